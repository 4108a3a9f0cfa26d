"""The recovery sweep and the lease, on a real SQLite database (no worker process)."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy import create_engine, text, update

from app.domain.job_status import JobStatus
from app.domain.orm import Job, utcnow
from app.domain.services.jobs import transition
from app.domain.sweep import sweep
from app.infra.db import session_scope
from app.settings import Settings

RUNNING, SUCCEEDED = JobStatus.RUNNING, JobStatus.SUCCEEDED


def _make_running(settings: Settings, job_id: str, attempt: int, beat_age: float) -> None:
    with session_scope(settings.database_url) as session:
        session.execute(update(Job).where(Job.id == job_id).values(
            status="running", attempt=attempt,
            heartbeat_at=utcnow() - timedelta(seconds=beat_age)))


def test_stale_running_job_is_requeued_and_fresh_one_is_left_alone(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    stale = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    fresh = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    _make_running(settings, stale, attempt=1, beat_age=settings.job_lease_seconds + 5)
    _make_running(settings, fresh, attempt=1, beat_age=1)
    counts = sweep(settings)
    assert counts["requeued"] == 1
    stale_job = client.get(f"/v1/jobs/{stale}").json()
    assert stale_job["status"] == "queued" and stale_job["attempt"] == 1
    assert stale_job["status_history"][-1]["status"] == "queued"
    assert client.get(f"/v1/jobs/{fresh}").json()["status"] == "running"


def test_stale_job_at_the_attempt_cap_fails_as_worker_lost(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job_id = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    _make_running(settings, job_id, attempt=settings.max_attempts,
                  beat_age=settings.job_lease_seconds + 5)
    assert sweep(settings)["failed"] == 1
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["status"] == "failed" and "worker lost" in job["error"]


def test_stale_job_with_cancel_requested_ends_cancelled(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job_id = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    _make_running(settings, job_id, attempt=1, beat_age=settings.job_lease_seconds + 5)
    client.post(f"/v1/jobs/{job_id}/cancel")
    assert sweep(settings)["cancelled"] == 1
    assert client.get(f"/v1/jobs/{job_id}").json()["status"] == "cancelled"


def test_long_queued_job_whose_message_is_gone_is_enqueued_again(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job_id = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    assert sweep(settings)["reenqueued"] == 0
    engine = create_engine(settings.broker_url.removeprefix("sqla+"))
    with engine.begin() as connection:  # the message is lost (tests/app/test_sweep_broker)
        assert connection.execute(text("DELETE FROM kombu_message")).rowcount == 1
    engine.dispose()
    with session_scope(settings.database_url) as session:
        session.execute(update(Job).where(Job.id == job_id).values(
            queued_at=utcnow() - timedelta(seconds=settings.requeue_after_seconds + 1)))
    assert sweep(settings)["reenqueued"] == 1
    assert sweep(settings)["reenqueued"] == 0  # queued_at was refreshed


def test_an_old_attempt_cannot_finish_a_job_claimed_again(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job_id = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    _make_running(settings, job_id, attempt=2, beat_age=0)
    with session_scope(settings.database_url) as session:
        assert not transition(session, job_id, (RUNNING,), SUCCEEDED, expect_attempt=1)
        assert transition(session, job_id, (RUNNING,), SUCCEEDED, expect_attempt=2)


def test_redis_visibility_timeout_exceeds_the_hard_time_limit() -> None:
    from workers.celery_app import hard_time_limit, make_celery

    settings = Settings(broker_url="redis://127.0.0.1:6379/0", job_max_seconds=7200)
    conf = make_celery(settings).conf
    assert conf.task_time_limit == hard_time_limit(settings) > settings.job_max_seconds
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
