"""Request and response schemas, one family per entity (Create / Public / ListPublic)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.domain.job_status import JobStatus
from solvers.params import TaskName

# Text that goes into the database as it is: no NUL or other control characters (NUL is
# not storable on PostgreSQL; the rest has no business in an id).
NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"


class DatasetPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    rows: int
    features: int
    nnz: int
    task: Literal["classification", "regression"] = Field(
        "classification", description="classification: class labels (`labels`, "
        "`class_counts`); regression: real-valued targets (`label_stats`, no class list)")
    labels: list[float]
    class_counts: dict[str, int]
    label_stats: dict[str, Any] | None = Field(
        None, description="Regression datasets: the targets' min, max, mean, std, "
        "distinct (how many distinct values) and quantiles (0.05, 0.25, 0.5, 0.75, 0.95)")
    weight_stats: dict[str, Any] | None = Field(
        None, description="Datasets with instance weights (uploaded with weight_column): "
        "their min, max, mean, sum and zeros (rows of weight 0); null: unweighted")
    sha256: str
    size_bytes: int = Field(description="Decompressed size of the uploaded text (for a "
                            "split: the size of its stored arrays)")
    created_at: datetime
    parent_id: str | None = Field(None, description="The dataset this one was split from")
    split_part: str | None = Field(None, description="'train' or 'test' for a split")
    split_seed: int | None = None
    split_test_fraction: float | None = None
    split_stratified: bool | None = None
    source_format: str = Field("svmlight", description="What was uploaded: svmlight, csv, "
                               "tsv, parquet or npz (a split: its parent's)")
    feature_names: list[str] | None = Field(
        None, description="The feature columns' names, in order (feature 1 first), where "
        "the file had them (CSV, TSV, Parquet, .npz with feature_names); predict accepts "
        "rows keyed by them")
    duplicate_of: list[str] = Field(
        default_factory=list, description="In an upload's answer: the tenant's earlier "
        "datasets with the same content (sha256), oldest first; upload with reuse=true to "
        "get the oldest back (200) instead of a new copy")


class SplitCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    test_fraction: float = Field(0.25, gt=0.0, lt=1.0,
                                 description="Share of the rows that go to the test part")
    stratify: bool = Field(True, description="Keep every class's share in both parts")
    seed: int = Field(0, ge=0, le=2**63 - 1,
                      description="Seed of the shuffle; the same seed gives the same split")


class SplitPublic(BaseModel):
    train: DatasetPublic
    test: DatasetPublic


class DatasetsPublic(BaseModel):
    data: list[DatasetPublic]
    count: int


class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset_id: str = Field(min_length=1, max_length=64, pattern=NO_CONTROL)
    solver: str = Field("auto", min_length=1, max_length=32, pattern=NO_CONTROL,
                        description="A name from GET /v1/solvers; 'auto' (the default) "
                        "picks a linear solver from the data, the loss and C")
    params: dict[str, Any] = Field(default_factory=dict)
    sample_weight: Literal["dataset", "none"] | list[float] = Field(
        "dataset", description="Instance weights (C_i = C * w_i * class weight): 'dataset' "
        "(the default) uses the dataset's weights when it has them (weight_stats), 'none' "
        "trains unweighted, a list gives one weight >= 0 per row for this job")


class JobResult(BaseModel):
    primal_objective: float | None = None
    dual_objective: float | None = None
    duality_gap: float | None = None
    iterations: int | None = None
    train_seconds: float | None = None
    exit_reason: str | None = None
    converged: bool | None = Field(
        None, description="Linear models: true only when the relative duality gap at the "
        "returned model is <= tol (a certificate); kernel models: SMO's stop rule held")
    train_accuracy: float | None = Field(None, description="Classification models")
    train_metrics: dict[str, Any] | None = Field(
        None, description="Regression and outlier models: an evaluation's figures on the "
        "training rows (see EvaluationPublic)")
    n_support: int | None = None
    relative_gap: float | None = Field(
        None, description="Certified (P - lower bound) / P; one-vs-rest: the sum of the "
        "outputs' gaps over the sum of their primal values")
    tol: float | None = None
    warnings: list[str] = Field(default_factory=list,
                                description="Why the model is not converged, if it is not")
    path: list[dict[str, Any]] = Field(
        default_factory=list, description="What ran, in order: solver, exit, iterations, "
        "seconds, relative_gap, reason (and output for one-vs-rest)")
    auto: dict[str, Any] | None = Field(None, description="solver 'auto': chosen, reason, and "
                                         "settings (what it set for its choice: the SVR's "
                                         "method, a sweep limit), when it set any")
    nonzero_weights: list[int] | None = Field(
        None, description="L1-regularised models (penalty l1): the number of non-zero "
        "feature weights of each output")
    violation: float | None = Field(
        None, description="Kernel jobs with one binary problem: its final KKT violation "
        "m - M (SMO's stop rule: converged below eps)")
    problems: list[dict[str, Any]] | None = Field(
        None, description="Kernel jobs with several binary problems (one-vs-one pairs, "
        "one-vs-rest classes; up to 2,000 listed): per problem its pair (negative_class "
        "null for one-vs-rest), exit_reason, iterations, final KKT violation, "
        "dual_objective and end_s (seconds since the solver started, the progress "
        "events' clock)")
    data_plan: dict[str, Any] | None = Field(
        None, description="How the fit read its data (app/domain/memory.py plan_fit): mode "
        "'in_memory' or 'blocks' (out of core, block minimization), blocks, passes over the "
        "data (fit, certificate and training accuracy), certificate_passes, bytes_read, "
        "budget_bytes (the worker's memory budget), estimate_bytes, max_block_bytes")


class JobPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    dataset_id: str | None
    solver: str
    params: dict[str, Any]
    task: TaskName = Field("classification", description="What the job trains, from its "
                           "formulation: classification, regression or outlier")
    status: JobStatus
    error: str | None
    model_id: str | None
    result: JobResult | None
    progress: dict[str, Any] | None = Field(
        description="The latest progress event (iteration, gap or violation, subproblem "
        "...) without its fraction: the job's one fraction is progress_fraction")
    progress_fraction: float | None = Field(
        None, description="How far the job is, 0 to 1, in every state: null until its "
        "first progress event; 1.0 once it succeeded with a converged model; otherwise "
        "(running, stopped at max_iter, failed, cancelled) the fraction of its latest "
        "progress event")
    waiting_for: str | None = Field(
        None, description="A queued job: what it waits for, e.g. \"a worker (warming up, "
        "12 s)\", \"a free worker (2 running)\" (worked out when the job is read; the "
        "counts of other tenants' jobs only for an admin key)")
    status_history: list[dict[str, Any]]
    attempt: int
    worker: str | None
    cancel_requested: bool
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None

    @model_validator(mode="after")
    def _progress_fraction(self) -> JobPublic:
        """1.0 once succeeded with a converged model, else the fraction of the latest
        progress event, if any (a model that stopped at max_iter is not 100% done); the
        event's own `fraction` leaves `progress`, so the answer has one fraction."""
        fraction = (self.progress or {}).get("fraction")
        if self.progress is not None and "fraction" in self.progress:
            self.progress = {k: v for k, v in self.progress.items() if k != "fraction"}
        if self.progress_fraction is None:
            converged = self.result is None or self.result.converged is not False
            if self.status == JobStatus.SUCCEEDED and converged:
                self.progress_fraction = 1.0
            elif isinstance(fraction, int | float):
                self.progress_fraction = float(fraction)
        return self


