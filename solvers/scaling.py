"""Feature scaling that travels with a model: fit on the training rows, apply at predict time.

Three methods, each a per-feature map fitted on the training CSR matrix:

- ``minmax``: LIBSVM's ``svm-scale``. Feature j goes from ``[min_j, max_j]`` (over all
  training rows, implicit zeros included) to ``[lower, upper]``, default ``[-1, 1]``:
  ``v -> lower`` if ``v == min_j``, ``v -> upper`` if ``v == max_j``, else
  ``lower + (upper - lower) * (v - min_j) / (max_j - min_j)``; exactly svm-scale.c's
  ``output()``, same operations in the same order, so the doubles are svm-scale's before it
  prints them with ``%g``. Values outside the training range are extrapolated, not clipped
  (svm-scale does the same).
- ``maxabs``: ``v -> v / max_j |x_j|``. Zero stays zero, so the sparsity pattern is kept
  exactly.
- ``standard``: ``v -> (v - mean_j) / std_j`` (population std, ddof = 0). Every zero of
  a feature with a non-zero mean becomes non-zero, so the output is dense: ``fit_scaler``
  refuses training matrices with fewer than half their entries stored
  (``nnz < STANDARD_MIN_DENSITY * n_rows * n_features``), so that the scaled matrix holds
  at most twice the entries of the one it came from. Use ``maxabs`` for sparse data.

The sparsity cost of ``minmax``: a zero maps to ``lower + (upper-lower)*(0-min)/(max-min)``,
which is non-zero unless ``min_j == 0 and lower == 0`` (or ``max_j == 0 and upper == 0``).
With the default ``[-1, 1]`` every non-negative sparse feature (min 0) becomes dense
(svm-scale warns about this and suggests ``-l 0``); ``[0, 1]`` keeps the zeros of such
features. ``Scaler.zero_image()`` says, per feature, what a zero becomes.

Constant features (``min_j == max_j`` in training; for maxabs an all-zero column; for
standard ``std_j == 0``) are dropped: their output is 0 whatever the input. This is what
svm-scale does ("skip single-valued attribute": it never writes them) and what libsvm's
Python ``commonutil.csr_scale`` does (coef 0, offset 0).

Features the training data did not have (index >= ``n_features``) output 0, and the
result has ``n_features`` columns: this is svm-scale's rule since it warns "feature index
%d appeared in file %s was not seen in the scaling factor file %s. The feature is scaled
to 0." (svm-scale.c, restore pass: such features get min = max = 0; checked with the
Debian svm-scale 3.24 binary). Older svm-scale versions scaled them with the min/max of
the file being scaled, which makes a row's output depend on its batch; libsvm's Python
``commonutil.csr_scale`` raises on a dimension mismatch (``ndarray.resize`` of a
referenced array).

The range file (``svm-scale -s``): ``x``, then ``lower upper``, then ``index min max`` for
every non-constant feature, 1-based, in increasing order; an optional leading ``y`` section
(``y``, ``y_lower y_upper``, ``y_min y_max``) scales regression targets and is read and
ignored here. svm-scale prints numbers with ``%.16g``; we print ``%.16g`` too when it reads
back to the same double, and ``%.17g`` otherwise, so the file is svm-scale's byte for byte
when svm-scale's is exact, and always lossless (svm-scale reads either with ``%lf``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp
from numba import njit

from solvers.params import STANDARD_MIN_DENSITY  # one limit: the API checks it too

ScalingMethod = Literal["minmax", "maxabs", "standard"]
METHODS: tuple[str, ...] = ("minmax", "maxabs", "standard")
ARRAYS_FORMAT_VERSION = 1

_RULE_MINMAX = 0
_RULE_MAXABS = 1
_RULE_STANDARD = 2
_RULES = {"minmax": _RULE_MINMAX, "maxabs": _RULE_MAXABS, "standard": _RULE_STANDARD}


class ScalingError(ValueError):
    """A scaler cannot be fitted, applied, exported or read as asked; the message says why."""


# ---- kernels ----------------------------------------------------------------------------


@njit(cache=True)
def _scaled_value(rule, value, first, second, lower, upper):  # pragma: no cover - jitted
    """One value of one feature. minmax: (first, second) = (min, max), svm-scale's output();
    maxabs: first = max |x|; standard: (first, second) = (mean, std). Constant -> 0."""
    if rule == _RULE_MINMAX:
        if first == second:
            return 0.0
        if value == first:
            return lower
        if value == second:
            return upper
        return lower + (upper - lower) * (value - first) / (second - first)
    if rule == _RULE_MAXABS:
        if first == 0.0:
            return 0.0
        return value / first
    if second == 0.0:
        return 0.0
    return (value - first) / second


@njit(cache=True)
def _zero_image_kernel(rule, first, second, lower, upper):  # pragma: no cover - jitted
    out = np.empty(first.shape[0])
    # out = scale(zeros(d))
    for j in range(first.shape[0]):
        out[j] = _scaled_value(rule, 0.0, first[j], second[j], lower, upper)
    return out


@njit(cache=True)
def _transform_kernel(
    matrix, rule, feature_params, lower, upper, fill_columns, out
):  # pragma: no cover - jitted
    """Scale CSR rows (sorted, unique indices) into `out` = (indptr, indices, data), sized
    for nnz + n_rows * len(fill_columns) entries; returns the number written.

    matrix = (indptr, indices, data); feature_params = (first, second, zero_image).
    Row by row, the stored entries are merged with `fill_columns` (features whose zero
    scales to a non-zero), so implicit zeros of those features are written too; results
    equal to 0 are not stored (svm-scale prints only non-zeros)."""
    indptr, indices, data = matrix
    first, second, zero_image = feature_params
    out_indptr, out_indices, out_data = out
    n_features = first.shape[0]
    n_fill = fill_columns.shape[0]
    sentinel = np.iinfo(np.int64).max
    pos = 0
    out_indptr[0] = 0
    # out[r] = scale(dense(X[r]))[nonzero] for every row r
    for row in range(indptr.shape[0] - 1):
        p = indptr[row]
        end = indptr[row + 1]
        q = 0
        while p < end or q < n_fill:
            stored = np.int64(indices[p]) if p < end else sentinel
            filled = np.int64(fill_columns[q]) if q < n_fill else sentinel
            if filled < stored:
                column = filled
                value = zero_image[column]
                q += 1
            else:
                column = stored
                if column < n_features:
                    value = _scaled_value(
                        rule, data[p], first[column], second[column], lower, upper
                    )
                else:
                    value = 0.0
                p += 1
                if filled == stored:
                    q += 1
            if value != 0.0:
                out_indices[pos] = column
                out_data[pos] = value
                pos += 1
        out_indptr[row + 1] = pos
    return pos


# ---- the scaler -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Scaler:
    """A fitted per-feature scaling (see the module docstring for each method's map).

    feature_min / feature_max: training min and max of each feature, implicit zeros
    included (all methods record them; minmax and maxabs use them). mean / std: standard
    only (None otherwise). lower / upper: the minmax target range; maxabs maps into
    [-1, 1] and records that; standard has no range (None).
    """

    method: ScalingMethod
    lower: float | None
    upper: float | None
    feature_min: np.ndarray
    feature_max: np.ndarray
    mean: np.ndarray | None = None
    std: np.ndarray | None = None

    @property
    def n_features(self) -> int:
        return int(self.feature_min.shape[0])

    @property
    def constant(self) -> np.ndarray:
        """Features dropped (output 0) because they carry no information in training."""
        first, second = self._feature_params()
        if self.method == "minmax":
            return np.asarray(first == second)
        if self.method == "maxabs":
            return np.asarray(first == 0.0)
        return np.asarray(second == 0.0)

    def zero_image(self) -> np.ndarray:
        """What a zero of each feature becomes; non-zero entries are the sparsity cost."""
        first, second = self._feature_params()
        return np.asarray(_zero_image_kernel(_RULES[self.method], first, second, *self._range()))

    def transform(self, X: Any) -> sp.csr_matrix:
        """Scale the rows of X (CSR, or anything scipy turns into CSR) into a new CSR with
        ``n_features`` columns. Features of X beyond ``n_features`` output 0 (svm-scale);
        X with fewer columns is fine (its missing features are zeros, scaled as zeros)."""
        matrix = _as_canonical_csr(X, "X")
        first, second = self._feature_params()
        zero_image = self.zero_image()
        fill_columns = np.flatnonzero(zero_image != 0.0).astype(np.int64)
        n_rows = matrix.shape[0]
        capacity = matrix.nnz + n_rows * fill_columns.shape[0]
        out_indptr = np.empty(n_rows + 1, dtype=np.int64)
        out_indices = np.empty(capacity, dtype=np.int32)
        out_data = np.empty(capacity, dtype=np.float64)
        written = _transform_kernel(
            (matrix.indptr, matrix.indices, matrix.data),
            _RULES[self.method],
            (first, second, zero_image),
            *self._range(),
            fill_columns,
            (out_indptr, out_indices, out_data),
        )
        return sp.csr_matrix(
            (out_data[:written].copy(), out_indices[:written].copy(), out_indptr),
            shape=(n_rows, self.n_features),
        )

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, meta) to store beside a model: float64 arrays and a JSON-ready dict."""
        arrays = {"feature_min": self.feature_min.copy(), "feature_max": self.feature_max.copy()}
        if self.mean is not None and self.std is not None:
            arrays["mean"] = self.mean.copy()
            arrays["std"] = self.std.copy()
        meta = {
            "format_version": ARRAYS_FORMAT_VERSION,
            "method": self.method,
            "lower": self.lower,
            "upper": self.upper,
            "n_features": self.n_features,
        }
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> Scaler:
        """The inverse of `to_arrays`, validated: a stored scaler that does not hold together
        is refused rather than applied."""
        if meta.get("format_version") != ARRAYS_FORMAT_VERSION:
            raise ScalingError(
                f"stored scaler has format_version {meta.get('format_version')!r}; "
                f"this code reads version {ARRAYS_FORMAT_VERSION}"
            )
        method = meta.get("method")
        if method not in METHODS:
            raise ScalingError(f"stored scaler has unknown method {method!r}; one of {METHODS}")
        n_features = int(meta["n_features"])
        wanted = ["feature_min", "feature_max"] + (["mean", "std"] if method == "standard" else [])
        loaded: dict[str, np.ndarray] = {}
        for name in wanted:
            if name not in arrays:
                raise ScalingError(f"stored {method} scaler lacks the array {name!r}")
            array = np.ascontiguousarray(arrays[name], dtype=np.float64)
            if array.shape != (n_features,) or not np.all(np.isfinite(array)):
                raise ScalingError(
                    f"stored scaler array {name!r} must hold {n_features} finite values, "
                    f"has shape {array.shape}"
                )
            loaded[name] = array
        if np.any(loaded["feature_min"] > loaded["feature_max"]):
            raise ScalingError("stored scaler has a feature with min > max")
        lower, upper = meta.get("lower"), meta.get("upper")
        if method == "standard":
            if np.any(loaded["std"] < 0):
                raise ScalingError("stored scaler has a negative std")
            return cls("standard", None, None, **loaded)
        _check_range(lower, upper)
        return cls(method, float(lower), float(upper), **loaded)  # type: ignore[arg-type]

    def _feature_params(self) -> tuple[np.ndarray, np.ndarray]:
        if self.method == "minmax":
            return self.feature_min, self.feature_max
        if self.method == "maxabs":
            max_abs = np.maximum(-self.feature_min, self.feature_max)
            return max_abs, max_abs
        assert self.mean is not None and self.std is not None
        return self.mean, self.std

    def _range(self) -> tuple[float, float]:
        if self.lower is None or self.upper is None:
            return 0.0, 0.0  # standard: the kernel does not read them
        return self.lower, self.upper


def fit_scaler(
    X: Any, method: ScalingMethod = "minmax", lower: float = -1.0, upper: float = 1.0
) -> Scaler:
    """Fit a scaler on the training rows X (CSR, or anything scipy turns into CSR).

    lower / upper: the minmax target range (svm-scale's -l / -u); maxabs always maps into
    [-1, 1] and standard has no range, so for them the arguments must stay at their
    defaults. Raises ScalingError for an empty matrix, non-finite values, lower >= upper,
    or ``standard`` on a matrix with fewer than STANDARD_MIN_DENSITY of its entries stored.
    """
    if method not in METHODS:
        raise ScalingError(f"method must be one of {METHODS}, not {method!r}")
    matrix = _as_canonical_csr(X, "X")
    if matrix.shape[0] == 0:
        raise ScalingError("cannot fit a scaler on zero rows")
    if not np.all(np.isfinite(matrix.data)):
        raise ScalingError("X holds NaN or infinite values; a scaler needs finite data")
    feature_min = np.asarray(matrix.min(axis=0).toarray(), dtype=np.float64).ravel()
    feature_max = np.asarray(matrix.max(axis=0).toarray(), dtype=np.float64).ravel()
    feature_min = np.ascontiguousarray(feature_min)
    feature_max = np.ascontiguousarray(feature_max)
    if method == "minmax":
        _check_range(lower, upper)
        return Scaler("minmax", float(lower), float(upper), feature_min, feature_max)
    if (lower, upper) != (-1.0, 1.0):
        raise ScalingError(
            f"lower/upper set the minmax range only; {method} takes no range "
            f"(got lower={lower}, upper={upper}); use method='minmax' for a custom range"
        )
    if method == "maxabs":
        return Scaler("maxabs", -1.0, 1.0, feature_min, feature_max)
    mean, std = _mean_std(matrix)
    return Scaler("standard", None, None, feature_min, feature_max, mean, std)


def _mean_std(matrix: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    n_rows, n_features = matrix.shape
    density = matrix.nnz / (n_rows * n_features) if n_features else 1.0
    if density < STANDARD_MIN_DENSITY:
        raise ScalingError(
            f"standard scaling would densify this sparse matrix: only {density:.1%} of its "
            f"entries are stored, and (x - mean) / std turns every zero of a feature with a "
            f"non-zero mean into a stored value (the limit is {STANDARD_MIN_DENSITY:.0%}, so "
            "that scaling at most doubles the data); use method='maxabs', which keeps zeros, "
            "or 'minmax' with lower=0"
        )
    counts = np.bincount(matrix.indices, minlength=n_features)
    mean = np.bincount(matrix.indices, weights=matrix.data, minlength=n_features) / n_rows
    centred = matrix.data - mean[matrix.indices]
    # var_j = (sum over stored (x - mean)^2 + (number of implicit zeros) * mean^2) / n
    squares = np.bincount(matrix.indices, weights=centred * centred, minlength=n_features)
    variance = (squares + (n_rows - counts) * mean * mean) / n_rows
    return np.ascontiguousarray(mean), np.ascontiguousarray(np.sqrt(variance))


def _check_range(lower: Any, upper: Any) -> None:
    if lower is None or upper is None or not (np.isfinite(lower) and np.isfinite(upper)):
        raise ScalingError(f"lower and upper must be finite numbers, got {lower!r}, {upper!r}")
    if not lower < upper:
        raise ScalingError(f"lower must be below upper, got lower={lower}, upper={upper}")


def _as_canonical_csr(X: Any, name: str) -> sp.csr_matrix:
    """float64 CSR with sorted, unique indices (a copy only when X is not that already)."""
    try:
        matrix = sp.csr_matrix(X, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise ScalingError(f"{name} must be a 2-D sparse matrix or array: {error}") from error
    if matrix.ndim != 2:
        raise ScalingError(f"{name} must be 2-D, has shape {matrix.shape}")
    if not matrix.has_canonical_format:
        matrix = matrix.copy()
        matrix.sum_duplicates()
    matrix.indptr = np.ascontiguousarray(matrix.indptr, dtype=np.int64)
    matrix.indices = np.ascontiguousarray(matrix.indices, dtype=np.int32)
    matrix.data = np.ascontiguousarray(matrix.data, dtype=np.float64)
    return matrix


# ---- svm-scale range files --------------------------------------------------------------


def _format_number(value: float) -> str:
    """svm-scale's %.16g when it reads back exactly, else %.17g (always lossless)."""
    text = f"{value:.16g}"
    return text if float(text) == value else f"{value:.17g}"


def scaler_to_range_text(scaler: Scaler) -> str:
    """The scaler as the file ``svm-scale -s`` writes (minmax only)."""
    if scaler.method != "minmax":
        raise ScalingError(
            f"only a minmax scaler has an svm-scale range file; {scaler.method} is not a "
            "min/max map (maxabs equals svm-scale's only when min = -max for every "
            "feature), so refit with method='minmax' to export one"
        )
    assert scaler.lower is not None and scaler.upper is not None
    lines = ["x", f"{_format_number(scaler.lower)} {_format_number(scaler.upper)}"]
    for j in np.flatnonzero(scaler.feature_min != scaler.feature_max):
        low = _format_number(float(scaler.feature_min[j]))
        high = _format_number(float(scaler.feature_max[j]))
        lines.append(f"{j + 1} {low} {high}")
    return "\n".join(lines) + "\n"


def scaler_from_range_text(text: str, n_features: int | None = None) -> Scaler:
    """A minmax scaler from an ``svm-scale -s`` range file.

    Features the file does not list are constant (dropped), as they are for svm-scale on
    its training file. n_features: the model's feature count (the file only knows the
    largest non-constant index); default the largest index listed. A ``y`` section is
    read past and ignored (targets are not scaled for classification)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if lines and lines[0] == "y":
        if len(lines) < 3:
            raise ScalingError(
                "range file: the y section needs 'y_lower y_upper' and 'y_min y_max'"
            )
        lines = lines[3:]
    if not lines or lines[0] != "x":
        raise ScalingError("range file: expected a line 'x' (optionally after a y section)")
    tokens = " ".join(lines[1:]).split()
    if len(tokens) < 2 or (len(tokens) - 2) % 3:
        raise ScalingError(
            "range file: expected 'lower upper' after 'x', then 'index min max' triples"
        )
    lower, upper = _parse_float(tokens[0]), _parse_float(tokens[1])
    _check_range(lower, upper)
    triples = [tokens[k : k + 3] for k in range(2, len(tokens), 3)]
    listed: dict[int, tuple[float, float]] = {}
    for index_text, low_text, high_text in triples:
        try:
            index = int(index_text)
        except ValueError:
            raise ScalingError(
                f"range file: feature index {index_text!r} is not an integer"
            ) from None
        if index < 1:
            raise ScalingError(f"range file: feature index {index} must be >= 1 (1-based)")
        if index in listed:
            raise ScalingError(f"range file: feature {index} is listed twice")
        low, high = _parse_float(low_text), _parse_float(high_text)
        if not (np.isfinite(low) and np.isfinite(high)) or low > high:
            raise ScalingError(f"range file: feature {index} has min {low} and max {high}")
        listed[index] = (low, high)
    largest = max(listed, default=0)
    if n_features is None:
        n_features = largest
    elif n_features < largest:
        raise ScalingError(f"range file lists feature {largest} but n_features is {n_features}")
    feature_min = np.zeros(n_features)
    feature_max = np.zeros(n_features)
    for index, (low, high) in listed.items():
        feature_min[index - 1], feature_max[index - 1] = low, high
    return Scaler("minmax", lower, upper, feature_min, feature_max)


def _parse_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ScalingError(f"range file: {text!r} is not a number") from None
