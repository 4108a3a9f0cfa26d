"""Request and response schemas of /v1/searches (SearchCreate / SearchPublic /
SearchesPublic), beside app/domain/schemas.py's families."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from app.domain.job_status import JobStatus
from app.domain.schemas import NO_CONTROL

# classification's, then regression's (app.domain.tasks.REGRESSION_METRICS)
METRICS = ("accuracy", "balanced_accuracy", "roc_auc", "log_loss", "neg_mse", "r2")
Metric = Literal["accuracy", "balanced_accuracy", "roc_auc", "log_loss", "neg_mse", "r2"]


class Log2Range(BaseModel):
    """2**e for e = start, start + step, ... up to stop inclusive (grid.py's ranges)."""

    model_config = ConfigDict(extra="forbid")

    log2: tuple[float, float, float] = Field(
        description="[start, stop, step] of the exponent, e.g. [-5, 15, 2]; stop is "
        "included when the steps reach it; a negative step counts down ([3, -15, -2])")


SpaceValue = StrictBool | StrictInt | StrictFloat | StrictStr
SpaceDimension = Log2Range | list[SpaceValue]


class CrossValidation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    folds: int = Field(5, ge=2, le=20)
    stratified: bool = Field(True, description="Keep every class's share in every fold")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="Seed of the rows' shuffle")


class Holdout(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset_id: str = Field(min_length=1, max_length=64, pattern=NO_CONTROL,
                            description="Score every point on this stored dataset instead "
                            "of cross-validating")


class Strategy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["grid", "random", "halving"] = "grid"
    n: int | None = Field(None, ge=1, le=100_000,
                          description="random: how many points of the grid to draw; "
                          "halving: draw this many candidates (default: every grid point)")
    seed: int = Field(0, ge=0, le=2**63 - 1, description="random: seed of the draw; "
                      "halving: also of the rows' subsamples")
    factor: float = Field(3.0, ge=1.5, le=100.0,
                          description="halving: each round keeps the best 1/factor of its "
                          "candidates and multiplies the rows by factor")
    min_resources: Literal["exhaust", "smallest"] | StrictInt = Field(
        "exhaust", description="halving: the rows of the first round: 'exhaust' (the "
        "number that makes the last round use every row, as scikit-learn's "
        "HalvingGridSearchCV), 'smallest' (2 x classes x folds) or a number of rows; "
        "never below 'smallest'")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"type": value} if isinstance(value, str) else value


class SearchCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset_id: str = Field(min_length=1, max_length=64, pattern=NO_CONTROL)
    solver: str = Field("auto", min_length=1, max_length=32, pattern=NO_CONTROL,
                        description="A name from GET /v1/solvers ('auto' included)")
    params: dict[str, Any] = Field(default_factory=dict,
                                   description="Fixed parameters of every point (scale, "
                                   "probability, loss, ...)")
    space: dict[str, SpaceDimension] = Field(
        min_length=1, max_length=8,
        description="Parameter -> values: {\"log2\": [start, stop, step]} or a list of "
        "values (numbers or choices)")
    cv: CrossValidation | Holdout = Field(default_factory=CrossValidation)
    metric: Metric = Field(
        "accuracy", description="classification: accuracy (default), balanced_accuracy, "
        "roc_auc (two classes), log_loss (with probability); regression: neg_mse (minus "
        "the mean squared error; the default on a regression dataset) or r2")
    strategy: Strategy = Field(default_factory=Strategy)
    refit: bool = Field(True, description="Train the best point on every row into a "
                        "model (a normal job, linked as refit_job_id)")
    select: Literal["best", "one_std"] = Field(
        "best", description="'best': the best mean score, ties to the smallest C, then "
        "the smallest gamma, then the first point; 'one_std': the smallest C (then "
        "gamma) among points whose mean is within one standard deviation (across folds) "
        "of the best mean")


class SearchPoint(BaseModel):
    index: int
    values: dict[str, Any] = Field(description="The point's values of the space")
    folds_done: int
    mean: float | None = Field(None, description="Mean of the metric over the folds")
    std: float | None = Field(None, description="Standard deviation over the folds "
                              "(population, ddof 0)")
    scores: list[float | None]
    fit_seconds: float = Field(description="Mean fit time over the folds done")
    converged: bool | None = Field(None, description="Every fold's fit converged")
    exit_reasons: list[str]
    warm_started: int = Field(0, description="Folds fitted from the previous C's solution")
    nonzero_weights: float | None = Field(
        None, description="L1-regularised models (l1_cd, or auto with penalty 'l1'): the "
        "model's non-zero weights (summed over its outputs), averaged over the folds done; "
        "against C, the regularisation path. None for models with dense weights")
    round: int = Field(0, description="halving: the round that evaluated this point "
                       "(grid and random: 0)")
    n_rows: int | None = Field(None, description="halving: the rows of the round's "
                               "subsample (None: every row)")
    candidate: int | None = Field(None, description="halving: the point's index in round "
                                  "0 (the same values in every round)")


class SearchRound(BaseModel):
    round: int
    candidates: int = Field(description="Points evaluated in this round")
    n_rows: int = Field(description="Rows of the round's stratified subsample (the last "
                        "round: every row)")
    points: list[int] = Field(description="Indices of the round's points in `points` "
                              "(empty until the round starts)")


class SearchPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    dataset_id: str | None
    holdout_dataset_id: str | None
    solver: str
    status: JobStatus
    spec: dict[str, Any]
    folds: int
    total: int = Field(description="Fits in the search: points x folds")
    done: int = Field(description="Fits done")
    best: dict[str, Any] | None = None
    refit_job_id: str | None = None
    model_id: str | None = Field(None, description="The refit job's model, once trained")
    error: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    points: list[SearchPoint] | None = Field(None, description="The table of points (GET "
                                             "/v1/searches/{id} only)")
    rounds: list[SearchRound] | None = Field(None, description="halving: the rounds, "
                                             "their candidates and rows")


class SearchesPublic(BaseModel):
    data: list[SearchPublic]
    count: int
