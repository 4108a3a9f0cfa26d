"""scikit-learn's five LIBSVM estimators trained by Hinge's SMO: `HingeSVC`, `HingeNuSVC`,
`HingeSVR`, `HingeNuSVR`, `HingeOneClassSVM`.

Each is scikit-learn's own class (sklearn.svm.SVC, ...) with the one step that calls
LIBSVM's training replaced by Hinge's SMO (`solvers.fit(solver="smo", formulation=...)`,
or a job of a running service with `server=`): the parameters, their validation and
messages, `class_weight_`, `sample_weight` and metadata routing, the fitted attributes
(`support_`, `support_vectors_`, `dual_coef_`, `intercept_`, `n_support_`, `fit_status_`,
`n_iter_`, `probA_`, `probB_`, `coef_`, read-only and sparse as scikit-learn's), the
`ConvergenceWarning` at `max_iter`, the tie rules and the errors at predict are
scikit-learn's, because they are its code; the support vectors and coefficients are
Hinge's, set in LIBSVM's layout, and prediction is scikit-learn's on them (or, with
`remote_predict=True`, the service's predict route).

Kernels Hinge's SMO does not compute itself (`precomputed`, a callable, and parameters
outside its ranges such as gamma=0 or degree=0) are trained on features Phi with
Phi Phi' = K (an eigendecomposition of the kernel matrix) under the linear kernel: the
same dual problem, up to rounding of K; such a matrix must be positive semi-definite.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn import svm as _sk
from sklearn.metrics.pairwise import pairwise_kernels

from hinge.sklearn import _service
from hinge.sklearn._service import HINGE_CONSTRAINTS

try:  # scikit-learn's own container choice for sparse attributes
    from sklearn.utils._sparse import _align_api_if_sparse as _sparse_api
except ImportError:  # pragma: no cover - older scikit-learn
    def _sparse_api(matrix: Any) -> Any:
        return sp.csr_matrix(matrix)

_HINGE_C_MAX = 1e12  # solvers.params: the largest C Hinge trains (C=inf trains at it)
_HINGE_MAX_ITER = 100_000_000  # solvers.params: the most SMO steps a fit may take
_NAMES = {"eps": "tol", "cache_mb": "cache_size", "threads": "n_jobs", "seed": "random_state"}
_NATIVE = ("linear", "poly", "rbf", "sigmoid")
_EIG_NEGATIVE = 1e-10  # eigenvalues below -this * the largest: not a PSD kernel


def kernel_features(K: np.ndarray) -> np.ndarray:
    """Phi with Phi Phi' = K for a symmetric positive semi-definite kernel matrix."""
    K = np.asarray(K, dtype=np.float64)
    values, vectors = np.linalg.eigh((K + K.T) / 2.0)
    top = float(np.max(np.abs(values))) if values.size else 0.0
    if values.size and values.min() < -_EIG_NEGATIVE * max(top, 1e-300):
        raise ValueError(
            "Hinge trains positive semi-definite kernels only: this kernel matrix has the "
            f"eigenvalue {values.min():.3g} (largest {top:.3g})")
    keep = values > 1e-15 * top
    if not keep.any():
        return np.zeros((K.shape[0], 1))
    return np.ascontiguousarray(vectors[:, keep] * np.sqrt(values[keep]))


