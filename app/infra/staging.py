"""The staged bytes of resumable uploads: one file a session, `<home>/uploads/<id>.part`,
appended to by one request at a time (an exclusive, non-blocking flock: a second writer,
in this process or another of the host, is told so at once instead of waiting).

The file is the truth of a session's offset: its size, under the lock. A part is appended
and fsynced before it is acknowledged; a part refused (too long, the disk full) is cut
off again (`truncate`), so the file holds only bytes that were taken; a part cut short by
a dropped connection keeps what arrived (`fsync`), and the client resumes from there.
Every process of a deployment that serves a session must see the same home (the local
blob backend's rule; behind several hosts with the s3 backend, route a session's
requests to one host, docs/operations.md)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
from pathlib import Path

STAGING = "uploads"
SUFFIX = ".part"


class Busy(Exception):
    """Another request holds the session's file (a part being written, or completing)."""


def staging_dir(home: Path) -> Path:
    return home / STAGING


def staged_path(home: Path, upload_id: str) -> Path:
    return staging_dir(home) / f"{upload_id}{SUFFIX}"


def staged_size(home: Path, upload_id: str) -> int:
    """The bytes staged (0 before the first part)."""
    try:
        return staged_path(home, upload_id).stat().st_size
    except FileNotFoundError:
        return 0


def settled_size(home: Path, upload_id: str, wait: float = 5.0) -> int:
    """The bytes staged once no part is being written (a part cut short by a dropped
    connection is still being kept for a moment after the client saw the drop), or after
    `wait` seconds the bytes staged so far."""
    try:
        fd = os.open(staged_path(home, upload_id), os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.02)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def free_bytes(home: Path) -> int:
    where = staging_dir(home)
    where.mkdir(parents=True, exist_ok=True)
    return shutil.disk_usage(where).free


def check_room(home: Path, adding: int, reserve: int) -> None:
    """OSError ENOSPC unless the staging disk keeps `reserve` bytes free beside `adding`."""
    free = free_bytes(home)
    if free - adding < reserve:
        raise OSError(errno.ENOSPC, f"{free} bytes free, {adding} to stage and {reserve} "
                      "to keep free (HINGE_DISK_RESERVE_BYTES)", str(staging_dir(home)))


class StagedFile:
    """A session's file, opened (created) and locked exclusively: `size` is the offset.
    Busy when another request holds it. Closing releases the lock."""

    def __init__(self, home: Path, upload_id: str) -> None:
        path = staged_path(home, upload_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            raise Busy(upload_id) from None
        self.start = self.size

    @property
    def size(self) -> int:
        return os.fstat(self.fd).st_size

    def append(self, chunks: list[bytes]) -> None:
        os.lseek(self.fd, 0, os.SEEK_END)
        for chunk in chunks:
            view = memoryview(chunk)
            while view:
                view = view[os.write(self.fd, view):]

    def fsync(self) -> None:
        os.fsync(self.fd)

    def truncate(self) -> None:
        """Cut off what this request appended (a part refused)."""
        os.ftruncate(self.fd, self.start)
        os.fsync(self.fd)

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self.fd, length, offset)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)  # (the lock goes with the descriptor)

    def __enter__(self) -> StagedFile:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def remove_staged(home: Path, upload_id: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        staged_path(home, upload_id).unlink()


def staged_ids_older_than(home: Path, seconds: float) -> list[str]:
    """The sessions whose staged file was last written more than `seconds` ago."""
    where = staging_dir(home)
    if not where.is_dir():
        return []
    cutoff = time.time() - seconds
    found = []
    for path in where.glob(f"*{SUFFIX}"):
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_mtime < cutoff:
                found.append(path.name[:-len(SUFFIX)])
    return found
