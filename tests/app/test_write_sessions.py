"""Every write an API request makes is committed BEFORE its response is sent.

FastAPI runs a yield-dependency's teardown after the response is sent unless the
dependency has `scope="function"`; a write session committed there would leave the client
with an answer the database does not hold yet, and an open SQLite write transaction
(BEGIN IMMEDIATE) that blocks every other writer until then. Here an ASGI wrapper looks at
the database from its own connection at the moment the app starts its response
(`http.response.start`): the change must be visible and SQLite's write lock free. The
last test shows the look-out sees the difference: a request-scoped write session still
holds the lock and its change is not visible yet.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from fastapi import Depends, FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session
from sqlalchemy.pool import NullPool

from app.api.deps import get_write_session
from app.api.main import create_app
from app.domain.orm import Dataset
from app.settings import Settings
from tests.support import (
    BACKENDS,
    bearer,
    embedded_settings,
    make_key,
    migrate,
    migrated_settings,
    sqlite_write_lock_error,
)
from workers.training import run_job


def _write_lock_error(database_url: str) -> str | None:
    """None on PostgreSQL; on SQLite, whether another connection could take the write lock."""
    return sqlite_write_lock_error(database_url) if database_url.startswith("sqlite") else None


class AtResponseStart:
    """An ASGI wrapper that records what another connection sees when a response starts."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.engine = sa.create_engine(settings.database_url, poolclass=NullPool)
        self.seen: list[dict[str, Any]] = []

    def look(self) -> dict[str, Any]:
        with self.engine.connect() as connection:
            jobs = {row.id: row.status for row in
                    connection.execute(sa.text("SELECT id, status FROM jobs"))}
            datasets = {row.id: row.name for row in
                        connection.execute(sa.text("SELECT id, name FROM datasets"))}
            models = set(connection.execute(sa.text("SELECT id FROM models")).scalars())
        blobs = {p.stem for p in self.settings.datasets_dir.glob("*.npz")}
        return {"lock": _write_lock_error(self.settings.database_url), "jobs": jobs,
                "datasets": datasets, "models": models, "blobs": blobs}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.seen.append(self.look())
            await send(message)

        await self.app(scope, receive, watched)

    @property
    def last(self) -> dict[str, Any]:
        return self.seen[-1]


@pytest.fixture(params=BACKENDS)
def settings_on(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    with migrated_settings(request.param, tmp_path / "home") as settings:
        yield settings


@pytest.fixture
def watched(settings_on: Settings) -> Iterator[tuple[TestClient, AtResponseStart]]:
    observer = AtResponseStart(create_app(settings_on), settings_on)
    try:
        with TestClient(observer, headers=bearer(make_key(settings_on))) as client:
            yield client, observer
    finally:
        observer.engine.dispose()


def test_every_write_is_committed_before_its_response_starts(
    watched: tuple[TestClient, AtResponseStart], settings_on: Settings, cancer_bytes: bytes
) -> None:
    client, observer = watched

    upload = client.post("/v1/datasets?name=cancer", content=cancer_bytes)
    assert upload.status_code == 201, upload.text
    dataset_id = upload.json()["id"]
    assert observer.last["lock"] is None
    assert observer.last["datasets"] == {dataset_id: "cancer"}
    assert observer.last["blobs"] == {dataset_id}

    submitted = client.post("/v1/jobs", json={"dataset_id": dataset_id})
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    assert observer.last["lock"] is None
    assert observer.last["jobs"] == {job_id: "queued"}

    cancelled = client.post(f"/v1/jobs/{job_id}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    assert observer.last["lock"] is None
    assert observer.last["jobs"] == {job_id: "cancelled"}

    trained = client.post("/v1/jobs", json={"dataset_id": dataset_id}).json()["id"]
    assert run_job(settings_on, trained, "test-worker") == "succeeded"
    model_id = client.get(f"/v1/jobs/{trained}").json()["model_id"]
    deleted = client.delete(f"/v1/models/{model_id}")
    assert deleted.status_code == 204, deleted.text
    assert observer.last["lock"] is None
    assert observer.last["models"] == set()

    gone = client.delete(f"/v1/datasets/{dataset_id}")
    assert gone.status_code == 204, gone.text
    assert observer.last["lock"] is None
    assert observer.last["datasets"] == {}
    assert observer.last["blobs"] == set()  # the file goes once the delete has committed


def test_a_refused_write_leaves_nothing_and_no_lock(
    watched: tuple[TestClient, AtResponseStart], cancer_bytes: bytes
) -> None:
    client, observer = watched
    dataset_id = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
    job_id = client.post("/v1/jobs", json={"dataset_id": dataset_id}).json()["id"]
    assert client.delete(f"/v1/datasets/{dataset_id}").status_code == 409
    assert observer.last["lock"] is None
    assert observer.last["datasets"].keys() == {dataset_id}
    assert observer.last["blobs"] == {dataset_id}
    assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
    assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 409
    assert observer.last["lock"] is None


def _rename_route(app: FastAPI, dependency: Callable[..., Any]) -> None:
    @app.post("/rename-probe/{dataset_id}")
    def rename(dataset_id: str, session: Session = dependency) -> dict[str, str]:
        dataset = session.get(Dataset, dataset_id)
        assert dataset is not None
        dataset.name = "renamed"
        session.flush()
        return {"ok": "yes"}


@pytest.mark.parametrize("scope", ["function", "request"])
def test_the_look_out_tells_a_commit_before_the_response_from_one_after(
    tmp_path: Path, cancer_bytes: bytes, scope: str
) -> None:
    settings = embedded_settings(tmp_path / "home")
    settings.ensure_dirs()
    migrate(settings.database_url)
    app = create_app(settings)
    _rename_route(app, Depends(get_write_session, scope=scope))  # type: ignore[arg-type]
    observer = AtResponseStart(app, settings)
    with TestClient(observer, headers=bearer(make_key(settings))) as client:
        dataset_id = client.post("/v1/datasets?name=cancer", content=cancer_bytes).json()["id"]
        assert client.post(f"/rename-probe/{dataset_id}").status_code == 200
        seen_at_response = observer.last
        assert client.get(f"/v1/datasets/{dataset_id}").json()["name"] == "renamed"
    observer.engine.dispose()
    if scope == "function":  # what WriteSessionDep does
        assert seen_at_response["lock"] is None
        assert seen_at_response["datasets"] == {dataset_id: "renamed"}
    else:  # the commit runs only after the response was sent
        assert seen_at_response["lock"] == "database is locked"
        assert seen_at_response["datasets"] == {dataset_id: "cancer"}
