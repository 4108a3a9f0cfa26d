"""Input validation and coercion, done once before any solver: X as CSR arrays, y as
labels and sorted classes, class weights as per-example costs.

Every message says how to fix the input; the solvers trust what passes here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers.backbone import CsrArrays
from solvers.params import ParamError, label_key


@dataclass(frozen=True)
class TrainingSet:
    """A validated training set: X, its classes and the cost of every class; for a
    regression or outlier task (params.FORMULATIONS) no classes (`classes` empty,
    `class_cost` = [C]) and the targets in `targets`; `sample_weight` the per-row weights
    (None: all 1)."""

    X: CsrArrays
    classes: np.ndarray  # sorted distinct labels, float64
    label_index: np.ndarray  # (n_rows,) index into classes
    class_cost: np.ndarray  # (n_classes,) C * class_weight[class]
    targets: np.ndarray | None = None  # (n_rows,) float64: regression targets
    sample_weight: np.ndarray | None = None  # (n_rows,) float64 >= 0

    @property
    def n_classes(self) -> int:
        return int(self.classes.shape[0])

    def weights(self) -> np.ndarray:
        """The per-row weights (ones when none were given)."""
        if self.sample_weight is None:
            return np.ones(self.X.n_rows)
        return self.sample_weight


def training_set(X: Any, y: Any, applied: Mapping[str, Any], sample_weight: Any = None,
                 task: str = "classification", keep_float32: bool = False) -> TrainingSet:
    """X, y, the applied parameters (C, class_weight) and the optional per-row weights
    as a TrainingSet, or ValueError. `task` (params.task_of): "classification" (y are
    class labels, at least two), "regression" (y real targets) or "outlier" (y is
    ignored and may be None). `keep_float32`: as_csr_arrays's."""
    arrays = as_csr_arrays(X, keep_float32)
    weights = as_sample_weight(sample_weight, arrays.n_rows)
    cost = float(applied.get("C", 1.0))
    if task == "outlier":
        return TrainingSet(arrays, np.empty(0), np.zeros(arrays.n_rows, dtype=np.int64),
                           np.array([cost]), None, weights)
    labels = as_labels(y, arrays.n_rows)
    if task == "regression":
        return TrainingSet(arrays, np.empty(0), np.zeros(arrays.n_rows, dtype=np.int64),
                           np.array([cost]), labels, weights)
    classes, label_index = np.unique(labels, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            f"training needs at least two classes; y has only the label {classes[0]:g}"
        )
    class_weight = class_weights(classes, applied.get("class_weight"))
    return TrainingSet(arrays, classes, label_index, cost * class_weight, None, weights)


def as_sample_weight(sample_weight: Any, n_rows: int) -> np.ndarray | None:
    """Per-row weights as a float64 array (None stays None): finite, >= 0, not all 0."""
    if sample_weight is None:
        return None
    weights = np.asarray(sample_weight)
    if weights.ndim != 1 or weights.shape[0] != n_rows:
        raise ValueError(f"sample_weight must have one weight per row of X ({n_rows}); "
                         f"got shape {weights.shape}")
    if not np.issubdtype(weights.dtype, np.number) or np.iscomplexobj(weights):
        raise ValueError(f"sample_weight must be real numbers; got dtype {weights.dtype}")
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("sample_weight must be finite numbers >= 0")
    if not np.any(weights > 0):
        raise ValueError("sample_weight: every weight is 0, nothing to train on")
    return weights


