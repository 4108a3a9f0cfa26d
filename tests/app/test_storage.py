"""Blob storage: the sha256-keyed local cache (bound, LRU eviction, integrity, one fetch
for concurrent processes), both backends' round trips, model arrays above the threshold,
and the orphan sweep on the object store (a real moto S3 server on loopback)."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.domain.sweep import sweep_storage
from app.infra.blob_cache import BlobCache, BlobIntegrityError
from app.infra.storage import (
    MODEL_BLOB_MARKER,
    BlobRef,
    LocalBlobStore,
    blob_store,
    dataset_shards,
    load_dataset,
    model_arrays,
    save_dataset_arrays,
    store_model_arrays,
)
from app.settings import Settings
from tests.support import (
    BLOB_BACKENDS,
    bearer,
    blob_exists,
    embedded_settings,
    make_key,
    migrate,
    s3_overrides,
)
from workers.training import run_job


def _sha(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def _writer(payload: bytes) -> Any:
    def fetch(path: Path) -> None:
        path.write_bytes(payload)
    return fetch


def _read(cache: BlobCache, payload: bytes) -> bytes:
    with cache.open(_sha(payload), _writer(payload)) as handle:
        return handle.read()


# -- the cache ---------------------------------------------------------------------------

def test_cache_stays_within_its_bound_and_evicts_the_least_recently_used(tmp_path: Path
                                                                         ) -> None:
    cache = BlobCache(tmp_path / "cache", max_bytes=250)
    a, b, c, d = (bytes([i]) * 100 for i in range(4))
    for payload in (a, b, c):
        assert _read(cache, payload) == payload
        time.sleep(0.01)  # distinct use times
    # three blobs of 100 bytes do not fit in 250: the oldest (a) went
    assert not cache.path(_sha(a)).exists()
    assert cache.path(_sha(b)).exists() and cache.path(_sha(c)).exists()
    assert cache.size() == 200
    # a hit marks b used; d then evicts c, the least recently used
    assert _read(cache, b) == b
    time.sleep(0.01)
    assert _read(cache, d) == d
    assert {p.name for p in cache.directory.glob("*.blob")} == {
        f"{_sha(b)}.blob", f"{_sha(d)}.blob"}
    assert cache.size() <= 250


def test_a_hit_does_not_fetch_and_an_evicted_blob_stays_readable_while_open(tmp_path: Path
                                                                            ) -> None:
    cache = BlobCache(tmp_path / "cache", max_bytes=1000)
    payload = b"x" * 300
    assert _read(cache, payload) == payload

    def must_not_fetch(_path: Path) -> None:
        raise AssertionError("a cached blob was fetched again")

    with cache.open(_sha(payload), must_not_fetch) as handle:
        cache.max_bytes = 0
        cache.evict()  # another process might do this meanwhile
        assert not cache.path(_sha(payload)).exists()
        assert handle.read() == payload


def test_a_blob_with_the_wrong_bytes_is_refused_and_not_cached(tmp_path: Path) -> None:
    cache = BlobCache(tmp_path / "cache", max_bytes=1000)
    with pytest.raises(BlobIntegrityError):
        cache.open(_sha(b"expected"), _writer(b"tampered"))
    assert list(cache.directory.iterdir()) == [
        p for p in cache.directory.iterdir() if p.name.endswith(".lock")]  # only locks


def _fill_from_process(directory: str, payload: bytes, fetch_log: str, results: Any) -> None:
    def slow_fetch(path: Path) -> None:
        with open(fetch_log, "a") as log:
            log.write(f"{os.getpid()}\n")
        time.sleep(0.3)  # the others arrive while this fill is in progress
        path.write_bytes(payload)

    cache = BlobCache(Path(directory), max_bytes=10_000)
    with cache.open(_sha(payload), slow_fetch) as handle:
        results.put(handle.read() == payload)


def test_concurrent_processes_fill_a_blob_once(tmp_path: Path) -> None:
    payload = os.urandom(4096)
    fetch_log = tmp_path / "fetches"
    context = multiprocessing.get_context("fork")  # separate processes, as workers are
    results = context.Queue()
    processes = [context.Process(target=_fill_from_process,
                                 args=(str(tmp_path / "cache"), payload, str(fetch_log),
                                       results)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert [results.get(timeout=5) for _ in processes] == [True] * 4
    assert len(fetch_log.read_text().split()) == 1  # one process fetched, three waited
    cache = BlobCache(tmp_path / "cache", max_bytes=10_000)
    assert [p.name for p in cache.directory.glob("*.blob")] == [f"{_sha(payload)}.blob"]
    assert not list(cache.directory.glob("*.partial"))


# -- the stores --------------------------------------------------------------------------

@pytest.fixture(params=BLOB_BACKENDS)
def blob_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


ARRAYS = {"data": np.array([1.0, 2.0, 3.0]), "indices": np.array([0, 2, 1], dtype=np.int32),
          "indptr": np.array([0, 2, 3], dtype=np.int64), "y": np.array([1.0, -1.0])}


def test_dataset_arrays_round_trip_and_another_host_reads_them(
    settings: Settings, tmp_path: Path
) -> None:
    stored = save_dataset_arrays(blob_store(settings), "d" * 32, ARRAYS)
    assert stored.ref.key == f"datasets/{'d' * 32}.npz"
    assert stored.ref == BlobRef.parse(str(stored.ref))
    X, y = load_dataset(blob_store(settings), str(stored.ref), 3)
    assert X.toarray().tolist() == [[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]
    assert y.tolist() == [1.0, -1.0]
    if settings.blob_backend == "s3":  # a second host: its own HINGE_HOME, an empty cache
        other = settings.model_copy(update={"home": tmp_path / "other-host"})
        store = blob_store(other)
        X2, _ = load_dataset(store, str(stored.ref), 3)
        assert (X2 != X).nnz == 0
        assert (other.home / "blob-cache" / f"{stored.ref.sha256}.blob").exists()


def test_model_arrays_go_to_the_store_from_the_threshold_on(settings: Settings) -> None:
    store = blob_store(settings)
    configured = settings.model_copy(update={"model_blob_min_bytes": 100})
    small, large = b"PK" + b"s" * 97, b"PK" + b"l" * 98
    assert store_model_arrays(store, configured, "m1", small) == (small, False)
    column, in_blob = store_model_arrays(store, configured, "m2", large)
    assert in_blob and column.startswith(MODEL_BLOB_MARKER)
    assert blob_exists(settings, "models/m2.npz")
    assert model_arrays(store, small) == small and model_arrays(store, column) == large


def test_s3_objects_that_changed_are_refused(s3_endpoint: str, tmp_path: Path) -> None:
    settings = embedded_settings(tmp_path / "home", **s3_overrides(s3_endpoint))
    stored = save_dataset_arrays(blob_store(settings), "e" * 32, ARRAYS)
    client = boto3.client("s3", endpoint_url=settings.s3_endpoint_url, region_name="us-east-1",
                          aws_access_key_id=settings.s3_access_key_id,
                          aws_secret_access_key=settings.s3_secret_access_key
                          .get_secret_value())
    client.put_object(Bucket=settings.s3_bucket, Key=stored.ref.key, Body=b"not the arrays")
    other = settings.model_copy(update={"home": tmp_path / "other-host"})
    with pytest.raises(BlobIntegrityError):
        load_dataset(blob_store(other), str(stored.ref), 3)


def test_orphan_blobs_are_swept_from_the_store(settings: Settings) -> None:
    configured = settings.model_copy(update={"orphan_blob_grace_seconds": 2.0})
    store = blob_store(configured)
    orphan = save_dataset_arrays(store, "c" * 32, ARRAYS)
    store.put_bytes("models/" + "f" * 32 + ".npz", b"PK model")
    output = "predictions/" + "e" * 32 + ".npz"  # a batch prediction's, its row deleted
    store.put_bytes(output, b"PK output")
    # what a worker that died while writing a prediction's output left
    parts = store.scratch(output).parent / f".{'e' * 32}.parts"
    parts.mkdir(parents=True)
    (parts / "labels.npy").write_bytes(b"partial")
    assert sweep_storage(configured) == []  # too young: an upload may still commit it
    time.sleep(3.1)  # S3 keeps LastModified in whole seconds
    assert sorted(sweep_storage(configured)) == sorted(
        [f"{'c' * 32}.npz", f"{'f' * 32}.npz", f"{'e' * 32}.npz", parts.name])
    assert not blob_exists(configured, orphan.ref.key)
    assert not blob_exists(configured, "models/" + "f" * 32 + ".npz")
    assert not blob_exists(configured, output) and not parts.exists()


# -- a model whose arrays live in blob storage, through the API ------------------------

def test_a_large_model_predicts_from_its_blob_and_deleting_it_removes_the_blob(
    tmp_path: Path, cancer_bytes: bytes, blob_overrides: dict[str, Any]
) -> None:
    settings = embedded_settings(tmp_path / "home", **(blob_overrides | {
        "model_blob_min_bytes": 0}))
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
        dataset = client.post("/v1/datasets?name=cancer", content=cancer_bytes).json()["id"]
        job = client.post("/v1/jobs", json={"dataset_id": dataset, "solver": "dcd",
                                            "params": {"C": 1}}).json()["id"]
        assert run_job(settings, job, "test-worker") == "succeeded"
        model = client.get(f"/v1/jobs/{job}").json()["model_id"]
        assert blob_exists(settings, f"models/{model}.npz")
        rows = b"".join(cancer_bytes.splitlines(keepends=True)[:20])
        predicted = client.post(f"/v1/models/{model}/predict", content=rows,
                                headers={"content-type": "text/plain"})
        assert predicted.status_code == 200, predicted.text
        assert len(predicted.json()["labels"]) == 20
        assert client.get(f"/v1/models/{model}/export").status_code == 200
        assert client.delete(f"/v1/models/{model}").status_code == 204
        assert not blob_exists(settings, f"models/{model}.npz")


def test_a_dataset_of_blob_shards_reads_back_row_for_row(tmp_path: Path) -> None:
    """storage.dataset_shards: each shard a dataset blob, mapped when loaded, released."""
    from solvers.shards import concatenate, shard_arrays, split_rows

    rng = np.random.default_rng(7)
    X = sp.random(40, 9, density=0.3, format="csr", random_state=rng)
    y = rng.choice([-1.0, 1.0], 40)
    store = LocalBlobStore(tmp_path)
    paths = [str(save_dataset_arrays(store, f"{i:032d}", shard_arrays(s)).ref)
             for i, s in enumerate(split_rows(X, y, None, 15))]
    source = dataset_shards(store, paths, 9)
    assert len(source) == 3 and source.info(2).rows == 10
    whole = concatenate(source)
    assert (whole.X != X).nnz == 0
    np.testing.assert_array_equal(whole.y, y)
    source.release(0)
