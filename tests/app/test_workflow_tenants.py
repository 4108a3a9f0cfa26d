"""Splits and evaluations within tenants: a split belongs to its parent's tenant and counts
against the tenant's limits like an upload; an evaluation needs the model and the dataset
of the caller's tenant, and its records are the tenant's only.

(The authorization matrix, tests/app/test_authorization_matrix.py, checks every route's
scope and the 404 for another tenant's id in the path; this file checks what the matrix
cannot see: limits, ids in request bodies, who owns the new rows.)
"""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from app.domain.orm import Dataset, Evaluation
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import bearer, make_key
from workers.training import run_job


def _tenant(client: TestClient, name: str, **limits: int) -> tuple[str, dict[str, str]]:
    """A new tenant (made with the admin `client`) and the header of a train key of it."""
    tenant = client.post("/v1/admin/tenants", json={"name": name, **limits})
    assert tenant.status_code == 201, tenant.text
    key = client.post("/v1/admin/keys", json={"tenant_id": tenant.json()["id"],
                                              "scopes": ["train"]})
    assert key.status_code == 201, key.text
    return tenant.json()["id"], bearer(key.json()["key"])


def _blobs(settings: Settings) -> set[str]:
    return {p.stem for p in settings.datasets_dir.glob("*.npz")}


def _dataset_ids(settings: Settings) -> set[str]:
    with session_scope(settings.database_url) as session:
        return set(session.scalars(select(Dataset.id)))


def test_a_split_counts_against_the_tenants_limits_like_uploads(
        client: TestClient, settings: Settings, cancer_bytes: bytes) -> None:
    tenant_id, small = _tenant(client, "small", max_datasets=2)
    parent = client.post("/v1/datasets?name=cancer", content=cancer_bytes, headers=small)
    assert parent.status_code == 201, parent.text
    url = f"/v1/datasets/{parent.json()['id']}/split"

    refused = client.post(url, json={"seed": 1}, headers=small)  # 1 + 2 > 2
    assert refused.status_code == 413, refused.text
    assert "HINGE_TENANT_MAX_DATASETS" in refused.json()["error"]["message"]
    assert client.get("/v1/datasets", headers=small).json()["count"] == 1
    assert _blobs(settings) == _dataset_ids(settings)  # the parts' blobs went again

    limits = f"/v1/admin/tenants/{tenant_id}/limits"
    assert client.put(limits, json={"max_datasets": 3}).status_code == 200
    split = client.post(url, json={"seed": 1}, headers=small)
    assert split.status_code == 201, split.text
    parts = split.json()
    assert client.get("/v1/datasets", headers=small).json()["count"] == 3

    # the parts' bytes count: with the limit at exactly what is stored now, nothing fits
    parent_bytes = (settings.datasets_dir / f"{parent.json()['id']}.npz").stat().st_size
    used = parent_bytes + parts["train"]["size_bytes"] + parts["test"]["size_bytes"]
    assert client.put(limits, json={"max_datasets": 10, "max_stored_bytes": used}
                      ).status_code == 200
    refused = client.post(url, json={"seed": 2}, headers=small)
    assert refused.status_code == 413, refused.text
    assert refused.json()["error"]["detail"] == {
        "limit": used, "used": used,
        "adding": refused.json()["error"]["detail"]["adding"]}
    tiny = client.post("/v1/datasets?name=tiny", content=b"1 1:1\n-1 2:1\n", headers=small)
    assert tiny.status_code == 413 and "stored bytes" in tiny.json()["error"]["message"]
    assert client.put(limits, json={"max_datasets": 10, "max_stored_bytes": 2 * used}
                      ).status_code == 200
    assert client.post(url, json={"seed": 2}, headers=small).status_code == 201
    assert _blobs(settings) == _dataset_ids(settings)


def test_a_split_belongs_to_the_tenant_of_its_parent(
        client: TestClient, settings: Settings, cancer_id: str) -> None:
    _, other = _tenant(client, "other")
    missing = client.post(f"/v1/datasets/{'f' * 32}/split", json={}, headers=other)
    theirs = client.post(f"/v1/datasets/{cancer_id}/split", json={}, headers=other)
    assert theirs.status_code == 404
    assert theirs.text == missing.text.replace("f" * 32, cancer_id)
    assert client.get("/v1/datasets", headers=other).json()["count"] == 0

    parts = client.post(f"/v1/datasets/{cancer_id}/split", json={}).json()
    mine = {d["id"] for d in client.get("/v1/datasets").json()["data"]}
    assert {parts["train"]["id"], parts["test"]["id"], cancer_id} == mine
    for part in (parts["train"], parts["test"]):
        assert client.get(f"/v1/datasets/{part['id']}", headers=other).status_code == 404
    assert _blobs(settings) == _dataset_ids(settings)


