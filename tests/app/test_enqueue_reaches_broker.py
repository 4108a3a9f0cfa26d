"""A submitted job reaches the broker: the job's id, under the task name the worker runs.

No worker runs here: the test reads the queue itself with kombu, on the embedded SQLite
broker and on Redis. (The other app tests run the worker's job function directly, so they
would all pass with enqueueing broken; this one would not.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kombu import Connection

from app.api.main import create_app
from app.settings import Settings
from tests.support import bearer, embedded_settings, make_key, migrate, require_redis

TRAIN_TASK = "hinge.train"  # the name workers/tasks.py registers


def _queued_messages(settings: Settings, limit: int = 10) -> list[Any]:
    messages = []
    with Connection(settings.broker_url) as connection:
        queue = connection.SimpleQueue(settings.queue)
        try:
            for _ in range(limit):
                try:
                    message = queue.get(block=True, timeout=2)
                except queue.Empty:
                    break
                messages.append(message)
                message.ack()
        finally:
            queue.close()
    return messages


@pytest.fixture(params=["sqlite-broker", pytest.param("redis", marks=pytest.mark.redis)])
def broker_settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    overrides = {"broker_url": require_redis()} if request.param == "redis" else {}
    configured = embedded_settings(tmp_path / "home", **overrides)
    configured.ensure_dirs()
    migrate(configured.database_url)
    yield configured


def test_submitted_job_is_on_the_broker_queue(broker_settings: Settings,
                                             cancer_bytes: bytes) -> None:
    with TestClient(create_app(broker_settings),
                    headers=bearer(make_key(broker_settings))) as client:
        upload = client.post("/v1/datasets", files={"file": ("cancer", cancer_bytes)})
        assert upload.status_code == 201, upload.text
        job = client.post("/v1/jobs", json={"dataset_id": upload.json()["id"],
                                            "solver": "dcd"})
        assert job.status_code == 202, job.text
    messages = _queued_messages(broker_settings)
    assert len(messages) == 1
    message = messages[0]
    assert message.headers["task"] == TRAIN_TASK
    args, kwargs, _embed = message.decode()
    assert (args, kwargs) == ([job.json()["id"]], {})


def test_a_rejected_job_sends_nothing(broker_settings: Settings, cancer_bytes: bytes) -> None:
    with TestClient(create_app(broker_settings),
                    headers=bearer(make_key(broker_settings))) as client:
        upload = client.post("/v1/datasets", files={"file": ("cancer", cancer_bytes)})
        job = client.post("/v1/jobs", json={"dataset_id": upload.json()["id"],
                                            "solver": "dcd", "params": {"C": -1}})
        assert job.status_code == 422
    assert _queued_messages(broker_settings) == []
