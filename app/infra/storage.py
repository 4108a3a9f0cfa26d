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

import errno
import logging
import shutil
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
from app.infra.mapped_arrays import (
    advise_random,
    drop_cached,
    prefetch,
    read_npz,
    release,
    write_npz,
)
from solvers.shards import Shard, ShardInfo, info_of, shard_from_arrays

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger("hinge.storage")

__all__ = ["DATASETS", "MODELS", "MODEL_BLOB_MARKER", "PARTIAL", "BlobRef", "BlobShards",
           "BlobStore", "LocalBlobStore", "ShardWriter", "StoredBlob", "blob_store",
           "csr_from_arrays", "dataset_arrays", "dataset_blob_keys", "dataset_key",
           "dataset_shards", "delete_dataset_blobs", "load_dataset", "model_arrays",
           "model_key", "remove_orphan_blobs", "remove_temporary_blobs",
           "save_dataset_arrays", "shard_key", "sharded_blob_path", "store_model_arrays"]

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


def dataset_arrays(store: BlobStore, blob_path: str,
                   shards: list[dict[str, Any]] | None = None) -> dict[str, np.ndarray]:
    """Every array of a dataset's blob (data, indices, indptr, y and any other member),
    memory-mapped from the blob's file where it allows it (app/infra/mapped_arrays.py:
    the processes of a host share one copy), else read into memory. A dataset stored in
    row shards (`shards`, the row's manifest) is read shard by shard and concatenated in
    memory (the out-of-core readers take `dataset_shards` instead)."""
    if shards is None:
        with store.open(BlobRef.parse(blob_path)) as handle:
            return read_npz(handle)
    return concatenate_arrays([dataset_arrays(store, s["blob_path"]) for s in shards])


