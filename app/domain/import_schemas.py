"""Request and answer bodies of imports (/v1/imports)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.domain.job_status import JobStatus
from app.domain.schemas import NO_CONTROL
from app.domain.tasks import UPLOAD_TASKS

MAX_SOURCES = 1000
DTYPE_DOC = ("The stored values' layout: float32 (8 bytes a non-zero with the int32 "
             "indices; values rounded to float32), float64 (12 bytes a non-zero) or auto "
             "(the default): float32 when every value of every part is exactly a float32, "
             "else float64 (the parts parsed before a value that is not one are parsed "
             "again), as for an upload")


class ImportCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str | list[str] = Field(description=(
        "`s3://bucket/key` (a glob such as `s3://bucket/set/part-*.svm` for its part "
        "files) or `file:///path` under HINGE_IMPORT_ROOTS (a glob too), or a list of "
        "them, imported in that order"))
    name: str | None = Field(None, max_length=255, pattern=NO_CONTROL)
    format: str = Field("svmlight", max_length=16, description="svmlight (gzip, bz2 and "
                        "xz parts are decompressed by their magic bytes)")
    task: str = Field("auto", description="auto (the labels say), classification or "
                      "regression, as for an upload")
    dtype: Literal["auto", "float32", "float64"] = Field("auto", description=DTYPE_DOC)

    @field_validator("source")
    @classmethod
    def _sources(cls, value: str | list[str]) -> str | list[str]:
        sources = [value] if isinstance(value, str) else value
        if not sources or len(sources) > MAX_SOURCES:
            raise ValueError(f"from 1 to {MAX_SOURCES} sources")
        for source in sources:
            if not source or len(source) > 2048 or any(ord(c) < 32 for c in source):
                raise ValueError("a source is a URL of at most 2048 characters")
        return value

    @field_validator("task")
    @classmethod
    def _task(cls, value: str) -> str:
        if value not in UPLOAD_TASKS:
            raise ValueError(f"one of {', '.join(UPLOAD_TASKS)}")
        return value

    def sources(self) -> list[str]:
        return [self.source] if isinstance(self.source, str) else list(self.source)


class ImportPublic(BaseModel):
    """An import: `parts_done` of `parts_total` part files, `bytes_done` of `bytes_total`
    (as stored: compressed parts count their compressed bytes), the rows and non-zeros
    parsed so far; once `succeeded`, `dataset_id`. A failed import says why in `error`,
    and `error_detail` has the particulars (`part`, `uri`, `line`, `reason`; `status`: the
    HTTP status a request would have had: 422 for a malformed part, 413 over the quota).
    `dtype` is the layout asked for, `value_dtype` the one its parts write (None while an
    auto import's is not known yet; its dataset's once succeeded)."""

    id: str
    name: str
    format: str
    dtype: Literal["auto", "float32", "float64"] = Field(description=DTYPE_DOC)
    value_dtype: Literal["float32", "float64"] | None = Field(
        description="The stored values' layout: float32 (compact, 8 bytes a non-zero) or "
        "float64 (12); None while an auto import has met no value that is not a float32 "
        "and is not done")
    source: list[str]
    status: JobStatus
    parts_total: int
    parts_done: int
    bytes_total: int
    bytes_done: int
    rows_done: int
    nnz_done: int
    dataset_id: str | None
    cancel_requested: bool
    error: str | None
    error_detail: dict[str, Any] | None
    attempt: int
    worker: str | None
    created_at: datetime
    finished_at: datetime | None


class ImportsPublic(BaseModel):
    data: list[ImportPublic]
    count: int
