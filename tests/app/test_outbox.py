"""A submitted job, evaluation or search and its messages commit together (app.domain.outbox),
on a real SQLite database and the real embedded broker (no worker: the tests read the
broker's queues).

The message is owed in the same transaction as the job; it is sent right after the commit,
or, when the broker is down or the process died before sending, by the sweep once the
broker takes it. An accepted job is never left without its message, and a message is
never sent for a job that was not committed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update

from app.api.main import create_app
from app.domain.orm import Evaluation, Job, OutboxMessage, Search, SearchTask, utcnow
from app.domain.outbox import grace_seconds, sweep_outbox
from app.domain.schemas import JobCreate
from app.domain.services import jobs
from app.domain.services.tenants import tenant_by_name
from app.domain.sweep import ROWS_OF_TASK, sweep
from app.infra.db import AFTER_COMMIT, read_sessionmaker_for, session_scope
from app.infra.queue import broker_holding, search_queue
from app.settings import Settings
from tests.support import bearer, make_key


def _outbox(settings: Settings) -> list[str]:
    """The job ids whose messages the outbox still holds."""
    with read_sessionmaker_for(settings.database_url)() as session:
        return list(session.scalars(select(OutboxMessage.ref_id)
                                    .order_by(OutboxMessage.created_at)))


def _past_the_grace(settings: Settings) -> None:
    with session_scope(settings.database_url) as session:
        session.execute(update(OutboxMessage).values(
            created_at=utcnow() - timedelta(seconds=grace_seconds(settings) + 1)))


def _held(settings: Settings, queue: str | None = None) -> tuple[frozenset[str], int]:
    holding = broker_holding(settings.broker_url, queue or settings.queue)
    assert holding.ids is not None
    return holding.ids, holding.ready


def test_each_job_is_sent_once_and_its_outbox_row_goes(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    first = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    assert _held(settings) == ({first}, 1)  # sent before the answer
    second = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    assert _held(settings) == ({first, second}, 2)
    # the second submission's transaction deleted the first one's row in passing
    assert _outbox(settings) == [second]
    assert sweep(settings)["outbox_sent"] == 0  # sent already: nothing is sent again
    assert _outbox(settings) == []
    assert _held(settings) == ({first, second}, 2)


def _committed_without_its_send(settings: Settings, dataset_id: str) -> Job:
    """A job submitted and committed whose send, due after the commit, is dropped (as when
    the API process dies between the two)."""
    with session_scope(settings.database_url) as session:
        tenant = tenant_by_name(session, "default")
        assert tenant is not None
        job = jobs.submit(session, settings, tenant.id, JobCreate(dataset_id=dataset_id))
        session.info.pop(AFTER_COMMIT)
    return job


def test_a_job_committed_without_its_send_gets_it_from_the_sweep(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    # The API process dies between the commit and the send: here, the commit happens and
    # the send that follows it is dropped.
    job = _committed_without_its_send(settings, cancer_id)
    assert _outbox(settings) == [job.id]
    assert _held(settings) == (frozenset(), 0)

    assert sweep(settings)["outbox_sent"] == 0  # too young: its relay may be under way
    _past_the_grace(settings)
    assert sweep(settings)["outbox_sent"] == 1
    assert _held(settings) == ({job.id}, 1)
    assert _outbox(settings) == []
    assert sweep(settings)["outbox_sent"] == 0


def test_the_sweep_drops_what_it_owes_for_a_job_already_claimed(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    job = _committed_without_its_send(settings, cancer_id)
    with session_scope(settings.database_url) as session:  # e.g. a duplicate delivered
        assert jobs.claim_job(session, job.id, "worker-1") is not None
    _past_the_grace(settings)
    assert sweep(settings)["outbox_sent"] == 0
    assert _outbox(settings) == []
    assert _held(settings) == (frozenset(), 0)


@pytest.fixture
def broker_down(settings: Settings, tmp_path: Path) -> Iterator[TestClient]:
    """The app with a broker it cannot reach (its SQLite file cannot be created);
    evaluations go to a worker whatever their size."""
    down = settings.model_copy(update={
        "broker_url": f"sqla+sqlite:///{tmp_path / 'no-such-dir' / 'broker.sqlite'}",
        "evaluate_inline_rows": 0})
    with TestClient(create_app(down), headers=bearer(make_key(settings))) as client:
        yield client


def test_a_job_submitted_while_the_broker_is_down_is_accepted_and_sent_later(
    broker_down: TestClient, settings: Settings, cancer_bytes: bytes
) -> None:
    upload = broker_down.post("/v1/datasets", content=cancer_bytes)
    assert upload.status_code == 201, upload.text
    response = broker_down.post("/v1/jobs", json={"dataset_id": upload.json()["id"]})
    assert response.status_code == 202, response.text  # was a 503 and a failed job
    job = response.json()
    assert job["status"] == "queued"
    assert _outbox(settings) == [job["id"]]

    _past_the_grace(settings)
    down = broker_down.app.state.settings  # type: ignore[attr-defined]
    assert sweep_outbox(down, ROWS_OF_TASK) == []  # still down: still owed
    assert _outbox(settings) == [job["id"]]

    assert sweep(settings)["outbox_sent"] == 1  # the broker is back
    assert _held(settings) == ({job["id"]}, 1)
    assert _outbox(settings) == []
    with read_sessionmaker_for(settings.database_url)() as session:
        assert session.scalar(select(func.count()).select_from(Job)) == 1
        assert session.get(Job, job["id"]).status == "queued"  # type: ignore[union-attr]


def test_a_rejected_job_owes_nothing(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    response = client.post("/v1/jobs", json={"dataset_id": cancer_id, "params": {"C": -1}})
    assert response.status_code == 422
    assert _outbox(settings) == []
    assert _held(settings) == (frozenset(), 0)


def test_an_evaluation_and_a_search_submitted_while_the_broker_is_down_are_sent_later(
    client: TestClient, broker_down: TestClient, settings: Settings, cancer_id: str,
    cancer_model_id: str
) -> None:
    model_id = cancer_model_id
    job_id = client.get(f"/v1/models/{model_id}").json()["job_id"]
    evaluation = broker_down.post(f"/v1/models/{model_id}/evaluations",
                                  json={"dataset_id": cancer_id})
    assert evaluation.status_code == 202, evaluation.text  # was a 503 and a failed record
    assert evaluation.json()["status"] == "queued"
    search = broker_down.post("/v1/searches", json={
        "dataset_id": cancer_id, "solver": "dcd", "space": {"C": [0.5, 1, 2]},
        "cv": {"folds": 2}})
    assert search.status_code == 202, search.text  # was a 503 and a failed search
    assert search.json()["status"] == "queued"
    with read_sessionmaker_for(settings.database_url)() as session:
        tasks = set(session.scalars(select(SearchTask.id)))
        assert session.get(Search, search.json()["id"]).status == "queued"  # type: ignore[union-attr]
    assert len(tasks) == 2
    assert set(_outbox(settings)) == {evaluation.json()["id"], *tasks}

    _past_the_grace(settings)
    assert sweep(settings)["outbox_sent"] == 3  # the broker is back
    assert _held(settings) == ({job_id, evaluation.json()["id"]}, 2)
    assert _held(settings, search_queue(settings.queue)) == (tasks, 2)
    assert _outbox(settings) == []


def test_the_sweep_drops_what_it_owes_for_an_evaluation_already_claimed(
    client: TestClient, broker_down: TestClient, settings: Settings, cancer_id: str,
    cancer_model_id: str
) -> None:
    job_id = client.get(f"/v1/models/{cancer_model_id}").json()["job_id"]
    evaluation_id = broker_down.post(f"/v1/models/{cancer_model_id}/evaluations",
                                     json={"dataset_id": cancer_id}).json()["id"]
    with session_scope(settings.database_url) as session:  # e.g. a duplicate delivered
        session.execute(update(Evaluation).where(Evaluation.id == evaluation_id)
                        .values(status="running", attempt=1, heartbeat_at=utcnow()))
    _past_the_grace(settings)
    assert sweep(settings)["outbox_sent"] == 0
    assert _outbox(settings) == []
    assert _held(settings) == ({job_id}, 1)
