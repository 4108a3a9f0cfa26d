"""Request and answer bodies of batch predictions (/v1/predictions)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.domain.job_status import JobStatus
from app.domain.schemas import NO_CONTROL, ModelOnDatasetPublic

OutputName = Literal["labels", "decision_values", "probabilities"]


class PredictionCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model_id: str = Field(min_length=1, max_length=300, pattern=NO_CONTROL, description=(
        "a model id (or a unique prefix), `name@alias` or `name/versions/n`"))
    dataset_id: str = Field(min_length=1, max_length=64, pattern=NO_CONTROL)
    outputs: list[OutputName] | None = Field(None, description=(
        "what to store: `labels` always, `decision_values`, `probabilities` (models "
        "trained with probability: true); default all three"))


class PredictionPublic(ModelOnDatasetPublic):
    """A batch prediction: `rows_done` of `rows` so far; once `succeeded`, its output at
    GET /v1/predictions/{id}/output (`output_bytes`: the stored .npz's size)."""

    rows_done: int
    outputs: list[str]
    status: JobStatus
    cancel_requested: bool
    error: str | None
    attempt: int
    worker: str | None
    output_bytes: int | None
    created_at: datetime
    finished_at: datetime | None


class PredictionsPublic(BaseModel):
    data: list[PredictionPublic]
    count: int
