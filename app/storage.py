"""Blob storage for dataset arrays: one uncompressed .npz per dataset under HINGE_HOME.

Arrays are written with np.savez and read with allow_pickle=False: nothing is unpickled.
A blob is written under a temporary name (`.<id>.<host>.<pid>.partial`), fsynced and
renamed, so a reader never sees half a file. What a crash leaves behind is cleaned up:
this host's temporary files of dead processes when an API process starts
(`remove_temporary_blobs`), and by the sweep, after a grace period, any temporary file
and any blob whose dataset row was never committed (`remove_orphan_blobs`).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

log = logging.getLogger("hinge.storage")

PARTIAL = ".partial"


def _temporary_name(directory: Path, dataset_id: str) -> Path:
    return directory / f".{dataset_id}.{socket.gethostname()}.{os.getpid()}{PARTIAL}"


def save_dataset_arrays(directory: Path, dataset_id: str, arrays: dict[str, np.ndarray]) -> Path:
    """Write atomically (temporary file, fsync, rename) and return the final path."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{dataset_id}.npz"
    temporary = _temporary_name(directory, dataset_id)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, allow_pickle=False, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, final)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return final


def load_dataset(path: str | Path, n_features: int) -> tuple[sp.csr_matrix, np.ndarray]:
    with np.load(path, allow_pickle=False) as blob:
        data, indices, indptr, y = blob["data"], blob["indices"], blob["indptr"], blob["y"]
    X = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, n_features))
    return X, y


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


def remove_orphan_blobs(directory: Path, grace_seconds: float,
                        known: Callable[[Iterable[str]], set[str]]) -> list[Path]:
    """Remove blobs older than `grace_seconds` whose dataset id `known` does not return
    (no row: the upload crashed between the file and the commit), and temporary files
    older than that (any host's)."""
    cutoff = time.time() - grace_seconds
    old: dict[str, Path] = {}
    removed: list[Path] = []
    for path in directory.iterdir():
        try:
            if path.stat().st_mtime >= cutoff:
                continue
        except FileNotFoundError:
            continue
        if path.name.endswith(PARTIAL):
            path.unlink(missing_ok=True)
            removed.append(path)
        elif path.suffix == ".npz" and not path.name.startswith("."):
            old[path.stem] = path
    if old:
        keep = known(old)
        for dataset_id, path in old.items():
            if dataset_id not in keep:
                path.unlink(missing_ok=True)
                removed.append(path)
    if removed:
        log.info("removed %d orphan blob(s)", len(removed))
    return removed
