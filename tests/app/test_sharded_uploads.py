"""svmlight uploads streamed to disk in row shards (HINGE_SHARD_BYTES, set small here):
the stored layout, every reader of a sharded dataset (training, evaluation, prediction,
split, search), deletion, and what a failed upload leaves (nothing)."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.datasets import load_svmlight_file

from app.domain.orm import Dataset
from app.domain.sweep import sweep_storage
from app.infra.storage import LocalBlobStore, ShardWriter, blob_store, dataset_arrays
from app.settings import Settings
from solvers.svmlight import dump_svmlight
from testkit.datagen import text_like
from tests.support import BLOB_BACKENDS, stored_row
from workers.prediction import run_prediction
from workers.training import run_job

SHARD_BYTES = 16 << 10


@pytest.fixture(params=BLOB_BACKENDS)
def blob_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def sharded(settings: Settings) -> Settings:
    settings.shard_bytes = SHARD_BYTES
    return settings


def _text(rows: int = 1500, seed: int = 3) -> bytes:
    X, y = text_like(rows, 300, seed=seed, nnz_per_row=12.0)
    buffer = io.BytesIO()
    dump_svmlight(X, y, buffer)
    return buffer.getvalue()


def _blob_keys(settings: Settings) -> list[str]:
    """Every dataset blob the store holds (temporary files included, on local disk)."""
    store = blob_store(settings)
    if isinstance(store, LocalBlobStore):
        root = settings.home / "datasets"
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    listed = store.client.list_objects_v2(Bucket=store.bucket, Prefix=store.prefix)  # type: ignore[attr-defined]
    return sorted(item["Key"] for item in listed.get("Contents", [])
                  if "/datasets/" in "/" + item["Key"])


def _row(settings: Settings, dataset_id: str) -> Dataset:
    return stored_row(settings, Dataset, dataset_id)


def test_a_sharded_upload_is_read_by_every_reader_and_deleted_whole(
        client: TestClient, sharded: Settings) -> None:
    text = _text()
    X, y = load_svmlight_file(io.BytesIO(text))
    answer = client.post("/v1/datasets?name=big", content=text)
    assert answer.status_code == 201, answer.text
    dataset = answer.json()
    assert (dataset["rows"], dataset["nnz"], dataset["features"]) == (X.shape[0], X.nnz,
                                                                      X.shape[1])
    row = _row(sharded, dataset["id"])
    assert row.shards is not None and len(row.shards) >= 4
    assert [s["blob_path"].split("#")[0] for s in row.shards] == [
        f"datasets/{row.id}/p00000-{k:05d}.npz" for k in range(len(row.shards))]
    assert sum(s["rows"] for s in row.shards) == X.shape[0]
    assert sum(s["nnz"] for s in row.shards) == X.nnz
    assert row.stored_bytes >= sum(s["nbytes"] for s in row.shards)
    arrays = dataset_arrays(blob_store(sharded), row.blob_path, row.shards)
    np.testing.assert_array_equal(arrays["data"], X.data)
    np.testing.assert_array_equal(arrays["indptr"], X.indptr)
    np.testing.assert_array_equal(arrays["y"], y)

    # the same text in one blob (a shard larger than the set): the same fit
    sharded.shard_bytes = 64 << 20
    whole = client.post("/v1/datasets?name=whole", content=text).json()
    assert _row(sharded, whole["id"]).shards is None
    assert whole["duplicate_of"] == [dataset["id"]]
    summary = ("task", "labels", "class_counts", "label_stats", "rows", "nnz", "features")
    assert {k: dataset[k] for k in summary} == {k: whole[k] for k in summary}
    models = []
    for dataset_id in (dataset["id"], whole["id"]):
        job = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                            "params": {"C": 1.0, "loss": "l1"}}).json()
        assert run_job(sharded, job["id"], "test-worker") == "succeeded"
        done = client.get(f"/v1/jobs/{job['id']}").json()
        assert done["result"]["converged"] is True
        models.append(done["model_id"])
    exported = [client.get(f"/v1/models/{m}/export") for m in models]
    assert exported[0].status_code == 200 and exported[0].text == exported[1].text

    reports = [client.post(f"/v1/models/{models[0]}/evaluations", json={"dataset_id": d})
               for d in (dataset["id"], whole["id"])]
    assert reports[0].status_code == 201, reports[0].text
    assert reports[0].json()["report"] == reports[1].json()["report"]

    prediction = client.post("/v1/predictions", json={"model_id": models[0],
                                                      "dataset_id": dataset["id"]})
    assert prediction.status_code == 202, prediction.text
    assert run_prediction(sharded, prediction.json()["id"], "test-worker") == "succeeded"
    output = client.get(f"/v1/predictions/{prediction.json()['id']}/output")
    assert output.status_code == 200 and len(output.text.strip().splitlines()) >= X.shape[0]

    split = client.post(f"/v1/datasets/{dataset['id']}/split",
                        json={"test_fraction": 0.25, "seed": 1})
    assert split.status_code == 201, split.text
    parts = split.json()
    assert parts["train"]["rows"] + parts["test"]["rows"] == X.shape[0]

    assert client.delete(f"/v1/datasets/{dataset['id']}").status_code == 204
    assert not [k for k in _blob_keys(sharded) if dataset["id"] in k]


@pytest.mark.parametrize("task", ["auto", "regression"])
def test_a_sharded_regression_set_has_the_summary_of_a_whole_one(
        client: TestClient, sharded: Settings, task: str) -> None:
    X, _y = text_like(1500, 300, seed=5, nnz_per_row=12.0)
    targets = np.random.default_rng(5).normal(size=1500).round(3)
    buffer = io.BytesIO()
    dump_svmlight(X, targets, buffer)
    first = client.post(f"/v1/datasets?task={task}", content=buffer.getvalue()).json()
    assert _row(sharded, first["id"]).shards
    sharded.shard_bytes = 64 << 20
    whole = client.post(f"/v1/datasets?task={task}", content=buffer.getvalue()).json()
    assert first["task"] == "regression" and first["label_stats"] == whole["label_stats"]
    sharded.shard_bytes = SHARD_BYTES
    sharded.max_memory_dataset_bytes = 8 * 1000  # the targets of 1000 rows
    refused = client.post(f"/v1/datasets?task={task}", content=buffer.getvalue())
    assert refused.status_code == 413, refused.text
    assert "HINGE_MAX_MEMORY_DATASET_BYTES" in refused.json()["error"]["message"]


def test_a_bad_line_after_some_shards_leaves_nothing(client: TestClient,
                                                     sharded: Settings) -> None:
    lines = _text().split(b"\n")
    lines[1200] = b"1 5:oops"
    answer = client.post("/v1/datasets", content=b"\n".join(lines))
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["detail"]["line"] == 1201
    assert _blob_keys(sharded) == []
    assert client.get("/v1/datasets").json()["count"] == 0


def test_over_the_tenant_quota_mid_stream_is_413_and_leaves_nothing(
        client: TestClient, sharded: Settings) -> None:
    sharded.tenant_max_stored_bytes = 100_000
    answer = client.post("/v1/datasets", content=_text())
    assert answer.status_code == 413, answer.text
    assert _blob_keys(sharded) == []


def test_reuse_of_a_sharded_duplicate_stores_nothing_more(client: TestClient,
                                                          sharded: Settings) -> None:
    text = _text()
    first = client.post("/v1/datasets", content=text).json()
    keys = _blob_keys(sharded)
    again = client.post("/v1/datasets?reuse=true", content=text)
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    assert _blob_keys(sharded) == keys


def test_the_sweep_removes_orphan_shards_and_keeps_a_datasets(client: TestClient,
                                                              sharded: Settings) -> None:
    kept = client.post("/v1/datasets", content=_text()).json()
    orphan = ShardWriter(blob_store(sharded), "orphan0123456789abcdef")
    arrays = dataset_arrays(blob_store(sharded), *(lambda r: (r.blob_path, r.shards))(
        _row(sharded, kept["id"])))
    orphan.write({k: arrays[k][:0] if k != "indptr" else arrays[k][:1]
                  for k in ("data", "indices", "indptr", "y")})
    if isinstance(blob_store(sharded), LocalBlobStore):
        old = time.time() - 2 * sharded.orphan_blob_grace_seconds
        for path in (sharded.home / "datasets").rglob("*"):
            os.utime(path, (old, old))
    else:
        sharded.orphan_blob_grace_seconds = 0.001
        time.sleep(0.01)
    removed = sweep_storage(sharded)
    assert removed == ["p00000-00000.npz"]
    left = _blob_keys(sharded)
    assert left and all(kept["id"] in k for k in left)
    if isinstance(blob_store(sharded), LocalBlobStore):
        assert not Path(sharded.home / "datasets" / "orphan0123456789abcdef").exists()
    rows = client.get(f"/v1/datasets/{kept['id']}").json()["rows"]
    assert rows == 1500


def _float32_text(rows: int = 1500, late_double: bool = False) -> bytes:
    X, y = text_like(rows, 300, seed=9, nnz_per_row=12.0)
    X.data = X.data.astype(np.float32).astype(np.float64)  # exactly float32 values
    if late_double:
        X.data[-1] = 0.1  # not a float32: the last shard turns the layout to float64
    buffer = io.BytesIO()
    dump_svmlight(X, y, buffer)
    return buffer.getvalue()


def test_values_that_are_float32_stream_compact_and_fit_alike(client: TestClient,
                                                              sharded: Settings) -> None:
    text = _float32_text()
    compact = client.post("/v1/datasets", content=text).json()
    wide = client.post("/v1/datasets?dtype=float64", content=text).json()
    assert (compact["value_dtype"], wide["value_dtype"]) == ("float32", "float64")
    assert compact["shards"] > 1 and compact["stored_bytes"] < 0.8 * wide["stored_bytes"]
    row = _row(sharded, compact["id"])
    arrays = dataset_arrays(blob_store(sharded), row.blob_path, row.shards)
    assert arrays["data"].dtype == np.float32 and arrays["indices"].dtype == np.int32
    X, _y = load_svmlight_file(io.BytesIO(text))
    np.testing.assert_array_equal(arrays["data"], X.data)
    exports = []
    for dataset in (compact, wide):
        job = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd",
                                            "params": {"C": 1.0, "loss": "l1"}}).json()
        assert run_job(sharded, job["id"], "test-worker") == "succeeded"
        done = client.get(f"/v1/jobs/{job['id']}").json()
        assert done["result"]["converged"] is True
        exports.append(client.get(f"/v1/models/{done['model_id']}/export").text)
    assert exports[0] == exports[1]


def test_auto_turns_back_to_float64_at_a_value_that_is_not_float32(
        client: TestClient, sharded: Settings) -> None:
    text = _float32_text(late_double=True)
    dataset = client.post("/v1/datasets", content=text).json()
    assert dataset["value_dtype"] == "float64" and dataset["shards"] > 1
    row = _row(sharded, dataset["id"])
    arrays = dataset_arrays(blob_store(sharded), row.blob_path, row.shards)
    X, _y = load_svmlight_file(io.BytesIO(text))
    assert arrays["data"].dtype == np.float64
    np.testing.assert_array_equal(arrays["data"], X.data)
    asked = client.post("/v1/datasets?dtype=float32", content=text).json()
    assert asked["value_dtype"] == "float32"  # asked: rounded
    # a set held whole is float64 unless asked
    sharded.shard_bytes = 64 << 20
    small = client.post("/v1/datasets", content=_float32_text(rows=100)).json()
    assert (small["value_dtype"], small["shards"]) == ("float64", 1)
    small32 = client.post("/v1/datasets?dtype=float32", content=_float32_text(rows=100))
    assert small32.json()["value_dtype"] == "float32"