class _HingeLibSVM:
    """Replaces BaseLibSVM's `_dense_fit` / `_sparse_fit` (LIBSVM's training) by Hinge's."""

    _impl: ClassVar[str]
    _HINGE_CONSTRAINTS: ClassVar[dict[str, list[Any]]] = HINGE_CONSTRAINTS

    def _dense_fit(self, X: Any, y: Any, sample_weight: Any, solver_type: int, kernel: str,
                   random_seed: int) -> None:
        if callable(self.kernel):  # type: ignore[attr-defined]
            self._BaseLibSVM__Xfit = X  # what BaseLibSVM._compute_kernel reads
            X = self._compute_kernel(X)  # type: ignore[attr-defined]
            if X.shape[0] != X.shape[1]:
                raise ValueError("X.shape[0] should be equal to X.shape[1]")
        self._hinge_fit(X, y, sample_weight, kernel, random_seed, sparse=False)

    def _sparse_fit(self, X: Any, y: Any, sample_weight: Any, solver_type: int, kernel: str,
                    random_seed: int) -> None:
        X.data = np.asarray(X.data, dtype=np.float64, order="C")
        X.sort_indices()
        self._hinge_fit(X, y, sample_weight, kernel, random_seed, sparse=True)

    # -- Hinge's fit -----------------------------------------------------------------

    def _native(self, kernel: str) -> bool:
        """Whether Hinge's SMO computes this kernel with these parameters itself."""
        if kernel not in _NATIVE:
            return False
        if kernel == "linear":
            return True
        gamma = float(self._gamma)  # type: ignore[attr-defined]
        return (0.0 < gamma <= 1e6 and (kernel != "poly" or 1 <= self.degree <= 20)  # type: ignore[attr-defined]
                and abs(float(self.coef0)) <= 1e6)  # type: ignore[attr-defined]

    def _hinge_params(self, kernel: str, random_seed: int) -> dict[str, Any]:
        est: Any = self
        params: dict[str, Any] = {
            "formulation": self._impl, "kernel": kernel, "eps": float(est.tol),
            "cache_mb": min(max(float(est.cache_size), 1.0), 16384.0),
            "multiclass": "ovo", "threads": _service.threads(est.n_jobs)}
        if kernel != "linear":
            params.update(gamma=float(est._gamma), degree=int(est.degree),
                          coef0=float(est.coef0))
        if self._impl in ("c_svc", "epsilon_svr", "nu_svr"):
            params["C"] = min(float(est.C), _HINGE_C_MAX)
        if self._impl in ("nu_svc", "one_class", "nu_svr"):
            params["nu"] = float(est.nu)
        if self._impl == "epsilon_svr":
            params["epsilon"] = float(est.epsilon)
        # scikit-learn's max_iter=-1 is no limit (its LIBSVM drops LIBSVM's cap of
        # max(1e7, 100 l) SMO steps, which Hinge's SMO takes by default): Hinge's largest
        params["max_iter"] = min(int(est.max_iter), _HINGE_MAX_ITER) \
            if int(est.max_iter) > 0 else _HINGE_MAX_ITER
        return params

    def _hinge_fit(self, X: Any, y: np.ndarray, sample_weight: np.ndarray, kernel: str,
                   random_seed: int, sparse: bool) -> None:
        est: Any = self
        classification = self._impl in ("c_svc", "nu_svc")
        weights = np.asarray(sample_weight, dtype=np.float64) if len(sample_weight) else None
        if weights is None and self._impl in ("nu_svc", "one_class", "nu_svr"):
            # scikit-learn's LIBSVM always has instance weights (ones by default), and
            # its nu formulations sum nu * w_i row by row where LIBSVM takes nu * l
            # (solvers/smo/model.py, _nu_total): Hinge's rule with weights is that sum
            weights = np.ones(X.shape[0])
        if weights is not None:
            if weights.ndim != 1:
                raise ValueError("Sample weights must be 1D array or scalar")
            if not np.any(weights > 0):
                raise ValueError("Invalid input - all samples have zero or negative weights.")
            weights = np.maximum(weights, 0.0)  # LIBSVM leaves rows of weight <= 0 out
            if classification and np.unique(y[weights > 0]).shape[0] < 2:
                raise ValueError("Invalid input - all samples with positive weights belong "
                                 "to the same class.")
        class_weight = np.asarray(getattr(est, "class_weight_", np.empty(0)))
        params = self._hinge_params("linear" if not self._native(kernel) else kernel,
                                    random_seed)
        # scikit-learn's LIBSVM ignores class weights in nu-SVC (it reads the row weights)
        if self._impl == "c_svc" and class_weight.size and not np.all(class_weight == 1.0):
            if np.all(class_weight > 0) and np.all(np.isfinite(class_weight)):
                params["class_weight"] = {str(k): float(w) for k, w in enumerate(class_weight)}
            else:  # C_i = C class_weight[y_i] w_i: a zero class weight as zero row weights
                per_row = class_weight[y.astype(np.int64)]
                weights = per_row if weights is None else weights * per_row
        rows = X
        if kernel == "precomputed":
            rows = kernel_features(X)
        elif not self._native(kernel):
            dense = X.toarray() if sp.issparse(X) else X
            extra = {"rbf": ("gamma",), "poly": ("gamma", "degree", "coef0"),
                     "sigmoid": ("gamma", "coef0")}[kernel]
            values = {"gamma": float(est._gamma), "degree": est.degree,
                      "coef0": float(est.coef0)}
            rows = kernel_features(pairwise_kernels(
                dense, metric=kernel, **{name: values[name] for name in extra}))
        target = None if self._impl == "one_class" else y
        task = {"c_svc": "classification", "nu_svc": "classification"}.get(
            self._impl, None if self._impl == "one_class" else "regression")
        trained = _service.train(self, rows, target, "smo", params, weights, _NAMES, task)
        _service.record(self, trained)
        self._set_libsvm_attributes(X, rows, y, trained, kernel, sparse)
        if classification and getattr(est, "_effective_probability", False) is True:
            self._probA, self._probB = self._platt(rows, y, weights, params, random_seed)

    def _platt(self, rows: Any, y: np.ndarray, weights: np.ndarray | None,
               params: dict[str, Any], seed: int) -> tuple[np.ndarray, np.ndarray]:
        """scikit-learn's LIBSVM's Platt sigmoids: its folds, Hinge's fits (in process)."""
        from solvers import fit

        est: Any = self
        class_weight = np.asarray(getattr(est, "class_weight_", np.empty(0)))
        k = int(y.max()) + 1
        costs = np.ones(k)  # nu-SVC: no C, no class weights
        if self._impl == "c_svc":
            costs = float(est.C) * (class_weight if class_weight.size else costs)
        fold_params = {key: value for key, value in params.items()
                       if key not in ("class_weight", "C")}

        def fit_values(train: Any, labels: np.ndarray, w: np.ndarray | None, cp: float,
                       cn: float, held: Any) -> np.ndarray:
            extra: dict[str, Any] = {}
            if self._impl == "c_svc":
                extra = {"C": 1.0, "class_weight": {"1": min(cp, _HINGE_C_MAX),
                                                    "0": min(cn, _HINGE_C_MAX)}}
            result = fit(train, labels, solver="smo", sample_weight=w, **fold_params,
                         **extra)
            return np.asarray(result.model.decision_function(held), dtype=np.float64).ravel()

        from hinge.sklearn._platt import pairwise_sigmoids

        return pairwise_sigmoids(rows, y, weights, costs, seed, fit_values)

    def _set_libsvm_attributes(self, X: Any, rows: Any, y: np.ndarray,
                               trained: _service.Trained, kernel: str, sparse: bool) -> None:
        """support_, support_vectors_, _n_support, dual_coef_, intercept_, _probA,
        _probB, fit_status_ and _num_iter as LIBSVM returns them (before scikit-learn's
        flip of a binary classifier's signs)."""
        from solvers.models import estimator_of

        est: Any = self
        model: Any = estimator_of(trained.model)
        classification = self._impl in ("c_svc", "nu_svc")
        n_sv = np.asarray(model.n_sv, dtype=np.int64)
        vectors = model.support_vectors()
        if trained.sv_rows_known:
            support = np.asarray(model.sv_rows, dtype=np.int64)
        else:
            groups = y.astype(np.int64) if classification else np.zeros(rows.shape[0])
            support = _service.match_rows(rows, groups, vectors,
                                          np.repeat(np.arange(n_sv.shape[0]), n_sv))
        self.support_ = support.astype(np.int32)
        if kernel == "precomputed":
            self.support_vectors_ = np.empty((0, 0), dtype=np.float64)
        elif sparse:
            self.support_vectors_ = _sparse_api(sp.csr_matrix(X[support]))
        else:
            self.support_vectors_ = np.ascontiguousarray(np.asarray(X)[support],
                                                         dtype=np.float64)
        total = int(support.shape[0])
        self._n_support = (n_sv.astype(np.int32) if classification
                           else np.array([total, total], dtype=np.int32))
        coef = np.ascontiguousarray(model.sv_coef, dtype=np.float64)
        if sparse:  # every entry stored, as libsvm_sparse reads dual_coef_.data
            n_out, n_sv_total = coef.shape
            indptr = np.arange(0, n_out * n_sv_total + 1, max(n_sv_total, 1))[:n_out + 1]
            self.dual_coef_ = _sparse_api(sp.csr_matrix(
                (coef.ravel(), np.tile(np.arange(n_sv_total), n_out), indptr),
                shape=coef.shape))
        else:
            self.dual_coef_ = coef
        self.intercept_ = -np.asarray(model.rho, dtype=np.float64).copy()
        calibration = getattr(trained.model, "calibration", None)
        if calibration is not None and classification:
            self._probA = np.asarray(calibration.A, dtype=np.float64).copy()
            self._probB = np.asarray(calibration.B, dtype=np.float64).copy()
        else:
            self._probA = np.empty(0, dtype=np.float64)
            self._probB = np.empty(0, dtype=np.float64)
        self.fit_status_ = int(any(r == "max_iter" for r in trained.exit_reasons))
        self._num_iter = np.asarray(trained.iterations, dtype=np.int32)
        if not math.isfinite(float(np.sum(coef))) or not np.isfinite(self.intercept_).all():
            raise ValueError("The dual coefficients or intercepts are not finite. The input "
                             "data may contain large values and need to be preprocessed.")
        est._warn_from_fit_status()

    # -- prediction through the service (remote_predict=True) -------------------------

    def _remote_values(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Labels and values of the service in LIBSVM's convention."""
        labels, values, _ = _service.remote_predict(self, X)
        if values.ndim == 1:
            values = values.reshape(-1, 1)
        if self._impl in ("c_svc", "nu_svc") and values.shape[1] == 1:
            values = -values  # Hinge's two-class value is positive for classes_[1]
        return labels, values

    def _remote(self, kernel: Any) -> bool:
        return _service.uses_service(self) and not callable(kernel) and kernel != "precomputed"

    def _dense_predict(self, X: Any) -> Any:
        if self._remote(self.kernel):  # type: ignore[attr-defined]
            return self._remote_values(X)[0]
        return super()._dense_predict(X)  # type: ignore[misc]

    def _sparse_predict(self, X: Any) -> Any:
        if self._remote(self.kernel):  # type: ignore[attr-defined]
            return self._remote_values(X)[0]
        return super()._sparse_predict(X)  # type: ignore[misc]

    def _dense_decision_function(self, X: Any) -> Any:
        if self._remote(self.kernel):  # type: ignore[attr-defined]
            return self._remote_values(X)[1]
        return super()._dense_decision_function(X)  # type: ignore[misc]

    def _sparse_decision_function(self, X: Any) -> Any:
        if self._remote(self.kernel):  # type: ignore[attr-defined]
            return self._remote_values(X)[1]
        return super()._sparse_decision_function(X)  # type: ignore[misc]


_HINGE_DOC = """
    Hinge's parameters (besides scikit-learn's):

    n_jobs : Numba threads of Hinge's SMO (None: 1; -1: all cores).
    server, api_key : train through the Hinge service at this URL (None: in process).
    remote_predict : predict through the service's predict route instead of locally
        (server mode only).
    timeout : longest silence, in seconds, tolerated while waiting for a remote job.

    Beyond scikit-learn's attributes: `converged_` (Hinge's stop rule held: LIBSVM's
    maximal-violating-pair rule at tol), `solver_`, `dual_objective_`, and after a remote
    fit `dataset_id_`, `job_id_`, `model_id_`.
"""


class SVC(_HingeLibSVM, _sk.SVC):
    __doc__ = "C-Support Vector Classification on Hinge's SMO (sklearn.svm.SVC).\n" + _HINGE_DOC
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_sk.SVC._parameter_constraints, **HINGE_CONSTRAINTS}

    def __init__(self, *, C: float = 1.0, kernel: Any = "rbf", degree: int = 3,
                 gamma: Any = "scale", coef0: float = 0.0, shrinking: bool = True,
                 probability: Any = "deprecated", tol: float = 1e-3,
                 cache_size: float = 200, class_weight: Any = None, verbose: bool = False,
                 max_iter: int = -1, decision_function_shape: str = "ovr",
                 break_ties: bool = False, random_state: Any = None,
                 n_jobs: int | None = None, server: str | None = None,
                 api_key: str | None = None, remote_predict: bool = False,
                 timeout: float | None = 600.0) -> None:
        super().__init__(C=C, kernel=kernel, degree=degree, gamma=gamma, coef0=coef0,
                         shrinking=shrinking, probability=probability, tol=tol,
                         cache_size=cache_size, class_weight=class_weight, verbose=verbose,
                         max_iter=max_iter, decision_function_shape=decision_function_shape,
                         break_ties=break_ties, random_state=random_state)
        self.n_jobs, self.server, self.api_key = n_jobs, server, api_key
        self.remote_predict, self.timeout = remote_predict, timeout