def test_a_split_with_an_idempotency_key_is_made_once(
        client: TestClient, cancer_id: str) -> None:
    url = f"/v1/datasets/{cancer_id}/split"
    key = {"Idempotency-Key": "split-cancer-1"}
    first = client.post(url, json={"seed": 3}, headers=key)
    assert first.status_code == 201, first.text
    again = client.post(url, json={"seed": 3}, headers=key)
    assert again.status_code == 201 and again.headers["Idempotent-Replay"] == "true"
    assert again.json() == first.json()
    assert client.get("/v1/datasets").json()["count"] == 3
    different = client.post(url, json={"seed": 4}, headers=key)
    assert different.status_code == 422 and "Idempotency-Key" in different.text
    assert client.post(url, json={"seed": 4}, headers={"Idempotency-Key": "split-cancer-2"}
                       ).status_code == 201
    assert client.get("/v1/datasets").json()["count"] == 5


def _model(client: TestClient, settings: Settings, dataset_id: str,
           headers: dict[str, str] | None = None) -> dict[str, Any]:
    job = client.post("/v1/jobs", json={"dataset_id": dataset_id}, headers=headers)
    assert job.status_code == 202, job.text
    assert run_job(settings, job.json()["id"], "test-worker") == "succeeded"
    model_id = client.get(f"/v1/jobs/{job.json()['id']}", headers=headers).json()["model_id"]
    return dict(client.get(f"/v1/models/{model_id}", headers=headers).json())


def test_an_evaluation_needs_the_model_and_the_dataset_of_the_callers_tenant(
        client: TestClient, settings: Settings, cancer_id: str, cancer_bytes: bytes) -> None:
    other_tenant, other = _tenant(client, "other")
    model = _model(client, settings, cancer_id)
    url = f"/v1/models/{model['id']}/evaluations"
    theirs = client.post("/v1/datasets?name=cancer", content=cancer_bytes, headers=other
                         ).json()["id"]

    # another tenant's dataset in the body: the answer for one that does not exist
    refused = client.post(url, json={"dataset_id": theirs})
    missing = client.post(url, json={"dataset_id": "f" * 32})
    assert refused.status_code == missing.status_code == 422
    assert refused.text == missing.text.replace("f" * 32, theirs)
    # the other tenant cannot evaluate, list or read this tenant's model's evaluations,
    # not even with its own dataset
    assert client.post(url, json={"dataset_id": theirs}, headers=other).status_code == 404
    assert client.get(url, headers=other).status_code == 404

    made = client.post(url, json={"dataset_id": cancer_id})
    assert made.status_code == 201, made.text
    evaluation = made.json()
    assert client.get(f"{url}/{evaluation['id']}", headers=other).status_code == 404
    listed = client.get(url).json()
    assert listed["count"] == 1 and [e["id"] for e in listed["data"]] == [evaluation["id"]]
    with session_scope(settings.database_url) as session:
        row = session.get(Evaluation, evaluation["id"])
        assert row is not None
        owner = session.scalar(select(Dataset.tenant_id).where(Dataset.id == cancer_id))
        assert row.tenant_id == owner != other_tenant

    # the other tenant's own model and dataset: its records, invisible to the first
    their_model = _model(client, settings, theirs, other)
    their_url = f"/v1/models/{their_model['id']}/evaluations"
    assert client.post(their_url, json={"dataset_id": cancer_id}, headers=other
                       ).status_code == 422
    assert client.post(their_url, json={"dataset_id": theirs}, headers=other
                       ).status_code == 201
    assert client.get(their_url, headers=other).json()["count"] == 1
    assert client.get(their_url).status_code == 404
    assert client.get(url).json()["count"] == 1


def test_a_read_only_key_reads_evaluations_but_does_not_make_them(
        client: TestClient, settings: Settings, cancer_id: str) -> None:
    model = _model(client, settings, cancer_id)
    url = f"/v1/models/{model['id']}/evaluations"
    evaluation = client.post(url, json={"dataset_id": cancer_id}).json()
    reader = bearer(make_key(settings, "default", ("read",)))
    assert client.post(url, json={"dataset_id": cancer_id}, headers=reader).status_code == 403
    assert client.post(f"/v1/datasets/{cancer_id}/split", json={}, headers=reader
                       ).status_code == 403
    assert client.get(url, headers=reader).json()["count"] == 1
    shown = client.get(f"{url}/{evaluation['id']}", headers=reader)
    assert shown.status_code == 200 and shown.json()["report"] == evaluation["report"]
