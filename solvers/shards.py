"""Row shards: the one layout of a large dataset (../docs/operations.md, "Large datasets").

A dataset is a list of row shards. Each shard is a CSR block of consecutive rows with
the members a dataset blob has always had: `data` (float64, or float32 in the compact
layout), `indices` (int32), `indptr` (int64, starting at 0), `y` (float64) and, when the
dataset has instance weights, `w` (float64). A dataset stored before shards existed is a
list of one shard: its blob. Shards are the unit of out-of-core blocks, of distribution
(a Dask worker owns some shards) and of parallel import.

This module is numerics only (the import-linter contract: solvers imports nothing of
app). A solver that reads shards takes a `ShardSource`; the service gives it one over its
blob store (app.infra.storage.dataset_shards), the tests one over files or memory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

VALUE_DTYPES = ("float64", "float32")


@dataclass(frozen=True)
class Shard:
    """One loaded row block: X (CSR, int32 indices, float64 or float32 data), y and the
    optional per-row weights."""

    X: sp.csr_matrix
    y: np.ndarray
    w: np.ndarray | None = None

    @property
    def rows(self) -> int:
        return int(self.X.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.X.nnz)


@dataclass(frozen=True)
class ShardInfo:
    """What a shard holds, known without loading it (a dataset's manifest keeps these)."""

    rows: int
    nnz: int
    nbytes: int  # its arrays' bytes in memory


class ShardSource(Protocol):
    """A dataset as shards, loaded one at a time. `load` may map the shard's file (no
    copy) or read it; `release` drops what a loaded shard holds of memory (a hint: the
    page cache behind a sequential pass); `prefetch` asks for a shard ahead (a hint)."""

    n_features: int

    def __len__(self) -> int: ...

    def info(self, index: int) -> ShardInfo: ...

    def load(self, index: int) -> Shard: ...

    def prefetch(self, index: int) -> None: ...

    def release(self, index: int) -> None: ...


def shard_arrays(shard: Shard) -> dict[str, np.ndarray]:
    """The members of a shard's blob (the dataset blob layout above)."""
    arrays = {"data": shard.X.data, "indices": shard.X.indices.astype(np.int32, copy=False),
              "indptr": shard.X.indptr.astype(np.int64, copy=False),
              "y": np.asarray(shard.y, dtype=np.float64)}
    if shard.w is not None:
        arrays["w"] = np.asarray(shard.w, dtype=np.float64)
    return arrays


def shard_from_arrays(arrays: dict[str, np.ndarray], n_features: int) -> Shard:
    """A Shard over a blob's members, holding data and indices themselves (no copy)."""
    indptr = arrays["indptr"]
    X = sp.csr_matrix((arrays["data"], arrays["indices"], indptr),
                      shape=(len(indptr) - 1, n_features))
    return Shard(X, arrays["y"], arrays.get("w"))


def info_of(shard: Shard) -> ShardInfo:
    nbytes = sum(int(a.nbytes) for a in shard_arrays(shard).values())
    return ShardInfo(shard.rows, shard.nnz, nbytes)


def split_rows(X: sp.csr_matrix, y: np.ndarray, w: np.ndarray | None,
               rows_per_shard: int) -> list[Shard]:
    """X, y, w cut into shards of at most `rows_per_shard` consecutive rows."""
    if rows_per_shard < 1:
        raise ValueError("rows_per_shard must be at least 1")
    X = sp.csr_matrix(X)
    shards = []
    for start in range(0, X.shape[0], rows_per_shard):
        stop = min(start + rows_per_shard, X.shape[0])
        block = X[start:stop]
        block.indices = block.indices.astype(np.int32, copy=False)
        shards.append(Shard(block, np.asarray(y[start:stop], dtype=np.float64),
                            None if w is None else np.asarray(w[start:stop], np.float64)))
    return shards


class MemoryShards:
    """Shards held in memory (tests, and a dataset small enough to need no files)."""

    def __init__(self, shards: Sequence[Shard], n_features: int) -> None:
        self._shards = list(shards)
        self.n_features = n_features

    def __len__(self) -> int:
        return len(self._shards)

    def info(self, index: int) -> ShardInfo:
        return info_of(self._shards[index])

    def load(self, index: int) -> Shard:
        return self._shards[index]

    def prefetch(self, index: int) -> None:
        return None

    def release(self, index: int) -> None:
        return None


class NpzShards:
    """Shards in .npz files on a local or shared filesystem, one file a shard, in the
    blob layout above (np.savez or app.infra.mapped_arrays.write_npz writes them).
    Picklable: a Dask worker opens the same paths itself."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]], n_features: int,
                 infos: Sequence[ShardInfo] | None = None) -> None:
        self.paths = [os.fspath(p) for p in paths]
        self.n_features = n_features
        self._infos = list(infos) if infos is not None else None

    def __len__(self) -> int:
        return len(self.paths)

    def info(self, index: int) -> ShardInfo:
        if self._infos is not None:
            return self._infos[index]
        return info_of(self.load(index))

    def load(self, index: int) -> Shard:
        with np.load(self.paths[index], allow_pickle=False) as blob:
            arrays = {name: blob[name] for name in blob.files}
        return shard_from_arrays(arrays, self.n_features)

    def prefetch(self, index: int) -> None:
        _advise(self.paths[index], os.POSIX_FADV_WILLNEED)

    def release(self, index: int) -> None:
        _advise(self.paths[index], os.POSIX_FADV_DONTNEED)


def _advise(path: str | os.PathLike[str], advice: int) -> None:
    """posix_fadvise(advice) on the whole file (read ahead, or drop from the page cache);
    a file that cannot be opened is left alone."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, advice)
    finally:
        os.close(fd)


def write_npz_shards(directory: str | os.PathLike[str], shards: Sequence[Shard],
                     n_features: int) -> NpzShards:
    """Each shard to `directory`/shard-00000.npz, ... (tests and benchmarks)."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, shard in enumerate(shards):
        path = os.path.join(os.fspath(directory), f"shard-{i:05d}.npz")
        np.savez(path, **shard_arrays(shard))  # type: ignore[arg-type]
        paths.append(path)
    return NpzShards(paths, n_features, [info_of(s) for s in shards])


def concatenate(source: ShardSource) -> Shard:
    """Every shard of `source` in one Shard (in memory: for tests and small sets)."""
    parts = [source.load(i) for i in range(len(source))]
    X = sp.vstack([p.X for p in parts], format="csr")
    y = np.concatenate([p.y for p in parts])
    weighted = [p.w is not None for p in parts]
    if any(weighted) and not all(weighted):
        raise ValueError("some shards have weights and some do not")
    w = np.concatenate([p.w for p in parts if p.w is not None]) if all(weighted) else None
    return Shard(X, y, w)
