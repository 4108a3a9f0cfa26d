"""Blob storage: dataset arrays and large model arrays, behind one interface.

Two backends (`HINGE_BLOB_BACKEND`; the interface `BlobStore` and the local backend are in
app/infra/blobs.py):
- `local` (the embedded default): files under HINGE_HOME (`datasets/<id>.npz`,
  `models/<id>.npz`); every process of the deployment must see the same directory.
- `s3`: an S3-compatible object store (MinIO, AWS S3, ...; app/infra/s3_store.py). Nothing is
  shared between hosts but the store: each process keeps a bounded cache of the blobs it
  reads, keyed by their sha256 (app/infra/blob_cache.py), under its own HINGE_HOME.

The database refers to a blob by `BlobRef`, its key and the sha256 of its bytes, written
`<key>#<sha256>` (a dataset's `blob_path`; a large model's `arrays` column holds
`MODEL_BLOB_MARKER` followed by it, a small model's the .npz bytes themselves). A bare
path (a row written before blobs had references) is read from the local filesystem.

Dataset arrays are written as an uncompressed .npz with aligned members and read back
memory-mapped
(app/infra/mapped_arrays.py: every process of a host shares one copy of a dataset) or
with allow_pickle=False: nothing is unpickled.
A blob is written under a temporary name (`.<id>.<host>.<pid>.partial`), fsynced, hashed
and then renamed (local) or uploaded (s3), so a reader never sees half a file. What a
crash leaves behind is cleaned up: this host's temporary files of dead processes when an
API process starts (`remove_temporary_blobs`), and by the sweep, after a grace period,
any temporary file and any blob whose row was never committed (`remove_orphan_blobs`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import scipy.sparse as sp

from app.infra.blob_cache import PARTIAL, remove_temporary_blobs
from app.infra.blobs import (
    DATASETS,
    MODEL_BLOB_MARKER,
    MODELS,
    BlobRef,
    BlobStore,
    LocalBlobStore,
    StoredBlob,
    dataset_key,
    model_key,
    write_synced,
)
from app.infra.mapped_arrays import prefetch, read_npz, release, write_npz
from solvers.shards import Shard, ShardInfo, info_of, shard_from_arrays

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger("hinge.storage")

__all__ = ["DATASETS", "MODELS", "MODEL_BLOB_MARKER", "PARTIAL", "BlobRef", "BlobShards",
           "BlobStore", "LocalBlobStore", "StoredBlob", "blob_store", "csr_from_arrays",
           "dataset_arrays", "dataset_key", "dataset_shards", "load_dataset", "model_arrays",
           "model_key", "remove_orphan_blobs", "remove_temporary_blobs", "save_dataset_arrays",
           "store_model_arrays"]

_stores: OrderedDict[tuple[object, ...], BlobStore] = OrderedDict()
_stores_lock = threading.Lock()
_MAX_STORES = 8  # a service has one configuration; tests make many


def blob_store(settings: Settings) -> BlobStore:
    """The store the settings describe (one per configuration and process)."""
    identity: tuple[object, ...] = (
        settings.blob_backend, str(settings.home), settings.s3_endpoint_url,
        settings.s3_bucket, settings.s3_prefix, settings.s3_region,
        settings.s3_access_key_id, settings.s3_secret_access_key.get_secret_value(),
        settings.blob_cache_bytes)
    with _stores_lock:
        store = _stores.get(identity)
        if store is not None:
            _stores.move_to_end(identity)
        else:
            if settings.blob_backend == "s3":
                from app.infra.s3_store import S3BlobStore

                store = S3BlobStore(settings)
            else:
                store = LocalBlobStore(settings.home)
            _stores[identity] = store
            while len(_stores) > _MAX_STORES:
                _stores.popitem(last=False)
        return store


# -- datasets ----------------------------------------------------------------------------

def save_dataset_arrays(store: BlobStore, dataset_id: str, arrays: dict[str, np.ndarray]
                        ) -> StoredBlob:
    """Store a dataset's arrays as one blob (temporary file, fsync, commit)."""
    key = dataset_key(dataset_id)
    scratch = store.scratch(key)
    write_synced(scratch, lambda handle: write_npz(handle, arrays))
    return store.commit(key, scratch)


def dataset_arrays(store: BlobStore, blob_path: str) -> dict[str, np.ndarray]:
    """Every array of a dataset's blob (data, indices, indptr, y and any other member),
    memory-mapped from the blob's file where it allows it (app/infra/mapped_arrays.py:
    the processes of a host share one copy), else read into memory."""
    with store.open(BlobRef.parse(blob_path)) as handle:
        return read_npz(handle)


def csr_from_arrays(arrays: dict[str, np.ndarray], n_features: int) -> sp.csr_matrix:
    """The CSR matrix of a dataset's arrays, holding its data and indices themselves (no
    copy). SciPy narrows the int64 indptr to an int32 copy when it fits (O(rows); the
    solvers widen it back to another), and it must: with an int64 indptr beside int32
    indices, every SciPy routine on the matrix (row slicing, the canonical-format check)
    first copies all the indices to int64."""
    return sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                         shape=(len(arrays["indptr"]) - 1, n_features))


