"""ORM models: tenants and their API keys; datasets, jobs (with their progress events),
models, evaluations and searches (their tasks and results), each owned by a tenant; stored
answers of idempotent requests; the outbox of messages owed to the broker; registered
models (names), their versions and aliases."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from app.domain.job_status import JobStatus


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is not None and value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value


class JobStatusType(TypeDecorator[JobStatus]):
    """A job status stored as its plain value in a VARCHAR(16), loaded as a JobStatus."""

    impl = String(16)
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Any) -> str | None:
        return None if value is None else JobStatus(value).value

    def process_result_value(self, value: str | None, dialect: Any) -> JobStatus | None:
        return None if value is None else JobStatus(value)


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_id() -> str:
    return uuid.uuid4().hex


class Base(DeclarativeBase):
    pass


class Tenant(Base):
    """Who owns data. The limit columns override the settings' defaults when set."""

    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    max_stored_bytes: Mapped[int | None] = mapped_column(BigInteger)
    max_datasets: Mapped[int | None] = mapped_column(Integer)
    max_running_jobs: Mapped[int | None] = mapped_column(Integer)
    max_queued_jobs: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ApiKey(Base):
    """An API key `hk_<id>_<secret>`: the id is public (lookup), the secret is stored only
    as HMAC-SHA256 under the server's secret key."""

    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(16), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(64))
    key_hash: Mapped[str] = mapped_column(String(64))
    scopes: Mapped[list[str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class IdempotencyRecord(Base):
    """The first answer to a POST sent with an Idempotency-Key, replayed for a repeat."""

    __tablename__ = "idempotency_keys"
    __table_args__ = (UniqueConstraint("tenant_id", "key", name="uq_idempotency_tenant_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    tenant_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("tenants.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(255))
    route: Mapped[str] = mapped_column(String(255))
    request_hash: Mapped[str] = mapped_column(String(64))
    status_code: Mapped[int | None] = mapped_column(Integer)  # None while in progress
    response_body: Mapped[bytes | None] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    # while in progress: the process that holds it and until when (app/api/idempotency.py)
    holder: Mapped[str | None] = mapped_column(String(255))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime)


def _tenant_column() -> Mapped[str]:
    return mapped_column(String(32), ForeignKey("tenants.id"), index=True)


def _task_column() -> Mapped[str]:
    """classification, regression or outlier (app.domain.tasks)."""
    return mapped_column(String(16), default="classification",
                         server_default="classification")


class Dataset(Base):
    __tablename__ = "datasets"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()
    name: Mapped[str] = mapped_column(String(255))
    rows: Mapped[int] = mapped_column(Integer)
    features: Mapped[int] = mapped_column(Integer)
    nnz: Mapped[int] = mapped_column(BigInteger)
    labels: Mapped[list[float]] = mapped_column(JSON)
    class_counts: Mapped[dict[str, int]] = mapped_column(JSON)
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    blob_path: Mapped[str] = mapped_column(Text)
    stored_bytes: Mapped[int] = mapped_column(BigInteger, default=0)  # the blob's size
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # A split (POST /v1/datasets/{id}/split) records where it came from.
    parent_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    split_part: Mapped[str | None] = mapped_column(String(8))  # train | test
    split_seed: Mapped[int | None] = mapped_column(BigInteger)
    split_test_fraction: Mapped[float | None] = mapped_column(Float)
    split_stratified: Mapped[bool | None] = mapped_column(Boolean)
    # What the upload was (svmlight, csv, tsv, parquet, npz; a split: its parent's) and
    # the names of its feature columns where the file had them (CSV, Parquet, .npz).
    source_format: Mapped[str] = mapped_column(String(16), default="svmlight",
                                               server_default="svmlight")
    feature_names: Mapped[list[str] | None] = mapped_column(JSON)
    # classification (labels, class_counts) or regression (label_stats: min, max, mean,
    # std, quantiles; labels and class_counts empty): app.domain.tasks
    task: Mapped[str] = _task_column()
    label_stats: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # instance weights (app.domain.weights: `w` in the blob): min, max, mean, sum, zeros;
    # None: the dataset has none
    weight_stats: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    # Row shards (solvers/shards.py): [{"blob_path", "rows", "nnz", "nbytes"}, ...] in row
    # order; None: one shard, `blob_path`. `value_dtype`: float64, or float32 (compact).
    shards: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    value_dtype: Mapped[str] = mapped_column(String(8), default="float64",
                                             server_default="float64")


class WorkItemColumns:
    """The columns of a durable work item's life cycle (app.domain.lifecycle): claimed with
    a lease (`attempt`, `worker`, `heartbeat_at`), finished with a public `error`."""

    status: Mapped[JobStatus] = mapped_column(JobStatusType(), index=True,
                                              default=JobStatus.QUEUED)
    error: Mapped[str | None] = mapped_column(Text)
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    worker: Mapped[str | None] = mapped_column(String(255))
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    queued_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Job(WorkItemColumns, Base):
    __tablename__ = "jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()
    dataset_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    solver: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    # classification, regression or outlier: its formulation's (solvers.params.task_of)
    task: Mapped[str] = _task_column()
    # and the work item's columns (WorkItemColumns: status, error, attempt, worker, ...)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    progress: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    model_id: Mapped[str | None] = mapped_column(String(32))
    status_history: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class OutboxMessage(Base):
    """A message owed to the broker ("run task `task` on row `ref_id`"), added in the
    transaction that makes the row, and deleted once the broker holds the message
    (app/domain/outbox.py). The row and its message are committed together or not at all."""

    __tablename__ = "outbox"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    task: Mapped[str] = mapped_column(String(64))  # the task name, e.g. hinge.train
    ref_id: Mapped[str] = mapped_column(String(32))  # the job's id
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class JobEvent(Base):
    """Throttled progress history of a job; `seq` is the SSE event id."""

    __tablename__ = "job_events"
    __table_args__ = (UniqueConstraint("job_id", "seq", name="uq_job_events_job_seq"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    job_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("jobs.id", ondelete="CASCADE"), index=True
    )
    seq: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))  # progress | status
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Model(Base):
    __tablename__ = "models"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()
    job_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("jobs.id", ondelete="SET NULL"), unique=True
    )
    dataset_id: Mapped[str | None] = mapped_column(String(32))
    kind: Mapped[str] = mapped_column(String(16))  # linear | kernel
    task: Mapped[str] = _task_column()
    solver: Mapped[str] = mapped_column(String(32))
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    labels: Mapped[list[float]] = mapped_column(JSON)
    n_features: Mapped[int] = mapped_column(Integer)
    result: Mapped[dict[str, Any]] = mapped_column(JSON)
    converged: Mapped[bool] = mapped_column(Boolean)
    arrays: Mapped[bytes] = mapped_column(LargeBinary)  # .npz bytes, loaded without pickle
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    train_accuracy: Mapped[float | None] = mapped_column(Float)
    # None for a trained model; an uploaded model file's {"source": "imported", "format",
    # "file_name", "sha256", ...} (app.domain.services.model_import)
    origin: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelOnDatasetColumns:
    """The columns of work that passes a stored dataset through a model (evaluations,
    batch predictions): both the tenant's; the dataset's name kept if it is deleted."""

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()  # the model's (and the dataset's) tenant
    model_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("models.id", ondelete="CASCADE"), index=True
    )
    dataset_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    dataset_name: Mapped[str] = mapped_column(String(255))