class JobsPublic(BaseModel):
    data: list[JobPublic]
    count: int


class WorkerPublic(BaseModel):
    """One worker process: `warming` while it loads the solver kernels, `ready`, or
    `stale` (no heartbeat for HINGE_WORKER_STALE_SECONDS: presumed gone)."""

    model_config = ConfigDict(from_attributes=True)

    hostname: str = Field(description="The Celery node name")
    pid: int
    concurrency: int = Field(description="Pool processes of its node")
    state: Literal["warming", "ready", "stale"]
    state_since: datetime
    started_at: datetime
    heartbeat_age_s: float
    warming_s: float = Field(description="Warming: seconds so far; ready: how long its "
                             "warm-up took")


class QueuePublic(BaseModel):
    queued: int = Field(description="Jobs waiting for a worker (every tenant's with an "
                        "admin key, else the caller's tenant's)")
    running: int = Field(description="Jobs running (every tenant's with an admin key, "
                         "else the caller's tenant's)")


class StatusPublic(BaseModel):
    scope: Literal["service", "tenant"] = Field(
        description="service: an admin key's view (every worker, every tenant's queue); "
                    "tenant: any other key's (worker counts, its own tenant's queue)")
    workers: list[WorkerPublic] | None = Field(
        description="Every worker process (admin key); null for other keys")
    ready_workers: int
    warming_workers: int
    queue: QueuePublic
    worker_stale_seconds: float


class ModelPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    job_id: str | None
    dataset_id: str | None
    kind: str
    task: TaskName = Field("classification", description="classification (labels are "
                           "classes), regression (predict gives values) or outlier "
                           "(one-class: +1 inlier, -1 outlier)")
    solver: str
    params: dict[str, Any]
    labels: list[float]
    n_features: int
    result: dict[str, Any]
    converged: bool
    train_accuracy: float | None
    size_bytes: int
    origin: dict[str, Any] | None = Field(
        None, description="null for a trained model; for an uploaded model file "
        "{source: imported, format: libsvm | liblinear, file_name, sha256, range_file, "
        "range_sha256}")
    created_at: datetime


class ModelsPublic(BaseModel):
    data: list[ModelPublic]
    count: int


class Instance(BaseModel):
    model_config = ConfigDict(extra="forbid")

    indices: list[int] = Field(description="1-based feature indices")
    values: list[float]


# A predict row: sparse (indices, values), dense (one value per feature, in order) or
# named ({"f1": 0.5}: the feature names of the model's dataset). Tried in this order, so
# the sparse rows of the hot path validate at the first try.
PredictRow = Annotated[Instance | list[float] | dict[str, float],
                       Field(union_mode="left_to_right")]


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    instances: list[PredictRow] = Field(description=(
        "Rows, each sparse {\"indices\": [1-based ints], \"values\": [floats]}, dense "
        "[one float per feature, in order] or named {\"feature name\": float} (models "
        "trained on a dataset with feature names)"))
    strict: bool = Field(False, description="Refuse (422) a row with a non-zero value for "
                         "a feature the model has never seen, instead of ignoring it with "
                         "a warning")


class ServedBy(BaseModel):
    """The registered version that answered a request made by `name@alias` or
    `name/versions/n` (also in the Hinge-Model-Version header: `name/versions/n`)."""

    name: str
    version: int
    alias: str | None


class PredictResponse(BaseModel):
    """For two classes one decision value per row, positive for classes[1]. For more: one
    per class (one-vs-rest models) or one per class pair in LIBSVM's order (one-vs-one
    kernel models: (0,1), (0,2), ..., (0,k-1), (1,2), ...; pair (i, j) is
    classes[i] vs classes[j], i < j, and a positive value is a vote for classes[i]; the label
    is the class with the most votes, ties to the smaller class). `probabilities` (models
    trained with probability: true): one per class, in the order of `classes`."""

    model_id: str
    task: TaskName = Field("classification", description="regression: `labels` are the "
                           "predicted values (as `decision_values`); outlier: +1 inlier, "
                           "-1 outlier, the decision value its score (> 0: inlier)")
    labels: list[float]
    decision_values: list[float] | list[list[float]]
    classes: list[float]
    probabilities: list[list[float]] | None = None
    sigma: float | None = Field(
        None, description="Regression models trained with probability: true: the width "
        "of the Laplace noise, density exp(-|z|/sigma)/(2 sigma), of the target around "
        "the predicted value (LIBSVM's -b 1)")
    warnings: list[str] = Field(default_factory=list, description="What was ignored: "
                                "non-zero values of features the model has never seen "
                                "(strict=true refuses them instead)")
    served_by: ServedBy | None = Field(None, description="Predicted by a registry reference "
                                       "(name@alias, name/versions/n): the version that "
                                       "answered; absent for a model id")


class EvaluationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset_id: str = Field(min_length=1, max_length=64, pattern=NO_CONTROL)


