"""GET /v1/status and a queued job's `waiting_for`, from the rows worker processes write
(app/domain/services/workers.py; the processes themselves: tests/workers/test_presence.py)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.domain.orm import Job, Tenant, WorkerProcess, utcnow
from app.domain.services import workers
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import bearer, make_key
from workers.training import claim


def _worker(settings: Settings, state: str = "warming", age: float = 0.0,
            warming_for: float = 0.0, hostname: str = "celery@test") -> str:
    """A worker row as a worker process writes it, its heartbeat `age` seconds old."""
    with session_scope(settings.database_url) as session:
        worker_id = workers.register_worker(session, hostname, 4242, 1)
        if state == "ready":
            workers.mark_ready(session, worker_id)
        now = utcnow()
        started = now - timedelta(seconds=age + warming_for)
        session.execute(update(WorkerProcess).where(WorkerProcess.id == worker_id).values(
            heartbeat_at=now - timedelta(seconds=age), started_at=started,
            state_since=started if state == "warming" else now - timedelta(seconds=age)))
    return worker_id


def _queued_job(client: TestClient, cancer_bytes: bytes) -> str:
    dataset = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
    response = client.post("/v1/jobs", json={"dataset_id": dataset})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _waiting_for(client: TestClient, job_id: str) -> str:
    body = client.get(f"/v1/jobs/{job_id}").json()
    assert body["status"] == "queued"
    listed = next(j for j in client.get("/v1/jobs").json()["data"] if j["id"] == job_id)
    assert listed["waiting_for"] == body["waiting_for"]
    return str(body["waiting_for"])


def test_status_without_workers_and_a_job_that_waits_for_one(
        client: TestClient, settings: Settings, cancer_bytes: bytes) -> None:
    status = client.get("/v1/status").json()
    assert status == {"scope": "service", "workers": [], "ready_workers": 0,
                      "warming_workers": 0,
                      "queue": {"queued": 0, "running": 0},
                      "worker_stale_seconds": settings.worker_stale_seconds}
    job_id = _queued_job(client, cancer_bytes)
    reason = _waiting_for(client, job_id)
    assert reason.startswith("a worker: no worker is running") and "make run" in reason
    assert client.get("/v1/status").json()["queue"] == {"queued": 1, "running": 0}


def test_a_warming_worker_then_a_ready_one_then_a_busy_one(
        client: TestClient, settings: Settings, cancer_bytes: bytes) -> None:
    job_id = _queued_job(client, cancer_bytes)
    worker_id = _worker(settings, "warming", age=0.3, warming_for=12.0)
    assert re.fullmatch(r"a worker \(warming up, 1[23] s\)", _waiting_for(client, job_id))
    [shown] = client.get("/v1/status").json()["workers"]
    assert shown["state"] == "warming" and shown["hostname"] == "celery@test"
    assert shown["pid"] == 4242 and shown["concurrency"] == 1
    assert 12.0 <= shown["warming_s"] < 20 and 0.3 <= shown["heartbeat_age_s"] < 5

    with session_scope(settings.database_url) as session:
        workers.mark_ready(session, worker_id)
    status = client.get("/v1/status").json()
    assert (status["ready_workers"], status["warming_workers"]) == (1, 0)
    assert status["workers"][0]["state"] == "ready"
    assert 12.0 <= status["workers"][0]["warming_s"] < 20  # how long its warm-up took
    assert _waiting_for(client, job_id) == "a worker to pick it up (1 of 1 free)"

    # the one worker runs another job: this one waits for it, and a later one too
    second = _queued_job(client, cancer_bytes)
    assert claim(settings, job_id, "celery@test pid 4242") is not None
    assert _waiting_for(client, second) == "a free worker (1 running)"
    third = _queued_job(client, cancer_bytes)
    assert _waiting_for(client, third) == "a free worker (1 running, 1 queued ahead)"
    assert client.get("/v1/status").json()["queue"] == {"queued": 2, "running": 1}
    # another tenant's key learns nothing of those jobs: not how many run or wait ahead
    other = make_key(settings, tenant="other", scopes=("read", "train"))
    their_data = client.post("/v1/datasets", content=cancer_bytes,
                             headers=bearer(other)).json()["id"]
    theirs = client.post("/v1/jobs", headers=bearer(other),
                         json={"dataset_id": their_data}).json()["id"]
    shown = client.get(f"/v1/jobs/{theirs}", headers=bearer(other)).json()["waiting_for"]
    assert shown == "a free worker (all 1 busy)", shown
    assert client.get(f"/v1/jobs/{job_id}").json()["waiting_for"] is None  # running


def test_a_stale_worker_is_not_one_that_runs_jobs(
        client: TestClient, settings: Settings, cancer_bytes: bytes) -> None:
    _worker(settings, "ready", age=settings.worker_stale_seconds + 90)
    job_id = _queued_job(client, cancer_bytes)
    assert _waiting_for(client, job_id) == ("a worker: none is running (the last one "
                                            "stopped answering 2 min ago; `make run` "
                                            "starts one)")
    [shown] = client.get("/v1/status").json()["workers"]
    assert shown["state"] == "stale" and client.get("/v1/status").json()["ready_workers"] == 0


def test_the_tenants_running_limit_is_named(
        client: TestClient, settings: Settings, cancer_bytes: bytes) -> None:
    _worker(settings, "ready")
    _worker(settings, "ready", hostname="celery@other")
    job_ids = [_queued_job(client, cancer_bytes) for _ in range(2)]
    with session_scope(settings.database_url) as session:  # the tenant may run one job
        tenant_id = session.get(Job, job_ids[0]).tenant_id  # type: ignore[union-attr]
        session.execute(update(Tenant).where(Tenant.id == tenant_id)
                        .values(max_running_jobs=1))
    assert claim(settings, job_ids[0], "celery@test pid 4242") is not None
    assert _waiting_for(client, job_ids[1]) == (
        "one of its tenant's running jobs to end (1 running, the tenant's limit is 1)")


def test_status_needs_a_read_key(client: TestClient, settings: Settings) -> None:
    assert client.get("/v1/status", headers={"Authorization": ""}).status_code == 401
    reader = make_key(settings, "default", ("read",))
    assert client.get("/v1/status", headers=bearer(reader)).status_code == 200


def test_a_tenant_key_sees_its_own_queue_and_no_worker_identities(
        client: TestClient, settings: Settings, cancer_bytes: bytes) -> None:
    """Tenant "default" has two queued jobs and a running one; tenant "other" one queued.
    A read or train key sees only its own tenant's figures and the worker counts; the
    admin key sees every tenant's jobs and the workers' host names and PIDs."""
    _worker(settings, "ready", hostname="celery@secret-host")
    _worker(settings, "warming", hostname="celery@warming-host")
    running = _queued_job(client, cancer_bytes)
    assert claim(settings, running, "celery@secret-host pid 4242") is not None
    for _ in range(2):
        _queued_job(client, cancer_bytes)
    other_train = make_key(settings, "other", ("train",))
    other = bearer(other_train)
    dataset = client.post("/v1/datasets", content=cancer_bytes, headers=other).json()["id"]
    assert client.post("/v1/jobs", json={"dataset_id": dataset},
                       headers=other).status_code == 202

    service = client.get("/v1/status").json()  # the admin key of tenant "default"
    assert service["scope"] == "service"
    assert service["queue"] == {"queued": 3, "running": 1}
    assert {w["hostname"] for w in service["workers"]} == {"celery@secret-host",
                                                           "celery@warming-host"}
    assert {w["pid"] for w in service["workers"]} == {4242}

    expected = {"default": {"queued": 2, "running": 1}, "other": {"queued": 1, "running": 0}}
    for tenant, scopes in (("default", ("read",)), ("default", ("train",)),
                           ("other", ("read",))):
        response = client.get("/v1/status", headers=bearer(make_key(settings, tenant,
                                                                    scopes)))
        assert response.status_code == 200, response.text
        shown = response.json()
        assert shown == {"scope": "tenant", "workers": None, "ready_workers": 1,
                         "warming_workers": 1, "queue": expected[tenant],
                         "worker_stale_seconds": settings.worker_stale_seconds}
        assert "secret-host" not in response.text and "4242" not in response.text


def test_the_sweep_forgets_long_stale_workers(settings: Settings) -> None:
    from app.domain.sweep import sweep

    _worker(settings, "ready", age=workers.FORGET_AFTER_SECONDS + 60)
    recent = _worker(settings, "ready", age=settings.worker_stale_seconds + 5)
    assert sweep(settings)["workers_forgotten"] == 1
    with session_scope(settings.database_url) as session:
        assert [w.id for w in session.query(WorkerProcess)] == [recent]


@pytest.mark.parametrize(("seconds", "shown"), [(12.4, "12 s"), (150, "2 min"),
                                                (7200, "2.0 h")])
def test_durations_read_naturally(seconds: float, shown: str) -> None:
    assert workers._ago(seconds) == shown
