"""One validated settings object, read from the environment (prefix HINGE_)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


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

    @model_validator(mode="after")
    def _embedded_defaults(self) -> Settings:
        self.home = self.home.expanduser().resolve()
        if not self.database_url:
            self.database_url = f"sqlite:///{self.home / 'hinge.sqlite'}"
        if not self.broker_url:
            self.broker_url = f"sqla+sqlite:///{self.home / 'broker.sqlite'}"
        return self

    @property
    def datasets_dir(self) -> Path:
        return self.home / "datasets"

    def ensure_dirs(self) -> None:
        self.datasets_dir.mkdir(parents=True, exist_ok=True)


@lru_cache
def get_settings() -> Settings:
    return Settings()
