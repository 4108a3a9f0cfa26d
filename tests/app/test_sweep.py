"""The recovery sweep and the lease (app.domain.lifecycle), on a real SQLite database and on
PostgreSQL, with the embedded broker (no worker process): jobs, evaluations and search
tasks are swept by the one lifecycle."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine, select, text, update

from app.domain.job_status import JobStatus
from app.domain.orm import Evaluation, Job, SearchTask, utcnow
from app.domain.services.jobs import transition
from app.domain.sweep import sweep
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import BACKENDS, migrated_settings
from workers.training import run_job


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path,
             blob_overrides: dict[str, Any]) -> Iterator[Settings]:
    """This module's tests run on SQLite and on PostgreSQL (evaluations on a worker)."""
    with migrated_settings(request.param, tmp_path / "home", evaluate_inline_rows=0,
                           max_attempts=2, **blob_overrides) as configured:
        yield configured

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


def _lose_worker(settings: Settings, table: Any, item_id: str) -> None:
    """The item's worker died: it is running with a heartbeat older than the lease."""
    with session_scope(settings.database_url) as session:
        session.execute(update(table).where(table.id == item_id).values(
            heartbeat_at=utcnow() - timedelta(seconds=settings.job_lease_seconds + 5)))


def test_an_evaluation_whose_worker_is_lost_is_requeued_then_failed(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job_id = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    assert run_job(settings, job_id, "test-worker") == "succeeded"
    model_id = client.get(f"/v1/jobs/{job_id}").json()["model_id"]
    url = f"/v1/models/{model_id}/evaluations"
    evaluation_id = client.post(url, json={"dataset_id": cancer_id}).json()["id"]
    for attempt in range(1, settings.max_attempts + 1):
        with session_scope(settings.database_url) as session:
            session.execute(update(Evaluation).where(Evaluation.id == evaluation_id)
                            .values(status="running", attempt=attempt))
        _lose_worker(settings, Evaluation, evaluation_id)
        counts = sweep(settings)
        evaluation = client.get(f"{url}/{evaluation_id}").json()
        if attempt < settings.max_attempts:
            assert counts["requeued"] == 1 and evaluation["status"] == "queued"
        else:
            assert counts["failed"] == 1 and evaluation["status"] == "failed"
    assert evaluation["error"] == ("worker lost: 2 attempt(s) ended without a heartbeat")


def test_a_search_task_whose_worker_is_lost_is_requeued_then_fails_its_search(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    search = client.post("/v1/searches", json={"dataset_id": cancer_id, "solver": "dcd",
                                               "space": {"C": [1.0, 2.0]},
                                               "cv": {"folds": 2}}).json()
    with session_scope(settings.database_url) as session:
        task_id = session.scalars(select(SearchTask.id).where(
            SearchTask.search_id == search["id"]).order_by(SearchTask.number)).first()
    assert task_id is not None
    for attempt in range(1, settings.max_attempts + 1):
        with session_scope(settings.database_url) as session:
            session.execute(update(SearchTask).where(SearchTask.id == task_id)
                            .values(status="running", attempt=attempt))
        _lose_worker(settings, SearchTask, task_id)
        counts = sweep(settings)
        if attempt < settings.max_attempts:
            assert counts["search_tasks_enqueued"] == 1
            assert client.get(f"/v1/searches/{search['id']}").json()["status"] == "queued"
    assert counts["failed"] == 1
    body = client.get(f"/v1/searches/{search['id']}").json()
    assert body["status"] == "failed" and "the worker was lost 2 times" in body["error"]


def test_progress_answers_go_stop_or_lost_for_every_kind_that_reports_it(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    from app.domain import lifecycle
    from app.domain.services import jobs

    job_id = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    _make_running(settings, job_id, attempt=1, beat_age=30)
    with session_scope(settings.database_url) as session:
        assert jobs.record_progress(session, job_id, 1, {"iteration": 3}, keep=True) == "go"
    with session_scope(settings.database_url) as session:
        job = session.get(Job, job_id)
        assert job is not None and job.progress == {"iteration": 3}
        assert job.heartbeat_at is not None  # the beat renewed
        assert (utcnow() - job.heartbeat_at).total_seconds() < 10
        job.cancel_requested = True
    with session_scope(settings.database_url) as session:
        assert jobs.record_progress(session, job_id, 1, {"iteration": 4}, keep=False) == (
            "stop")
        assert jobs.record_progress(session, job_id, 2, {"iteration": 5}, keep=False) == (
            "lost")  # another attempt's: nothing written
    with session_scope(settings.database_url) as session:
        job = session.get(Job, job_id)
        assert job is not None and job.progress == {"iteration": 4}
    # a kind without a cancel flag goes on while it holds the item
    from app.domain.services.evaluations import EVALUATIONS
    assert EVALUATIONS.cancel_flag is None
    with session_scope(settings.database_url) as session:
        assert lifecycle.progress(session, EVALUATIONS, "ev_none", 1) == "lost"
