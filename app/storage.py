"""Blob storage for dataset arrays: one uncompressed .npz per dataset under HINGE_HOME.

Arrays are written with np.savez and read with allow_pickle=False: nothing is unpickled.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def save_dataset_arrays(directory: Path, dataset_id: str, arrays: dict[str, np.ndarray]) -> Path:
    """Write atomically (temp file, fsync, rename) and return the final path."""
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"{dataset_id}.npz"
    fd, tmp_name = tempfile.mkstemp(prefix=f".{dataset_id}.", suffix=".npz", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            np.savez(handle, allow_pickle=False, **arrays)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, final)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return final


def load_dataset(path: str | Path, n_features: int) -> tuple[sp.csr_matrix, np.ndarray]:
    with np.load(path, allow_pickle=False) as blob:
        data, indices, indptr, y = blob["data"], blob["indices"], blob["indptr"], blob["y"]
    X = sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, n_features))
    return X, y
