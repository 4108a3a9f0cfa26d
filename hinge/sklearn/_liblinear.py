"""scikit-learn's LIBLINEAR estimators trained by Hinge's linear solvers: `HingeLinearSVC`,
`HingeLinearSVR` and `HingeLogisticRegression` (LogisticRegression's `liblinear` solver).

`fit_liblinear` is scikit-learn's `sklearn.svm._base._fit_liblinear` (same arguments,
same checks and messages, same `(coef_, intercept_, n_iter_)`) with LIBLINEAR's solver
types mapped onto Hinge's solvers:

| LIBLINEAR -s | problem                                  | Hinge solver            |
| ------------ | ---------------------------------------- | ----------------------- |
| 0            | L2-regularised logistic regression       | tron, loss logistic     |
| 1            | L2-loss SVC, dual                        | dcd, loss l2            |
| 2            | L2-loss SVC, primal                      | tron, loss l2           |
| 3            | L1-loss SVC, dual                        | dcd, loss l1            |
| 4            | Crammer-Singer                           | crammer_singer          |
| 5            | L1-regularised L2-loss SVC               | l1_cd, loss l2          |
| 6            | L1-regularised logistic regression       | l1_cd, loss logistic    |
| 7            | L2-regularised logistic regression, dual | logistic_dcd            |
| 11, 12, 13   | L2-loss SVR primal / dual, L1-loss SVR   | linear_svr              |

`tol_rule` says what `tol` means. Both check Hinge's certificate at tol, the relative
duality gap (P(w) - L) / P(w) <= tol at the returned model (`converged_`,
`relative_gap_`). "liblinear" (the default, scikit-learn's meaning) also runs the
solver's own LIBLINEAR stop rule at tol (eps = tol) and no Hinge fallback after the
solver (dual CD, tron: `fallback=False`), so `max_iter` caps the fit as LIBLINEAR's does
(ConvergenceWarning when it stops there); "gap" lets the fallback rule continue until
the certificate holds (max_iter then bounds the first solver; ConvergenceWarning when the
certificate does not hold).

Under "liblinear" the randomized solvers run with `sweeps="sklearn"` (docs/from-sklearn.md,
"The same epochs as scikit-learn's LIBLINEAR"): scikit-learn's generator at the seed
drawn here, on the rows grouped by class as LIBLINEAR's train() groups them, so that
dual CD (-s 1, 3, 7), the SVR dual (-s 12, 13) and -s 5 take scikit-learn's epochs;
"gap" keeps Hinge's own sweeps.
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn import linear_model as _sklm
from sklearn import svm as _sk
from sklearn.base import _fit_context
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import LabelEncoder
from sklearn.svm._base import _get_liblinear_solver_type
from sklearn.svm._classes import _validate_dual_parameter
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_random_state, validate_data

from hinge.sklearn import _service
from hinge.sklearn._service import HINGE_CONSTRAINTS

_HINGE_C_MAX = 1e12
_NAMES = {"bias_scale": "intercept_scaling", "threads": "n_jobs", "seed": "random_state",
          "eps": "tol"}
# LIBLINEAR's solver type -> (Hinge solver, its parameters)
_SOLVERS: dict[int, tuple[str, dict[str, Any]]] = {
    0: ("tron", {"loss": "logistic"}),
    1: ("dcd", {"loss": "l2"}),
    2: ("tron", {"loss": "l2"}),
    3: ("dcd", {"loss": "l1"}),
    4: ("crammer_singer", {}),
    5: ("l1_cd", {"loss": "l2", "penalty": "l1"}),
    6: ("l1_cd", {"loss": "logistic", "penalty": "l1"}),
    7: ("logistic_dcd", {}),
    11: ("linear_svr", {"loss": "l2", "method": "primal"}),
    12: ("linear_svr", {"loss": "l2", "method": "dual"}),
    13: ("linear_svr", {"loss": "l1", "method": "dual"}),
}
_EXTRA_CONSTRAINTS: dict[str, list[Any]] = {
    **HINGE_CONSTRAINTS,
    "tol_rule": [StrOptions({"liblinear", "gap"})],
}


def fit_liblinear(estimator: Any, X: Any, y: Any, C: float, fit_intercept: bool,
                  intercept_scaling: float, class_weight: Any, penalty: str, dual: bool,
                  verbose: int, max_iter: int, tol: float, random_state: Any = None,
                  multi_class: str = "ovr", loss: str = "logistic_regression",
                  epsilon: float = 0.1, sample_weight: Any = None
                  ) -> tuple[np.ndarray, Any, np.ndarray]:
    """scikit-learn's `_fit_liblinear` on Hinge's solvers."""
    regression = loss in ("epsilon_insensitive", "squared_epsilon_insensitive")
    if not regression:
        enc = LabelEncoder()
        y_ind = enc.fit_transform(y)
        classes_ = enc.classes_
        if len(classes_) < 2:
            raise ValueError("This solver needs samples of at least 2 classes in the data, "
                             f"but the data contains only one class: {classes_[0]!r}")
        class_weight_ = compute_class_weight(class_weight, classes=classes_, y=y,
                                             sample_weight=sample_weight)
    else:
        class_weight_ = np.empty(0, dtype=np.float64)
        y_ind = y
    rnd = check_random_state(random_state)
    if fit_intercept and intercept_scaling <= 0:
        raise ValueError(f"Intercept scaling is {intercept_scaling!r} but needs to be "
                         "greater than 0. To disable fitting an intercept, set "
                         "fit_intercept=False.")
    y_ind = np.asarray(y_ind, dtype=np.float64).ravel()
    given_weights = sample_weight is not None
    weights = _check_sample_weight(sample_weight, X, dtype=np.float64)
    solver_type = _get_liblinear_solver_type(multi_class, penalty, loss, dual)
    seed = int(rnd.randint(np.iinfo("i").max))
    if class_weight_.size and np.any(class_weight_ <= 0):
        weights = weights * class_weight_[y_ind.astype(np.int64)]
        given_weights, class_weight_ = True, np.ones_like(class_weight_)
    # every solver of the table takes instance weights (C_i = C * w_i, the per-row bounds
    # of scikit-learn's LIBLINEAR): the same solver with and without them
    solver, params = _SOLVERS[solver_type][0], dict(_SOLVERS[solver_type][1])
    from solvers.params import SOLVERS

    spec = SOLVERS[solver]
    names = {p.name for p in spec.params}
    params["C"] = min(float(C), _HINGE_C_MAX)
    if solver == "linear_svr":
        params["epsilon"] = float(epsilon)
    params["bias"] = "augment" if fit_intercept else "none"
    if fit_intercept:
        params["bias_scale"] = float(intercept_scaling)
    params["max_iter"] = int(max_iter)
    rule = getattr(estimator, "tol_rule", "liblinear")
    # Hinge's certificate at tol: a fit as close to the optimum as tol says, whichever
    # rule; "liblinear" adds LIBLINEAR's own stop rule at tol and no fallback after the
    # solver (dual CD, tron), so that max_iter caps the fit as LIBLINEAR's
    params["tol"] = min(max(float(tol), 1e-12), 1.0)
    if rule == "liblinear":
        if "eps" in names:
            params["eps"] = float(tol)
        if "fallback" in names:
            params["fallback"] = False
    if class_weight_.size and not np.all(class_weight_ == 1.0):
        params["class_weight"] = {str(k): float(w) for k, w in enumerate(class_weight_)}
    if spec.randomized:
        params["seed"] = seed
    if "sweeps" in names and rule == "liblinear":  # scikit-learn's sweeps: its epochs
        params["sweeps"] = "sklearn"
        if not regression:  # LIBLINEAR's train() groups the rows by class (stable)
            order = np.argsort(y_ind, kind="stable")
            X, y_ind, weights = X[order], y_ind[order], weights[order]
    if "threads" in names:
        params["threads"] = _service.threads(estimator.n_jobs)
    task = "regression" if regression else "classification"
    trained = _service.train(estimator, X, y_ind, solver, params,
                             weights if given_weights else None, _NAMES, task)
    _service.record(estimator, trained)
    model = trained.model
    coef = np.array(getattr(model, "coef", None) if not hasattr(model, "estimator")
                    else model.estimator.coef, dtype=np.float64)
    intercept = np.array(model.intercept, dtype=np.float64).ravel()
    n_iter = np.asarray(trained.iterations, dtype=np.int32)
    if rule == "liblinear" and n_iter.size and int(n_iter.max()) >= max_iter:
        warnings.warn("Liblinear failed to converge, increase the number of iterations.",
                      ConvergenceWarning, stacklevel=3)
    elif rule == "gap" and not trained.converged:
        warnings.warn(f"Hinge's certificate does not hold: the relative duality gap "
                      f"{trained.relative_gap} is above tol={tol}.", ConvergenceWarning,
                      stacklevel=3)
    if fit_intercept:
        return coef, intercept, n_iter
    return coef, 0.0, n_iter


_HINGE_DOC = """
    Hinge's parameters (besides scikit-learn's):

    tol_rule : 'liblinear' (default: tol is LIBLINEAR's stop rule, as scikit-learn's) or
        'gap' (tol is the relative duality gap Hinge certifies at the returned model).
    n_jobs : Numba threads of the data-parallel kernels (None: 1; -1: all cores).
    server, api_key : train through the Hinge service at this URL (None: in process).
    remote_predict : predict through the service's predict route (server mode only).
    timeout : longest silence, in seconds, tolerated while waiting for a remote job.

    Beyond scikit-learn's attributes: `converged_` (the certificate holds),
    `relative_gap_`, `primal_objective_`, `dual_objective_`, `solver_` (what ran), and
    after a remote fit `dataset_id_`, `job_id_`, `model_id_`.