class ModelOnDatasetPublic(BaseModel):
    """What a work item of a model on a stored dataset says of both (an evaluation, a batch
    prediction: orm.ModelOnDatasetColumns)."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    model_id: str
    dataset_id: str | None
    dataset_name: str
    rows: int


class EvaluationPublic(ModelOnDatasetPublic):
    """`report` once succeeded: accuracy, balanced_accuracy, confusion_matrix (rows = true
    class, columns = predicted, classes sorted), per_class (precision, recall, f1,
    support), macro and weighted averages; for two classes roc_auc, average_precision,
    roc_curve and precision_recall_curve (at most 200 points each); log_loss and
    brier_score when the model has probabilities. Regression models: n_samples, mse,
    rmse, mae, r2 and squared_correlation (what svm-predict prints). Outlier (one-class)
    models: outlier_fraction and, when the labels are +1 inlier / -1 outlier,
    true_outlier_fraction, accuracy, outlier_precision, outlier_recall, roc_auc and
    average_precision of the outlier class (score: minus the decision value). `task`
    says which."""

    status: JobStatus
    report: dict[str, Any] | None
    error: str | None
    attempt: int
    created_at: datetime
    finished_at: datetime | None


class EvaluationsPublic(BaseModel):
    data: list[EvaluationPublic]
    count: int


class SolverParam(BaseModel):
    name: str
    type: str
    default: Any
    description: str
    nullable: bool
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    choices: list[Any] | None = None


class SolverPublic(BaseModel):
    name: str
    description: str
    problem: str
    params: list[SolverParam]


class SolversPublic(BaseModel):
    data: list[SolverPublic]
    count: int


# -- tenants and keys (admin) -----------------------------------------------------------

Scope = Literal["read", "train", "admin"]
Text64 = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.\-]+$")]


class TenantLimits(BaseModel):
    """A tenant's own limits; null means the service's default (HINGE_TENANT_MAX_*)."""

    model_config = ConfigDict(extra="forbid")

    max_stored_bytes: int | None = Field(None, gt=0, le=2**62)
    max_datasets: int | None = Field(None, gt=0, le=2**31 - 1)
    max_running_jobs: int | None = Field(None, gt=0, le=2**31 - 1)
    max_queued_jobs: int | None = Field(None, gt=0, le=2**31 - 1)


class TenantCreate(TenantLimits):
    name: Text64


class TenantPublic(TenantLimits):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    created_at: datetime


class TenantsPublic(BaseModel):
    data: list[TenantPublic]
    count: int


class KeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant_id: str = Field(min_length=1, max_length=32, pattern=r"^[0-9a-f]+$")
    scopes: list[Scope] = Field(min_length=1, max_length=3)
    name: str = Field("", max_length=64, pattern=NO_CONTROL)
    expires_in_days: float | None = Field(None, gt=0, le=36_500)


class KeyPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    tenant_id: str
    name: str
    scopes: list[str]
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyPublic):
    key: str = Field(description="The full key, shown only in this answer: hk_<id>_<secret>")


class KeysPublic(BaseModel):
    data: list[KeyPublic]
    count: int


class LineageDataset(BaseModel):
    id: str
    exists: bool = Field(description="False once the dataset has been deleted")
    name: str | None = None
    sha256: str | None = None
    rows: int | None = None
    features: int | None = None
    source_format: str | None = None
    parent_id: str | None = Field(None, description="A split's parent dataset")
    split_part: str | None = None


class LineageJob(BaseModel):
    id: str
    status: JobStatus
    solver: str
    params: dict[str, Any] = Field(description="The parameters as the job asked")
    attempt: int
    created_at: datetime
    finished_at: datetime | None


class LineageSearch(BaseModel):
    id: str
    status: JobStatus
    solver: str
    folds: int
    best: dict[str, Any] | None


class LineageEvaluation(BaseModel):
    id: str
    dataset_id: str | None
    dataset_name: str
    status: JobStatus
    accuracy: float | None
    created_at: datetime


class LineageVersion(BaseModel):
    name: str
    version: int


class LineagePublic(BaseModel):
    """GET /v1/models/{id}/lineage: from the dataset to the evaluations."""

    model_id: str
    created_at: datetime
    origin: dict[str, Any] | None = Field(description="An imported model's file (no job, "
                                          "no dataset)")
    dataset: LineageDataset | None
    job: LineageJob | None
    search: LineageSearch | None = Field(description="The search whose refit trained it")
    solver: str
    kind: str
    params: dict[str, Any] = Field(description="The parameters as applied")
    certificate: dict[str, Any] = Field(description="The solver's exit and its proof: "
                                        "exit_reason, converged, objectives, duality gap, "
                                        "tolerance, iterations")
    path: list[dict[str, Any]] | None = Field(description="The solver path (linear "
                                              "solvers: each step of the C path)")
    code_version: str | None = Field(description="The code that trained it (models "
                                     "trained before it was recorded: null)")
    evaluations: list[LineageEvaluation]
    registered_versions: list[LineageVersion]