class NuSVC(_HingeLibSVM, _sk.NuSVC):
    __doc__ = "Nu-Support Vector Classification on Hinge's SMO (sklearn.svm.NuSVC).\n" + \
        _HINGE_DOC
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_sk.NuSVC._parameter_constraints, **HINGE_CONSTRAINTS}

    def __init__(self, *, nu: float = 0.5, kernel: Any = "rbf", degree: int = 3,
                 gamma: Any = "scale", coef0: float = 0.0, shrinking: bool = True,
                 probability: Any = "deprecated", tol: float = 1e-3,
                 cache_size: float = 200, class_weight: Any = None, verbose: bool = False,
                 max_iter: int = -1, decision_function_shape: str = "ovr",
                 break_ties: bool = False, random_state: Any = None,
                 n_jobs: int | None = None, server: str | None = None,
                 api_key: str | None = None, remote_predict: bool = False,
                 timeout: float | None = 600.0) -> None:
        super().__init__(nu=nu, kernel=kernel, degree=degree, gamma=gamma, coef0=coef0,
                         shrinking=shrinking, probability=probability, tol=tol,
                         cache_size=cache_size, class_weight=class_weight, verbose=verbose,
                         max_iter=max_iter, decision_function_shape=decision_function_shape,
                         break_ties=break_ties, random_state=random_state)
        self.n_jobs, self.server, self.api_key = n_jobs, server, api_key
        self.remote_predict, self.timeout = remote_predict, timeout


