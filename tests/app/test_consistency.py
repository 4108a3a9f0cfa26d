"""Consistency under attack, on SQLite and PostgreSQL: any id or name on any route is a
404, 409 or 422, never a 500 (a NUL byte included); a job racing the delete of its
dataset; the queue cap under concurrent submissions; a predict input that overflows;
Last-Event-ID; no server path in a job's public error. Loops are bounded."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.settings import Settings
from tests.support import (
    BACKENDS,
    bearer,
    make_key,
    migrated_settings,
)
from workers.training import run_job

RACE_ROUNDS = 12


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    with migrated_settings(request.param, tmp_path / "home", rate_per_second=0,
                           max_queued_jobs=5) as settings:
        yield settings


@pytest.fixture
def api(backend: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(backend), headers=bearer(make_key(backend))) as client:
        yield client


def _upload(client: TestClient, cancer_bytes: bytes) -> str:
    response = client.post("/v1/datasets", content=cancer_bytes)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def test_a_nul_byte_anywhere_is_a_422_on_every_route(api: TestClient, cancer_bytes: bytes
                                                     ) -> None:
    dataset_id = _upload(api, cancer_bytes)
    operations = [(m.upper(), p) for p, item in api.get("/openapi.json").json()["paths"].items()
                  for m in item]
    assert len(operations) >= 15
    for method, path in operations:
        filled = re.sub(r"\{\w+\}", "ab%00cd", path)
        for url in ({filled, f"{path}?name=x%00y"} if filled != path else {f"{path}?name=x%00y"}):
            response = api.request(method, url.replace("{", "").replace("}", ""))
            assert response.status_code == 422, (method, url, response.text)
    bodies = [
        ("POST", "/v1/jobs", {"dataset_id": "a\x00b"}),
        ("POST", "/v1/jobs", {"dataset_id": dataset_id, "solver": "dcd\x00"}),
        ("POST", "/v1/jobs", {"dataset_id": dataset_id, "params": {"loss": "l1\x00"}}),
        ("POST", "/v1/admin/tenants", {"name": "t\x00"}),
        ("POST", "/v1/admin/keys", {"tenant_id": "ab\x00", "scopes": ["read"]}),
    ]
    for method, url, body in bodies:
        response = api.request(method, url, json=body)
        assert response.status_code == 422, (url, body, response.text)
    upload = api.post("/v1/datasets", files={"file": ("x.txt", cancer_bytes)},
                      data={"name": "bad\x00name"})
    assert upload.status_code == 422, upload.text
    assert api.get("/v1/datasets").json()["count"] == 1


def test_job_create_racing_dataset_delete_is_never_a_500(api: TestClient, cancer_bytes: bytes
                                                         ) -> None:
    outcomes: set[tuple[int, int]] = set()
    for _ in range(RACE_ROUNDS):
        dataset_id = _upload(api, cancer_bytes)
        start = threading.Barrier(2)

        def submit(dataset_id: str = dataset_id, start: threading.Barrier = start) -> int:
            start.wait()
            return api.post("/v1/jobs", json={"dataset_id": dataset_id}).status_code

        def delete(dataset_id: str = dataset_id, start: threading.Barrier = start) -> int:
            start.wait()
            return api.delete(f"/v1/datasets/{dataset_id}").status_code

        with ThreadPoolExecutor(2) as pool:
            job, gone = pool.submit(submit), pool.submit(delete)
            outcome = (job.result(), gone.result())
        # either the job came first (202, then the delete is refused: 409) or the delete
        # did (204, then the job names no dataset: 422)
        assert outcome in {(202, 409), (422, 204)}, outcome
        outcomes.add(outcome)
        if outcome[0] == 202:  # let the next round's job fit under the queue cap
            for job_row in api.get("/v1/jobs?status=queued").json()["data"]:
                api.post(f"/v1/jobs/{job_row['id']}/cancel")
    jobs = api.get("/v1/jobs").json()["data"]
    assert all(j["dataset_id"] is not None for j in jobs if j["status"] != "cancelled")


def test_the_queue_cap_holds_under_concurrent_submissions(api: TestClient, cancer_bytes: bytes
                                                          ) -> None:
    dataset_id = _upload(api, cancer_bytes)
    start = threading.Barrier(20)

    def submit(_i: int) -> int:
        start.wait()
        return api.post("/v1/jobs", json={"dataset_id": dataset_id}).status_code

    with ThreadPoolExecutor(20) as pool:
        statuses = list(pool.map(submit, range(20)))
    assert sorted(set(statuses)) == [202, 429], statuses
    assert statuses.count(202) == 5
    assert api.get("/v1/jobs?status=queued").json()["count"] == 5


def test_a_predict_input_that_overflows_is_a_422(api: TestClient, backend: Settings,
                                                 cancer_bytes: bytes) -> None:
    dataset_id = _upload(api, cancer_bytes)
    job_id = api.post("/v1/jobs", json={"dataset_id": dataset_id}).json()["id"]
    assert run_job(backend, job_id, "test") == "succeeded"
    model_id = api.get(f"/v1/jobs/{job_id}").json()["model_id"]
    exported = api.get(f"/v1/models/{model_id}/export").text.split("\nw\n", 1)[1]
    weights = [float(line) for line in exported.split()]
    assert sum(abs(w) for w in weights) > 2  # so the finite inputs below overflow
    signs = [1e308 if w > 0 else -1e308 for w in weights]
    indices = list(range(1, len(weights) + 1))
    huge = {"instances": [{"indices": indices, "values": signs}]}
    response = api.post(f"/v1/models/{model_id}/predict", json=huge)
    assert response.status_code == 422, response.text
    assert "overflow" in response.json()["error"]["message"]
    line = " ".join(f"{i}:{v:g}" for i, v in zip(indices, signs, strict=True)) + "\n"
    text = api.post(f"/v1/models/{model_id}/predict", content=line.encode(),
                    headers={"content-type": "text/plain"})
    assert text.status_code == 422, text.text
    fine = api.post(f"/v1/models/{model_id}/predict",
                    json={"instances": [{"indices": [1], "values": [0.5]}]})
    assert fine.status_code == 200 and None not in fine.json()["decision_values"]


def test_last_event_id_is_validated(api: TestClient, cancer_bytes: bytes) -> None:
    dataset_id = _upload(api, cancer_bytes)
    job_id = api.post("/v1/jobs", json={"dataset_id": dataset_id}).json()["id"]
    api.post(f"/v1/jobs/{job_id}/cancel")  # terminal: a valid stream ends at once
    for bad in (str(2**70), "-1", "1e3", "x", str(2**31)):
        response = api.get(f"/v1/jobs/{job_id}/events", headers={"Last-Event-ID": bad})
        assert response.status_code == 422, (bad, response.text)
    with api.stream("GET", f"/v1/jobs/{job_id}/events", headers={"Last-Event-ID": "1"}) as ok:
        assert ok.status_code == 200
        text = "".join(ok.iter_text())
    assert '"status": "cancelled"' in text and "id: 1\n" not in text


def test_a_failed_job_names_no_server_path(api: TestClient, backend: Settings,
                                           cancer_bytes: bytes) -> None:
    dataset_id = _upload(api, cancer_bytes)
    job_id = api.post("/v1/jobs", json={"dataset_id": dataset_id}).json()["id"]
    for blob in backend.datasets_dir.glob("*.npz"):
        blob.unlink()  # the worker will not find the arrays
    assert run_job(backend, job_id, "test") == "failed"
    job = api.get(f"/v1/jobs/{job_id}").json()
    assert job["error"], job
    assert str(backend.home) not in job["error"] and ".npz" not in job["error"], job["error"]
    assert "/" not in job["error"], job["error"]


@pytest.mark.postgres
def test_another_schemas_submissions_do_not_hold_up_this_ones(tmp_path: Path,
                                                               cancer_bytes: bytes) -> None:
    """The submission lock is an advisory lock, which belongs to the whole database: two
    deployments in one database (schemas) must not queue on each other's. Another schema
    holds its submission lock; this one's submission is answered at once."""
    import sqlalchemy as sa
    from sqlalchemy.orm import Session

    from app.domain.services.limits import lock_submissions

    with migrated_settings("postgres", tmp_path / "other") as other, \
            migrated_settings("postgres", tmp_path / "home", rate_per_second=0) as settings, \
            TestClient(create_app(settings), headers=bearer(make_key(settings))) as api:
        dataset_id = _upload(api, cancer_bytes)
        holder = sa.create_engine(other.database_url)
        pool = ThreadPoolExecutor(1)
        try:
            with holder.connect() as connection:
                transaction = connection.begin()
                lock_submissions(Session(bind=connection))  # held until the rollback
                answer = pool.submit(api.post, "/v1/jobs", json={"dataset_id": dataset_id})
                try:
                    status = answer.result(timeout=20).status_code
                finally:
                    transaction.rollback()
        finally:
            pool.shutdown(wait=True)
            holder.dispose()
    assert status == 202
