"""Datasets memory-mapped from their blobs: the processes of a host hold one copy of a
dataset's arrays (app/infra/mapped_arrays.py), the solvers take them without a copy,
older or compressed blobs stay readable, and `release` drops a mapped range's pages."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.infra.blobs import LocalBlobStore
from app.infra.mapped_arrays import is_mapped, release
from app.infra.storage import (
    dataset_arrays,
    dataset_shards,
    load_dataset,
    save_dataset_arrays,
)
from solvers.inputs import as_csr_arrays

ROOT = Path(__file__).resolve().parents[2]


def _arrays(rows: int, per_row: int, seed: int = 0) -> dict[str, np.ndarray]:
    """`rows` rows of `per_row` non-zeros each (columns 0..per_row-1), labels +-1."""
    rng = np.random.default_rng(seed)
    return {"data": rng.standard_normal(rows * per_row),
            "indices": np.tile(np.arange(per_row, dtype=np.int32), rows),
            "indptr": np.arange(0, rows * per_row + 1, per_row, dtype=np.int64),
            "y": np.where(rng.random(rows) < 0.5, -1.0, 1.0)}


def test_loaded_arrays_are_mapped_and_the_solvers_take_them_without_a_copy(
        tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    arrays = _arrays(1000, 8)
    arrays["w"] = np.linspace(0.5, 1.5, 1000)  # any further member comes back too
    stored = save_dataset_arrays(store, "a" * 32, arrays)
    loaded = dataset_arrays(store, str(stored.ref))
    assert sorted(loaded) == ["data", "indices", "indptr", "w", "y"]
    for name, values in arrays.items():
        assert is_mapped(loaded[name]), name
        assert loaded[name].dtype == values.dtype and np.array_equal(loaded[name], values)
    X, y = load_dataset(store, str(stored.ref), 8)
    assert X.indices.dtype == np.int32
    csr = as_csr_arrays(X)  # what every solver starts from
    for mine, theirs in ((csr.data, X.data), (csr.indices, X.indices)):
        assert np.shares_memory(mine, theirs) and is_mapped(mine)
    # SciPy's own routines on X copy nothing of the size of the data (with an int64
    # indptr beside int32 indices they would copy every index to int64)
    tracemalloc.start()
    assert X.has_canonical_format
    X[100:200]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < X.indices.nbytes / 2, peak
    assert is_mapped(y)
    X.data[0] = 99.0  # copy-on-write: the blob itself never changes
    assert dataset_arrays(store, str(stored.ref))["data"][0] == arrays["data"][0]


@pytest.mark.parametrize("savez", [np.savez, np.savez_compressed])
def test_older_or_compressed_blobs_are_read_into_memory(tmp_path: Path, savez: Any
                                                        ) -> None:
    arrays = _arrays(50, 4)  # np.savez's members are not aligned: read, not mapped
    path = tmp_path / "datasets" / "old.npz"
    path.parent.mkdir(parents=True)
    savez(path, **arrays)
    X, y = load_dataset(LocalBlobStore(tmp_path), "datasets/old.npz", 4)
    assert not is_mapped(X.data)
    assert np.array_equal(X.data, arrays["data"]) and np.array_equal(y, arrays["y"])


def _rollup(pid: int) -> dict[str, int]:
    """/proc/<pid>/smaps_rollup in bytes."""
    figures = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_unit = line.split()
        figures[name.rstrip(":")] = int(value) * 1024
    return figures


CHILD = textwrap.dedent("""
    import sys
    from app.infra.blobs import LocalBlobStore
    from app.infra.storage import load_dataset
    from solvers.inputs import as_csr_arrays
    X, y = load_dataset(LocalBlobStore(__import__("pathlib").Path(sys.argv[1])),
                        sys.argv[2], int(sys.argv[3]))
    arrays = as_csr_arrays(X)  # the solvers' own view of X
    total = float(arrays.data.sum()) + float(arrays.indices.sum()) + float(y.sum())
    print("ready", total, flush=True)
    sys.stdin.readline()
