"""One validated settings object, read from the environment (prefix HINGE_)."""

from __future__ import annotations

import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

HostList = Annotated[list[str], NoDecode]  # comma-separated in the environment


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="HINGE_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    home: Path = Path("./var")
    # Empty means the embedded default under `home`: SQLite database, SQLite broker.
    database_url: str = ""
    broker_url: str = ""
    queue: str = "hinge.train"

    max_upload_bytes: int = Field(1 << 40, gt=0)  # compressed and decompressed, each
    max_features: int = Field(10_000_000, gt=0)
    max_classes: int = Field(1000, ge=2)
    max_line_bytes: int = Field(16 << 20, gt=0)
    max_predict_rows: int = Field(100_000, gt=0)
    max_predict_bytes: int = Field(32 << 20, gt=0)
    # POST /v1/models (an uploaded LIBSVM / LIBLINEAR model file and its range file)
    max_model_import_bytes: int = Field(64 << 20, gt=0)
    max_import_support_vectors: int = Field(200_000, gt=0)
    # Every other request body (the JSON control routes: jobs, searches, splits,
    # evaluations, admin), checked on the raw stream before it is parsed or the key is
    # checked (app/api/body_limit.py); uploads and predict have the two limits above.
    max_json_body_bytes: int = Field(1 << 20, gt=0)
    job_max_seconds: float = Field(3600.0, gt=0)
    max_queued_jobs: int = Field(1000, gt=0)
    # On SQLite, how long a write (a submission, an upload, a claim) waits in line for the
    # write lock before it gives up; the API then answers 503 with Retry-After (app.infra.db).
    sqlite_write_wait_seconds: float = Field(15.0, gt=0)
    # Crash recovery: a running job whose heartbeat is older than the lease is re-queued
    # (or failed with "worker lost" after max_attempts); the API sweeps every interval.
    job_lease_seconds: float = Field(60.0, gt=0)
    sweep_interval_seconds: float = Field(10.0, gt=0)
    max_attempts: int = Field(3, ge=1)
    requeue_after_seconds: float = Field(120.0, gt=0)
    # A running job reports progress (GET /v1/jobs/{id}, its SSE stream, the history) at
    # most this often: the solvers' default (solvers.backbone.PROGRESS_INTERVAL_S). Tests
    # set it lower, so that even a short fit reports.
    progress_interval_seconds: float = Field(0.2, ge=0)
    # Worker readiness (GET /v1/status): a worker process whose heartbeat (every third of
    # this) is older than this is presumed gone.
    worker_stale_seconds: float = Field(30.0, gt=0)
    # Evaluations of datasets up to this many rows run inside the request; larger ones on
    # a worker (POST /v1/models/{id}/evaluations answers 202 and the record is queued).
    evaluate_inline_rows: int = Field(20_000, ge=0)
    # A batch prediction (POST /v1/predictions) passes the dataset's rows through the model
    # this many at a time: what a worker holds of its output at once.
    predict_block_rows: int = Field(16_384, gt=0)
    # A search (POST /v1/searches) of more fits (points x folds) than this is a 413.
    max_search_fits: int = Field(20_000, gt=0)

    # -- broker, thread budget and API processes (docs/operations.md: "Brokers", "Thread budget") --
    # Celery worker processes per worker host (`--concurrency`; `make run` and compose).
    worker_concurrency: int = Field(1, ge=1)
    # Numba threads per worker process, and the cap on a job's `threads`. 0 (the default)
    # means the budget: cores // worker_concurrency (at least 1), so processes x threads
    # never exceed the cores unless you set it higher yourself.
    solver_threads: int = Field(0, ge=0)
    # The memory one job may use on a worker (app/domain/memory.py estimates it before
    # the fit starts; a job over it fails with the figure). 0: no limit.
    worker_memory_bytes: int = Field(0, ge=0)
    # A Dask scheduler (tcp://host:8786) for fits spread over Dask workers (a job's
    # engine "dask", or "auto" for a dataset over one worker's memory; docs/operations.md
    # "Dask"). Empty: every fit runs in the worker that claims it.
    dask_scheduler: str = ""
    # How long a distributed fit waits for one round (or to connect) before it fails.
    dask_round_timeout_seconds: float = Field(600.0, gt=0)
    # uvicorn processes of the API (`make run`, `python -m app.run`); each keeps its own
    # model cache, invalidated across processes through the bus.
    api_workers: int = Field(1, ge=1)
    # How much nicer than `make run` (python -m app.run) its Celery worker runs: training
    # takes the CPU that the API's requests leave. 0: the same priority as the API.
    worker_nice: int = Field(10, ge=0, le=19)
    # uvicorn's access log (a line per request on the API's output). Off by default: on a
    # single-row predict it cost about a sixth of the API's CPU; the request counters and
    # latencies by route and status are in /metrics either way.
    access_log: bool = False
    # Models kept deserialised per API process for predict (least recently used go first).
    model_cache_size: int = Field(64, ge=1)
    # How often each API process checks that its cached models still exist (the backstop
    # of the bus's invalidations; the only check on the embedded broker).
    model_cache_check_seconds: float = Field(1.0, gt=0)
    # How long an API process trusts a key it verified without reading its row again (a
    # key revoked elsewhere stops working within this long; 0: read it on every request).
    key_cache_seconds: float = Field(1.0, ge=0)

    # -- security (docs/security.md) --------------------
    # The key that hashes API keys (HMAC-SHA256) and signs dashboard sessions. Empty: a
    # random one kept in $HINGE_HOME/secret_key (mode 0600), created on first use.
    secret_key: SecretStr = SecretStr("")
    # Host header allow-list (DNS rebinding); "*" allows any. Comma-separated in the env.
    allowed_hosts: HostList = ["127.0.0.1", "localhost", "[::1]", "testserver"]
    # Origins allowed by CORS; empty (the default) answers no cross-origin request.
    cors_origins: HostList = []
    session_hours: float = Field(12.0, gt=0)  # dashboard sign-in lifetime
    # Per-tenant request rate: a token bucket of `rate_burst` refilled at `rate_per_second`
    # (in Redis when the broker is Redis, else in the API process); 0 turns it off.
    rate_per_second: float = Field(50.0, ge=0)
    rate_burst: int = Field(200, ge=1)
    # Predict routes (POST /v1/models/{ref}/predict) draw on a bucket of their own, one per
    # API key and model, instead of the tenant's: a service predicting at a few hundred
    # requests a second is not refused for the tenant's training routes' sake; 0 turns it off.
    predict_rate_per_second: float = Field(1000.0, ge=0)
    predict_rate_burst: int = Field(2000, ge=1)
    # Per-tenant limits (a tenant row may lower or raise them).
    tenant_max_stored_bytes: int = Field(64 << 30, gt=0)  # of dataset arrays, all datasets
    tenant_max_datasets: int = Field(1000, gt=0)
    tenant_max_running_jobs: int = Field(4, gt=0)
    tenant_max_queued_jobs: int = Field(200, gt=0)
    # One dataset, bounded while it is parsed (the arrays take ~12 bytes per non-zero and
    # ~16 per row, so a small file of short lines grows far more than its text).
    # svmlight uploads stream to disk in row shards of about shard_bytes of arrays (the
    # API holds one shard and the labels, 8 bytes a row): they are bounded by the tenant's
    # stored bytes and the free disk, which keeps disk_reserve_bytes free (507 else).
    # Uploads parsed whole in memory (CSV, TSV, Parquet, .npz, a weight_column) are
    # bounded by max_memory_dataset_bytes too (about 1.5x that per concurrent upload).
    max_dataset_rows: int = Field(2_000_000_000, gt=0)
    max_dataset_nnz: int = Field(2_000_000_000, gt=0)
    max_dataset_bytes: int = Field(1 << 40, gt=0)  # the arrays of one dataset
    max_memory_dataset_bytes: int = Field(128 << 20, gt=0)
    shard_bytes: int = Field(32 << 20, ge=4096)
    disk_reserve_bytes: int = Field(1 << 30, ge=0)
    max_concurrent_uploads: int = Field(2, ge=1)  # per API process; the rest wait
    # Resumable uploads (/v1/uploads): the staged bytes are a file under home/uploads
    upload_max_part_bytes: int = Field(64 << 20, gt=0)  # one PATCH's body
    upload_expire_hours: float = Field(24.0, gt=0)  # after its last part, a session goes
    tenant_max_open_uploads: int = Field(8, gt=0)
    # -- imports (POST /v1/imports; docs/operations.md: "Large datasets") --
    # Directories whose files (and files below them) a tenant may import as file:///...;
    # empty (the default): no file import. Comma-separated in the environment.
    import_roots: HostList = []
    import_max_parts: int = Field(10_000, gt=0)  # part files of one import
    # A part's text is parsed this many bytes at a time, each piece one shard blob: what
    # a worker holds of a part at once (about 2.5x this).
    import_shard_text_bytes: int = Field(64 << 20, gt=0)
    # Workers that parse one import's parts side by side: its own and this many helpers.
    import_helpers: int = Field(8, ge=0)
    idempotency_hours: float = Field(24.0, gt=0)
    # An Idempotency-Key in progress is leased to its request's process, which renews the
    # lease every third of this; a key whose holder died is free again after it (at once
    # when the holder was a process of the same host that is gone).
    idempotency_lease_seconds: float = Field(10.0, gt=0)
    # Caps on what a training spec may ask for.
    max_job_seconds: float = Field(86_400.0, gt=0)
    max_cache_mb: float = Field(4096.0, gt=0)
    max_threads: int = Field(8, ge=1)
    # Blobs with no row (a crash between file and commit) are removed after this long.
    orphan_blob_grace_seconds: float = Field(3600.0, gt=0)

    # -- blob storage (app/infra/storage.py; docs/operations.md: "Running on several hosts") --
    # local: files under `home` (one host, or a shared filesystem); s3: an S3-compatible
    # object store, so hosts share nothing but the store, the database and the broker.
    blob_backend: Literal["local", "s3"] = "local"
    s3_endpoint_url: str = ""  # e.g. http://minio:9000; empty: AWS S3 itself
    s3_bucket: str = "hinge"  # must exist
    s3_prefix: str = ""  # prepended to every object key (several deployments, one bucket)
    s3_region: str = "us-east-1"
    s3_access_key_id: str = ""  # empty: boto3's own chain (environment, profile, role)
    s3_secret_access_key: SecretStr = SecretStr("")
    # Each process's local cache of the blobs it read from S3 (under home/blob-cache),
    # keyed by sha256; least recently used blobs go beyond this size.
    blob_cache_bytes: int = Field(8 << 30, gt=0)
    # A model whose arrays take at least this many bytes keeps them in blob storage;
    # smaller ones stay in the database row.
    model_blob_min_bytes: int = Field(1 << 20, ge=0)

    @field_validator("allowed_hosts", "cors_origins", "import_roots", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _embedded_defaults(self) -> Settings:
        self.home = self.home.expanduser().resolve()
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'hinge.sqlite'}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{self.home / 'broker.sqlite'}"
        return self

    def solver_thread_budget(self, cores: int | None = None) -> int:
        """Numba threads per worker process: HINGE_SOLVER_THREADS, or by default the
        host's cores shared among the worker processes (at least 1)."""
        if self.solver_threads:
            return self.solver_threads
        return max(1, (cores or available_cores()) // self.worker_concurrency)

    def hmac_key(self) -> bytes:
        """The secret behind key hashes and session signatures (see `secret_key`)."""
        configured = self.secret_key.get_secret_value()
        if configured:
            return configured.encode()
        return _home_secret(self.home / "secret_key")

    @property
    def datasets_dir(self) -> Path:
        return self.home / "datasets"

    def ensure_dirs(self) -> None:
        self.datasets_dir.mkdir(parents=True, exist_ok=True)


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _home_secret(path: Path) -> bytes:
    """The secret in `path`, created (0600, atomically: first writer wins) if missing."""
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(48))
    try:
        os.link(fresh, path)  # fails if another process created it first
    except FileExistsError:
        pass
    finally:
        fresh.unlink(missing_ok=True)
    return path.read_bytes().strip()


@lru_cache
def get_settings() -> Settings:
    return Settings()