"""


class _RemoteLinear:
    """decision_function through the service's predict route (remote_predict=True)."""

    def decision_function(self, X: Any) -> Any:
        if _service.uses_service(self):
            rows = validate_data(self, X, accept_sparse="csr", reset=False)
            values = _service.remote_predict(self, rows)[1]
            return values[:, 0] if values.ndim == 2 and values.shape[1] == 1 else values
        return super().decision_function(X)  # type: ignore[misc]


class LinearSVC(_RemoteLinear, _sk.LinearSVC):
    __doc__ = "Linear Support Vector Classification on Hinge's solvers (LinearSVC).\n" + \
        _HINGE_DOC
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_sk.LinearSVC._parameter_constraints, **_EXTRA_CONSTRAINTS}

    def __init__(self, penalty: str = "l2", loss: str = "squared_hinge", *,
                 dual: Any = "auto", tol: float = 1e-4, C: float = 1.0,
                 multi_class: str = "ovr", fit_intercept: bool = True,
                 intercept_scaling: float = 1, class_weight: Any = None, verbose: int = 0,
                 random_state: Any = None, max_iter: int = 1000,
                 tol_rule: str = "liblinear", n_jobs: int | None = None,
                 server: str | None = None, api_key: str | None = None,
                 remote_predict: bool = False, timeout: float | None = 600.0) -> None:
        super().__init__(penalty=penalty, loss=loss, dual=dual, tol=tol, C=C,
                         multi_class=multi_class, fit_intercept=fit_intercept,
                         intercept_scaling=intercept_scaling, class_weight=class_weight,
                         verbose=verbose, random_state=random_state, max_iter=max_iter)
        self.tol_rule, self.n_jobs, self.server, self.api_key = tol_rule, n_jobs, server, \
            api_key
        self.remote_predict, self.timeout = remote_predict, timeout

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> LinearSVC:
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C",
                             accept_large_sparse=False)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        _dual = _validate_dual_parameter(self.dual, self.loss, self.penalty,
                                         self.multi_class, X)
        self.coef_, self.intercept_, n_iter_ = fit_liblinear(
            self, X, y, self.C, self.fit_intercept, self.intercept_scaling,
            self.class_weight, self.penalty, _dual, self.verbose, self.max_iter, self.tol,
            self.random_state, self.multi_class, self.loss, sample_weight=sample_weight)
        self.n_iter_ = n_iter_.max().item()
        if self.multi_class == "crammer_singer" and len(self.classes_) == 2:
            self.coef_ = (self.coef_[1] - self.coef_[0]).reshape(1, -1)
            if self.fit_intercept:
                self.intercept_ = np.array([self.intercept_[1] - self.intercept_[0]])
        return self


