"""Kernel functions on sparse CSR rows, and the servable kernel SVM model (`KernelModel`).

Kernels (codes are LIBSVM's `kernel_type` numbers, so that a stored model reads like one):

    0 linear   K(x, z) = x.z
    1 poly     K(x, z) = (gamma x.z + coef0)^degree      (integer power by squaring, as LIBSVM)
    2 rbf      K(x, z) = exp(-gamma ||x - z||^2) = exp(-gamma (||x||^2 + ||z||^2 - 2 x.z))
    3 sigmoid  K(x, z) = tanh(gamma x.z + coef0)

Every kernel is a function of the dot product x.z and the squared norms ||x||^2, ||z||^2
(precomputed once per row), so a sparse-sparse kernel value costs one sparse dot product. The
dot products are computed by scattering one row into a dense buffer of n_features float64
and gathering the other row's entries from it (`bench/smo_bench.py` measures this against a
merged walk of the two sorted index lists, which LIBSVM uses: the scatter/gather is faster on
every benchmark set, see bench/results/smo.md).

`KernelModel` is what the service stores and serves: support vectors as CSR arrays, dual
coefficients and intercepts in LIBSVM's layout (one-vs-one) or one binary model per class
(one-vs-rest). `KernelModel.to_arrays()` / `from_arrays()` give plain numeric arrays
(np.savez / np.load(allow_pickle=False)). The API imports this module for prediction: it
imports only NumPy, SciPy and Numba.

Decision values (`KernelModel.predict`, `decision_values`):
- two classes: one value per row, positive for classes[1] (the larger label, scikit-learn's
  convention); label = classes[1] when the value is >= 0 (LIBSVM's rule: its own value,
  which has the opposite sign in our class order, must be > 0 to vote for classes[0]);
- one-vs-one, k > 2 classes: k(k-1)/2 values per row in LIBSVM's pair order (0,1), (0,2),
  ..., (0,k-1), (1,2), ... over the sorted classes; a positive value votes for the pair's
  first class; the label is the class with most votes, ties to the smallest class (LIBSVM);
- one-vs-rest: k values per row, value c = "class c vs the rest"; label = argmax (ties to
  the smallest class).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from solvers._kernel_helpers import LINEAR, POLY, RBF, SIGMOID, kernel_from_dot

KERNEL_CODES: dict[str, int] = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3}
KERNEL_NAMES: dict[int, str] = {code: name for name, code in KERNEL_CODES.items()}
MULTICLASS_CODES: dict[str, int] = {"ovo": 0, "ovr": 1}
MULTICLASS_NAMES: dict[int, str] = {code: name for name, code in MULTICLASS_CODES.items()}
MODEL_FORMAT_VERSION = 1
# LIBSVM's svm_type (stored as its code; a model stored without one is c_svc)
SVM_TYPE_CODES: dict[str, int] = {"c_svc": 0, "nu_svc": 1, "one_class": 2, "epsilon_svr": 3,
                                  "nu_svr": 4}
SVM_TYPE_NAMES: dict[int, str] = {code: name for name, code in SVM_TYPE_CODES.items()}
SINGLE_OUTPUT_TYPES = ("one_class", "epsilon_svr", "nu_svr")

_LINEAR, _POLY, _RBF, _SIGMOID = LINEAR, POLY, RBF, SIGMOID
_ROWS_PER_CHUNK = 64  # prediction: rows per parallel work item


# --------------------------------------------------------------------------------------
# The model


@dataclass
class KernelModel:
    """A trained kernel SVM (C-SVC), ready to predict.

    Decision function of binary model p: f_p(x) = sum_s coef_p[s] K(sv_s, x) - rho[p], with
    coef_p[s] = y_s alpha_s of that binary problem (LIBSVM's sv_coef and rho).

    Layout (`multiclass`):
    - "ovo" (also every two-class model): exactly LIBSVM's. Support vectors are grouped by
      their class in the order of `classes` (`n_sv[c]` of class c, consecutive); pair p =
      (i, j), i < j, enumerated (0,1), (0,2), ..., (1,2), ...; its coefficients are
      sv_coef[j-1, SVs of class i] and sv_coef[i, SVs of class j]; class i is its +1 side,
      so f_p(x) > 0 votes for classes[i]. sv_coef has shape (n_classes - 1, n_SV), rho
      (n_pairs,).
    - "ovr": binary model c = "classes[c] (+1) vs the rest (-1)"; support vectors are the
      union over the models (still grouped by class, `n_sv` per class), sv_coef has shape
      (n_classes, n_SV) (zero where a vector is not a support vector of model c), rho
      (n_classes,).
    """

    classes: np.ndarray  # (n_classes,) sorted float64
    kernel: str  # "linear" | "poly" | "rbf" | "sigmoid"
    gamma: float
    degree: int
    coef0: float
    multiclass: str  # "ovo" | "ovr"
    n_features: int
    sv_data: np.ndarray  # CSR arrays of the support vectors: float64
    sv_indices: np.ndarray  # int32, sorted within rows
    sv_indptr: np.ndarray  # int64, (n_SV + 1,)
    sv_coef: np.ndarray  # float64, (n_classes - 1 or n_classes, n_SV)
    rho: np.ndarray  # float64, (n_pairs or n_classes,); intercept = -rho
    n_sv: np.ndarray  # int64, (n_classes,) support vectors per class
    sv_rows: np.ndarray  # int64, (n_SV,) row of each support vector in the training set
    # one-vs-one ties: None gives them to the smallest class; a model imported from a
    # LIBSVM file whose labels are not sorted keeps the file's order (vote_order[a]: the
    # class index of the file's a-th label), since LIBSVM gives a tie to the class listed
    # first (solvers/model_import.py)
    vote_order: np.ndarray | None = None
    # LIBSVM's svm_type. c_svc and nu_svc: the layout above. one_class, epsilon_svr and
    # nu_svr: one decision function f(x) = sum_s sv_coef[0, s] K(sv_s, x) - rho[0]
    # (n_sv = [n_SV], support vectors in training order); classes [-1, 1] for one_class
    # (label +1 inlier when f(x) > 0, else -1), none for regression (predict gives f(x))
    svm_type: str = "c_svc"
    kind: ClassVar[str] = "kernel"

    def __post_init__(self) -> None:
        self.classes = np.ascontiguousarray(self.classes, dtype=np.float64)
        self.sv_data = np.ascontiguousarray(self.sv_data, dtype=np.float64)
        self.sv_indices = np.ascontiguousarray(self.sv_indices, dtype=np.int32)
        self.sv_indptr = np.ascontiguousarray(self.sv_indptr, dtype=np.int64)
        self.sv_coef = np.ascontiguousarray(self.sv_coef, dtype=np.float64)
        self.rho = np.ascontiguousarray(self.rho, dtype=np.float64)
        self.n_sv = np.ascontiguousarray(self.n_sv, dtype=np.int64)
        self.sv_rows = np.ascontiguousarray(self.sv_rows, dtype=np.int64)
        if self.vote_order is not None:
            self.vote_order = np.ascontiguousarray(self.vote_order, dtype=np.int64)
            if np.array_equal(self.vote_order, np.arange(self.vote_order.shape[0])):
                self.vote_order = None  # the sorted order: the default
        self.gamma, self.degree, self.coef0 = float(self.gamma), int(self.degree), float(
            self.coef0)
        self.n_features = int(self.n_features)
        self._check()
        self._sv_sq_norms: np.ndarray | None = None

    @property
    def n_classes(self) -> int:
        return int(self.classes.shape[0])

    @property
    def single_output(self) -> bool:
        """One decision function and no class pairs (one_class, epsilon_svr, nu_svr)."""
        return self.svm_type in SINGLE_OUTPUT_TYPES

    @property
    def task(self) -> str:
        """classification, regression or outlier."""
        if self.svm_type == "one_class":
            return "outlier"
        return "regression" if self.single_output else "classification"

    @property
    def n_support(self) -> int:
        return int(self.sv_indptr.shape[0] - 1)

    @property
    def n_outputs(self) -> int:
        """Decision values per row: 1 (two classes), n_pairs (ovo) or n_classes (ovr)."""
        k = self.n_classes
        if k == 2 or self.single_output:
            return 1
        return k if self.multiclass == "ovr" else k * (k - 1) // 2

    @property
    def intercept(self) -> np.ndarray:
        return -self.rho

    def support_vectors(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.sv_data, self.sv_indices, self.sv_indptr),
                             shape=(self.n_support, self.n_features))

    def sv_sq_norms(self) -> np.ndarray:
        if self._sv_sq_norms is None:
            self._sv_sq_norms = row_sq_norms(self.sv_data, self.sv_indptr)
        return self._sv_sq_norms

    def predict(self, X: Any, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(labels, decision values) of the rows of X; see the module docstring for the
        layout and sign of the decision values."""
        raw = raw_decision_values(self, X, threads)
        return self._labels(raw), self._public_values(raw)

    def decision_function(self, X: Any, threads: int | None = None) -> np.ndarray:
        return self._public_values(raw_decision_values(self, X, threads))

    def _public_values(self, raw: np.ndarray) -> np.ndarray:
        if self.single_output:  # LIBSVM's value: the prediction, or > 0 for inliers
            return raw[:, 0]
        if self.n_classes == 2:
            return -raw[:, 0]  # LIBSVM's value is positive for classes[0]
        return raw

    def _labels(self, raw: np.ndarray) -> np.ndarray:
        if self.svm_type == "one_class":
            return np.where(raw[:, 0] > 0, 1.0, -1.0)
        if self.single_output:
            return raw[:, 0].copy()
        k = self.n_classes
        if k == 2:
            return np.where(raw[:, 0] > 0, self.classes[0], self.classes[1])
        if self.multiclass == "ovr":
            return self.classes[np.argmax(raw, axis=1)]
        first, second = pair_classes(k)
        winners = np.where(raw > 0, first[None, :], second[None, :])
        votes = np.zeros((raw.shape[0], k), dtype=np.int64)
        np.add.at(votes, (np.arange(raw.shape[0])[:, None], winners), 1)
        if self.vote_order is not None:  # the first maximum in the file's label order
            order = self.vote_order
            return self.classes[order[np.argmax(votes[:, order], axis=1)]]
        return self.classes[np.argmax(votes, axis=1)]  # first maximum: LIBSVM's tie rule

    # ---- storage --------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Plain numeric arrays (np.savez; load with allow_pickle=False)."""
        return {
            "format_version": np.array(MODEL_FORMAT_VERSION, dtype=np.int64),
            "classes": self.classes,
            "kernel": np.array(KERNEL_CODES[self.kernel], dtype=np.uint8),
            "gamma": np.array(self.gamma, dtype=np.float64),
            "degree": np.array(self.degree, dtype=np.int64),
            "coef0": np.array(self.coef0, dtype=np.float64),
            "multiclass": np.array(MULTICLASS_CODES[self.multiclass], dtype=np.uint8),
            "n_features": np.array(self.n_features, dtype=np.int64),
            "sv_data": self.sv_data,
            "sv_indices": self.sv_indices,
            "sv_indptr": self.sv_indptr,
            "sv_coef": self.sv_coef,
            "rho": self.rho,
            "n_sv": self.n_sv,
            "sv_rows": self.sv_rows,
            **({} if self.vote_order is None else {"vote_order": self.vote_order}),
            "svm_type": np.array(SVM_TYPE_CODES[self.svm_type], dtype=np.uint8),
        }

    @classmethod
    def from_arrays(cls, arrays: Any) -> KernelModel:
        """The inverse of to_arrays (a dict, or the NpzFile of np.load)."""
        version = int(arrays["format_version"])
        if version != MODEL_FORMAT_VERSION:
            raise ValueError(f"kernel model format {version} is not supported "
                             f"(this version reads {MODEL_FORMAT_VERSION})")
        kernel_code = int(arrays["kernel"])
        multiclass_code = int(arrays["multiclass"])
        svm_type_code = int(arrays["svm_type"]) if "svm_type" in arrays else 0
        if svm_type_code not in SVM_TYPE_NAMES:
            raise ValueError("kernel model arrays name an unknown svm_type code")
        if kernel_code not in KERNEL_NAMES or multiclass_code not in MULTICLASS_NAMES:
            raise ValueError("kernel model arrays name an unknown kernel or multiclass code")
        return cls(
            classes=np.array(arrays["classes"]),
            kernel=KERNEL_NAMES[kernel_code],
            gamma=float(arrays["gamma"]),
            degree=int(arrays["degree"]),
            coef0=float(arrays["coef0"]),
            multiclass=MULTICLASS_NAMES[multiclass_code],
            n_features=int(arrays["n_features"]),
            sv_data=np.array(arrays["sv_data"]),
            sv_indices=np.array(arrays["sv_indices"]),
            sv_indptr=np.array(arrays["sv_indptr"]),
            sv_coef=np.array(arrays["sv_coef"]),
            rho=np.array(arrays["rho"]),
            n_sv=np.array(arrays["n_sv"]),
            sv_rows=np.array(arrays["sv_rows"]),
            vote_order=np.array(arrays["vote_order"]) if "vote_order" in arrays else None,
            svm_type=SVM_TYPE_NAMES[svm_type_code],
        )

    def _check(self) -> None:
        if self.svm_type not in SVM_TYPE_CODES:
            raise ValueError(f"unknown svm_type {self.svm_type!r}")
        k = self.classes.shape[0]
        if self.single_output:
            self._check_single()
            return
        if k < 2 or self.classes.ndim != 1 or np.any(np.diff(self.classes) <= 0):
            raise ValueError("classes must be at least two sorted, distinct values")
        if self.kernel not in KERNEL_CODES:
            raise ValueError(f"unknown kernel {self.kernel!r}")
        if self.multiclass not in MULTICLASS_CODES:
            raise ValueError(f"unknown multiclass strategy {self.multiclass!r}")
        n_sv = self.sv_indptr.shape[0] - 1
        rows = k if (self.multiclass == "ovr" and k > 2) else k - 1
        if (self.sv_coef.shape != (rows, n_sv) or self.n_sv.shape != (k,)
                or int(self.n_sv.sum()) != n_sv or self.rho.shape != (self.n_outputs,)
                or self.sv_rows.shape != (n_sv,)
                or (self.vote_order is not None and not np.array_equal(
                    np.sort(self.vote_order), np.arange(k)))):
            raise ValueError(
                f"inconsistent kernel model: {n_sv} support vectors, sv_coef "
                f"{self.sv_coef.shape}, n_sv {self.n_sv.tolist()}, rho {self.rho.shape}")
        self._check_support_vectors()

    def _check_single(self) -> None:
        n_sv = self.sv_indptr.shape[0] - 1
        classes = [-1.0, 1.0] if self.svm_type == "one_class" else []
        if self.classes.tolist() != classes:
            raise ValueError(f"a {self.svm_type} model has classes {classes}")
        if (self.sv_coef.shape != (1, n_sv) or self.n_sv.tolist() != [n_sv]
                or self.rho.shape != (1,) or self.sv_rows.shape != (n_sv,)):
            raise ValueError(
                f"inconsistent {self.svm_type} model: {n_sv} support vectors, sv_coef "
                f"{self.sv_coef.shape}, n_sv {self.n_sv.tolist()}, rho {self.rho.shape}")
        self._check_support_vectors()

    def _check_support_vectors(self) -> None:
        """The support vectors' CSR arrays, whatever the svm_type."""
        indptr = self.sv_indptr
        if (indptr[0] != 0 or indptr[-1] != self.sv_indices.shape[0]
                or self.sv_data.shape != self.sv_indices.shape or np.any(np.diff(indptr) < 0)):
            raise ValueError("inconsistent kernel model: malformed support-vector CSR arrays")
        if self.sv_indices.shape[0] and (
                self.sv_indices.min() < 0 or self.sv_indices.max() >= self.n_features):
            raise ValueError("inconsistent kernel model: a support-vector index is out of range")


def pair_classes(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Class indices (i, j) of the one-vs-one pairs, in LIBSVM's order."""
    first = [i for i in range(n_classes) for _ in range(i + 1, n_classes)]
    second = [j for i in range(n_classes) for j in range(i + 1, n_classes)]
    return np.array(first, dtype=np.int64), np.array(second, dtype=np.int64)


# --------------------------------------------------------------------------------------
# Python entry points


def as_query_csr(X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X (SciPy sparse or a 2-D array) as CSR arrays (float64, int32 sorted, int64)."""
    if sp.issparse(X):
        matrix = sp.csr_matrix(X)
    else:
        dense = np.asarray(X, dtype=np.float64)
        if dense.ndim != 2:
            raise ValueError(f"X must be 2-D (rows = examples); got shape {dense.shape}")
        matrix = sp.csr_matrix(dense)
    if not matrix.has_canonical_format:
        matrix = matrix.copy()
        matrix.sum_duplicates()
    data = np.ascontiguousarray(matrix.data, dtype=np.float64)
    if not np.all(np.isfinite(data)):
        raise ValueError("X contains NaN or infinity")
    return (data, np.ascontiguousarray(matrix.indices, dtype=np.int32),
            np.ascontiguousarray(matrix.indptr, dtype=np.int64))


def row_sq_norms(data: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """||x_r||^2 of every CSR row."""
    out = np.empty(indptr.shape[0] - 1)
    _row_sq_norms_kernel(data, indptr, out)
    return out


def kernel_params(model: KernelModel) -> tuple[int, float, float, int]:
    return (KERNEL_CODES[model.kernel], float(model.gamma), float(model.coef0),
            int(model.degree))


def kernel_column(X: Any, j: int, kernel: str = "rbf", gamma: float = 1.0,
                  coef0: float = 0.0, degree: int = 3, threads: int | None = None) -> np.ndarray:
    """K(x_r, x_j) for every row r of X (float64), computed in parallel over rows."""
    data, indices, indptr = as_query_csr(X)
    n_features = int(X.shape[1])
    if not 0 <= j < indptr.shape[0] - 1:
        raise IndexError(f"row {j} is out of range")
    sq = row_sq_norms(data, indptr)
    out = np.empty(indptr.shape[0] - 1)
    params = (KERNEL_CODES[kernel], float(gamma), float(coef0), int(degree))
    with _threads(threads):
        _kernel_column_kernel((data, indices, indptr, sq), int(j), params,
                              np.zeros(n_features), out)
    return out


def raw_decision_values(model: KernelModel, X: Any, threads: int | None = None,
                        dot: str = "scatter") -> np.ndarray:
    """LIBSVM-layout decision values, shape (n_rows, n_outputs): sum coef K - rho per binary
    model, positive for the pair's first class (for two classes: for classes[0]).

    `dot` selects how sparse dot products are computed: "scatter" (the query row scattered
    into a dense buffer, support vectors gathered from it) or "merge" (LIBSVM's merged walk
    of two sorted index lists); both give the same values up to rounding.
    """
    q_data, q_indices, q_indptr = as_query_csr(X)
    n_rows = q_indptr.shape[0] - 1
    out = np.empty((n_rows, model.n_outputs))
    if n_rows == 0:
        return out
    queries = (q_data, q_indices, q_indptr, row_sq_norms(q_data, q_indptr))
    svs = (model.sv_data, model.sv_indices, model.sv_indptr, model.sv_sq_norms())
    starts = np.concatenate(([0], np.cumsum(model.n_sv))).astype(np.int64)
    # one decision function (one_class, regression): the "ovr" path with one row
    ovr = (model.multiclass == "ovr" and model.n_classes > 2) or model.single_output
    layout = (model.sv_coef, model.rho, starts, ovr)
    if dot not in ("scatter", "merge"):
        raise ValueError("dot must be 'scatter' or 'merge'")
    with _threads(threads):
        _decision_kernel(queries, svs, kernel_params(model), layout, model.n_features,
                         dot == "merge", out)
    return out


def decision_values(model: KernelModel, X: Any, threads: int | None = None) -> np.ndarray:
    """Decision values of the rows of X in the public convention (see the module docstring):
    (n_rows,) for two classes, positive for classes[1]; (n_rows, n_outputs) otherwise."""
    return model.decision_function(X, threads)


def max_threads() -> int:
    """Numba's thread-pool size (NUMBA_NUM_THREADS; default: the number of cores)."""
    return int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]


class _threads:
    """Run a block with `threads` Numba threads (None: leave the current setting)."""

    def __init__(self, threads: int | None) -> None:
        self.threads = threads
        self.previous = 0

    def __enter__(self) -> None:
        if self.threads is not None:
            self.previous = numba.get_num_threads()
            numba.set_num_threads(max(1, min(int(self.threads), max_threads())))

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            numba.set_num_threads(self.previous)


# --------------------------------------------------------------------------------------
# Compiled kernels (the kernel values: solvers/_kernel_helpers.py).


@njit(cache=True)
def _row_sq_norms_kernel(data, indptr, out):
    for r in range(indptr.shape[0] - 1):
        # out[r] = x_r . x_r
        total = 0.0
        for k in range(indptr[r], indptr[r + 1]):
            total += data[k] * data[k]
        out[r] = total


@njit(cache=True, parallel=True)
def _kernel_column_kernel(rows, j, params, dense, out):
    """out[r] = K(x_r, x_j) for every row r; dense: zeros(n_features), left zeroed."""
    data, indices, indptr, sq = rows
    kind, gamma, coef0, degree = params
    for k in range(indptr[j], indptr[j + 1]):
        dense[indices[k]] = data[k]
    for r in prange(indptr.shape[0] - 1):
        # dot = x_r . x_j  (gather from the scattered x_j)
        dot = 0.0
        for k in range(np.uint64(indptr[r]), np.uint64(indptr[r + 1])):
            dot += data[k] * dense[np.uint32(indices[k])]
        out[r] = kernel_from_dot(kind, dot, sq[r], sq[j], gamma, coef0, degree)
    for k in range(indptr[j], indptr[j + 1]):
        dense[indices[k]] = 0.0


@njit(cache=True, inline="always")
def _merge_dot(a_data, a_indices, a_start, a_end, b_data, b_indices, b_start, b_end):
    """Sparse a.b by a merged walk of the two sorted index lists (LIBSVM's dot)."""
    total = 0.0
    p = a_start
    q = b_start
    while p < a_end and q < b_end:
        ia = a_indices[p]
        ib = b_indices[q]
        if ia == ib:
            total += a_data[p] * b_data[q]
            p += 1
            q += 1
        elif ia > ib:
            q += 1
        else:
            p += 1
    return total


@njit(cache=True, parallel=True)
def _decision_kernel(queries, svs, params, layout, n_features, merge, out):
    """out[r, p] = sum_s coef_p[s] K(sv_s, x_r) - rho[p] for every query row r.

    queries = (data, indices, indptr, sq norms); svs = the same for the support vectors;
    layout = (sv_coef, rho, class starts of the SV blocks, ovr). Parallel over blocks of
    rows; each block owns a dense scatter buffer and a buffer of kernel values.
    """
    q_data, q_indices, q_indptr, q_sq = queries
    s_data, s_indices, s_indptr, s_sq = svs
    kind, gamma, coef0, degree = params
    sv_coef, rho, starts, ovr = layout
    n_rows = q_indptr.shape[0] - 1
    n_sv = s_indptr.shape[0] - 1
    n_classes = starts.shape[0] - 1
    n_blocks = (n_rows + _ROWS_PER_CHUNK - 1) // _ROWS_PER_CHUNK
    for block in prange(n_blocks):
        dense = np.zeros(n_features)
        values = np.empty(n_sv)
        for r in range(block * _ROWS_PER_CHUNK, min(n_rows, (block + 1) * _ROWS_PER_CHUNK)):
            start = q_indptr[r]
            end = q_indptr[r + 1]
            if not merge:
                for k in range(start, end):
                    col = q_indices[k]
                    if col < n_features:  # features no SV has: only in ||x||^2
                        dense[col] = q_data[k]
            for s in range(n_sv):
                # values[s] = K(sv_s, x_r)
                if merge:
                    dot = _merge_dot(q_data, q_indices, start, end,
                                     s_data, s_indices, s_indptr[s], s_indptr[s + 1])
                else:
                    dot = 0.0
                    for k in range(np.uint64(s_indptr[s]), np.uint64(s_indptr[s + 1])):
                        dot += s_data[k] * dense[np.uint32(s_indices[k])]
                values[s] = kernel_from_dot(kind, dot, q_sq[r], s_sq[s], gamma, coef0,
                                             degree)
            if not merge:
                for k in range(start, end):
                    col = q_indices[k]
                    if col < n_features:
                        dense[col] = 0.0
            if ovr:
                for c in range(n_classes):
                    # out[r, c] = sv_coef[c] @ values - rho[c]
                    total = 0.0
                    for s in range(n_sv):
                        total += sv_coef[c, s] * values[s]
                    out[r, c] = total - rho[c]
            else:
                p = 0
                for i in range(n_classes):
                    for j in range(i + 1, n_classes):
                        # LIBSVM: class i's SVs use row j-1 of sv_coef, class j's use row i
                        total = 0.0
                        for s in range(starts[i], starts[i + 1]):
                            total += sv_coef[j - 1, s] * values[s]
                        for s in range(starts[j], starts[j + 1]):
                            total += sv_coef[i, s] * values[s]
                        out[r, p] = total - rho[p]
                        p += 1
