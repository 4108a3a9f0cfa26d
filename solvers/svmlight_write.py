"""Writing svmlight text (`dump_svmlight`): 1-based indices, repr() floats, so that
solvers/svmlight.py's parser reads it back exactly."""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np
import scipy.sparse


def dump_svmlight(X_csr: Any, y: Any, fileobj_or_path: Any) -> None:
    """Write svmlight text: 1-based indices, repr() floats, so parsing round-trips exactly.

    Stored zeros are written (and read back) as entries. Non-finite values are refused.
    """
    X = scipy.sparse.csr_matrix(X_csr, dtype=np.float64, copy=True)
    X.sum_duplicates()
    X.sort_indices()
    labels = np.asarray(y, dtype=np.float64).ravel()
    if labels.shape[0] != X.shape[0]:
        raise ValueError(f"y has {labels.shape[0]} labels for {X.shape[0]} rows")
    if not (np.isfinite(labels).all() and np.isfinite(X.data).all()):
        raise ValueError("svmlight cannot represent NaN or infinite labels or values")
    if isinstance(fileobj_or_path, (str, os.PathLike)):
        with open(fileobj_or_path, "wb") as handle:
            _write_rows(X, labels, handle.write, binary=True)
    else:
        binary = not isinstance(fileobj_or_path, io.TextIOBase)
        _write_rows(X, labels, fileobj_or_path.write, binary=binary)


def _write_rows(X: scipy.sparse.csr_matrix, labels: np.ndarray, write: Any, binary: bool) -> None:
    indptr = X.indptr.tolist()
    columns = (X.indices.astype(np.int64) + 1).tolist()
    values = X.data.tolist()
    lines: list[str] = []
    buffered = 0
    for row, label in enumerate(labels.tolist()):
        start, stop = indptr[row], indptr[row + 1]
        pairs = " ".join(
            f"{column}:{value!r}"
            for column, value in zip(columns[start:stop], values[start:stop], strict=True)
        )
        lines.append(f"{label!r} {pairs}\n" if pairs else f"{label!r}\n")
        buffered += stop - start + 1
        if buffered >= 65536:
            _flush(lines, write, binary)
            lines, buffered = [], 0
    _flush(lines, write, binary)


def _flush(lines: list[str], write: Any, binary: bool) -> None:
    text = "".join(lines)
    write(text.encode("ascii") if binary else text)
