"""Test support: real databases, brokers and processes (no mocks, no Celery eager mode).

Under CI=true a test that needs PostgreSQL or Redis fails when the server is missing;
elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from app.settings import Settings
from testkit.paths import DATA_DIR as SHARED_DATA  # ../shared/data, or $HINGE_SHARED_DATA
from testkit.paths import REPO
from testkit.service import (
    ServiceProcess,
    bearer,
    blob_env,
    child_pids,
    downgrade,
    embedded_settings,
    free_port,
    make_key,
    migrate,
    moto_server,
    running_service,
    s3_overrides,
    settings_env,
    start_api,
    start_worker,
    wait_for_job,
)

T = TypeVar("T")

__all__ = [
    "BACKENDS",
    "BLOB_BACKENDS",
    "BROKERS",
    "IN_CI",
    "POSTGRES_URL",
    "RABBITMQ_URL",
    "REDIS_URL",
    "REPO",
    "SHARED_DATA",
    "ServiceProcess",
    "SharedService",
    "bearer",
    "blob_env",
    "blob_exists",
    "broker_url_for",
    "child_pids",
    "data_file",
    "downgrade",
    "drop_queue",
    "embedded_settings",
    "free_port",
    "make_key",
    "migrate",
    "migrated_settings",
    "moto_server",
    "postgres_schema",
    "read_sse",
    "require_rabbitmq",
    "require_redis",
    "running_service",
    "s3_overrides",
    "search_events",
    "settings_env",
    "sqlite_write_lock_error",
    "start_api",
    "start_worker",
    "stored_row",
    "unavailable",
    "wait_for_job",
]

IN_CI = os.environ.get("CI", "").lower() == "true"
POSTGRES_URL = os.environ.get(
    "HINGE_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("HINGE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
RABBITMQ_URL = os.environ.get("HINGE_TEST_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")


def data_file(name: str) -> Path:
    """A file of the shared LIBSVM sets. Only `parity` tests read them (tests/conftest.py
    skips those when the folder is missing); any other test fails here without it."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.fail(f"shared dataset {path} is missing: a test that reads ../shared/data "
                    "must be marked @pytest.mark.parity (the default suite uses "
                    "testkit.bundled)")
    return path


def unavailable(what: str, error: BaseException) -> None:
    message = f"{what} is not reachable: {type(error).__name__}: {error}"
    if IN_CI:
        pytest.fail(message + " (CI=true: a required server must be running)")
    pytest.skip(message)


@contextlib.contextmanager
def postgres_schema() -> Iterator[str]:
    """A fresh schema in the test database; yields a URL whose search_path points to it."""
    import sqlalchemy as sa

    schema = f"hinge_{uuid.uuid4().hex[:12]}"
    try:
        admin = sa.create_engine(POSTGRES_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:
            connection.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    except Exception as exc:
        unavailable(f"PostgreSQL at {POSTGRES_URL}", exc)
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}options=-csearch_path%3D{schema}"
    finally:
        with admin.connect() as connection:
            connection.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()


def require_redis() -> str:
    import redis

    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2).ping()
    except Exception as exc:
        unavailable(f"Redis at {REDIS_URL}", exc)
    return REDIS_URL


def require_rabbitmq() -> str:
    from kombu import Connection

    try:
        with Connection(RABBITMQ_URL, connect_timeout=2) as connection:
            connection.ensure_connection(max_retries=1)
    except Exception as exc:
        unavailable(f"RabbitMQ at {RABBITMQ_URL}", exc)
    return RABBITMQ_URL


def broker_url_for(broker: str) -> str:
    """A broker URL for a test parameter: "sqla" (the embedded default: ""), "redis" or
    "rabbitmq" (the shared servers; tests use a unique queue name each, see
    embedded_settings, and drop it with drop_queue)."""
    if broker == "redis":
        return require_redis()
    if broker == "rabbitmq":
        return require_rabbitmq()
    return ""


def drop_queue(broker_url: str, queue: str) -> None:
    """Remove a test's queue and its search queue from a shared broker (RabbitMQ queues
    are durable)."""
    from app.infra.queue import search_queue

    names = [queue, search_queue(queue)]
    if broker_url.startswith("redis"):
        import redis

        redis.Redis.from_url(broker_url).delete(*names)
    elif broker_url.startswith("amqp"):
        from kombu import Connection

        with Connection(broker_url, connect_timeout=2) as connection:
            channel = connection.channel()
            for name in names:
                channel.queue_delete(name)
                channel.exchange_delete(name)


# the three brokers of the tests, as a fixture parameter list
BROKERS = ["sqla", pytest.param("redis", marks=pytest.mark.redis),
           pytest.param("rabbitmq", marks=pytest.mark.rabbitmq)]

