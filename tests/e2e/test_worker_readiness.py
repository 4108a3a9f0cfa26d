"""A real Celery worker process reports its readiness: `warming` while it loads the solver
kernels, then `ready`, a live heartbeat, and its row gone when it stops; a killed worker
turns `stale`. A queued job says what it waits for all along (GET /v1/status,
`waiting_for`; the rules themselves: tests/app/test_status.py)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.settings import Settings
from tests.support import bearer, embedded_settings, make_key, migrate, start_worker

STALE_SECONDS = 1.5


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Settings, TestClient]]:
    settings = embedded_settings(tmp_path / "home", worker_stale_seconds=STALE_SECONDS)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
        yield settings, client


def _until(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(what)


def test_a_worker_warms_up_runs_the_waiting_job_and_leaves(
        world: tuple[Settings, TestClient], tmp_path: Path, cancer_bytes: bytes) -> None:
    settings, client = world
    dataset = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
    job_id = client.post("/v1/jobs", json={"dataset_id": dataset}).json()["id"]
    assert "no worker is running" in client.get(f"/v1/jobs/{job_id}").json()["waiting_for"]

    worker = start_worker(settings, tmp_path, wait=False)
    try:
        states: list[str] = []
        reasons: list[str] = []
        deadline = time.monotonic() + 120
        job: dict[str, Any] = {}
        while time.monotonic() < deadline:
            shown = client.get("/v1/status").json()["workers"]
            assert len(shown) <= 1, shown
            if shown and (not states or states[-1] != shown[0]["state"]):
                states.append(shown[0]["state"])
            job = client.get(f"/v1/jobs/{job_id}").json()
            if job["waiting_for"] and (not reasons or reasons[-1] != job["waiting_for"]):
                reasons.append(job["waiting_for"])
            if job["status"] == "succeeded":
                break
            time.sleep(0.05)
        assert job["status"] == "succeeded", (job, worker.log()[-3000:])
        # the state once the job is done: a fast job can start and end between two reads
        # of the status, right after the worker became ready
        shown = client.get("/v1/status").json()["workers"]
        if shown and (not states or states[-1] != shown[0]["state"]):
            states.append(shown[0]["state"])
        # never back to warming, never stale while it runs
        assert states in (["warming", "ready"], ["ready"]), states
        assert all(r.startswith(("a worker", "a free worker")) for r in reasons), reasons
        print(f"\nworker states seen: {states}; the job waited for: {reasons}")

        status = client.get("/v1/status").json()
        [row] = status["workers"]
        assert (status["ready_workers"], status["warming_workers"]) == (1, 0)
        assert row["state"] == "ready" and row["concurrency"] == 1
        assert row["warming_s"] > 0  # how long its warm-up took
        # the row is the process that ran the job (the job names "<node> pid <pid>")
        assert job["worker"] == f"{row['hostname']} pid {row['pid']}"
        assert row["pid"] != worker.process.pid  # a pool process, not the main one
        # the heartbeat goes on while the worker idles
        time.sleep(3 * STALE_SECONDS)
        [row] = client.get("/v1/status").json()["workers"]
        assert row["state"] == "ready" and row["heartbeat_age_s"] < STALE_SECONDS
    finally:
        worker.stop()
    assert worker.process.returncode == 0
    assert client.get("/v1/status").json()["workers"] == []  # gone with its process


def test_a_killed_worker_turns_stale_and_a_job_says_so(
        world: tuple[Settings, TestClient], tmp_path: Path, cancer_bytes: bytes) -> None:
    settings, client = world
    worker = start_worker(settings, tmp_path, wait=False)
    try:
        row = _until(lambda: [w for w in client.get("/v1/status").json()["workers"]
                              if w["state"] == "ready"], 120, "the worker never got ready")[0]
        # the node first (it would start a new pool process), then its pool process
        os.kill(worker.process.pid, signal.SIGKILL)
        os.kill(row["pid"], signal.SIGKILL)
        worker.process.wait(timeout=30)
    finally:
        worker.stop()
    stale = _until(lambda: [w for w in client.get("/v1/status").json()["workers"]
                            if w["state"] == "stale"], 10, "the row never turned stale")
    assert [w["pid"] for w in stale] == [row["pid"]]
    assert client.get("/v1/status").json()["ready_workers"] == 0
    dataset = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
    job = client.post("/v1/jobs", json={"dataset_id": dataset}).json()
    assert job["status"] == "queued"
    assert job["waiting_for"].startswith("a worker: none is running (the last one stopped "
                                         "answering")
