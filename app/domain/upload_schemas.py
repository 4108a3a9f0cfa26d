"""Request and answer bodies of resumable uploads (/v1/uploads)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.domain.schemas import NO_CONTROL
from app.domain.tasks import UPLOAD_TASKS
from solvers.tabular import FORMATS

FORMAT_PATTERN = "^(" + "|".join(FORMATS) + ")$"


class UploadCreate(BaseModel):
    """A new session: the file's size, and how its dataset is read (the query parameters
    of POST /v1/datasets, said once here)."""

    model_config = ConfigDict(extra="forbid")

    size: int = Field(gt=0, description="The file's bytes (as sent: compressed, if it is)")
    name: str | None = Field(None, max_length=255, pattern=NO_CONTROL)
    format: str | None = Field(None, pattern=FORMAT_PATTERN,
                               description="as for POST /v1/datasets (default: read from "
                               "the content)")
    label_column: str | None = Field(None, max_length=255, pattern=NO_CONTROL)
    task: str = Field("auto", pattern="^(" + "|".join(UPLOAD_TASKS) + ")$")
    weight_column: str | None = Field(None, max_length=255, pattern=NO_CONTROL)
    dtype: Literal["auto", "float32", "float64"] = "auto"
    reuse: bool = False

    def options(self) -> dict[str, object]:
        return self.model_dump(exclude={"size", "name"})


class UploadPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    status: Literal["open", "completed"] = Field(description="open: parts are taken; "
                                                 "completed: `dataset_id` is its dataset")
    name: str | None
    size: int
    offset: int = Field(description="The bytes staged: the next part starts here "
                        "(its `Upload-Offset`)")
    bytes_received: int = Field(description="Every body byte the parts brought (a part "
                                "refused or cut short included)")
    parts: int = Field(description="Parts acknowledged")
    max_part_bytes: int = Field(description="The most one part may carry "
                                "(HINGE_UPLOAD_MAX_PART_BYTES)")
    options: dict[str, object]
    dataset_id: str | None
    created_at: datetime
    expires_at: datetime = Field(description="Without a part before then, the session "
                                 "and its staged bytes are swept (HINGE_UPLOAD_EXPIRE_HOURS "
                                 "after the last part)")
