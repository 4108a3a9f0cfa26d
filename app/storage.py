"""Blob storage: dataset arrays and large model arrays, behind one interface.

Two backends (`HINGE_BLOB_BACKEND`):
- `local` (the embedded default): files under HINGE_HOME (`datasets/<id>.npz`,
  `models/<id>.npz`); every process of the deployment must see the same directory.
- `s3`: an S3-compatible object store (MinIO, AWS S3, ...; app/s3_store.py). Nothing is
  shared between hosts but the store: each process keeps a bounded cache of the blobs it
  reads, keyed by their sha256 (app/blob_cache.py), under its own HINGE_HOME.

The database refers to a blob by `BlobRef`, its key and the sha256 of its bytes, written
`<key>#<sha256>` (a dataset's `blob_path`; a large model's `arrays` column holds
`MODEL_BLOB_MARKER` followed by it, a small model's the .npz bytes themselves). A bare
path (a row written before blobs had references) is read from the local filesystem.

Arrays are written with np.savez and read with allow_pickle=False: nothing is unpickled.
A blob is written under a temporary name (`.<id>.<host>.<pid>.partial`), fsynced, hashed
and then renamed (local) or uploaded (s3), so a reader never sees half a file. What a
crash leaves behind is cleaned up: this host's temporary files of dead processes when an
API process starts (`remove_temporary_blobs`), and by the sweep, after a grace period,
any temporary file and any blob whose row was never committed (`remove_orphan_blobs`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np
import scipy.sparse as sp

from app.blob_cache import PARTIAL, file_sha256, temporary_name

if TYPE_CHECKING:
    from app.settings import Settings

log = logging.getLogger("hinge.storage")

__all__ = ["PARTIAL", "BlobRef", "BlobStore", "StoredBlob", "blob_store", "load_dataset",
           "model_arrays", "remove_orphan_blobs", "remove_temporary_blobs",
           "save_dataset_arrays", "store_model_arrays"]

DATASETS = "datasets"
MODELS = "models"
MODEL_BLOB_MARKER = b"hinge-blob:"  # never the start of an .npz (a zip: b"PK")


@dataclass(frozen=True)
class BlobRef:
    key: str
    sha256: str | None = None  # None: a bare local path of an older row

    def __str__(self) -> str:
        return f"{self.key}#{self.sha256}" if self.sha256 else self.key

    @classmethod
    def parse(cls, text: str) -> BlobRef:
        key, sep, digest = text.rpartition("#")
        return cls(key, digest) if sep else cls(text)


@dataclass(frozen=True)
class StoredBlob:
    ref: BlobRef
    size: int


def dataset_key(dataset_id: str) -> str:
    return f"{DATASETS}/{dataset_id}.npz"


def model_key(model_id: str) -> str:
    return f"{MODELS}/{model_id}.npz"


class BlobStore(ABC):
    """Where blobs live. A blob is written to `scratch(key)` by the caller, then handed
    over with `commit`; `open` returns its bytes as a file, `delete` removes it."""

    @abstractmethod
    def scratch(self, key: str) -> Path:
        """A temporary path to write the blob of `key` to before `commit`."""

    @abstractmethod
    def commit(self, key: str, scratch: Path) -> StoredBlob:
        """Store the (fsynced) file at `scratch` under `key`; the scratch file is gone
        afterwards, whether this succeeds or raises."""

    @abstractmethod
    def open(self, ref: BlobRef) -> BinaryIO:
        """The blob's bytes (FileNotFoundError if there is no such blob)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the blob (nothing happens if it does not exist)."""

    @abstractmethod
    def keys_older_than(self, prefix: str, cutoff: float) -> list[str]:
        """Keys under `prefix` ("datasets", "models") last written before `cutoff`."""

    def remove_stale_scratch(self, prefix: str, cutoff: float) -> list[str]:
        """Remove temporary files under `prefix` older than `cutoff`; their names."""
        return []

    def put_bytes(self, key: str, payload: bytes) -> StoredBlob:
        scratch = self.scratch(key)
        _write_synced(scratch, lambda handle: handle.write(payload))
        return self.commit(key, scratch)