class SVR(_HingeLibSVM, _sk.SVR):
    __doc__ = "Epsilon-Support Vector Regression on Hinge's SMO (sklearn.svm.SVR).\n" + \
        _HINGE_DOC
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_sk.SVR._parameter_constraints, **HINGE_CONSTRAINTS}

    def __init__(self, *, kernel: Any = "rbf", degree: int = 3, gamma: Any = "scale",
                 coef0: float = 0.0, tol: float = 1e-3, C: float = 1.0,
                 epsilon: float = 0.1, shrinking: bool = True, cache_size: float = 200,
                 verbose: bool = False, max_iter: int = -1, n_jobs: int | None = None,
                 server: str | None = None, api_key: str | None = None,
                 remote_predict: bool = False, timeout: float | None = 600.0) -> None:
        super().__init__(kernel=kernel, degree=degree, gamma=gamma, coef0=coef0, tol=tol,
                         C=C, epsilon=epsilon, shrinking=shrinking, cache_size=cache_size,
                         verbose=verbose, max_iter=max_iter)
        self.n_jobs, self.server, self.api_key = n_jobs, server, api_key
        self.remote_predict, self.timeout = remote_predict, timeout


class NuSVR(_HingeLibSVM, _sk.NuSVR):
    __doc__ = "Nu-Support Vector Regression on Hinge's SMO (sklearn.svm.NuSVR).\n" + \
        _HINGE_DOC
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_sk.NuSVR._parameter_constraints, **HINGE_CONSTRAINTS}

    def __init__(self, *, nu: float = 0.5, C: float = 1.0, kernel: Any = "rbf",
                 degree: int = 3, gamma: Any = "scale", coef0: float = 0.0,
                 shrinking: bool = True, tol: float = 1e-3, cache_size: float = 200,
                 verbose: bool = False, max_iter: int = -1, n_jobs: int | None = None,
                 server: str | None = None, api_key: str | None = None,
                 remote_predict: bool = False, timeout: float | None = 600.0) -> None:
        super().__init__(nu=nu, C=C, kernel=kernel, degree=degree, gamma=gamma,
                         coef0=coef0, shrinking=shrinking, tol=tol, cache_size=cache_size,
                         verbose=verbose, max_iter=max_iter)
        self.n_jobs, self.server, self.api_key = n_jobs, server, api_key
        self.remote_predict, self.timeout = remote_predict, timeout