def as_csr_arrays(X: Any, keep_float32: bool = False) -> CsrArrays:
    """X (SciPy sparse, or anything np.asarray makes a 2-D numeric array) as CSR arrays.

    data float64, indices int32 sorted within rows (duplicates summed), indptr int64, all
    C-contiguous; the input is never modified. With `keep_float32` (a solver whose
    registry entry `reads_float32`), sparse float32 values stay float32, the input's own
    array when it is contiguous and writeable (a compact dataset, 8 bytes a non-zero, is
    not copied to 12). Raises ValueError saying how to fix X.
    """
    if sp.issparse(X):
        matrix = X.tocsr()
    else:
        try:
            dense = np.asarray(X)
        except Exception as exc:
            raise ValueError(f"X could not be read as a matrix: {exc}") from None
        if dense.ndim != 2:
            raise ValueError(
                f"X must be 2-D (rows = examples, columns = features); got shape {dense.shape}"
            )
        if not (np.issubdtype(dense.dtype, np.number) or dense.dtype == np.bool_):
            raise ValueError(f"X must hold numbers; got dtype {dense.dtype}")
        if np.iscomplexobj(dense):
            raise ValueError("X must be real; got complex values")
        matrix = sp.csr_matrix(dense.astype(np.float64, copy=False))
    if np.iscomplexobj(matrix.data):
        raise ValueError("X must be real; got complex values")
    if not (np.issubdtype(matrix.dtype, np.number) or matrix.dtype == np.bool_):
        raise ValueError(f"X must hold numbers; got dtype {matrix.dtype}")
    n_rows, n_features = matrix.shape
    if n_rows == 0:
        raise ValueError("X has no rows; a training set needs at least two examples")
    if n_features > np.iinfo(np.int32).max:
        raise ValueError(f"X has {n_features} columns; at most 2**31 - 1 are supported")
    _check_csr_structure(matrix)
    if not matrix.has_canonical_format:
        matrix = matrix.copy()
        matrix.sum_duplicates()  # also sorts the indices of every row
    value_dtype = np.float32 if keep_float32 and matrix.data.dtype == np.float32 else (
        np.float64)
    data = np.require(matrix.data, value_dtype, ["C", "A", "W"])
    if not _all_finite(data):
        row = int(np.searchsorted(matrix.indptr, np.flatnonzero(~np.isfinite(data))[0], "right"))
        raise ValueError(
            f"X contains NaN or infinity (first in row {row - 1}); remove or impute those values"
        )
    indices = np.require(matrix.indices, np.int32, ["C", "A", "W"])
    indptr = np.require(matrix.indptr, np.int64, ["C", "A", "W"])
    return CsrArrays(data, indices, indptr, int(n_features))


def as_float64(X: CsrArrays) -> CsrArrays:
    """X with float64 values: X itself when they are, else a float64 copy of its values
    (for a solver that does not read float32, SolverSpec.reads_float32)."""
    if X.data.dtype == np.float64:
        return X
    return X._replace(data=np.ascontiguousarray(X.data, dtype=np.float64))


_FINITE_CHUNK = 1 << 20


def _all_finite(data: np.ndarray) -> bool:
    """Whether every value is finite, checked a chunk at a time (no nnz-sized mask)."""
    return all(bool(np.isfinite(data[start:start + _FINITE_CHUNK]).all())
               for start in range(0, data.shape[0], _FINITE_CHUNK))


def _check_csr_structure(matrix: sp.csr_matrix | sp.csr_array) -> None:
    # The kernels do not check bounds: a malformed CSR must be refused here.
    n_rows, n_features = matrix.shape
    indptr, indices = matrix.indptr, matrix.indices
    if indptr.shape != (n_rows + 1,) or indptr[0] != 0 or indptr[-1] != indices.shape[0]:
        raise ValueError("X is a malformed CSR matrix (indptr does not match its rows/nnz)")
    if indices.shape[0] != matrix.data.shape[0] or np.any(np.diff(indptr) < 0):
        raise ValueError("X is a malformed CSR matrix (indptr is not non-decreasing)")
    if indices.shape[0] and (indices.min() < 0 or indices.max() >= n_features):
        raise ValueError("X is a malformed CSR matrix (a column index is out of range)")


def as_labels(y: Any, n_rows: int) -> np.ndarray:
    """y as a 1-D float64 array of finite class values, one per row of X."""
    labels = np.asarray(y)
    if labels.ndim != 1:
        hint = "; pass y.ravel()" if labels.ndim == 2 and 1 in labels.shape else ""
        raise ValueError(f"y must be 1-D (one label per row); got shape {labels.shape}{hint}")
    if not (np.issubdtype(labels.dtype, np.number) or labels.dtype == np.bool_) or (
        np.iscomplexobj(labels)
    ):
        raise ValueError(f"class labels must be real numbers; got dtype {labels.dtype}")
    labels = labels.astype(np.float64)
    if labels.shape[0] != n_rows:
        raise ValueError(f"y has {labels.shape[0]} labels but X has {n_rows} rows")
    if not np.all(np.isfinite(labels)):
        raise ValueError("y contains NaN or infinity; every label must be a finite number")
    return labels


def class_weights(classes: np.ndarray, given: Mapping[str, float] | None) -> np.ndarray:
    """Per-class multiplier of C, in the order of `classes` (keys are params.label_key)."""
    keys = [label_key(float(c)) for c in classes]
    given = dict(given or {})
    unknown = sorted(set(given) - set(keys))
    if unknown:
        raise ParamError(
            f"class_weight names label(s) {', '.join(unknown)}, not a class of y "
            f"(classes: {', '.join(keys)})",
            "class_weight",
        )
    return np.array([given.get(key, 1.0) for key in keys], dtype=np.float64)
