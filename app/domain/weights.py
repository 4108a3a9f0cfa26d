"""Instance weights: one number w_i >= 0 per row of a dataset (C_i = C * w_i * class weight).

At upload, `weight_column` names the column that holds them: a header name for CSV, TSV,
Parquet and .npz uploads with feature names, a 1-based feature index for svmlight (the
feature is taken out and the later features' indices move down by one: put the weight
last to keep the others' indices). The column leaves the features; a row without a value
in it (a zero, not stored) has weight 0 and is left out of every weighted fit. The weights
are stored with the dataset's arrays (`w` in its blob; older datasets have none) and
summarised in its `weight_stats`.

A job says `sample_weight`: "dataset" (the default: the dataset's weights, when it has
them), "none" (unweighted), or a list of one weight per row (this job only).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

from app.domain.errors import Invalid
from solvers.svmlight import ParsedDataset

DATASET, NONE = "dataset", "none"


def check_weights(w: np.ndarray, rows: int, field: str) -> np.ndarray:
    """The weights as float64; 422 unless one finite number >= 0 per row, some > 0."""
    w = np.asarray(w, dtype=np.float64).reshape(-1)
    if w.shape[0] != rows:
        raise Invalid(f"{field}: {w.shape[0]} weights for {rows} rows; give one per row",
                      {"weights": int(w.shape[0]), "rows": rows}, field=field)
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        raise Invalid(f"{field}: weight of row {int(bad[0])} (0-based) is {w[bad[0]]!r}; "
                      f"weights must be finite numbers >= 0 ({bad.size} row(s) are not)",
                      {"row": int(bad[0]), "bad_rows": int(bad.size)}, field=field)
    if not np.any(w > 0):
        raise Invalid(f"{field}: every weight is 0; at least one row needs a positive weight",
                      field=field)
    return w


def weight_stats(w: np.ndarray) -> dict[str, Any]:
    """What a dataset's summary says of its weights."""
    return {"min": float(w.min()), "max": float(w.max()), "mean": float(w.mean()),
            "sum": float(w.sum()), "zeros": int(np.sum(w == 0))}


def _column_index(parsed: ParsedDataset, column: str) -> int:
    """The 0-based stored column of `column` (a header name; svmlight: a 1-based index)."""
    if parsed.feature_names is not None:
        if column in parsed.feature_names:
            return parsed.feature_names.index(column)
        raise Invalid(f"weight_column: no column {column!r} among the features "
                      f"({', '.join(parsed.feature_names[:20])}"
                      f"{', ...' if len(parsed.feature_names) > 20 else ''})",
                      field="weight_column")
    try:
        index = int(column)
    except ValueError:
        raise Invalid(f"weight_column: {column!r} is not a feature index; a file without "
                      "column names (svmlight) names its weight feature by its 1-based "
                      "index", field="weight_column") from None
    if not 1 <= index <= parsed.n_features:
        raise Invalid(f"weight_column: feature {index} is not in 1..{parsed.n_features}",
                      field="weight_column")
    return index - 1


def take_weight_column(parsed: ParsedDataset, column: str) -> tuple[ParsedDataset, np.ndarray]:
    """The dataset without its weight column, and the weights (checked: check_weights)."""
    j = _column_index(parsed, column)
    X = sp.csr_matrix((parsed.data, parsed.indices, parsed.indptr),
                      shape=(parsed.n_samples, parsed.n_features))
    w = check_weights(np.asarray(X[:, j].todense()).reshape(-1), parsed.n_samples,
                      "weight_column")
    keep = np.ones(parsed.indices.shape[0], dtype=bool)
    keep[parsed.indices == j] = False
    rows = np.repeat(np.arange(parsed.n_samples), np.diff(parsed.indptr))
    counts = np.bincount(rows[keep], minlength=parsed.n_samples)
    indices = parsed.indices[keep]
    indices = np.where(indices > j, indices - 1, indices).astype(parsed.indices.dtype)
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(parsed.indptr.dtype)
    names = (None if parsed.feature_names is None
             else [n for i, n in enumerate(parsed.feature_names) if i != j])
    n_features = parsed.n_features - 1
    if parsed.feature_names is None:  # svmlight: the largest index left
        n_features = int(indices.max()) + 1 if indices.size else 0
    return dataclasses.replace(parsed, data=parsed.data[keep], indices=indices,
                               indptr=indptr, n_features=n_features,
                               feature_names=names), w


def job_weights(asked: str | Sequence[float], rows: int, has_weights: bool
                ) -> str | list[float] | None:
    """What a job stores of its weights: "dataset", a list, or None (unweighted)."""
    if isinstance(asked, str):
        return DATASET if asked == DATASET and has_weights else None
    values = [float(v) for v in asked]
    check_weights(np.asarray(values), rows, "sample_weight")
    return values