class OneClassSVM(_HingeLibSVM, _sk.OneClassSVM):
    __doc__ = "Unsupervised outlier detection on Hinge's SMO (sklearn.svm.OneClassSVM).\n" \
        + _HINGE_DOC
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_sk.OneClassSVM._parameter_constraints, **HINGE_CONSTRAINTS}

    def __init__(self, *, kernel: Any = "rbf", degree: int = 3, gamma: Any = "scale",
                 coef0: float = 0.0, tol: float = 1e-3, nu: float = 0.5,
                 shrinking: bool = True, cache_size: float = 200, verbose: bool = False,
                 max_iter: int = -1, n_jobs: int | None = None, server: str | None = None,
                 api_key: str | None = None, remote_predict: bool = False,
                 timeout: float | None = 600.0) -> None:
        super().__init__(kernel=kernel, degree=degree, gamma=gamma, coef0=coef0, tol=tol,
                         nu=nu, shrinking=shrinking, cache_size=cache_size, verbose=verbose,
                         max_iter=max_iter)
        self.n_jobs, self.server, self.api_key = n_jobs, server, api_key
        self.remote_predict, self.timeout = remote_predict, timeout


# Hinge's names of the same classes (the classes carry scikit-learn's names, so that
# make_pipeline's step names, reprs and error messages are scikit-learn's)
HingeSVC, HingeNuSVC, HingeSVR, HingeNuSVR, HingeOneClassSVM = SVC, NuSVC, SVR, NuSVR, \
    OneClassSVM