# the two database backends of the tests, as a fixture parameter list
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
# the two blob backends: a module that overrides the `blob_backend` fixture with these
# params runs its tests on both (tests/conftest.py starts the S3 server when needed)
BLOB_BACKENDS = ["local", pytest.param("s3", marks=pytest.mark.s3)]


def blob_exists(settings: Settings, key: str) -> bool:
    """Whether the blob store of `settings` holds `key` (e.g. "datasets/<id>.npz")."""
    from app.infra.storage import LocalBlobStore, blob_store

    store = blob_store(settings)
    if isinstance(store, LocalBlobStore):
        return store.path(key).exists()
    from app.infra.s3_store import S3BlobStore

    assert isinstance(store, S3BlobStore)
    listed = store.client.list_objects_v2(Bucket=store.bucket, Prefix=store.prefix + key)
    return any(item["Key"] == store.prefix + key for item in listed.get("Contents", []))


@contextlib.contextmanager
def migrated_settings(backend: str, home: Path, **overrides: Any) -> Iterator[Settings]:
    """Embedded settings in `home` on a SQLite file or a fresh PostgreSQL schema, migrated."""
    def configured(database_url: str = "") -> Settings:
        settings = embedded_settings(home, database_url=database_url, **overrides)
        settings.ensure_dirs()
        migrate(settings.database_url)
        return settings

    if backend == "sqlite":
        yield configured()
    else:
        with postgres_schema() as url:
            yield configured(url)


def sqlite_write_lock_error(url: str) -> str | None:
    """BEGIN IMMEDIATE from another connection without waiting: None, or SQLite's error."""
    connection = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0,
                                 isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("ROLLBACK")
        return None
    except sqlite3.OperationalError as exc:
        return str(exc)
    finally:
        connection.close()


def read_sse(response: Any, stop_after: int | None = None) -> list[dict[str, Any]]:
    """The events of an open SSE response, each as {"id", "event", "data" (parsed),
    "received" (time.time() at arrival)}, to the end of the stream or after `stop_after`."""
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in response.iter_lines():
        if line.startswith(":"):
            continue
        if not line:
            if "data" in current:
                current["data"] = json.loads(current["data"])
                current["received"] = time.time()
                events.append(current)
                if stop_after is not None and len(events) >= stop_after:
                    break
            current = {}
            continue
        key, _, value = line.partition(":")
        current[key] = value[1:] if value.startswith(" ") else value
    return events


def search_events(client: Any, search_id: str, last_event_id: str | None = None,
                  timeout: float | None = None) -> list[dict[str, Any]]:
    """The SSE events of a finished search (GET /v1/searches/{id}/events); with
    `last_event_id`, those after it; `timeout` overrides the client's."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    options = {} if timeout is None else {"timeout": timeout}
    with client.stream("GET", f"/v1/searches/{search_id}/events", headers=headers,
                       **options) as response:
        return read_sse(response)


def stored_row(settings: Settings, model: type[T], key: str) -> T:
    """The row of `model` with primary key `key`, read by a session of its own and detached
    (its loaded columns stay readable)."""
    from app.infra.db import read_sessionmaker_for

    with read_sessionmaker_for(settings.database_url)() as session:
        row = session.get(model, key)
        assert row is not None, (model.__name__, key)
        session.expunge(row)
        return row


@dataclass
class SharedService:
    """A running service (API server and Celery worker processes, started by
    running_service) that several tests share: each test talks to it as a tenant of its
    own (`tenant`), so that it sees only its own datasets, jobs, models and names.
    A test that kills or restarts a process, changes a setting or tests the start keeps a
    service of its own."""

    settings: Settings
    base_url: str
    workers: list[ServiceProcess]
    log_dir: Path  # the processes' logs

    @contextlib.contextmanager
    def tenant(self, timeout: float = 60) -> Iterator[httpx.Client]:
        """A client with the admin key of a new tenant. On the way out, the tenant's jobs
        still queued or running are cancelled and waited for, so that the next test finds
        the shared worker idle even when this one failed halfway."""
        key = make_key(self.settings, tenant=f"t-{uuid.uuid4().hex[:12]}")
        with httpx.Client(base_url=self.base_url, timeout=timeout,
                          headers=bearer(key)) as client:
            try:
                yield client
            finally:
                _cancel_unfinished(client)


def _cancel_unfinished(client: httpx.Client) -> None:
    unfinished = [job["id"] for status in ("running", "queued")
                  for job in client.get("/v1/jobs", params={"status": status,
                                                            "limit": 100}).json()["data"]]
    for job_id in unfinished:
        client.post(f"/v1/jobs/{job_id}/cancel")
    for job_id in unfinished:
        wait_for_job(client.get, job_id, timeout=60)