class LinearSVR(_sk.LinearSVR):
    __doc__ = "Linear Support Vector Regression on Hinge's solvers (LinearSVR).\n" + \
        _HINGE_DOC
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        **_sk.LinearSVR._parameter_constraints, **_EXTRA_CONSTRAINTS}

    def __init__(self, *, epsilon: float = 0.0, tol: float = 1e-4, C: float = 1.0,
                 loss: str = "epsilon_insensitive", fit_intercept: bool = True,
                 intercept_scaling: float = 1.0, dual: Any = "auto", verbose: int = 0,
                 random_state: Any = None, max_iter: int = 1000,
                 tol_rule: str = "liblinear", n_jobs: int | None = None,
                 server: str | None = None, api_key: str | None = None,
                 remote_predict: bool = False, timeout: float | None = 600.0) -> None:
        super().__init__(epsilon=epsilon, tol=tol, C=C, loss=loss,
                         fit_intercept=fit_intercept, intercept_scaling=intercept_scaling,
                         dual=dual, verbose=verbose, random_state=random_state,
                         max_iter=max_iter)
        self.tol_rule, self.n_jobs, self.server, self.api_key = tol_rule, n_jobs, server, \
            api_key
        self.remote_predict, self.timeout = remote_predict, timeout

    def predict(self, X: Any) -> Any:
        if _service.uses_service(self):
            rows = validate_data(self, X, accept_sparse="csr", reset=False)
            return _service.remote_predict(self, rows)[1].ravel()
        return super().predict(X)

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> LinearSVR:
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C",
                             accept_large_sparse=False)
        _dual = _validate_dual_parameter(self.dual, self.loss, "l2", "ovr", X)
        self.coef_, self.intercept_, n_iter_ = fit_liblinear(
            self, X, y, self.C, self.fit_intercept, self.intercept_scaling, None, "l2",
            _dual, self.verbose, self.max_iter, self.tol, self.random_state,
            loss=self.loss, epsilon=self.epsilon, sample_weight=sample_weight)
        self.coef_ = self.coef_.ravel()
        self.n_iter_ = n_iter_.max().item()
        return self


