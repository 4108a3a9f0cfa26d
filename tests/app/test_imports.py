"""POST /v1/imports on the embedded default: the API's checks (sources, roots, symlinks,
quota), and the import itself run by the worker's own code in this process
(workers.imports.run_import, as the authorization matrix runs a job): part files in,
a sharded dataset out with the files' rows and non-zeros; a malformed part, a cancel,
a disk that fills. The real Celery workers, S3 and the SIGKILL are in
tests/e2e/test_imports.py."""

from __future__ import annotations

import gzip
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.infra.storage import BlobRef, blob_store, dataset_arrays
from app.settings import Settings
from solvers.svmlight import dump_svmlight, load_svmlight
from testkit import datagen
from tests.support import IN_CI, bearer, embedded_settings, make_key, migrate
from workers.imports import run_import


def write_parts(directory: Path, n_parts: int, rows: int = 120, seed: int = 3,
                compress: bool = False, nnz_per_row: float = 12, n_features: int = 400,
                values: str = "any", wide_parts: tuple[int, ...] = ()
                ) -> tuple[list[Path], sp.csr_matrix, np.ndarray]:
    """`n_parts` svmlight part files of a seeded text-like set; the set itself. `values`:
    any (the generator's), decimals (6 decimals: not float32) or float32 (exactly float32,
    but in `wide_parts`, whose values keep 6 decimals)."""
    X, y = datagen.text_like(rows * n_parts, n_features, seed=seed,
                            nnz_per_row=nnz_per_row)
    if values != "any":
        X.data = np.maximum(np.round(X.data, 6), 1e-6)
        if values == "float32":
            wide = np.isin(np.repeat(np.arange(X.shape[0]) // rows, np.diff(X.indptr)),
                           wide_parts)
            X.data[~wide] = X.data[~wide].astype(np.float32).astype(np.float64)
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n_parts):
        path = directory / f"part-{i:03d}.svm{'.gz' if compress else ''}"
        block = slice(i * rows, (i + 1) * rows)
        if compress:
            plain = directory / f".plain-{i}"
            dump_svmlight(X[block], y[block], plain)
            path.write_bytes(gzip.compress(plain.read_bytes()))
            plain.unlink()
        else:
            dump_svmlight(X[block], y[block], path)
        paths.append(path)
    return paths, X, y


def imported_arrays(settings: Settings, dataset: dict[str, Any]
                    ) -> tuple[sp.csr_matrix, np.ndarray]:
    """The dataset's shards, concatenated, from the blob store."""
    store = blob_store(settings)
    blocks, ys = [], []
    for shard in dataset["shards"]:
        arrays = dataset_arrays(store, shard["blob_path"])
        blocks.append(sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                                    shape=(len(arrays["indptr"]) - 1, dataset["features"])))
        ys.append(np.asarray(arrays["y"]))
    return sp.vstack(blocks, format="csr"), np.concatenate(ys)


def shard_files(settings: Settings) -> list[str]:
    root = settings.home / "datasets"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def roots(tmp_path: Path) -> Path:
    root = tmp_path / "imports"
    root.mkdir()
    return root


@pytest.fixture
def world(tmp_path: Path, roots: Path) -> Iterator[tuple[Settings, TestClient]]:
    settings = embedded_settings(tmp_path / "home", import_roots=[str(roots)],
                                 import_shard_text_bytes=4096, disk_reserve_bytes=0,
                                 progress_interval_seconds=0)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
        yield settings, client


def _import(client: TestClient, source: Any, **body: Any) -> Any:
    return client.post("/v1/imports", json={"source": source, **body})