def concatenate_arrays(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Shards' blob members (data, indices, indptr from 0, y, optional w) as one dataset's."""
    if len(parts) == 1:
        return parts[0]
    out = {name: np.concatenate([p[name] for p in parts])
           for name in ("data", "indices", "y", *(("w",) if "w" in parts[0] else ()))}
    indptr = np.empty(sum(len(p["y"]) for p in parts) + 1, dtype=np.int64)
    indptr[0], row, base = 0, 0, 0
    for part in parts:
        rows = len(part["y"])
        indptr[row + 1:row + rows + 1] = part["indptr"][1:] + base
        row, base = row + rows, base + int(part["indptr"][-1])
    out["indptr"] = indptr
    return out


def shard_key(dataset_id: str, index: int, part: int = 0) -> str:
    """The blob key of a dataset's row shard: `datasets/<id>/p<part>-<index>.npz` (an upload
    is part 0; an import's part files number the parts), so the keys sort in row order."""
    return f"{DATASETS}/{dataset_id}/p{part:05d}-{index:05d}.npz"


def sharded_blob_path(dataset_id: str) -> str:
    """The `blob_path` of a dataset stored in shards: their folder, no blob itself (a
    reader that ignores `shards` fails loudly instead of reading one shard)."""
    return f"{DATASETS}/{dataset_id}/"


def dataset_blob_keys(blob_path: str, shards: list[dict[str, Any]] | None) -> list[str]:
    """The keys of every blob a dataset's row refers to."""
    if shards is None:
        return [BlobRef.parse(blob_path).key]
    return [BlobRef.parse(s["blob_path"]).key for s in shards]


def delete_dataset_blobs(store: BlobStore, blob_path: str,
                         shards: list[dict[str, Any]] | None) -> None:
    """Remove a dataset's blob, or all its shards and their folder."""
    for key in dataset_blob_keys(blob_path, shards):
        store.delete(key)
    if shards:
        store.remove_folder(str(Path(BlobRef.parse(shards[0]["blob_path"]).key).parent))


_COMPARE_ENTRIES = 1 << 20
EXACT_FLOAT32 = "auto"  # an upload's dtype: float32 where every value is exactly one


def compact_values(data: np.ndarray, value_dtype: str) -> np.ndarray | None:
    """`data` as float32 under the layout asked for (float32: rounded; auto: only when
    every value is exactly a float32), else None (float64 it stays)."""
    if value_dtype == "float64" or data.dtype == np.float32:
        return data if data.dtype == np.float32 else None
    compact = np.empty(len(data), dtype=np.float32)
    for start in range(0, len(data), _COMPARE_ENTRIES):  # bounded temporaries
        piece, out = data[start:start + _COMPARE_ENTRIES], compact[start:start + _COMPARE_ENTRIES]
        np.copyto(out, piece, casting="same_kind")
        if value_dtype == EXACT_FLOAT32 and not np.array_equal(out, piece):
            return None
    return compact


class ShardWriter:
    """Writes one dataset's row shards to the store as they are parsed (SvmlightParser's
    `on_shard`), each under a temporary name, fsynced and committed, after checking that
    the disk keeps `reserve_bytes` free beside it (else OSError ENOSPC before writing, as
    a disk that fills while writing raises). `abort` removes what was written; after
    `manifest`, the dataset's row owns the shards.

    `value_dtype`: the values' layout, float64, float32 (compact: 8 bytes a non-zero,
    rounded) or auto (float32 while every value is exactly a float32; the first shard
    that is not turns the shards written before it back to float64). `layout` says the
    result."""

    def __init__(self, store: BlobStore, dataset_id: str, reserve_bytes: int = 0,
                 part: int = 0, value_dtype: str = "float64") -> None:
        self.store = store
        self.dataset_id = dataset_id
        self.reserve_bytes = reserve_bytes
        self.part = part
        self.value_dtype = value_dtype
        self.written: list[tuple[StoredBlob, ShardInfo]] = []
        self.owned = False  # a dataset's row took the shards over (then never `abort`)

    @property
    def layout(self) -> str:
        """The stored values' dtype: float32 or float64."""
        return "float64" if self.value_dtype == "float64" else "float32"

    def write(self, arrays: dict[str, np.ndarray]) -> None:
        if self.value_dtype != "float64":
            compact = compact_values(arrays["data"], self.value_dtype)
            if compact is None:
                self.widen()
            else:
                arrays = {**arrays, "data": compact}
        self._put(len(self.written), arrays)

    def widen(self) -> None:
        """Every shard written to float64, and those to come: an auto layout met a value
        that is not a float32 (or an import's other part did: workers.imports)."""
        self.value_dtype = "float64"
        for index, (stored, _) in enumerate(list(self.written)):
            arrays = dataset_arrays(self.store, str(stored.ref))
            self._put(index, {**arrays, "data": arrays["data"].astype(np.float64)})

    def _put(self, index: int, arrays: dict[str, np.ndarray]) -> None:
        key = shard_key(self.dataset_id, index, self.part)
        nbytes = sum(int(a.nbytes) for a in arrays.values())
        scratch = self.store.scratch(key)
        free = shutil.disk_usage(scratch.parent).free
        if free - nbytes < self.reserve_bytes:
            raise OSError(errno.ENOSPC, f"{free} bytes free, {nbytes} to write and "
                          f"{self.reserve_bytes} to keep free (HINGE_DISK_RESERVE_BYTES)",
                          str(scratch.parent))
        write_synced(scratch, lambda handle: write_npz(handle, arrays))
        stored = self.store.commit(key, scratch)
        entry = (stored, ShardInfo(len(arrays["y"]), len(arrays["data"]), nbytes))
        if index < len(self.written):
            self.written[index] = entry
        else:
            self.written.append(entry)

    def targets(self) -> np.ndarray:
        """Every row's label, read back from the shards written."""
        return np.concatenate([np.array(dataset_arrays(self.store, str(stored.ref))["y"])
                               for stored, _ in self.written])

    @property
    def stored_bytes(self) -> int:
        return sum(stored.size for stored, _ in self.written)

    def manifest(self) -> list[dict[str, Any]]:
        """The dataset row's `shards`."""
        return [{"blob_path": str(stored.ref), "rows": info.rows, "nnz": info.nnz,
                 "nbytes": info.nbytes} for stored, info in self.written]

    def abort(self) -> None:
        """Remove every shard written (a failed or refused upload)."""
        for stored, _ in self.written:
            self.store.delete(stored.ref.key)
        self.written = []
        self.store.remove_folder(sharded_blob_path(self.dataset_id).rstrip("/"))


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
        self._by_rows: set[int] = set()

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
        self._by_rows.discard(index)
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
        blocks of solvers/blocks.py). A shard read so is read by rows only: its pages come
        in by these ranges, none by the device's readahead around a fault (advise_random)."""
        if index not in self._by_rows and index in self._loaded:
            self._by_rows.add(index)
            for values in self._loaded[index].values():
                advise_random(values)
        for values, first, last in self._row_ranges(index, start, stop):
            prefetch(values, first, last)

    def release_rows(self, index: int, start: int, stop: int) -> None:
        """Hand the mapped pages of rows [start, stop) of a loaded shard back (MADV_DONTNEED)
        and drop them from the page cache (a block done with: no memory of the worker's
        cgroup holds it)."""
        for values, first, last in self._row_ranges(index, start, stop):
            release(values, first, last)
            drop_cached(values, first, last)


def dataset_shards(store: BlobStore, blob_paths: Iterable[str], n_features: int,
                   infos: Iterable[ShardInfo] | None = None) -> BlobShards:
    """The ShardSource of a dataset whose shards are the blobs `blob_paths` (a dataset
    without shards: `[dataset.blob_path]`)."""
    return BlobShards(store, blob_paths, n_features, infos)


def load_dataset(store: BlobStore, blob_path: str, n_features: int,
                 shards: list[dict[str, Any]] | None = None
                 ) -> tuple[sp.csr_matrix, np.ndarray]:
    """A dataset's X (CSR) and y, mapped from its blob or read from its shards
    (`dataset_arrays`)."""
    arrays = dataset_arrays(store, blob_path, shards)
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
    old: dict[str, list[str]] = {}
    for key in store.keys_older_than(prefix, cutoff):
        # `<prefix>/<id>.npz`, or a row shard `<prefix>/<id>/p00000-00000.npz`
        old.setdefault(Path(key[len(prefix) + 1:].split("/", 1)[0]).stem, []).append(key)
    if old:
        keep = known(old)
        for blob_id, keys in old.items():
            if blob_id not in keep:
                for key in keys:
                    store.delete(key)
                    removed.append(Path(key).name)
                store.remove_folder(f"{prefix}/{blob_id}")
    if removed:
        log.info("removed %d orphan blob(s) under %s/", len(removed), prefix)
    return removed