class BlobShards:
    """A dataset's row shards (solvers.shards.ShardSource) over the blob store: one blob a
    shard, each mapped when it is loaded (`dataset_arrays`). A dataset stored before shards
    is one shard, its `blob_path`. `release` hands a loaded shard's mapped pages back."""

    def __init__(self, store: BlobStore, blob_paths: Iterable[str], n_features: int,
                 infos: Iterable[ShardInfo] | None = None) -> None:
        self.store = store
        self.blob_paths = list(blob_paths)
        self.n_features = n_features
        self._infos = list(infos) if infos is not None else None
        self._loaded: dict[int, dict[str, np.ndarray]] = {}

    def __len__(self) -> int:
        return len(self.blob_paths)

    def info(self, index: int) -> ShardInfo:
        if self._infos is not None:
            return self._infos[index]
        return info_of(self.load(index))

    def load(self, index: int) -> Shard:
        arrays = dataset_arrays(self.store, self.blob_paths[index])
        self._loaded[index] = arrays
        return shard_from_arrays(arrays, self.n_features)

    def prefetch(self, index: int) -> None:
        return None

    def release(self, index: int) -> None:
        arrays = self._loaded.pop(index, None)
        for values in (arrays or {}).values():
            release(values, 0, len(values))

    def _row_ranges(self, index: int, start: int, stop: int
                    ) -> list[tuple[np.ndarray, int, int]]:
        """(array, first, last) of rows [start, stop) of a loaded shard's members."""
        arrays = self._loaded.get(index)
        if arrays is None:
            return []
        indptr = arrays["indptr"]
        lo, hi = int(indptr[start]), int(indptr[stop])
        ranges = [(arrays["data"], lo, hi), (arrays["indices"], lo, hi),
                  (indptr, start, stop + 1)]
        ranges += [(arrays[name], start, stop) for name in ("y", "w") if name in arrays]
        return ranges

    def prefetch_rows(self, index: int, start: int, stop: int) -> None:
        """Read rows [start, stop) of a loaded shard ahead (madvise WILLNEED: the out-of-core
        blocks of solvers/blocks.py)."""
        for values, first, last in self._row_ranges(index, start, stop):
            prefetch(values, first, last)

    def release_rows(self, index: int, start: int, stop: int) -> None:
        """Hand the mapped pages of rows [start, stop) of a loaded shard back (MADV_DONTNEED;
        a block done with)."""
        for values, first, last in self._row_ranges(index, start, stop):
            release(values, first, last)


def dataset_shards(store: BlobStore, blob_paths: Iterable[str], n_features: int,
                   infos: Iterable[ShardInfo] | None = None) -> BlobShards:
    """The ShardSource of a dataset whose shards are the blobs `blob_paths` (a dataset
    without shards: `[dataset.blob_path]`)."""
    return BlobShards(store, blob_paths, n_features, infos)


def load_dataset(store: BlobStore, blob_path: str, n_features: int
                 ) -> tuple[sp.csr_matrix, np.ndarray]:
    """A dataset's X (CSR) and y, mapped from its blob (`dataset_arrays`)."""
    arrays = dataset_arrays(store, blob_path)
    return csr_from_arrays(arrays, n_features), arrays["y"]


# -- models ------------------------------------------------------------------------------

def store_model_arrays(store: BlobStore, settings: Settings, model_id: str, payload: bytes
                       ) -> tuple[bytes, bool]:
    """What the model row's `arrays` column keeps: the .npz bytes themselves when smaller
    than HINGE_MODEL_BLOB_MIN_BYTES, else a reference to a blob holding them (written
    here; True when a blob was written)."""
    if len(payload) < settings.model_blob_min_bytes:
        return payload, False
    stored = store.put_bytes(model_key(model_id), payload)
    return MODEL_BLOB_MARKER + str(stored.ref).encode(), True


def model_arrays(store: BlobStore, stored: bytes) -> bytes:
    """A model's .npz bytes, from the row's `arrays` column or the blob it refers to."""
    if not stored.startswith(MODEL_BLOB_MARKER):
        return stored
    with store.open(BlobRef.parse(stored[len(MODEL_BLOB_MARKER):].decode())) as handle:
        return handle.read()


# -- clean-up ----------------------------------------------------------------------------

def remove_orphan_blobs(store: BlobStore, prefix: str, grace_seconds: float,
                        known: Callable[[Iterable[str]], set[str]]) -> list[str]:
    """Remove blobs under `prefix` older than `grace_seconds` whose id `known` does not
    return (no row: the process crashed between the blob and the commit), and temporary
    files older than that (any host's); the removed blobs' file names."""
    cutoff = time.time() - grace_seconds
    removed = store.remove_stale_scratch(prefix, cutoff)
    old = {Path(key).stem: key for key in store.keys_older_than(prefix, cutoff)}
    if old:
        keep = known(old)
        for blob_id, key in old.items():
            if blob_id not in keep:
                store.delete(key)
                removed.append(Path(key).name)
    if removed:
        log.info("removed %d orphan blob(s) under %s/", len(removed), prefix)
    return removed
