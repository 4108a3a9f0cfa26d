"""The API keeps answering while another process holds SQLite's write lock.

Found by CI: the dashboard's job page got a 500 from GET /v1/jobs/{id}/events and never saw
its job finish. The SSE handler, a coroutine, read the database on the event loop; when it
waited there for the write lock, held by a request whose session the loop had yet to close
(dependency teardown runs after the response is sent), the loop could not close it: a
deadlock until SQLite's 30 s busy timeout, then "database is locked". Reads also took the
write lock (BEGIN IMMEDIATE) and held it until that teardown.

Here a real uvicorn process serves a SQLite file while the test holds the write lock from
its own connection, as the worker does while it writes: reads (JSON, dashboard pages, the
SSE stream) must answer at once, and a write must wait for the lock without stopping the
server, then succeed. A write that cannot have the lock within
HINGE_SQLITE_WRITE_WAIT_SECONDS is a 503 with Retry-After that created nothing (found by a
probe of `f00179e`: such requests were 500s, and some had committed a job that then ran).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.infra.queue import broker_holding
from app.settings import Settings
from tests.support import bearer, embedded_settings, make_key, migrate, start_api

# Far below SQLite's 30 s busy timeout: a request that waits for the lock fails the test.
PROMPT = 10.0


@contextlib.contextmanager
def _served(tmp_path: Path) -> Iterator[tuple[httpx.Client, Settings]]:
    """A real API process on a new embedded home, and an admin client of it."""
    settings = embedded_settings(tmp_path / "home")
    settings.ensure_dirs()
    migrate(settings.database_url)
    server, base = start_api(settings, tmp_path)
    try:
        with httpx.Client(base_url=base, timeout=PROMPT,
                          headers=bearer(make_key(settings))) as client:
            yield client, settings
    finally:
        server.stop()


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[httpx.Client, Settings]]:
    with _served(tmp_path) as served:
        yield served


class WriteLock:
    """SQLite's write lock on the service's database, held by this process."""

    def __init__(self, database_url: str) -> None:
        self.connection = sqlite3.connect(database_url.removeprefix("sqlite:///"),
                                          isolation_level=None, check_same_thread=False)

    def __enter__(self) -> WriteLock:
        self.connection.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, *_exc: object) -> None:
        self.connection.execute("ROLLBACK")
        self.connection.close()


def _queued_job(client: httpx.Client, cancer_bytes: bytes) -> dict:
    """Upload heart_scale and submit a job; with no worker here it stays queued."""
    dataset = client.post("/v1/datasets", files={"file": ("heart", cancer_bytes)}).json()
    job = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
    assert job["status"] == "queued"
    return job


def _first_event(client: httpx.Client, job_id: str) -> str:
    with client.stream("GET", f"/v1/jobs/{job_id}/events") as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data:"):
                return line
    raise AssertionError("the stream ended without an event")


def test_reads_and_the_event_stream_answer_while_the_write_lock_is_held(
    api: tuple[httpx.Client, Settings], cancer_bytes: bytes
) -> None:
    client, settings = api
    job = _queued_job(client, cancer_bytes)

    with WriteLock(settings.database_url):
        assert client.get(f"/v1/jobs/{job['id']}").json()["status"] == "queued"
        assert client.get("/v1/jobs").json()["count"] == 1
        assert client.get(f"/v1/datasets/{job['dataset_id']}").status_code == 200
        assert client.get("/healthz").json() == {"status": "ok"}
        for page in ("/", f"/jobs/{job['id']}", f"/datasets/{job['dataset_id']}", "/models"):
            assert client.get(page).status_code == 200, page
        assert '"status": "queued"' in _first_event(client, job["id"])
        assert client.get("/v1/jobs/0123456789abcdef0123456789abcdef/events").status_code == 404


def test_a_write_waits_for_the_lock_without_stopping_the_server(
    api: tuple[httpx.Client, Settings], cancer_bytes: bytes
) -> None:
    client, settings = api
    job = _queued_job(client, cancer_bytes)

    cancelled: list[httpx.Response] = []
    with WriteLock(settings.database_url):
        writer = threading.Thread(
            target=lambda: cancelled.append(client.post(f"/v1/jobs/{job['id']}/cancel")))
        writer.start()
        writer.join(1.0)
        assert writer.is_alive()  # the cancel waits for the lock...
        # ...while the server goes on answering reads and streams.
        assert client.get(f"/v1/jobs/{job['id']}").json()["status"] == "queued"
        assert '"status": "queued"' in _first_event(client, job["id"])
        assert client.get("/v1/solvers").status_code == 200
    writer.join(PROMPT)
    assert not writer.is_alive()
    assert cancelled[0].status_code == 202, cancelled[0].text
    assert client.get(f"/v1/jobs/{job['id']}").json()["status"] == "cancelled"


BOUND = 1.0  # HINGE_SQLITE_WRITE_WAIT_SECONDS of the API below


@pytest.fixture
def impatient_api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                  ) -> Iterator[tuple[httpx.Client, Settings]]:
    monkeypatch.setenv("HINGE_SQLITE_WRITE_WAIT_SECONDS", str(BOUND))
    with _served(tmp_path) as served:
        yield served


def _count(settings: Settings, table: str) -> int:
    with sqlite3.connect(settings.database_url.removeprefix("sqlite:///")) as connection:
        return int(connection.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert int(response.headers["Retry-After"]) >= 1
    assert response.json()["error"]["code"] == "unavailable"


def test_a_write_that_cannot_have_the_lock_in_time_is_a_503_that_created_nothing(
    impatient_api: tuple[httpx.Client, Settings], cancer_bytes: bytes
) -> None:
    client, settings = impatient_api
    dataset = client.post("/v1/datasets", files={"file": ("cancer", cancer_bytes)}).json()
    spec = {"dataset_id": dataset["id"], "solver": "dcd"}
    keyed = {"Idempotency-Key": "submit-once"}

    with WriteLock(settings.database_url):
        started = time.monotonic()
        _refused(client.post("/v1/jobs", json=spec))
        _refused(client.post("/v1/jobs", json=spec, headers=keyed))
        _refused(client.post("/v1/datasets", files={"file": ("again", cancer_bytes)}))
        assert time.monotonic() - started < 3 * (BOUND + 1)  # bounded, not SQLite's 30 s

    assert _count(settings, "jobs") == 0
    assert _count(settings, "outbox") == 0
    assert _count(settings, "idempotency_keys") == 0
    assert _count(settings, "datasets") == 1
    assert len(list(settings.home.rglob("*.npz"))) == 1  # the refused upload's went
    assert broker_holding(settings.broker_url, settings.queue).ready == 0

    # the lock is free again: the same requests are accepted, the keyed one for the first
    # time (the 503 kept no answer to replay)
    first = client.post("/v1/jobs", json=spec, headers=keyed)
    assert first.status_code == 202, first.text
    assert "Idempotent-Replay" not in first.headers
    assert client.post("/v1/jobs", json=spec).status_code == 202
    assert client.post("/v1/jobs", json=spec, headers=keyed).json() == first.json()
    assert _count(settings, "jobs") == 2
    held = broker_holding(settings.broker_url, settings.queue)
    assert held.ids is not None and first.json()["id"] in held.ids and held.ready == 2