def test_parts_under_the_roots_import_as_one_sharded_dataset(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    settings, client = world
    paths, X, y = write_parts(roots / "set", 3)
    paths[1].rename(paths[1].with_suffix(".svm"))  # (same name: order is by name)
    created = _import(client, f"file://{roots}/set/part-*.svm", name="three parts")
    assert created.status_code == 202, created.text
    body = created.json()
    assert body["status"] == "queued" and body["parts_total"] == 3
    assert body["bytes_total"] == sum(p.stat().st_size for p in paths)
    assert body["dataset_id"] is None
    assert run_import(settings, body["id"], "test") == "succeeded"
    done = client.get(f"/v1/imports/{body['id']}").json()
    assert done["status"] == "succeeded", done
    assert done["parts_done"] == 3 and done["bytes_done"] == done["bytes_total"]
    files = [load_svmlight(p) for p in paths]
    assert done["rows_done"] == sum(f.n_samples for f in files) == X.shape[0]
    assert done["nnz_done"] == sum(f.nnz for f in files) == X.nnz
    dataset = client.get(f"/v1/datasets/{done['dataset_id']}").json()
    assert dataset["rows"] == X.shape[0] and dataset["nnz"] == X.nnz
    assert dataset["name"] == "three parts"
    from app.domain.orm import Dataset
    from app.infra.db import read_sessionmaker_for

    with read_sessionmaker_for(settings.database_url)() as session:
        row = session.get(Dataset, done["dataset_id"])
        assert row is not None
        stored: dict[str, Any] = {"shards": row.shards, "features": row.features}
    # small shard pieces (4 KiB of text): several shards a part, keyed by part and place
    assert len(stored["shards"]) > 3
    keys = [BlobRef.parse(s["blob_path"]).key for s in stored["shards"]]
    assert keys == sorted(keys) and all(
        k.startswith(f"datasets/{done['dataset_id']}/p0000") for k in keys)
    assert sum(s["rows"] for s in stored["shards"]) == X.shape[0]
    got_X, got_y = imported_arrays(settings, stored)
    assert np.array_equal(got_y, y)
    assert (got_X != X[:, :got_X.shape[1]]).nnz == 0 and got_X.shape[0] == X.shape[0]


def test_gzip_parts_and_a_list_of_sources(world: tuple[Settings, TestClient],
                                          roots: Path) -> None:
    settings, client = world
    paths, X, _y = write_parts(roots / "gz", 2, compress=True)
    created = _import(client, [f"file://{p}" for p in reversed(paths)])
    assert created.status_code == 202, created.text
    assert run_import(settings, created.json()["id"], "test") == "succeeded"
    done = client.get(f"/v1/imports/{created.json()['id']}").json()
    assert done["rows_done"] == X.shape[0] and done["nnz_done"] == X.nnz


def test_a_malformed_part_fails_naming_the_part_and_line_and_leaves_nothing(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    settings, client = world
    paths, _X, _y = write_parts(roots / "bad", 3)
    lines = paths[2].read_text().splitlines()
    lines[6] = "1 3:0.5 2:0.25"  # indices not increasing
    paths[2].write_text("\n".join(lines) + "\n")
    created = _import(client, f"file://{roots}/bad/part-*.svm")
    import_id = created.json()["id"]
    assert run_import(settings, import_id, "test") == "failed"
    done = client.get(f"/v1/imports/{import_id}").json()
    assert done["status"] == "failed" and done["dataset_id"] is None
    assert "part 2" in done["error"] and "line 7" in done["error"], done["error"]
    assert done["error_detail"]["status"] == 422
    assert done["error_detail"]["part"] == 2 and done["error_detail"]["line"] == 7
    assert client.get("/v1/datasets").json()["count"] == 0
    assert shard_files(settings) == []


@pytest.mark.parametrize("source", ["file:///etc/hostname", "file://{roots}/../x.svm",
                                    "file:///{roots}/../../etc/passwd", "http://h/x.svm"])
def test_a_path_outside_the_roots_is_refused_and_nothing_is_read(
        world: tuple[Settings, TestClient], roots: Path, source: str) -> None:
    _settings, client = world
    refused = _import(client, source.format(roots=roots))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["detail"]["field"] == "source"
    assert client.get("/v1/imports").json()["count"] == 0


def test_a_symlink_out_of_the_roots_is_refused(world: tuple[Settings, TestClient],
                                               roots: Path, tmp_path: Path) -> None:
    _settings, client = world
    outside = tmp_path / "secret.svm"
    outside.write_text("1 1:1\n")
    (roots / "link.svm").symlink_to(outside)
    (roots / "dir").symlink_to(tmp_path)
    for source in (f"file://{roots}/link.svm", f"file://{roots}/*.svm",
                   f"file://{roots}/dir/secret.svm"):
        refused = _import(client, source)
        assert refused.status_code == 422, (source, refused.text)
        assert refused.json()["error"]["detail"]["reason"] == "outside_roots"
    # with the roots empty (the default), no file import at all
    settings = embedded_settings(tmp_path / "home2")
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as other:
        inside = roots / "ok.svm"
        inside.write_text("1 1:1\n")
        refused = other.post("/v1/imports", json={"source": f"file://{inside}"})
        assert refused.status_code == 422 and "HINGE_IMPORT_ROOTS" in refused.text


def test_a_source_the_quota_cannot_hold_is_a_413_before_it_is_read(
        tmp_path: Path, roots: Path) -> None:
    paths, _X, _y = write_parts(roots / "big", 2)
    size = sum(p.stat().st_size for p in paths)
    settings = embedded_settings(tmp_path / "home", import_roots=[str(roots)],
                                 tenant_max_stored_bytes=size - 1)
    settings.ensure_dirs()
    migrate(settings.database_url)
    for path in paths:
        path.chmod(0)  # unreadable: a read would fail; the answer comes from stat
    try:
        with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
            refused = client.post("/v1/imports", json={"source": f"file://{roots}/big/*"})
            assert refused.status_code == 413, refused.text
            assert refused.json()["error"]["detail"]["source_bytes"] == size
            assert client.get("/v1/imports").json()["count"] == 0
    finally:
        for path in paths:
            path.chmod(0o644)


def test_a_queued_import_is_cancelled_with_delete_and_never_runs(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    settings, client = world
    write_parts(roots / "c", 2)
    import_id = _import(client, f"file://{roots}/c/*").json()["id"]
    cancelled = client.delete(f"/v1/imports/{import_id}")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    assert run_import(settings, import_id, "test") == "skipped"
    assert client.delete(f"/v1/imports/{import_id}").status_code == 409
    events = client.get(f"/v1/imports/{import_id}/events").text
    assert "event: status" in events and "cancelled" in events


def test_an_idempotency_key_answers_a_repeat_with_the_first_import(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    _settings, client = world
    write_parts(roots / "i", 1)
    key = {"Idempotency-Key": f"import-{uuid.uuid4().hex[:6]}"}
    body = {"source": f"file://{roots}/i/part-000.svm"}
    first = client.post("/v1/imports", json=body, headers=key)
    again = client.post("/v1/imports", json=body, headers=key)
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    assert client.get("/v1/imports").json()["count"] == 1
    other = client.post("/v1/imports", json={**body, "name": "x"}, headers=key)
    assert other.status_code == 422


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 6 MiB tmpfs (mounting needs root; elsewhere skipped, under CI=true failed)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        if IN_CI:
            pytest.fail(f"cannot mount a tmpfs: {done.stderr}")
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_disk_that_fills_fails_the_import_with_the_reason_and_leaves_nothing(
        small_disk: Path, roots: Path) -> None:
    # the home (database and shards) on a 6 MiB volume, 4 parts of ~2 MiB of arrays
    _paths, _X, _y = write_parts(roots / "disk", 4, rows=4000, seed=5, nnz_per_row=60,
                                n_features=20_000)
    settings = embedded_settings(small_disk / "home", import_roots=[str(roots)],
                                 import_shard_text_bytes=256 << 10,
                                 disk_reserve_bytes=0)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
        import_id = client.post("/v1/imports", json={"source": f"file://{roots}/disk/*"}
                                ).json()["id"]
        assert run_import(settings, import_id, "test") == "failed"
        done = client.get(f"/v1/imports/{import_id}").json()
        assert done["status"] == "failed" and done["dataset_id"] is None
        assert "disk is full" in done["error"], done["error"]
        assert client.get("/v1/datasets").json()["count"] == 0
        assert shard_files(settings) == []
        assert client.get("/healthz").status_code == 200
        # the service goes on: a small upload still works
        assert client.post("/v1/datasets", content=b"1 1:1\n-1 2:1\n").status_code == 201
    assert os.statvfs(small_disk).f_bavail > 0


def test_the_dashboard_shows_an_import_and_its_progress(world: tuple[Settings, TestClient],
                                                        roots: Path) -> None:
    settings, client = world
    write_parts(roots / "d", 2)
    import_id = _import(client, f"file://{roots}/d/*", name="dash-set").json()["id"]
    page = client.get("/datasets")
    assert page.status_code == 200
    assert f'data-import-id="{import_id}"' in page.text and "dash-set" in page.text
    assert "0 / 2 parts" in page.text and 'href="/imports"' in page.text
    listing = client.get("/imports")
    assert listing.status_code == 200 and f"/imports/{import_id}" in listing.text
    assert 'http-equiv="refresh"' in listing.text  # reloads while it runs
    assert run_import(settings, import_id, "test") == "succeeded"
    dataset_id = client.get(f"/v1/imports/{import_id}").json()["dataset_id"]
    detail = client.get(f"/imports/{import_id}")
    assert detail.status_code == 200
    assert f"/datasets/{dataset_id}" in detail.text and "2 / 2" in detail.text
    # the layout asked and the one written, on the import's and the dataset's pages
    assert "auto asked, float64 values (12 bytes a non-zero)" in detail.text
    dataset_page = client.get(f"/datasets/{dataset_id}").text
    assert "float64 values, int32 indices (12 bytes a non-zero)" in dataset_page
    assert 'http-equiv="refresh"' not in detail.text
    assert f'data-import-id="{import_id}"' not in client.get("/datasets").text
    assert client.get(f"/imports/{'f' * 32}").status_code == 404


def test_parts_are_taken_once_and_a_stale_one_is_taken_again(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    """take_part: two takers get different parts; a part whose taker stopped beating is
    taken again after the lease; a done part never; a taken-over part's old token can
    record nothing."""
    from datetime import timedelta

    from sqlalchemy import update

    from app.domain.orm import ImportPart, utcnow
    from app.domain.services import imports
    from app.infra.db import session_scope

    settings, client = world
    write_parts(roots / "t", 3)
    import_id = _import(client, f"file://{roots}/t/*").json()["id"]
    with session_scope(settings.database_url) as session:
        assert imports.claim_import(session, settings, import_id, "w0") is not None
    with session_scope(settings.database_url) as session:
        first = imports.take_part(session, settings, import_id)
        second = imports.take_part(session, settings, import_id)
        third = imports.take_part(session, settings, import_id)
        assert first and second and third
        assert [first.part, second.part, third.part] == [0, 1, 2]
        assert imports.take_part(session, settings, import_id) is None
        result = imports.PartResult(1, 1, 1, 4, "0" * 64, {"1": 1}, [])
        assert imports.part_done(session, first, result)
        # part 1's taker went quiet for longer than the lease
        session.execute(update(ImportPart).where(ImportPart.part == 1).values(
            heartbeat_at=utcnow() - timedelta(seconds=settings.job_lease_seconds + 1)))
        again = imports.take_part(session, settings, import_id)
        assert again is not None and again.part == 1 and again.token != second.token
        assert not imports.part_progress(session, second, 10, 1, 1)
        assert not imports.part_done(session, second, result)
        assert imports.take_part(session, settings, import_id) is None
        assert imports.parts_state(session, import_id).done == 1


def test_the_sweep_keeps_a_running_imports_shards_and_removes_a_failed_ones(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    from app.domain.orm import Import
    from app.domain.sweep import sweep_storage
    from app.infra.db import session_scope

    settings, client = world
    write_parts(roots / "s", 1)
    running = _import(client, f"file://{roots}/s/*").json()["id"]
    failed = _import(client, f"file://{roots}/s/*").json()["id"]
    store = blob_store(settings)
    with session_scope(settings.database_url) as session:
        ids = {i: session.get(Import, i).dataset_id for i in (running, failed)}  # type: ignore[union-attr]
        session.get(Import, failed).status = "failed"  # type: ignore[union-attr]
    for dataset_id in ids.values():
        store.put_bytes(f"datasets/{dataset_id}/p00000-00000.npz", b"shard")
    old = settings.model_copy(update={"orphan_blob_grace_seconds": 1e-9})
    removed = sweep_storage(old)
    assert removed == ["p00000-00000.npz"]
    assert shard_files(settings) == [f"{ids[running]}/p00000-00000.npz"]


def test_a_tenant_with_as_many_imports_as_its_queue_limit_gets_a_429(
        tmp_path: Path, roots: Path) -> None:
    write_parts(roots / "q", 1)
    settings = embedded_settings(tmp_path / "home", import_roots=[str(roots)],
                                 tenant_max_queued_jobs=2)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
        body = {"source": f"file://{roots}/q/*"}
        first = client.post("/v1/imports", json=body)
        assert first.status_code == client.post("/v1/imports", json=body).status_code == 202
        refused = client.post("/v1/imports", json=body)
        assert refused.status_code == 429, refused.text
        assert client.delete(f"/v1/imports/{first.json()['id']}").status_code == 202
        assert client.post("/v1/imports", json=body).status_code == 202


# -- the values' layout (dtype) ------------------------------------------------------------

def _dataset_row(settings: Settings, dataset_id: str) -> dict[str, Any]:
    from app.domain.orm import Dataset
    from app.infra.db import read_sessionmaker_for

    with read_sessionmaker_for(settings.database_url)() as session:
        row = session.get(Dataset, dataset_id)
        assert row is not None
        return {"shards": row.shards, "features": row.features, "nnz": row.nnz,
                "rows": row.rows, "stored_bytes": row.stored_bytes,
                "value_dtype": row.value_dtype}


def _imported(settings: Settings, client: TestClient, source: str, **body: Any
              ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run an import to its end: the import and its dataset's row."""
    created = _import(client, source, **body)
    assert created.status_code == 202, created.text
    assert run_import(settings, created.json()["id"], "test") == "succeeded"
    done = client.get(f"/v1/imports/{created.json()['id']}").json()
    assert done["status"] == "succeeded", done
    dataset = client.get(f"/v1/datasets/{done['dataset_id']}").json()
    assert dataset["value_dtype"] == done["value_dtype"]
    return done, {**dataset, **_dataset_row(settings, done["dataset_id"])}


def _shard_dtypes(settings: Settings, row: dict[str, Any]) -> set[str]:
    store = blob_store(settings)
    return {str(dataset_arrays(store, s["blob_path"])["data"].dtype) for s in row["shards"]}


def test_dtype_float32_stores_8_bytes_a_non_zero_rounded(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    settings, client = world
    _paths, X, y = write_parts(roots / "f32", 3, values="decimals")
    source = f"file://{roots}/f32/*"
    asked = client.post("/v1/imports", json={"source": source, "dtype": "float32"}).json()
    assert (asked["dtype"], asked["value_dtype"]) == ("float32", "float32")
    done, compact = _imported(settings, client, source, dtype="float32")
    assert (done["dtype"], done["value_dtype"]) == ("float32", "float32")
    _done, wide = _imported(settings, client, source, dtype="float64")
    assert wide["value_dtype"] == "float64"
    assert len(compact["shards"]) > 3 and _shard_dtypes(settings, compact) == {"float32"}
    assert _shard_dtypes(settings, wide) == {"float64"}
    # the arrays: 4 + 4 bytes a non-zero, indptr and y 8 bytes a row (and one a shard)
    nnz, rows, shards = X.nnz, X.shape[0], len(compact["shards"])
    nbytes = sum(s["nbytes"] for s in compact["shards"])
    assert nbytes == 8 * nnz + 16 * rows + 8 * shards
    assert sum(s["nbytes"] for s in wide["shards"]) - nbytes == 4 * nnz
    assert nbytes < compact["stored_bytes"] < nbytes + 2048 * shards  # (the .npz's headers)
    # (each member of a shard's .npz is aligned: a few bytes of padding either way)
    assert abs(wide["stored_bytes"] - compact["stored_bytes"] - 4 * nnz) < 128 * shards
    got32, got_y = imported_arrays(settings, compact)
    got64, _y = imported_arrays(settings, wide)
    assert got32.dtype == np.float32 and np.array_equal(got_y, y)
    np.testing.assert_array_equal(got64.data, X.data)  # float64: the text's values
    np.testing.assert_array_equal(got32.data, X.data.astype(np.float32))  # rounded
    assert not np.array_equal(got32.data.astype(np.float64), X.data)
    page = client.get(f"/datasets/{compact['id']}").text  # the dashboard says the layout
    assert "float32 values, int32 indices (8 bytes a non-zero)" in page
    assert "float32 asked, float32 values (8 bytes a non-zero)" in client.get(
        f"/imports/{done['id']}").text


def test_auto_is_float32_when_every_part_is_exactly_float32(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    settings, client = world
    _paths, X, _y = write_parts(roots / "exact", 3, values="float32")
    created = _import(client, f"file://{roots}/exact/*").json()
    assert (created["dtype"], created["value_dtype"]) == ("auto", None)  # not known yet
    done, dataset = _imported(settings, client, f"file://{roots}/exact/*")
    assert (done["dtype"], done["value_dtype"]) == ("auto", "float32")
    assert _shard_dtypes(settings, dataset) == {"float32"}
    got, _y = imported_arrays(settings, dataset)
    np.testing.assert_array_equal(got.data, X.data)  # exactly: nothing was rounded
    # float64 asked stays float64, exact values or not
    _done, wide = _imported(settings, client, f"file://{roots}/exact/*", dtype="float64")
    assert wide["value_dtype"] == "float64" and _shard_dtypes(settings, wide) == {"float64"}


def test_auto_with_a_part_that_is_not_float32_is_float64_in_every_part(
        world: tuple[Settings, TestClient], roots: Path, caplog: pytest.LogCaptureFixture
        ) -> None:
    """One worker parses the parts in order: parts 0 and 1 are done in float32 when part 2
    meets 6-decimal values; they are parsed again, in float64."""
    settings, client = world
    _paths, X, _y = write_parts(roots / "late", 3, values="float32", wide_parts=(2,))
    with caplog.at_level("INFO", logger="hinge.worker"):
        done, dataset = _imported(settings, client, f"file://{roots}/late/*")
    assert (done["dtype"], done["value_dtype"]) == ("auto", "float64")
    assert "2 part(s) done in float32 to be parsed again" in caplog.text
    assert caplog.text.count(f"import {done['id']} part 0:") == 2  # float32, then float64
    assert _shard_dtypes(settings, dataset) == {"float64"}
    assert done["rows_done"] == X.shape[0] and done["nnz_done"] == X.nnz
    got, _y = imported_arrays(settings, dataset)
    np.testing.assert_array_equal(got.data, X.data)
    # the first part not float32: every other part is parsed in float64 from the start
    _paths, X2, _y2 = write_parts(roots / "early", 3, seed=4, values="float32",
                                  wide_parts=(0,))
    caplog.clear()
    with caplog.at_level("INFO", logger="hinge.worker"):
        done, dataset = _imported(settings, client, f"file://{roots}/early/*")
    assert done["value_dtype"] == "float64" and "parsed again" not in caplog.text
    assert _shard_dtypes(settings, dataset) == {"float64"}
    np.testing.assert_array_equal(imported_arrays(settings, dataset)[0].data, X2.data)


def test_parts_parsed_side_by_side_end_in_one_layout(
        world: tuple[Settings, TestClient], roots: Path) -> None:
    """Parts 0 and 2 taken at once (two workers), part 2's values not float32: part 0,
    still parsed in float32 when part 2 turned the import to float64, turns its shards to
    float64 as it is recorded (Widened); a float32 part recorded before is parsed again."""
    from app.domain.services import imports
    from app.infra.db import session_scope
    from workers.imports import _targets, run_part

    settings, client = world
    _paths, X, _y = write_parts(roots / "side", 3, values="float32", wide_parts=(2,))
    import_id = _import(client, f"file://{roots}/side/*").json()["id"]
    with session_scope(settings.database_url) as session:
        claim = imports.claim_import(session, settings, import_id, "w0")
        assert claim is not None
    dataset_id = claim.work.dataset_id
    with session_scope(settings.database_url) as session:
        first = imports.take_part(session, settings, import_id)
        middle = imports.take_part(session, settings, import_id)
        last = imports.take_part(session, settings, import_id)
    assert first and middle and last and last.part == 2
    assert {first.value_dtype, middle.value_dtype, last.value_dtype} == {"auto"}
    assert run_part(settings, middle, dataset_id, lambda: False) == "done"  # float32
    assert run_part(settings, last, dataset_id, lambda: False) == "done"  # widens
    state = client.get(f"/v1/imports/{import_id}").json()
    assert state["value_dtype"] == "float64" and state["parts_done"] == 1  # part 1 again
    assert run_part(settings, first, dataset_id, lambda: False) == "done"  # Widened
    with session_scope(settings.database_url) as session:
        again = imports.take_part(session, settings, import_id)
        assert again is not None and again.part == 1 and again.value_dtype == "float64"
        assert imports.take_part(session, settings, import_id) is None
    assert run_part(settings, again, dataset_id, lambda: False) == "done"
    with session_scope(settings.database_url) as session:
        dataset = imports.assemble(session, settings, claim, _targets(settings))
        assert dataset is not None and dataset.value_dtype == "float64"
    row = _dataset_row(settings, dataset_id)
    assert _shard_dtypes(settings, row) == {"float64"}
    got, _y = imported_arrays(settings, row)
    np.testing.assert_array_equal(got.data, X.data)


def test_a_dtype_that_is_not_a_layout_is_a_422(world: tuple[Settings, TestClient],
                                               roots: Path) -> None:
    _settings, client = world
    write_parts(roots / "bad-dtype", 1)
    for dtype in ("float16", "int8", "", 32):
        refused = _import(client, f"file://{roots}/bad-dtype/*", dtype=dtype)
        assert refused.status_code == 422, refused.text
    assert client.get("/v1/imports").json()["count"] == 0