class LogisticRegression(_RemoteLinear, _sklm.LogisticRegression):
    __doc__ = ("Logistic regression with LIBLINEAR's parameters (LogisticRegression("
               "solver='liblinear')) on Hinge's solvers. More than two classes: one-vs-rest "
               "(scikit-learn's liblinear refuses them), probabilities normalised over "
               "the classes.\n" + _HINGE_DOC)
    _parameter_constraints: ClassVar[dict[str, Any]] = {
        "penalty": [StrOptions({"l1", "l2", "deprecated"})],
        "l1_ratio": [Interval(numbers.Real, 0, 1, closed="both"), None],
        "dual": ["boolean"],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "C": [Interval(numbers.Real, 0, None, closed="right")],
        "fit_intercept": ["boolean"],
        "intercept_scaling": [Interval(numbers.Real, 0, None, closed="neither")],
        "class_weight": [dict, StrOptions({"balanced"}), None],
        "random_state": ["random_state"],
        "solver": [StrOptions({"liblinear"})],
        "max_iter": [Interval(numbers.Integral, 0, None, closed="left")],
        "verbose": ["verbose"],
        "warm_start": ["boolean"],
        **_EXTRA_CONSTRAINTS,
    }

    def __init__(self, penalty: str = "deprecated", *, C: float = 1.0,
                 l1_ratio: float | None = 0.0, dual: bool = False, tol: float = 1e-4,
                 fit_intercept: bool = True, intercept_scaling: float = 1,
                 class_weight: Any = None, random_state: Any = None,
                 solver: str = "liblinear", max_iter: int = 100, verbose: int = 0,
                 warm_start: bool = False, tol_rule: str = "liblinear", n_jobs: int | None = None,
                 server: str | None = None, api_key: str | None = None,
                 remote_predict: bool = False, timeout: float | None = 600.0) -> None:
        self.penalty, self.l1_ratio, self.dual, self.tol, self.C = penalty, l1_ratio, dual, \
            tol, C
        self.fit_intercept, self.intercept_scaling = fit_intercept, intercept_scaling
        self.class_weight, self.random_state, self.solver = class_weight, random_state, \
            solver
        self.max_iter, self.verbose, self.tol_rule = max_iter, verbose, tol_rule
        # scikit-learn's liblinear solver ignores warm_start ("Useless for liblinear
        # solver"): stored, so that its examples' LogisticRegression(warm_start=True) runs
        self.warm_start = warm_start
        self.n_jobs, self.server, self.api_key = n_jobs, server, api_key
        self.remote_predict, self.timeout = remote_predict, timeout

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> LogisticRegression:
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64, order="C",
                             accept_large_sparse=False)
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        if (sp.issparse(X) and X.nnz and np.max(np.abs(X.data)) > 1e30) or (
                not sp.issparse(X) and X.size and np.max(X) > 1e30):
            raise ValueError("Using the 'liblinear' solver while X contains a maximum value "
                             "> 1e30 results in a frozen fit. Please choose another solver "
                             "or rescale the input X.")
        penalty = self._penalty()
        if penalty == "l1" and self.dual:
            raise ValueError("Solver liblinear supports only dual=False with penalty='l1', "
                             "got dual=True")
        self.coef_, self.intercept_, self.n_iter_ = fit_liblinear(
            self, X, y, self.C, self.fit_intercept, self.intercept_scaling,
            self.class_weight, penalty, self.dual, self.verbose, self.max_iter,
            self.tol, self.random_state, sample_weight=sample_weight)
        return self

    def _penalty(self) -> str:
        """LIBLINEAR's penalty: `penalty` when given, else l1_ratio 0 (l2) or 1 (l1)."""
        if self.penalty != "deprecated":
            return str(self.penalty)
        if self.l1_ratio in (0, 0.0, None):
            return "l2"
        if self.l1_ratio == 1:
            return "l1"
        raise ValueError("The 'liblinear' solver supports l1_ratio 0 (penalty 'l2') or 1 "
                         f"(penalty 'l1') only, got l1_ratio={self.l1_ratio!r}")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = True  # one-vs-rest
        return tags

    def predict_proba(self, X: Any) -> np.ndarray:
        if len(getattr(self, "classes_", ())) > 2:
            return self._predict_proba_lr(X)  # one-vs-rest, normalised
        return super().predict_proba(X)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        return np.log(self.predict_proba(X))


# Hinge's names of the same classes (see hinge/sklearn/_libsvm.py)
HingeLinearSVC, HingeLinearSVR, HingeLogisticRegression = LinearSVC, LinearSVR, \
    LogisticRegression
