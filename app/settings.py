"""One validated settings object, read from the environment (prefix HINGE_)."""

from __future__ import annotations

import os
import secrets
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

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

    max_upload_bytes: int = Field(1 << 30, gt=0)  # compressed and decompressed, each
    max_features: int = Field(10_000_000, gt=0)
    max_classes: int = Field(1000, ge=2)
    max_line_bytes: int = Field(16 << 20, gt=0)
    max_predict_rows: int = Field(100_000, gt=0)
    max_predict_bytes: int = Field(32 << 20, gt=0)
    job_max_seconds: float = Field(3600.0, gt=0)
    max_queued_jobs: int = Field(1000, gt=0)
    solver_threads: int = Field(1, ge=1)
    # Crash recovery: a running job whose heartbeat is older than the lease is re-queued
    # (or failed with "worker lost" after max_attempts); the API sweeps every interval.
    job_lease_seconds: float = Field(60.0, gt=0)
    sweep_interval_seconds: float = Field(10.0, gt=0)
    max_attempts: int = Field(3, ge=1)
    requeue_after_seconds: float = Field(120.0, gt=0)
    # Evaluations of datasets up to this many rows run inside the request; larger ones on
    # a worker (POST /v1/models/{id}/evaluations answers 202 and the record is queued).
    evaluate_inline_rows: int = Field(20_000, ge=0)
    # A search (POST /v1/searches) of more fits (points x folds) than this is a 413.
    max_search_fits: int = Field(20_000, gt=0)

    # -- security (README: "Keys, limits and the security model") --------------------
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
    # Per-tenant limits (a tenant row may lower or raise them).
    tenant_max_stored_bytes: int = Field(20 << 30, gt=0)  # of dataset arrays, all datasets
    tenant_max_datasets: int = Field(1000, gt=0)
    tenant_max_running_jobs: int = Field(4, gt=0)
    tenant_max_queued_jobs: int = Field(200, gt=0)
    # One dataset, bounded while it is parsed (the arrays take ~12 bytes per non-zero and
    # ~16 per row, so a small file of short lines grows far more than its text).
    # Parsing takes up to about 1.5x max_dataset_bytes of memory per concurrent upload;
    # the defaults keep one upload under 300 MB (raise them for larger data sets).
    max_dataset_rows: int = Field(5_000_000, gt=0)
    max_dataset_nnz: int = Field(8_000_000, gt=0)
    max_dataset_bytes: int = Field(128 << 20, gt=0)  # the arrays of one dataset
    max_concurrent_uploads: int = Field(2, ge=1)  # per API process; the rest wait
    idempotency_hours: float = Field(24.0, gt=0)
    # Caps on what a training spec may ask for.
    max_job_seconds: float = Field(86_400.0, gt=0)
    max_cache_mb: float = Field(4096.0, gt=0)
    max_threads: int = Field(8, ge=1)
    # Blobs with no row (a crash between file and commit) are removed after this long.
    orphan_blob_grace_seconds: float = Field(3600.0, gt=0)

    @field_validator("allowed_hosts", "cors_origins", mode="before")
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
