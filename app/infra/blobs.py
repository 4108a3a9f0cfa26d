"""The blob-storage interface (`BlobStore`), blob references and the local-files
backend; app/infra/storage.py explains the design, app/infra/s3_store.py is the other backend."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from app.infra.blob_cache import PARTIAL, file_sha256, remove_stale_parts, temporary_name

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
        write_synced(scratch, lambda handle: handle.write(payload))
        return self.commit(key, scratch)


def write_synced(path: Path, write: Callable[[BinaryIO], object]) -> None:
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
        keys = [f"{prefix}/{path.name}" for path in self._old_files(prefix, cutoff)
                if path.suffix == ".npz" and not path.name.startswith(".")]
        for folder in self._folders(prefix):  # a sharded dataset's: <prefix>/<id>/<k>.npz
            keys += self.keys_older_than(f"{prefix}/{folder}", cutoff)
        return keys

    def _folders(self, prefix: str) -> list[str]:
        directory = self.root / prefix
        if "/" in prefix or not directory.is_dir():
            return []
        return [p.name for p in directory.iterdir()
                if p.is_dir() and not p.name.startswith(".")]

    def remove_stale_scratch(self, prefix: str, cutoff: float) -> list[str]:
        removed = []
        for path in self._old_files(prefix, cutoff):
            if path.name.endswith(PARTIAL):  # any host's: a crashed write
                path.unlink(missing_ok=True)
                removed.append(path.name)
        for folder in self._folders(prefix):
            removed += self.remove_stale_scratch(f"{prefix}/{folder}", cutoff)
        return removed + remove_stale_parts(self.root / prefix, cutoff)