class Evaluation(ModelOnDatasetColumns, WorkItemColumns, Base):
    """A model's figures on a stored dataset; computed inline for small datasets, else by a
    worker (claimed, leased and finished like a job: `attempt`, `heartbeat_at`)."""

    __tablename__ = "evaluations"

    rows: Mapped[int] = mapped_column(Integer)
    report: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Prediction(ModelOnDatasetColumns, WorkItemColumns, Base):
    """A batch prediction (POST /v1/predictions): a model's output on every row of a stored
    dataset, computed by a worker (claimed, leased and finished like a job) and stored as
    a blob (`output_path`, a BlobRef); `rows_done` is its progress."""

    __tablename__ = "predictions"

    rows: Mapped[int] = mapped_column(BigInteger)
    outputs: Mapped[list[str]] = mapped_column(JSON)  # labels, decision_values, probabilities
    rows_done: Mapped[int] = mapped_column(BigInteger, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    output_path: Mapped[str | None] = mapped_column(String(512))
    output_bytes: Mapped[int | None] = mapped_column(BigInteger)


class WorkerProcess(Base):
    """A worker process that runs jobs (one row per pool process): its readiness (warming
    while it compiles or loads the solver kernels, then ready) and its heartbeat. Written
    by the worker (workers/presence.py); read by GET /v1/status and a queued job's
    `waiting_for`. A row whose heartbeat is older than HINGE_WORKER_STALE_SECONDS is a
    worker presumed gone."""

    __tablename__ = "workers"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    hostname: Mapped[str] = mapped_column(String(255))  # the Celery node name
    pid: Mapped[int] = mapped_column(Integer)
    concurrency: Mapped[int] = mapped_column(Integer)  # pool processes of its node
    state: Mapped[str] = mapped_column(String(16))  # warming | ready
    state_since: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    heartbeat_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class Search(Base):
    """A cross-validated parameter search (POST /v1/searches): its points, its tasks'
    progress, the best point and the refit job (app/domain/services/searches.py)."""

    __tablename__ = "searches"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()
    dataset_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("datasets.id", ondelete="SET NULL"), index=True
    )
    holdout_dataset_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("datasets.id", ondelete="SET NULL"))
    solver: Mapped[str] = mapped_column(String(32))
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)  # the request as validated
    point_specs: Mapped[list[dict[str, Any]]] = mapped_column(JSON)  # [{"values", "params"}]
    folds: Mapped[int] = mapped_column(Integer)  # 1 with a holdout dataset
    total: Mapped[int] = mapped_column(Integer)  # fits: points x folds
    done: Mapped[int] = mapped_column(Integer, default=0)  # results recorded
    status: Mapped[JobStatus] = mapped_column(JobStatusType(), index=True,
                                              default=JobStatus.QUEUED)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    best: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    refit_job_id: Mapped[str | None] = mapped_column(
        String(32), ForeignKey("jobs.id", ondelete="SET NULL"))
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class SearchTask(WorkItemColumns, Base):
    """One unit of a search's work that a worker claims: a C path within one fold (linear
    solvers) or one point's folds; leased like a job (`attempt`, `heartbeat_at`)."""

    __tablename__ = "search_tasks"
    __table_args__ = (UniqueConstraint("search_id", "number",
                                       name="uq_search_tasks_search_number"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    search_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("searches.id", ondelete="CASCADE"), index=True)
    tenant_id: Mapped[str] = _tenant_column()
    number: Mapped[int] = mapped_column(Integer)
    point_indices: Mapped[list[int]] = mapped_column(JSON)  # in the order they are fitted
    fold: Mapped[int | None] = mapped_column(Integer)  # None: every fold


class SearchResult(Base):
    """One fit of a search: a point on one fold. Unique per (search, point, fold), so a
    retried task never counts a fit twice; `seq` orders them as they were committed."""

    __tablename__ = "search_results"
    __table_args__ = (
        UniqueConstraint("search_id", "point", "fold", name="uq_search_results_point_fold"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    search_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("searches.id", ondelete="CASCADE"), index=True)
    point: Mapped[int] = mapped_column(Integer)
    fold: Mapped[int] = mapped_column(Integer)
    seq: Mapped[int] = mapped_column(Integer)
    score: Mapped[float | None] = mapped_column(Float)  # None: the fit failed numerically
    fit_seconds: Mapped[float] = mapped_column(Float)
    converged: Mapped[bool] = mapped_column(Boolean)
    exit_reason: Mapped[str] = mapped_column(String(32))
    iterations: Mapped[int] = mapped_column(Integer)
    warm_start: Mapped[bool] = mapped_column(Boolean)
    # an L1-regularised model (l1_cd): its non-zero weights, summed over its outputs
    nonzero_weights: Mapped[int | None] = mapped_column(Integer, nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class RegisteredModel(Base):
    """A name a tenant serves models under (app/domain/services/registry.py): its versions
    are immutable, its aliases point at one of them and move."""

    __tablename__ = "registered_models"
    __table_args__ = (UniqueConstraint("tenant_id", "name",
                                       name="uq_registered_models_tenant_name"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()
    name: Mapped[str] = mapped_column(String(64))
    description: Mapped[str] = mapped_column(Text, default="")
    last_version: Mapped[int] = mapped_column(Integer, default=0)  # numbers never reused
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelVersion(Base):
    """One registration of a model under a name: number `version`, never changed."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("registered_model_id", "version",
                                       name="uq_model_versions_number"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    registered_model_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("registered_models.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    # RESTRICT: a registered model cannot be deleted from under its versions
    model_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("models.id", ondelete="RESTRICT"), index=True)
    description: Mapped[str] = mapped_column(Text, default="")
    tags: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    created_by: Mapped[str | None] = mapped_column(String(16))  # the API key's id
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ModelAlias(Base):
    """A movable name (`production`, `staging`, ...) for one version of a registered model;
    moved by one UPDATE, so a reader sees the old version or the new one. The foreign key
    to the version makes deleting a version an alias points at fail, whatever the race."""

    __tablename__ = "model_aliases"
    __table_args__ = (
        UniqueConstraint("registered_model_id", "alias", name="uq_model_aliases_alias"),
        ForeignKeyConstraint(["registered_model_id", "version"],
                             ["model_versions.registered_model_id", "model_versions.version"],
                             name="fk_model_aliases_version"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    registered_model_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("registered_models.id", ondelete="CASCADE"), index=True)
    alias: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    moved_by: Mapped[str | None] = mapped_column(String(16))
    moved_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class AliasMove(Base):
    """The history of an alias: every move (from None: created; to None: deleted)."""

    __tablename__ = "model_alias_moves"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    registered_model_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("registered_models.id", ondelete="CASCADE"), index=True)
    alias: Mapped[str] = mapped_column(String(64))
    from_version: Mapped[int | None] = mapped_column(Integer)
    to_version: Mapped[int | None] = mapped_column(Integer)
    moved_by: Mapped[str | None] = mapped_column(String(16))
    moved_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Import(WorkItemColumns, Base):
    """An import (POST /v1/imports): a dataset read by workers from part files in S3 or
    under HINGE_IMPORT_ROOTS (app.domain.services.imports), a durable work item claimed,
    leased and finished like a job. `dataset_id` is chosen when the import is created (its
    shards' keys are `datasets/<dataset_id>/p<part>-<k>.npz`); the dataset row exists once
    the import has succeeded. `error_detail`: a failure's particulars (the part, its
    line). `dtype`: the values' layout asked for (auto, float32, float64, as an upload's);
    `value_dtype`: the layout its parts write, float32 or float64 once known (an auto
    import's: None until a part meets a value that is not a float32, then float64; its
    dataset's at the end)."""

    __tablename__ = "imports"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()
    name: Mapped[str] = mapped_column(String(255))
    format: Mapped[str] = mapped_column(String(16), default="svmlight")
    task: Mapped[str] = _task_column()
    source: Mapped[list[str]] = mapped_column(JSON)  # as asked (URLs, globs)
    dataset_id: Mapped[str] = mapped_column(String(32), index=True)
    parts_total: Mapped[int] = mapped_column(Integer)
    bytes_total: Mapped[int] = mapped_column(BigInteger)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    error_detail: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    dtype: Mapped[str] = mapped_column(String(8), default="auto", server_default="float64")
    value_dtype: Mapped[str | None] = mapped_column(String(8))


class ImportPart(Base):
    """One part file of an import: parsed by whichever worker takes it (`token`, held by
    `heartbeat_at` like a lease); once `done`, its shards (the manifest entries of
    Dataset.shards) and counts are kept across attempts of the import."""

    __tablename__ = "import_parts"

    import_id: Mapped[str] = mapped_column(
        String(32), ForeignKey("imports.id", ondelete="CASCADE"), primary_key=True)
    part: Mapped[int] = mapped_column(Integer, primary_key=True)
    uri: Mapped[str] = mapped_column(Text)
    size: Mapped[int] = mapped_column(BigInteger)  # bytes of the file as stored
    state: Mapped[str] = mapped_column(String(16), default="pending")  # running, done, failed
    token: Mapped[str | None] = mapped_column(String(32))
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    bytes_done: Mapped[int] = mapped_column(BigInteger, default=0)
    rows: Mapped[int] = mapped_column(BigInteger, default=0)
    nnz: Mapped[int] = mapped_column(BigInteger, default=0)
    features: Mapped[int] = mapped_column(Integer, default=0)
    text_bytes: Mapped[int] = mapped_column(BigInteger, default=0)  # decompressed
    sha256: Mapped[str | None] = mapped_column(String(64))
    # {label_key: count} when the part's labels are integral and few, else None
    class_counts: Mapped[dict[str, int] | None] = mapped_column(JSON)
    shards: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON)
    value_dtype: Mapped[str | None] = mapped_column(String(8))  # its shards' layout, once done
    error: Mapped[str | None] = mapped_column(Text)
    error_line: Mapped[int | None] = mapped_column(Integer)


class Upload(Base):
    """A resumable upload session (POST /v1/uploads; app.domain.services.uploads): the
    declared `size`, the dataset's options, `staged` (the offset: the bytes staged, as of
    the last part), `bytes_received` (every body byte its parts brought, kept or not)
    and, once completed, its `dataset_id`. The staged bytes are a file, not a column."""

    __tablename__ = "uploads"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_id)
    tenant_id: Mapped[str] = _tenant_column()
    name: Mapped[str | None] = mapped_column(String(255))
    options: Mapped[dict[str, Any]] = mapped_column(JSON)
    size: Mapped[int] = mapped_column(BigInteger)
    staged: Mapped[int] = mapped_column(BigInteger, default=0)  # the offset
    bytes_received: Mapped[int] = mapped_column(BigInteger, default=0)
    parts: Mapped[int] = mapped_column(Integer, default=0)
    status: Mapped[str] = mapped_column(String(16), default="open")  # completed
    dataset_id: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
