"""A bounded local cache of blobs, keyed by the sha256 of their bytes, shared by every
process of a host that uses the same directory.

- A cached blob is `<sha256>.blob`; a hit opens it and marks it used (its mtime), so
  eviction removes the least recently used blobs first.
- A miss fetches into a temporary file (`.<sha256>.<host>.<pid>.partial`), checks its
  sha256 (a blob that does not match is refused, never cached) and renames it into place:
  a reader never sees half a file.
- Concurrent processes that miss the same blob fetch it once: the fill holds an
  exclusive `flock` on one of 64 lock files chosen by the digest (the lock files are
  never removed, so two processes can never hold "the same" lock on different inodes);
  the others wait on it and then open the filled file.
- After each fill the total size of the cached blobs is brought back under `max_bytes`
  (least recently used first), under a lock of its own. `open` returns an open file, so
  a blob evicted by another process meanwhile stays readable to the one reading it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger("hinge.storage")

PARTIAL = ".partial"
SUFFIX = ".blob"
LOCK_STRIPES = 64


class BlobIntegrityError(Exception):
    """A fetched blob's bytes do not have the sha256 they were stored with."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def temporary_name(directory: Path, stem: str) -> Path:
    """Where this process writes a file before renaming it to its final name."""
    return directory / f".{stem}.{socket.gethostname()}.{os.getpid()}{PARTIAL}"


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


PARTS = ".parts"  # a directory of a batch prediction's output being written


def remove_stale_parts(directory: Path, cutoff: float) -> list[str]:
    """Remove the `.<id>.parts` directories in `directory` (a batch prediction's output
    as it is written, app.domain.batch_output) in which nothing was written since
    `cutoff`: what a worker that died left; their names."""
    removed: list[str] = []
    if not directory.is_dir():
        return removed
    for path in directory.glob(f".*{PARTS}"):
        try:
            newest = max([path.stat().st_mtime,
                          *(child.stat().st_mtime for child in path.iterdir())])
        except FileNotFoundError:
            continue
        if newest < cutoff:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path.name)
    return removed


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class BlobCache:
    def __init__(self, directory: Path, max_bytes: int) -> None:
        self.directory = directory
        self.max_bytes = max_bytes
        directory.mkdir(parents=True, exist_ok=True)

    def path(self, sha256: str) -> Path:
        return self.directory / f"{sha256}{SUFFIX}"

    def scratch(self, stem: str) -> Path:
        """A temporary file name in the cache's directory (same filesystem: `adopt` renames)."""
        return temporary_name(self.directory, stem)

    def _lock_for(self, sha256: str) -> Path:
        return self.directory / f".fill-{int(sha256[:8], 16) % LOCK_STRIPES:02d}.lock"

    def _open_hit(self, sha256: str) -> BinaryIO | None:
        path = self.path(sha256)
        try:
            handle = open(path, "rb")  # noqa: SIM115 - the caller closes it
        except FileNotFoundError:
            return None
        with contextlib.suppress(FileNotFoundError):
            os.utime(path)  # most recently used
        return handle

    def open(self, sha256: str, fetch: Callable[[Path], None]) -> BinaryIO:
        """The cached blob, opened for reading; on a miss `fetch(path)` writes it to
        `path` first (once per host however many processes ask at the same time)."""
        handle = self._open_hit(sha256)
        if handle is not None:
            return handle
        with _flock(self._lock_for(sha256)):
            handle = self._open_hit(sha256)  # another process filled it while we waited
            if handle is not None:
                return handle
            temporary = self.scratch(sha256)
            try:
                fetch(temporary)
                actual = file_sha256(temporary)
                if actual != sha256:
                    raise BlobIntegrityError(f"fetched blob has sha256 {actual}, "
                                             f"expected {sha256}")
                os.replace(temporary, self.path(sha256))
            finally:
                temporary.unlink(missing_ok=True)
            handle = open(self.path(sha256), "rb")  # noqa: SIM115 - the caller closes it
        self.evict()
        return handle

    def adopt(self, sha256: str, temporary: Path) -> None:
        """Move a file this process just wrote (and stored elsewhere) into the cache."""
        os.replace(temporary, self.path(sha256))
        self.evict()

    def size(self) -> int:
        return sum(size for _mtime, size, _path in self._entries())

    def _entries(self) -> list[tuple[float, int, Path]]:
        entries = []
        for path in self.directory.glob(f"*{SUFFIX}"):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append((stat.st_mtime, stat.st_size, path))
        return entries

    def evict(self) -> list[Path]:
        """Remove least recently used blobs until the cache holds at most max_bytes."""
        removed: list[Path] = []
        with _flock(self.directory / ".evict.lock"):
            entries = sorted(self._entries(), key=lambda entry: entry[0])
            total = sum(size for _mtime, size, _path in entries)
            for _mtime, size, path in entries:
                if total <= self.max_bytes:
                    break
                path.unlink(missing_ok=True)
                total -= size
                removed.append(path)
        if removed:
            log.info("blob cache: evicted %d blob(s)", len(removed))
        return removed
