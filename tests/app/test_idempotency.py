"""Idempotency-Key on uploads and job submissions: the same key and request get the first
answer (no second dataset or job); a different request with that key is a 422; a failed
request frees its key; keys are per tenant."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.settings import Settings
from tests.support import bearer, make_key


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
