"""The .npz reader of solvers/tabular.py (rules in its docstring): the arrays of
``scipy.sparse.save_npz`` and the labels, each member's header checked (kind, size) before
its data is read, object (pickled) arrays refused, the CSR checked row by row."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from typing import IO, Any

import numpy as np

from solvers.svmlight import ParsedDataset, ParseLimits
from solvers.tabular_rules import Blocks, TabularError, check_names

NPZ_LABEL_KEYS = ("y", "label", "labels")
NPZ_KEYS = {"data", "indices", "indptr", "shape", "format", "feature_names",
            *NPZ_LABEL_KEYS}


def read_npz(file: IO[bytes], limits: ParseLimits, label_column: str | None,
             check: Callable[[int, int], None], sha256: str,
             bytes_read: int) -> ParsedDataset:
    """The dataset of the spooled .npz `file`; `check(rows, nnz)` before any array of
    that size is read."""
    if label_column is not None:
        raise TabularError(None, "label_column is for CSV, TSV and Parquet: a .npz "
                           f"holds its labels under {' / '.join(NPZ_LABEL_KEYS)}")
    try:
        archive = zipfile.ZipFile(file)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise TabularError(None, f"not a readable .npz (zip) file: {exc}") from None
    with archive:
        members = {info.filename.removesuffix(".npy"): info
                   for info in archive.infolist()}
        missing = [k for k in ("data", "indices", "indptr", "shape") if k not in members]
        labels = [k for k in NPZ_LABEL_KEYS if k in members]
        if missing or not labels:
            wanted = missing + ([] if labels else ["y"])
            raise TabularError(None, f".npz without {', '.join(wanted)}: it must hold a "
                               "CSR matrix as scipy.sparse.save_npz writes it (data, "
                               "indices, indptr, shape, format) and the labels under y "
                               f"(keys found: {', '.join(sorted(members)) or 'none'})")
        if len(labels) > 1:
            raise TabularError(None, f".npz holds labels under {' and '.join(labels)}: "
                               "keep one")
        unknown = sorted(set(members) - NPZ_KEYS)
        if unknown:
            raise TabularError(None, f".npz keys {', '.join(unknown)} are not read: "
                               f"expected {', '.join(sorted(NPZ_KEYS))}")
        arrays = NpzArrays(archive, members)
        if "format" in members:
            fmt = arrays.read("format", 1, kinds="US").item()
            fmt = fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else str(fmt)
            if fmt != "csr":
                raise TabularError(None, f".npz format {fmt!r}: only csr is read "
                                   "(X.tocsr() before save_npz)", column="format")
        shape = arrays.read("shape", 2, kinds="iu")
        if shape.shape != (2,) or (shape < 0).any():
            raise TabularError(None, ".npz shape must be two non-negative integers",
                               column="shape")
        n_rows, n_columns = int(shape[0]), int(shape[1])
        if n_columns > limits.max_features:
            raise TabularError(None, f"{n_columns} columns exceed max_features "
                               f"({limits.max_features})", column="shape")
        nnz = arrays.length("data")
        check(n_rows, nnz)  # before any array of that size is read
        indptr = arrays.read("indptr", n_rows + 1, kinds="iu").astype(np.int64)
        if indptr.shape != (n_rows + 1,):
            raise TabularError(None, f".npz indptr has {indptr.shape[0]} entries for "
                               f"{n_rows} rows (rows + 1 expected)", column="indptr")
        data = arrays.read("data", nnz, kinds="iuf").astype(np.float64, copy=False)
        indices = arrays.read("indices", nnz, kinds="iu")
        y = arrays.read(labels[0], n_rows, kinds="iuf").astype(np.float64, copy=False)
        names = None
        if "feature_names" in members:
            raw_names = arrays.read("feature_names", n_columns, kinds="US")
            names = [str(n) for n in raw_names.tolist()]
            if raw_names.ndim != 1 or len(names) != n_columns:
                raise TabularError(None, f".npz feature_names has {len(names)} names "
                                   f"for {n_columns} columns", column="feature_names")
            check_names(names, limits, ".npz feature_names")
    data, indices = check_csr(data, indices, indptr, y, n_columns, labels[0])
    blocks = Blocks()
    blocks.check_classes(y, limits, lambda i: (None, i + 1))
    blocks.add(data, indices, np.diff(indptr), y)
    return blocks.dataset(n_columns, sha256, bytes_read, "npz", names)


class NpzArrays:
    """Members of an .npz read one at a time; each one's header is checked (kind, size)
    before its data is read, and object (pickled) arrays are refused."""

    def __init__(self, archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo]) -> None:
        self.archive = archive
        self.members = members

    def _header(self, key: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        with self.archive.open(self.members[key]) as handle:
            try:
                version = np.lib.format.read_magic(handle)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise TabularError(None, f".npz member {key!r} is not a NumPy array: "
                                   f"{exc}", column=key) from None
        return shape, dtype

    def length(self, key: str) -> int:
        shape, _ = self._header(key)
        return int(np.prod(shape)) if shape else 1

    def read(self, key: str, most: int, kinds: str) -> np.ndarray:
        shape, dtype = self._header(key)
        count = int(np.prod(shape)) if shape else 1
        if dtype.kind not in kinds or dtype.hasobject:
            raise TabularError(None, f".npz {key} has dtype {dtype}: expected "
                               f"{_KIND_WORDS[kinds]}", column=key)
        if count > most or len(shape) > 1:
            raise TabularError(None, f".npz {key} has shape {tuple(shape)}: at most "
                               f"{most} values in one dimension expected", column=key)
        with self.archive.open(self.members[key]) as handle:
            try:
                array: np.ndarray = np.lib.format.read_array(handle, allow_pickle=False)
                return array
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise TabularError(None, f".npz member {key!r} is damaged: {exc}",
                                   column=key) from None


_KIND_WORDS = {"US": "text", "iu": "integers", "iuf": "numbers"}


def check_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, y: np.ndarray,
              n_columns: int, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    """The CSR arrays checked (422 naming the first bad row) with indices sorted within
    rows; data and indices as stored."""
    n_rows = indptr.shape[0] - 1
    if y.shape != (n_rows,):
        raise TabularError(None, f".npz {label_key} has {y.shape[0]} labels for {n_rows} "
                           "rows", column=label_key)
    if indices.shape != data.shape:
        raise TabularError(None, f".npz has {indices.shape[0]} indices for "
                           f"{data.shape[0]} values", column="indices")
    if indptr[0] != 0 or indptr[-1] != data.shape[0]:
        raise TabularError(None, f".npz indptr must start at 0 and end at {data.shape[0]} "
                           "(the number of values)", column="indptr")
    steps = np.diff(indptr)
    if (steps < 0).any():
        row = int(np.flatnonzero(steps < 0)[0]) + 1
        raise TabularError(None, f"row {row}: indptr decreases", row=row, column="indptr")
    rows_of = np.repeat(np.arange(1, n_rows + 1), steps)  # 1-based row of each entry
    bad = (indices < 0) | (indices >= n_columns)
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise TabularError(None, f"row {rows_of[at]}: column index {int(indices[at])} is "
                           f"outside [0, {n_columns})", row=int(rows_of[at]),
                           column="indices")
    finite = np.isfinite(data)
    if not finite.all():
        at = int(np.flatnonzero(~finite)[0])
        raise TabularError(None, f"row {rows_of[at]}, column {int(indices[at]) + 1}: value "
                           f"{float(data[at])} is NaN or infinite", row=int(rows_of[at]),
                           column=str(int(indices[at]) + 1))
    if not np.isfinite(y).all():
        row = int(np.flatnonzero(~np.isfinite(y))[0]) + 1
        raise TabularError(None, f"row {row}: label {float(y[row - 1])} is NaN or infinite",
                           row=row, column=label_key)
    indices = indices.astype(np.int32)
    order = np.lexsort((indices, rows_of))
    if (order != np.arange(order.shape[0])).any():
        indices, data = indices[order], data[order]
    same = (np.diff(indices) == 0) & (np.diff(rows_of) == 0)
    if same.any():
        at = int(np.flatnonzero(same)[0])
        raise TabularError(None, f"row {rows_of[at]}: column index {int(indices[at])} "
                           "appears twice", row=int(rows_of[at]), column="indices")
    return np.ascontiguousarray(data), np.ascontiguousarray(indices)
