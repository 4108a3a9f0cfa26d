"""What the tabular readers of solvers/tabular.py (CSV / TSV, Parquet) and
solvers/tabular_npz.py (.npz) share: their errors, the label-column and column-name rules,
the finite-value check, and the CSR pieces a dataset is assembled from."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from solvers.svmlight import ParsedDataset, ParseLimits, SvmlightError


class TabularError(SvmlightError):
    """Malformed CSV / TSV / Parquet / .npz input. `line` (CSV/TSV only) is the file's
    1-based line; `row` the 1-based data row; `column` the column's name (or key)."""

    def __init__(self, line: int | None, reason: str, row: int | None = None,
                 column: str | None = None) -> None:
        super().__init__(line, reason)
        self.row = row
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.line, self.reason, self.row, self.column))


class MissingExtra(RuntimeError):
    """The format needs an optional package that is not installed."""

    def __init__(self, fmt: str, package: str, extra: str) -> None:
        super().__init__(f"{fmt} uploads need the optional package {package}: "
                         f"pip install 'hinge[{extra}]'")
        self.format = fmt
        self.package = package
        self.extra = extra


def column_label(label_column: str | None, names: list[str], where: str) -> int:
    """The position of the label column among `names` (see the module's rules)."""
    if label_column is None:
        matches = [i for i, name in enumerate(names) if name.lower() == "label"]
        if len(matches) == 1:
            return matches[0]
        shown = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise TabularError(1 if where == "header" else None,
                           f"no column named 'label' in the {where} ({shown}): say which "
                           "column holds the labels with label_column=<name or 0-based "
                           "position>")
    if label_column in names:
        return names.index(label_column)
    try:
        position = int(label_column)
    except ValueError:
        raise TabularError(1 if where == "header" else None,
                           f"label_column {label_column!r} is not a column of the {where} "
                           f"({', '.join(repr(n) for n in names[:20])})") from None
    if not -len(names) <= position < len(names):
        raise TabularError(None, f"label_column {position} is out of range: the {where} "
                           f"has {len(names)} columns (0-based positions)")
    return position % len(names)


def check_names(names: list[str], limits: ParseLimits, where: str) -> None:
    if len(names) < 1:
        raise TabularError(1, f"the {where} names no columns")
    if len(names) - 1 > limits.max_features:
        raise TabularError(1, f"{len(names) - 1} feature columns exceed max_features "
                           f"({limits.max_features})")
    seen: set[str] = set()
    for position, name in enumerate(names):
        if not name:
            hint = (" (pandas writes its index so: to_csv(..., index=False))"
                    if position == 0 else "")
            raise TabularError(1, f"column {position + 1} of the {where} has no name{hint}")
        if name in seen:
            raise TabularError(1, f"column name {name!r} appears twice in the {where}")
        seen.add(name)


class Blocks:
    """CSR pieces appended block by block, joined once at the end."""

    def __init__(self) -> None:
        self.data: list[np.ndarray] = []
        self.indices: list[np.ndarray] = []
        self.row_nnz: list[np.ndarray] = []
        self.y: list[np.ndarray] = []
        self.rows = 0
        self.nnz = 0
        self.classes: set[float] = set()

    def add_dense(self, X: np.ndarray, y: np.ndarray) -> None:
        rows, columns = np.nonzero(X)  # row-major: indices sorted within each row
        self.add(X[rows, columns], columns.astype(np.int32),
                 np.bincount(rows, minlength=X.shape[0]).astype(np.int64), y)

    def add(self, data: np.ndarray, indices: np.ndarray, row_nnz: np.ndarray,
            y: np.ndarray) -> None:
        self.data.append(np.asarray(data, dtype=np.float64))
        self.indices.append(np.asarray(indices, dtype=np.int32))
        self.row_nnz.append(row_nnz)
        self.y.append(np.asarray(y, dtype=np.float64))
        self.rows += int(y.shape[0])
        self.nnz += int(data.shape[0])

    def check_classes(self, y: np.ndarray, limits: ParseLimits,
                      row_of: Callable[[int], tuple[int | None, int]]) -> None:
        if limits.max_classes is None:  # no limit: regression targets
            return
        new = set(np.unique(y).tolist()) - self.classes
        if len(self.classes) + len(new) <= limits.max_classes:
            self.classes |= new
            return
        seen = set(self.classes)
        for i, label in enumerate(y.tolist()):
            seen.add(label)
            if len(seen) > limits.max_classes:
                line, row = row_of(i)
                raise TabularError(line, f"row {row}: more than max_classes "
                                   f"({limits.max_classes}) distinct labels", row=row)

    def dataset(self, n_features: int, sha256: str, bytes_read: int, fmt: str,
                names: list[str] | None) -> ParsedDataset:
        if self.rows == 0:
            raise SvmlightError(None, "no data rows")
        indptr = np.zeros(self.rows + 1, dtype=np.int64)
        np.cumsum(np.concatenate(self.row_nnz), out=indptr[1:])
        return ParsedDataset(
            data=np.concatenate(self.data), indices=np.concatenate(self.indices),
            indptr=indptr, y=np.concatenate(self.y), n_features=n_features,
            sha256=sha256, bytes_read=bytes_read, source_format=fmt, feature_names=names)


def row_at(first: int, i: int) -> tuple[int | None, int]:
    return None, first + i


def check_finite(table: np.ndarray, names: list[str], first_row: int) -> None:
    finite = np.isfinite(table)
    if finite.all():
        return
    row, column = (int(v) for v in np.argwhere(~finite)[0])
    what = "missing value (NaN)" if np.isnan(table[row, column]) else "infinite value"
    raise TabularError(None, f"row {first_row + row}, column {names[column]!r}: {what}",
                       row=first_row + row, column=names[column])