""")


@pytest.mark.skipif(not Path("/proc/self/smaps_rollup").exists(), reason="needs Linux /proc")
def test_two_processes_on_one_dataset_hold_one_copy(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    arrays = _arrays(400_000, 16)  # ~77 MiB of data + indices
    size = arrays["data"].nbytes + arrays["indices"].nbytes + arrays["y"].nbytes
    stored = save_dataset_arrays(store, "b" * 32, arrays)
    del arrays
    command = [sys.executable, "-c", CHILD, str(tmp_path), str(stored.ref), "16"]
    children = [subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True,
                                 env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
                for _ in range(2)]
    try:
        for child in children:
            assert child.stdout is not None
            assert child.stdout.readline().startswith("ready")
        figures = [_rollup(child.pid) for child in children]
    finally:
        for child in children:
            child.communicate("\n", timeout=60)
    for figure in figures:
        private = figure["Private_Clean"] + figure["Private_Dirty"]
        # the interpreter, NumPy and SciPy take ~40-60 MiB of their own; the arrays
        # (77 MiB) are shared, not private
        assert figure["Shared_Clean"] >= 0.9 * size, figure
        assert private < 0.25 * size + (60 << 20), figure
        assert figure["Anonymous"] < 0.1 * size + (60 << 20), figure


def test_release_drops_the_pages_of_a_mapped_range(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path)
    stored = save_dataset_arrays(store, "c" * 32, {"data": np.ones(4 << 20)})  # 32 MiB
    data = dataset_arrays(store, str(stored.ref))["data"]
    before = _rollup_self()
    assert data.sum() == 4 << 20
    touched = _rollup_self()
    release(data, 0, data.size)
    after = _rollup_self()
    assert touched["Rss"] - before["Rss"] > 24 << 20
    assert touched["Rss"] - after["Rss"] > 24 << 20
    assert data.sum() == 4 << 20  # read again from the page cache
    anonymous = np.ones(1000)
    release(anonymous, 0, 1000)  # not mapped: untouched
    assert anonymous.sum() == 1000


def _cached_bytes(path: Path) -> int:
    """Bytes of the file in the page cache (util-linux's fincore)."""
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return int(out.split()[0])


def test_rows_read_by_blocks_leave_the_page_cache_when_released(tmp_path: Path) -> None:
    """A shard read by rows (the out-of-core blocks) asks for its ranges itself: released
    rows leave the process and the page cache, which the worker's memory cgroup is
    charged for; the rows beyond the range stay readable and equal."""
    store = LocalBlobStore(tmp_path)
    arrays = _arrays(20_000, 100)  # 16 MB of values, 8 MB of indices
    stored = save_dataset_arrays(store, "d" * 32, arrays)
    shards = dataset_shards(store, [str(stored.ref)], 100)
    shard = shards.load(0)
    path = next(tmp_path.rglob("*.npz"))
    half = 10_000
    shards.prefetch_rows(0, 0, 20_000)
    assert shard.X.data.sum() == pytest.approx(arrays["data"].sum())  # every page read
    assert int(shard.X.indices.sum()) == int(arrays["indices"].sum())
    full = _cached_bytes(path)
    assert full > 23 << 20
    # The page cache drops whole folios only: a large folio (readahead makes them, 2 MiB
    # and more) that straddles an end of a released range stays, a few MB a member.
    shards.release_rows(0, 0, half)
    dropped = full - _cached_bytes(path)
    assert dropped > full // 3  # half the values and indices: 12 of 24 MB
    shards.release_rows(0, half, 20_000)
    assert _cached_bytes(path) < full // 4
    np.testing.assert_array_equal(shard.X[half:].data, arrays["data"][half * 100:])
    shards.release(0)


def _rollup_self() -> dict[str, int]:
    import os

    return _rollup(os.getpid())


def test_prefetch_reads_the_range_into_the_page_cache_before_it_is_touched(
        tmp_path: Path) -> None:
    """prefetch reads the rows' file range itself (large sequential reads): once it has
    returned, the range is in the page cache and touching it reads nothing from the disk
    (no major page faults), where a range not prefetched is not cached."""
    import os
    import resource

    from app.infra.mapped_arrays import prefetch

    store = LocalBlobStore(tmp_path)
    arrays = _arrays(20_000, 100)
    stored = save_dataset_arrays(store, "e" * 32, arrays)
    shards = dataset_shards(store, [str(stored.ref)], 100)
    shard = shards.load(0)
    path = next(tmp_path.rglob("*.npz"))
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    assert _cached_bytes(path) < 1 << 20
    data = shard.X.data
    prefetch(data, 0, data.shape[0] // 2)
    cached = _cached_bytes(path)
    assert data.nbytes // 2 - (1 << 20) <= cached < data.nbytes  # that half, not all
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
    assert data[: data.shape[0] // 2].sum() == pytest.approx(
        arrays["data"][: data.shape[0] // 2].sum())
    assert resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults < 10
    shards.release(0)