def _write_synced(path: Path, write: Callable[[BinaryIO], object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise


class LocalBlobStore(BlobStore):
    """Blobs as files under `root` (HINGE_HOME): `<root>/<key>`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        return Path(key) if os.path.isabs(key) else self.root / key

    def scratch(self, key: str) -> Path:
        final = self.path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        return temporary_name(final.parent, final.stem)

    def commit(self, key: str, scratch: Path) -> StoredBlob:
        try:
            digest, size = file_sha256(scratch), scratch.stat().st_size
            os.replace(scratch, self.path(key))
        except BaseException:
            scratch.unlink(missing_ok=True)
            raise
        return StoredBlob(BlobRef(key, digest), size)

    def open(self, ref: BlobRef) -> BinaryIO:
        return open(self.path(ref.key), "rb")

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def _old_files(self, prefix: str, cutoff: float) -> list[Path]:
        directory = self.root / prefix
        if not directory.is_dir():
            return []
        old = []
        for path in directory.iterdir():
            try:
                if path.stat().st_mtime < cutoff:
                    old.append(path)
            except FileNotFoundError:
                continue
        return old

    def keys_older_than(self, prefix: str, cutoff: float) -> list[str]:
        return [f"{prefix}/{path.name}" for path in self._old_files(prefix, cutoff)
                if path.suffix == ".npz" and not path.name.startswith(".")]

    def remove_stale_scratch(self, prefix: str, cutoff: float) -> list[str]:
        removed = []
        for path in self._old_files(prefix, cutoff):
            if path.name.endswith(PARTIAL):  # any host's: a crashed write
                path.unlink(missing_ok=True)
                removed.append(path.name)
        return removed


_stores: dict[tuple[object, ...], BlobStore] = {}
_stores_lock = threading.Lock()


def blob_store(settings: Settings) -> BlobStore:
    """The store the settings describe (one per configuration and process)."""
    identity: tuple[object, ...] = (
        settings.blob_backend, str(settings.home), settings.s3_endpoint_url,
        settings.s3_bucket, settings.s3_prefix, settings.s3_region,
        settings.s3_access_key_id, settings.s3_secret_access_key.get_secret_value(),
        settings.blob_cache_bytes)
    with _stores_lock:
        store = _stores.get(identity)
        if store is None:
            if settings.blob_backend == "s3":
                from app.s3_store import S3BlobStore

                store = S3BlobStore(settings)
            else:
                store = LocalBlobStore(settings.home)
            _stores[identity] = store
        return store


# -- datasets ----------------------------------------------------------------------------

def save_dataset_arrays(store: BlobStore, dataset_id: str, arrays: dict[str, np.ndarray]
                        ) -> StoredBlob:
    """Store a dataset's arrays as one blob (temporary file, fsync, commit)."""
    key = dataset_key(dataset_id)
    scratch = store.scratch(key)
    _write_synced(scratch, lambda handle: np.savez(handle, allow_pickle=False, **arrays))
    return store.commit(key, scratch)


def load_dataset(store: BlobStore, blob_path: str, n_features: int
                 ) -> tuple[sp.csr_matrix, np.ndarray]:
    with store.open(BlobRef.parse(blob_path)) as handle, \
            np.load(handle, allow_pickle=False) as blob:
        data, indices, indptr, y = blob["data"], blob["indices"], blob["indptr"], blob["y"]
    X = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, n_features))
    return X, y


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

def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_temporary_blobs(directory: Path) -> list[Path]:
    """Remove the temporary files that processes of this host left when they died."""
    removed: list[Path] = []
    host = socket.gethostname()
    if not directory.is_dir():
        return removed
    for path in directory.glob(f".*{PARTIAL}"):
        parts = path.name[: -len(PARTIAL)].split(".")
        # ".<id>.<host...>.<pid>": the host name may itself contain dots
        if len(parts) < 4 or not parts[-1].isdigit() or ".".join(parts[2:-1]) != host:
            continue
        pid = int(parts[-1])
        if pid != os.getpid() and not _pid_alive(pid):
            path.unlink(missing_ok=True)
            removed.append(path)
    if removed:
        log.info("removed %d temporary blob(s) of dead processes", len(removed))
    return removed


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
