"""Idempotency-Key on uploads, job submissions, evaluations and batch predictions: the same
key and request get the first answer (no second dataset or job); a different request with
that key is a 422; a failed request frees its key; keys are per tenant. A key in progress
is leased to its request's process: free again once that process is gone (a crash-and-retry
against real API processes: tests/e2e/test_idempotency_crash.py)."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.api import idempotency
from app.domain.orm import IdempotencyRecord, utcnow
from app.domain.services import tenants
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import bearer, embedded_settings, make_key, migrate


def test_a_repeated_upload_gets_the_first_answer(client: TestClient, cancer_bytes: bytes
                                                 ) -> None:
    key = {"Idempotency-Key": "upload-1"}
    first = client.post("/v1/datasets?name=cancer", content=cancer_bytes, headers=key)
    again = client.post("/v1/datasets?name=cancer", content=cancer_bytes, headers=key)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and again.headers["idempotent-replay"] == "true"
    assert client.get("/v1/datasets").json()["count"] == 1
    other = client.post("/v1/datasets?name=cancer", content=cancer_bytes[:-200], headers=key)
    assert other.status_code == 422 and "Idempotency-Key" in other.json()["error"]["message"]
    renamed = client.post("/v1/datasets?name=other", content=cancer_bytes, headers=key)
    assert renamed.status_code == 422
    assert client.get("/v1/datasets").json()["count"] == 1
    failed = {"Idempotency-Key": "upload-2"}  # a refused upload frees its key
    assert client.post("/v1/datasets", content=b"1 0:1\n", headers=failed).status_code == 422
    tenant = client.get("/v1/admin/tenants").json()["data"][0]["id"]
    client.put(f"/v1/admin/tenants/{tenant}/limits", json={"max_datasets": 1})
    over = client.post("/v1/datasets", content=cancer_bytes, headers=failed)
    assert over.status_code == 413, over.text  # refused under the tenant's lock
    assert "DATASETS" in over.json()["error"]["message"]
    client.put(f"/v1/admin/tenants/{tenant}/limits", json={"max_datasets": None})
    assert client.post("/v1/datasets", content=cancer_bytes, headers=failed).status_code == 201


def test_a_repeated_job_submission_gets_the_first_answer(
    client: TestClient, settings: Settings, cancer_id: str
) -> None:
    key = {"Idempotency-Key": "job-1"}
    spec = {"dataset_id": cancer_id, "params": {"C": 2}}
    first = client.post("/v1/jobs", json=spec, headers=key)
    again = client.post("/v1/jobs", json=dict(reversed(list(spec.items()))), headers=key)
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    assert client.get("/v1/jobs").json()["count"] == 1
    assert client.post("/v1/jobs", json={**spec, "params": {"C": 3}},
                       headers=key).status_code == 422
    assert client.post("/v1/datasets", content=b"1 1:1\n-1 1:2\n",
                       headers=key).status_code == 422  # the key is taken by a job
    # a failed request frees its key; another tenant has keys of its own
    bad = {"Idempotency-Key": "job-2"}
    assert client.post("/v1/jobs", json={"dataset_id": "nope"}, headers=bad).status_code == 422
    assert client.post("/v1/jobs", json=spec, headers=bad).status_code == 202
    other = bearer(make_key(settings, "other"))
    theirs = client.post("/v1/jobs", json={"dataset_id": cancer_id},
                         headers={**other, **key})
    assert theirs.status_code == 422  # their own key "job-1" is fresh; the dataset is not theirs
    assert client.post("/v1/jobs", json=spec, headers={"Idempotency-Key": "a b"}
                       ).status_code == 422


# -- a key in progress is leased to its request's process (issue 24, item 3) ------------

def _tenant_id(settings: Settings) -> str:
    with session_scope(settings.database_url) as session:
        tenant = tenants.tenant_by_name(session, "default")
        assert tenant is not None
        return tenant.id


def _set(settings: Settings, key: str, **values: object) -> None:
    with session_scope(settings.database_url) as session:
        session.execute(update(IdempotencyRecord).where(IdempotencyRecord.key == key)
                        .values(**values))


def _row(settings: Settings, key: str) -> IdempotencyRecord:
    with session_scope(settings.database_url) as session:
        row = session.scalar(select(IdempotencyRecord).where(IdempotencyRecord.key == key))
        assert row is not None
        session.expunge(row)
        return row


def _dead_holder() -> str:
    """The holder name of a process of this host that has ended."""
    process = subprocess.Popen(["sleep", "30"])
    started = idempotency._start_ticks(process.pid)
    assert started is not None
    process.kill()
    process.wait()
    me = idempotency.this_process()
    return str(idempotency.Holder(me.host, me.namespace, process.pid, started))


def test_a_key_whose_holder_is_gone_is_taken_over_once(
        client: TestClient, settings: Settings, cancer_id: str) -> None:
    spec = {"dataset_id": cancer_id}
    key = {"Idempotency-Key": "crashed"}
    held = idempotency.begin(settings, _tenant_id(settings), "crashed", "POST /v1/jobs")
    assert isinstance(held, idempotency.Reserved)
    assert _row(settings, "crashed").holder == str(idempotency.this_process())
    # held by a live process (this one) under a valid lease: a duplicate waits
    busy = client.post("/v1/jobs", json=spec, headers=key)
    assert busy.status_code == 409 and "in progress" in busy.json()["error"]["message"]

    held.finished = True  # (as if that request had died with its process:)
    _set(settings, "crashed", holder=_dead_holder())  # its lease is still valid
    first = client.post("/v1/jobs", json=spec, headers=key)
    assert first.status_code == 202, first.text
    again = client.post("/v1/jobs", json=spec, headers=key)
    assert again.status_code == 202 and again.headers["idempotent-replay"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert client.get("/v1/jobs").json()["count"] == 1
    assert _row(settings, "crashed").lease_until is None  # finished: no lease


def test_another_hosts_holder_is_waited_for_until_its_lease_lapses(
        client: TestClient, settings: Settings, cancer_id: str) -> None:
    spec = {"dataset_id": cancer_id}
    key = {"Idempotency-Key": "elsewhere"}
    held = idempotency.begin(settings, _tenant_id(settings), "elsewhere", "POST /v1/jobs")
    assert isinstance(held, idempotency.Reserved)
    held.finished = True  # no renewals from here on
    # a process of another host (or PID namespace), dead or alive: only the lease tells
    _set(settings, "elsewhere", holder="other-host|other-boot:pid:[1]|1|1",
         lease_until=utcnow() + timedelta(seconds=30))
    assert client.post("/v1/jobs", json=spec, headers=key).status_code == 409
    _set(settings, "elsewhere", lease_until=utcnow() - timedelta(seconds=1))
    assert client.post("/v1/jobs", json=spec, headers=key).status_code == 202
    # a reservation made before leases existed (no holder) is held for LEGACY_HOLD
    legacy = {"Idempotency-Key": "legacy"}
    held = idempotency.begin(settings, _tenant_id(settings), "legacy", "POST /v1/jobs")
    assert isinstance(held, idempotency.Reserved)
    held.finished = True
    _set(settings, "legacy", holder=None, lease_until=None)
    assert client.post("/v1/jobs", json=spec, headers=legacy).status_code == 409
    _set(settings, "legacy", created_at=utcnow() - idempotency.LEGACY_HOLD
         - timedelta(seconds=1))
    assert client.post("/v1/jobs", json=spec, headers=legacy).status_code == 202
    assert client.get("/v1/jobs").json()["count"] == 2


def test_the_lease_is_renewed_while_the_request_runs(tmp_path: Path) -> None:
    settings = embedded_settings(tmp_path / "home", idempotency_lease_seconds=1.0)
    settings.ensure_dirs()
    migrate(settings.database_url)
    make_key(settings)
    held = idempotency.begin(settings, _tenant_id(settings), "long", "POST /v1/jobs")
    assert isinstance(held, idempotency.Reserved)
    first = _row(settings, "long").lease_until
    assert first is not None
    time.sleep(3.0)  # three leases: unrenewed, it would have lapsed long ago
    later = _row(settings, "long").lease_until
    assert later is not None and later - first >= timedelta(seconds=1.5), (first, later)
    held.complete(202, b"{}", "asked")
    row = _row(settings, "long")
    assert (row.status_code, row.lease_until) == (202, None)
    # once no reservation is left, the renewing thread ends
    deadline = time.monotonic() + 3.0
    while idempotency._renewer.thread is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert idempotency._renewer.thread is None


def test_a_shorter_lease_is_renewed_in_time_beside_a_longer_one(tmp_path: Path) -> None:
    """The renewing thread sleeps a third of the shortest lease it holds: a reservation
    whose lease is shorter than one already held wakes it (it used to sleep out a third
    of the longer lease first, and the short one lapsed)."""
    long_settings = embedded_settings(tmp_path / "long", idempotency_lease_seconds=60.0)
    short_settings = embedded_settings(tmp_path / "short", idempotency_lease_seconds=1.0)
    for settings in (long_settings, short_settings):
        settings.ensure_dirs()
        migrate(settings.database_url)
        make_key(settings)
    slow = idempotency.begin(long_settings, _tenant_id(long_settings), "slow",
                             "POST /v1/jobs")
    assert isinstance(slow, idempotency.Reserved)
    time.sleep(0.3)  # the thread now sleeps toward the long lease's third (20 s)
    held = idempotency.begin(short_settings, _tenant_id(short_settings), "short",
                             "POST /v1/jobs")
    assert isinstance(held, idempotency.Reserved)
    first = _row(short_settings, "short").lease_until
    time.sleep(2.0)
    later = _row(short_settings, "short").lease_until
    assert first is not None and later is not None
    assert later - first >= timedelta(seconds=1.0), (first, later)
    held.complete(202, b"{}", "asked")
    slow.complete(202, b"{}", "asked")


def test_a_repeated_evaluation_gets_the_first_answer(
    client: TestClient, cancer_id: str, cancer_model_id: str
) -> None:
    url = f"/v1/models/{cancer_model_id}/evaluations"
    key = {"Idempotency-Key": "evaluate-once"}
    first = client.post(url, json={"dataset_id": cancer_id}, headers=key)
    again = client.post(url, json={"dataset_id": cancer_id}, headers=key)
    assert first.status_code == again.status_code == 201, first.text
    assert again.json() == first.json()
    assert client.get(url).json()["count"] == 1
    small = client.post("/v1/datasets", content=b"1 1:1\n-1 1:2\n").json()["id"]
    other = client.post(url, json={"dataset_id": small}, headers=key)
    assert other.status_code == 422 and "Idempotency-Key" in other.text


def test_a_repeated_batch_prediction_gets_the_first_answer(
    client: TestClient, cancer_id: str, cancer_model_id: str
) -> None:
    spec = {"model_id": cancer_model_id, "dataset_id": cancer_id}
    key = {"Idempotency-Key": "predict-once"}
    first = client.post("/v1/predictions", json=spec, headers=key)
    again = client.post("/v1/predictions", json=spec, headers=key)
    assert first.status_code == again.status_code == 202, first.text
    assert again.json() == first.json()
    assert client.get("/v1/predictions").json()["count"] == 1
    other = client.post("/v1/predictions", json={**spec, "outputs": ["labels"]}, headers=key)
    assert other.status_code == 422 and "Idempotency-Key" in other.text
