"""The same content uploaded twice: the second answer names the first (`duplicate_of`),
and `reuse=true` returns the existing dataset (200) instead of storing a copy; per
tenant, and whatever the compression."""

from __future__ import annotations

import gzip

from fastapi.testclient import TestClient

from app.settings import Settings
from tests.support import bearer, make_key


def _datasets(client: TestClient) -> list[str]:
    return [d["id"] for d in client.get("/v1/datasets").json()["data"]]


def test_a_second_upload_names_the_first(client: TestClient, cancer_bytes: bytes) -> None:
    first = client.post("/v1/datasets?name=cancer", content=cancer_bytes)
    assert first.status_code == 201 and first.json()["duplicate_of"] == []
    # the same text, gzipped and under another name: the same content
    second = client.post("/v1/datasets?name=again", content=gzip.compress(cancer_bytes))
    assert second.status_code == 201
    assert second.json()["duplicate_of"] == [first.json()["id"]]
    assert second.json()["sha256"] == first.json()["sha256"]
    third = client.post("/v1/datasets", files={"file": ("cancer.txt", cancer_bytes)})
    assert third.json()["duplicate_of"] == [first.json()["id"], second.json()["id"]]
    other = client.post("/v1/datasets", content=cancer_bytes + b"1 1:1\n")
    assert other.status_code == 201 and other.json()["duplicate_of"] == []
    assert len(_datasets(client)) == 4


def test_reuse_returns_the_oldest_copy_and_stores_nothing(client: TestClient,
                                                          cancer_bytes: bytes) -> None:
    fresh = client.post("/v1/datasets?reuse=true&name=cancer", content=cancer_bytes)
    assert fresh.status_code == 201  # nothing to reuse yet: stored
    again = client.post("/v1/datasets?reuse=true&name=other", content=cancer_bytes)
    assert again.status_code == 200, again.text
    assert again.json()["id"] == fresh.json()["id"]
    assert again.json()["name"] == "cancer"  # the existing dataset, as it is
    assert _datasets(client) == [fresh.json()["id"]]


def test_duplicates_are_per_tenant(client: TestClient, settings: Settings,
                                   cancer_bytes: bytes) -> None:
    mine = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
    other = bearer(make_key(settings, "other", ("train",)))
    theirs = client.post("/v1/datasets?reuse=true", content=cancer_bytes, headers=other)
    assert theirs.status_code == 201
    assert theirs.json()["duplicate_of"] == [] and theirs.json()["id"] != mine


def test_an_idempotent_retry_with_reuse_replays_the_answer(client: TestClient,
                                                           cancer_bytes: bytes) -> None:
    first = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
    headers = {"Idempotency-Key": "reuse-1"}
    answers = [client.post("/v1/datasets?reuse=true", content=cancer_bytes, headers=headers)
               for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]
    assert [a.json()["id"] for a in answers] == [first, first]
    plain = client.post("/v1/datasets", content=cancer_bytes, headers=headers)
    assert plain.status_code == 422  # the same key with another request
