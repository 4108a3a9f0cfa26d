"""Every Hinge estimator against scikit-learn's own on scikit-learn's bundled data sets.

Kernel estimators (Hinge's SMO against scikit-learn's LIBSVM, the same dual and the same
stop rule): the same support vectors in the same order, dual coefficients, intercepts and
decision values within 1e-10, the same predictions and iteration counts. (The nu
formulations too: scikit-learn's LIBSVM sums nu * w_i row by row where LIBSVM takes
nu * l, and Hinge's SMO does the same with instance weights, which Hinge's estimators
always pass, ones by default, as scikit-learn's.)

Linear estimators (Hinge's certified solvers against LIBLINEAR): with tol_rule="gap" the
relative duality gap Hinge certifies is <= tol, so P(w_hinge) is within tol of the
optimum; scikit-learn's w (LIBLINEAR at a tight tol) cannot be better than that, and the
two agree on the predictions.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import datasets, svm
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from hinge.sklearn import (
    HingeLinearSVC,
    HingeLinearSVR,
    HingeLogisticRegression,
    HingeNuSVC,
    HingeNuSVR,
    HingeOneClassSVM,
    HingeSVC,
    HingeSVR,
)


def _dense(a: Any) -> np.ndarray:
    return a.toarray() if sp.issparse(a) else np.asarray(a)


def _data(name: str) -> tuple[Any, np.ndarray]:
    if name in ("cancer_scaled", "wine_scaled"):
        X, y = (datasets.load_breast_cancer if name == "cancer_scaled"
                else datasets.load_wine)(return_X_y=True)
        return StandardScaler().fit_transform(X), y
    if name == "iris_sparse":
        X, y = datasets.load_iris(return_X_y=True)
        return sp.csr_matrix(X), y
    loader = {"iris": datasets.load_iris, "wine": datasets.load_wine,
              "digits": datasets.load_digits, "diabetes": datasets.load_diabetes,
              "cancer": datasets.load_breast_cancer}[name]
    return loader(return_X_y=True)


HINGE = {"SVC": HingeSVC, "NuSVC": HingeNuSVC, "SVR": HingeSVR, "NuSVR": HingeNuSVR,
         "OneClassSVM": HingeOneClassSVM}

KERNEL_CASES = [
    ("SVC", {"C": 10.0}, "cancer_scaled", 1e-10),
    ("SVC", {"kernel": "poly", "degree": 2, "C": 0.5}, "iris", 1e-10),
    ("SVC", {"kernel": "linear", "C": 0.5}, "iris_sparse", 1e-10),
    ("SVC", {"kernel": "sigmoid", "gamma": 0.01}, "cancer_scaled", 1e-10),
    ("SVC", {"C": 3.0, "class_weight": "balanced"}, "wine", 1e-10),
    ("SVC", {"gamma": 0.001, "C": 5.0}, "digits", 1e-10),
    ("SVC", {"kernel": "precomputed"}, "iris", 1e-10),
    ("SVC", {"kernel": "linear", "C": np.inf}, "iris", 1e-10),
    ("SVC", {"gamma": 0.0}, "iris", 1e-10),
    ("NuSVC", {"nu": 0.3}, "iris", 1e-10),
    ("NuSVC", {"nu": 0.2}, "digits", 1e-10),
    ("SVR", {"C": 50.0, "epsilon": 5.0}, "diabetes", 1e-10),
    ("NuSVR", {"C": 50.0, "nu": 0.4}, "diabetes", 1e-10),
    ("OneClassSVM", {"nu": 0.1, "gamma": 0.1}, "iris", 1e-10),
    ("OneClassSVM", {"nu": 0.3}, "digits", 1e-10),
]


@pytest.mark.parametrize(("name", "params", "data", "atol"), KERNEL_CASES,
                         ids=[f"{n}-{d}-{i}" for i, (n, _, d, _) in enumerate(KERNEL_CASES)])
def test_kernel_estimator_is_libsvm_s(name: str, params: dict[str, Any], data: str,
                                      atol: float) -> None:
    X, y = _data(data)
    if params.get("kernel") == "precomputed":
        X = X @ X.T
    if np.isinf(params.get("C", 1.0)):  # a separable pair: the hard margin
        X, y = X[:100], y[:100]
    target = None if name == "OneClassSVM" else y
    ours = HINGE[name](**params).fit(X, target)
    theirs = getattr(svm, name)(**params).fit(X, target)
    np.testing.assert_array_equal(ours.support_, theirs.support_)
    assert ours.support_.dtype == theirs.support_.dtype
    np.testing.assert_array_equal(ours.n_support_, theirs.n_support_)
    assert type(ours.dual_coef_) is type(theirs.dual_coef_)
    assert type(ours.support_vectors_) is type(theirs.support_vectors_)
    assert ours.support_vectors_.shape == theirs.support_vectors_.shape
    np.testing.assert_allclose(_dense(ours.support_vectors_), _dense(theirs.support_vectors_))
    np.testing.assert_allclose(_dense(ours.dual_coef_), _dense(theirs.dual_coef_), rtol=0,
                               atol=atol)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=0, atol=atol)
    values = "predict" if name in ("SVR", "NuSVR") else "decision_function"
    np.testing.assert_allclose(getattr(ours, values)(X), getattr(theirs, values)(X), rtol=0,
                               atol=atol * 10)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    assert ours.fit_status_ == theirs.fit_status_ == 0
    np.testing.assert_array_equal(ours.n_iter_, theirs.n_iter_)  # the same SMO path
    if params.get("kernel") == "linear":
        assert type(ours.coef_) is type(theirs.coef_)
        np.testing.assert_allclose(_dense(ours.coef_), _dense(theirs.coef_), atol=1e-9)
        coef = ours.coef_
        assert not (coef.data if sp.issparse(coef) else coef).flags.writeable


def test_sample_weights_are_libsvm_s() -> None:
    X, y = _data("wine")
    weights = np.asarray(np.random.RandomState(0).uniform(0.0, 3.0, y.shape[0]))
    weights[:5] = 0.0  # left out, as LIBSVM leaves them out
    pairs: list[tuple[Any, Any]] = [(HingeSVC(C=2.0), svm.SVC(C=2.0)),
                                    (HingeSVR(C=10.0), svm.SVR(C=10.0)),
                                    (HingeNuSVC(nu=0.3), svm.NuSVC(nu=0.3)),
                                    (HingeOneClassSVM(nu=0.2), svm.OneClassSVM(nu=0.2)),
                                    (HingeNuSVR(C=10.0), svm.NuSVR(C=10.0)),
                                    (HingeNuSVR(C=0.3, nu=0.7), svm.NuSVR(C=0.3, nu=0.7))]
    for ours, theirs in pairs:
        target = None if isinstance(ours, HingeOneClassSVM) else y
        ours.fit(X, target, sample_weight=weights)
        theirs.fit(X, target, sample_weight=weights)
        np.testing.assert_array_equal(ours.n_iter_, theirs.n_iter_)
        # scikit-learn's support_ counts the rows of positive weight only (its LIBSVM
        # drops the others first); Hinge's are rows of X, as the attribute says
        kept = np.flatnonzero(weights > 0)
        np.testing.assert_array_equal(ours.support_, kept[theirs.support_])
        np.testing.assert_array_equal(ours.support_vectors_, theirs.support_vectors_)
        np.testing.assert_allclose(ours.dual_coef_, theirs.dual_coef_, rtol=0, atol=1e-10)
        np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=0, atol=1e-10)
        values = "predict" if isinstance(ours, (HingeSVR, HingeNuSVR)) else "decision_function"
        np.testing.assert_allclose(getattr(ours, values)(X), getattr(theirs, values)(X),
                                   rtol=0, atol=1e-9)


def test_callable_kernel_is_the_precomputed_one() -> None:
    X, y = _data("iris")

    def kernel(a: Any, b: Any) -> Any:
        return a @ b.T

    ours = HingeSVC(kernel=kernel).fit(X, y)
    theirs = svm.SVC(kernel=kernel).fit(X, y)
    np.testing.assert_array_equal(ours.support_, theirs.support_)
    np.testing.assert_allclose(ours.decision_function(X), theirs.decision_function(X),
                               atol=1e-9)


def test_max_iter_stops_the_fit_with_libsvm_s_warning() -> None:
    X, y = _data("iris")
    with pytest.warns(Warning, match=r"Solver terminated early \(max_iter=3\)") as caught:
        ours = HingeSVC(max_iter=3).fit(X, y)
    assert caught[0].category.__name__ == "ConvergenceWarning"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = svm.SVC(max_iter=3).fit(X, y)
    assert ours.fit_status_ == theirs.fit_status_ == 1
    np.testing.assert_array_equal(ours.n_iter_, theirs.n_iter_)
    np.testing.assert_array_equal(ours.n_iter_, [3, 3, 3])


def test_max_iter_minus_one_is_no_limit_as_sklearn_s() -> None:
    """scikit-learn's LIBSVM takes no step limit at max_iter=-1 (LIBSVM's own stops at
    max(1e7, 100 l) steps, as Hinge's SMO by default): Hinge's SMO is given its largest,
    1e8 steps. (The polynomial SVR of tests/hinge/scripts/gallery/plot_svm_regression.py
    takes 14,925,202 steps in both; at 1e7 Hinge's stopped with fit_status_ 1.)"""
    from solvers.params import SOLVERS

    largest = int(next(p.maximum for p in SOLVERS["smo"].params
                       if p.name == "max_iter" and p.maximum is not None))
    X, y = _data("iris")
    model = HingeSVC().fit(X, y)
    for max_iter, steps in ((-1, largest), (5, 5), (10 * largest, largest)):
        model.set_params(max_iter=max_iter)
        assert model._hinge_params("rbf", 0)["max_iter"] == steps


def test_errors_and_ties_are_sklearn_s() -> None:
    from sklearn.exceptions import NotFittedError

    X, y = _data("iris")
    with pytest.raises(NotFittedError):
        HingeSVC().predict(X)
    dense = HingeSVC().fit(X, y)
    with pytest.raises(ValueError, match="cannot use sparse input in 'SVC' trained on dense "
                                         "data"):
        dense.predict(sp.csr_matrix(X))
    with pytest.raises(ValueError, match="break_ties must be False"):
        HingeSVC(break_ties=True, decision_function_shape="ovo").fit(X, y).predict(X)
    with pytest.raises(TypeError, match="Sparse precomputed"):
        HingeSVC(kernel="precomputed").fit(sp.csr_matrix(X @ X.T), y)
    # ties of the one-vs-one votes: duplicated rows of three classes
    tied = np.repeat(np.eye(3), 4, axis=0)
    labels = np.repeat([0, 1, 2], 4)
    rows = np.full((6, 3), 1.0 / 3.0)
    ours = HingeSVC(kernel="linear").fit(tied, labels)
    theirs = svm.SVC(kernel="linear").fit(tied, labels)
    np.testing.assert_array_equal(ours.predict(rows), theirs.predict(rows))
    np.testing.assert_allclose(ours.decision_function(rows), theirs.decision_function(rows),
                               atol=1e-12)


# ---- the linear estimators: at the certified tolerance ---------------------------------


def _primal_svc(X: Any, y: np.ndarray, coef: np.ndarray, b: float, C: float, loss: str,
                scaling: float = 1.0) -> float:
    margins = 1.0 - y * (X @ coef + b)
    hinge = np.maximum(margins, 0.0)
    return float(0.5 * (coef @ coef + (b / scaling) ** 2)
                 + C * np.sum(hinge if loss == "hinge" else hinge ** 2))


def _primal_logistic(X: Any, y: np.ndarray, coef: np.ndarray, b: float, C: float,
                     penalty: str) -> float:
    reg = np.abs(coef).sum() + abs(b) if penalty == "l1" else 0.5 * (coef @ coef + b * b)
    return float(reg + C * np.sum(np.logaddexp(0.0, -y * (X @ coef + b))))


def _primal_svr(X: Any, y: np.ndarray, coef: np.ndarray, b: float, C: float, loss: str,
                epsilon: float) -> float:
    excess = np.maximum(np.abs(X @ coef + b - y) - epsilon, 0.0)
    return float(0.5 * (coef @ coef + b * b)
                 + C * np.sum(excess if loss == "epsilon_insensitive" else excess ** 2))


LINEAR_SVC_CASES = [
    ({"loss": "squared_hinge", "dual": False}, "cancer_scaled"),
    ({"loss": "squared_hinge", "dual": True}, "cancer_scaled"),
    ({"loss": "hinge", "dual": True}, "cancer_scaled"),
    ({"loss": "squared_hinge", "dual": False, "C": 0.1}, "iris"),
]


def _linear_svc_pair(params: dict[str, Any], X: Any, y: np.ndarray, tol: float
                     ) -> tuple[Any, Any]:
    """Hinge's LinearSVC certified to `tol` (relative gap) and scikit-learn's at tol 1e-10."""
    ours = HingeLinearSVC(**params, tol=tol, tol_rule="gap", max_iter=100_000).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = svm.LinearSVC(**params, tol=1e-10, max_iter=100_000).fit(X, y)
    assert ours.converged_ and ours.relative_gap_ <= tol
    return ours, theirs


@pytest.mark.parametrize(("params", "data"), LINEAR_SVC_CASES)
def test_linear_svc_is_at_the_certified_optimum(params: dict[str, Any], data: str) -> None:
    X, y = _data(data)
    tol = 1e-8
    ours, theirs = _linear_svc_pair(params, X, y, tol)
    assert ours.coef_.shape == theirs.coef_.shape and ours.intercept_.shape == \
        theirs.intercept_.shape
    C = params.get("C", 1.0)
    for k, label in enumerate(ours.classes_ if len(ours.classes_) > 2 else ours.classes_[1:]):
        signs = np.where(y == label, 1.0, -1.0)
        mine = _primal_svc(X, signs, ours.coef_[k], ours.intercept_[k], C, params["loss"])
        ref = _primal_svc(X, signs, theirs.coef_[k], theirs.intercept_[k], C, params["loss"])
        assert mine <= ref * (1 + tol), (mine, ref)
    assert np.mean(ours.predict(X) == theirs.predict(X)) >= 0.99


def _primal_crammer_singer(X: Any, y: np.ndarray, classes: np.ndarray, coef: np.ndarray,
                           intercept: np.ndarray, C: float) -> float:
    """LIBLINEAR -s 4 with the bias feature (value 1): 1/2 sum_m (||w_m||^2 + b_m^2) +
    C sum_i max_m (e_i^m + w_m.x_i - w_yi.x_i)."""
    scores = X @ coef.T + intercept
    rows, own = np.arange(y.shape[0]), np.searchsorted(classes, y)
    margins = np.ones_like(scores)
    margins[rows, own] = 0.0
    loss = np.max(margins + scores - scores[rows, own][:, None], axis=1)
    return float(0.5 * (np.sum(coef ** 2) + np.sum(intercept ** 2)) + C * loss.sum())


@pytest.mark.parametrize(("params", "data"), [
    ({"multi_class": "crammer_singer"}, "iris"),
    ({"multi_class": "crammer_singer", "C": 0.1}, "wine_scaled"),
    ({"penalty": "l1", "dual": False, "C": 0.05}, "cancer_scaled"),
    ({"penalty": "l1", "dual": False, "C": 1.0}, "cancer_scaled")])
def test_linear_svc_crammer_singer_and_l1_are_at_the_certified_optimum(
        params: dict[str, Any], data: str) -> None:
    """-s 4 (crammer_singer; three classes: for two scikit-learn keeps w_1 - w_0 only)
    and -s 5 (the L1 regulariser, squared hinge; the bias feature's weight regularised
    as the others, |b| here)."""
    X, y = _data(data)
    tol = 1e-8
    ours, theirs = _linear_svc_pair(params, X, y, tol)
    assert ours.coef_.shape == theirs.coef_.shape
    C = params.get("C", 1.0)
    if "multi_class" in params:
        assert ours.solver_ == "crammer_singer"
        mine, ref = (_primal_crammer_singer(X, y, model.classes_, model.coef_,
                                            model.intercept_, C) for model in (ours, theirs))
    else:
        assert ours.solver_ == "l1_cd"
        signs = np.where(y == ours.classes_[1], 1.0, -1.0)
        mine, ref = (float(np.abs(model.coef_).sum() + np.abs(model.intercept_).sum()
                           + C * np.sum(np.maximum(1.0 - signs * model.decision_function(X),
                                                   0.0) ** 2)) for model in (ours, theirs))
        np.testing.assert_array_equal(ours.coef_ != 0, theirs.coef_ != 0)  # the same support
    assert mine <= ref * (1 + tol), (mine, ref)
    # the same predictions wherever the reference's decision is not a tie within the two
    # models' distance (wine at C = 0.1 has a row whose top two classes tie at the
    # optimum: 2e-12 apart in scikit-learn's model for one random_state, 6e-9 in ours)
    ours_scores, their_scores = ours.decision_function(X), theirs.decision_function(X)
    apart = float(np.abs(ours_scores - their_scores).max())
    ranked = np.sort(their_scores.reshape(len(y), -1), axis=1)
    margin = (ranked[:, -1] - ranked[:, -2]) if ranked.shape[1] > 1 else np.abs(ranked[:, 0])
    decided = margin > 2 * apart
    assert apart < 1e-5 and decided.mean() >= 0.99, (apart, decided.mean())
    np.testing.assert_array_equal(ours.predict(X)[decided], theirs.predict(X)[decided])


def test_every_liblinear_solver_type_trains_with_instance_weights() -> None:
    """scikit-learn's LIBLINEAR takes sample weights with every solver type; so does the
    Hinge solver each type maps to (the same solver with and without weights)."""
    from hinge.sklearn._liblinear import _SOLVERS
    from solvers.params import SOLVERS

    assert [name for name, _ in _SOLVERS.values() if not SOLVERS[name].sample_weights] == []


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_weighted_linear_svc_dual_is_liblinear_s_weighted_dual_cd(loss: str) -> None:
    """scikit-learn's LIBLINEAR solves -s 3 / -s 1 with instance weights as per-row bounds
    C_i = C w_i in its dual CD (rows of weight 0 left out); Hinge's dual CD the same:
    at the certified optimum of the weighted primal."""
    X, y = _data("cancer_scaled")
    weights = np.asarray(np.random.RandomState(0).uniform(0.0, 3.0, y.shape[0]))
    weights[:5] = 0.0
    tol = 1e-8
    ours = HingeLinearSVC(loss=loss, dual=True, tol=tol, tol_rule="gap",
                          max_iter=100_000).fit(X, y, sample_weight=weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = svm.LinearSVC(loss=loss, dual=True, tol=1e-10,
                               max_iter=100_000).fit(X, y, sample_weight=weights)
    assert ours.solver_ == "dcd" and ours.converged_ and ours.relative_gap_ <= tol
    signs = np.where(y == ours.classes_[1], 1.0, -1.0)

    def primal(coef: np.ndarray, b: float) -> float:
        slack = np.maximum(1.0 - signs * (X @ coef + b), 0.0)
        return float(0.5 * (coef @ coef + b * b)
                     + np.sum(weights * (slack if loss == "hinge" else slack ** 2)))

    mine = primal(ours.coef_[0], ours.intercept_[0])
    ref = primal(theirs.coef_[0], theirs.intercept_[0])
    assert mine <= ref * (1 + tol), (mine, ref)
    # and scikit-learn's fit (tol=1e-10) is as close to it: the same weighted problem
    assert abs(mine - ref) <= 1e-7 * ref
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


@pytest.mark.parametrize(("penalty", "dual"), [("l2", False), ("l2", True), ("l1", False)])
def test_logistic_regression_is_at_the_certified_optimum(penalty: str, dual: bool) -> None:
    X, y = _data("cancer_scaled")
    tol = 1e-8
    ours = HingeLogisticRegression(penalty=penalty, dual=dual, tol=tol, tol_rule="gap",
                                   max_iter=10_000).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = LogisticRegression(solver="liblinear", l1_ratio=1.0 if penalty == "l1"
                                    else 0.0, dual=dual, tol=1e-10, max_iter=10_000).fit(X, y)
    assert ours.converged_ and ours.relative_gap_ <= tol
    signs = np.where(y == ours.classes_[1], 1.0, -1.0)
    mine = _primal_logistic(X, signs, ours.coef_[0], ours.intercept_[0], 1.0, penalty)
    ref = _primal_logistic(X, signs, theirs.coef_[0], theirs.intercept_[0], 1.0, penalty)
    assert mine <= ref * (1 + tol), (mine, ref)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-3)
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_l1_logistic_with_a_large_intercept_scaling_meets_liblinear_s_rule() -> None:
    """plot_logistic_path's 4th C (100 l1_min_c), intercept_scaling=1e4, random_state=12:
    the bias column (1e4) keeps a violation its steps of < 1e-12 cannot mend; LIBLINEAR
    leaves such coordinates out of its stop rule and stops after ten quadratic models that
    move nothing, as Hinge now does (before, the fit ran to max_iter, the example's 1e6)."""
    X, y = datasets.load_iris(return_X_y=True)
    X, y = X[y != 2], y[y != 2]
    X /= X.max()
    C = float(svm.l1_min_c(X, y, loss="log") * np.logspace(0, 10, 16)[3])  # the 4th C
    params: dict[str, Any] = {"l1_ratio": 1.0, "tol": 1e-6, "max_iter": 1000,
                              "intercept_scaling": 1e4, "C": C, "random_state": 12}
    theirs = LogisticRegression(solver="liblinear", **params).fit(X, y)
    assert theirs.n_iter_.max() < 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = HingeLogisticRegression(**params).fit(X, y)
    assert ours.n_iter_.max() < 1000 and ours.converged_


@pytest.mark.parametrize(("loss", "dual"), [("epsilon_insensitive", True),
                                            ("squared_epsilon_insensitive", True),
                                            ("squared_epsilon_insensitive", False)])
def test_linear_svr_is_at_the_certified_optimum(loss: str, dual: bool) -> None:
    X, y = _data("diabetes")
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    tol, C, epsilon = 1e-8, 1.0, 0.1
    ours = HingeLinearSVR(loss=loss, dual=dual, C=C, epsilon=epsilon, tol=tol,
                          tol_rule="gap", max_iter=100_000).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = svm.LinearSVR(loss=loss, dual=dual, C=C, epsilon=epsilon, tol=1e-10,
                               max_iter=100_000).fit(X, y)
    assert ours.converged_ and ours.relative_gap_ <= tol
    assert ours.coef_.shape == theirs.coef_.shape == (X.shape[1],)
    mine = _primal_svr(X, y, ours.coef_, ours.intercept_[0], C, loss, epsilon)
    ref = _primal_svr(X, y, theirs.coef_, theirs.intercept_[0], C, loss, epsilon)
    assert mine <= ref * (1 + tol), (mine, ref)
    np.testing.assert_allclose(ours.predict(X), theirs.predict(X), atol=1e-2)


def test_linear_max_iter_is_a_hard_cap_with_liblinear_s_warning() -> None:
    X, y = _data("iris")
    with pytest.warns(Warning, match="Liblinear failed to converge"):
        ours = HingeLinearSVC(dual=True, max_iter=1).fit(X, y)
    assert ours.n_iter_ == 1
    # the primal Newton solver (tron, -s 2 and -s 0): unscaled breast cancer is far from
    # its optimum after a few Newton steps, where Hinge's fallback (exact Newton steps)
    # would certify it past max_iter; the dual CD with sample weights (-s 1, 3), where
    # the fallback would continue with tron or ocas and then the interior point
    X, y = _data("cancer")
    weights = np.ones(y.shape[0])
    for max_iter in (1, 3):
        for estimator, sample_weight, solver in [
                (HingeLinearSVC(dual=False, max_iter=max_iter), None, "tron"),
                (HingeLogisticRegression(max_iter=max_iter), None, "tron"),
                (HingeLinearSVC(dual=True, max_iter=max_iter), weights, "dcd"),
                (HingeLinearSVC(loss="hinge", dual=True, max_iter=max_iter), weights, "dcd")]:
            with pytest.warns(ConvergenceWarning, match="Liblinear failed to converge"):
                estimator.fit(X, y, sample_weight=sample_weight)
            assert estimator.solver_ == solver
            assert np.max(estimator.n_iter_) == max_iter
            assert not estimator.converged_
    # tol_rule="gap": the fallback continues to the certificate, no warning when it holds
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        gap = HingeLinearSVC(dual=False, max_iter=2, tol_rule="gap").fit(X, y)
    assert gap.converged_ and gap.n_iter_ > 2
    with pytest.warns(Warning, match="Liblinear failed to converge"):
        crammer = HingeLinearSVC(multi_class="crammer_singer", max_iter=2).fit(X, y)
    assert crammer.n_iter_ <= 2


def test_linear_svc_sparse_fit_and_sparsify() -> None:
    X, y = _data("iris_sparse")
    ours = HingeLinearSVC(penalty="l1", dual=False, C=0.05).fit(X, y)
    theirs = svm.LinearSVC(penalty="l1", dual=False, C=0.05).fit(X, y)
    assert type(ours.coef_) is type(theirs.coef_)
    ours.sparsify()
    assert sp.issparse(ours.coef_)
    np.testing.assert_array_equal(ours.predict(X), ours.densify().predict(X))
    with pytest.raises(ValueError, match="Unsupported set of arguments"):
        HingeLinearSVC(penalty="l1", loss="hinge").fit(X, y)


@pytest.mark.parametrize(("name", "params", "data"), [
    ("SVC", {"C": 1.0}, "iris"),
    ("SVC", {"C": 2.0, "class_weight": "balanced"}, "wine"),
    ("SVC", {"C": 1.0}, "cancer_scaled"),
    ("SVC", {"kernel": "linear", "C": 0.5}, "iris_sparse"),
    ("NuSVC", {"nu": 0.3}, "iris"),
    ("NuSVC", {"nu": 0.3}, "wine"),
])
def test_probabilities_are_sklearn_s_at_the_same_random_state(name: str,
                                                              params: dict[str, Any],
                                                              data: str) -> None:
    """scikit-learn's Platt folds (its generator, its shuffle), Hinge's fits. (NuSVC's
    folds' optimum is not always unique: the same initial alpha as scikit-learn's, nu
    summed row by row, picks the same one.)"""
    X, y = _data(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # scikit-learn 1.9 deprecates it
        ours = HINGE[name](**params, probability=True, random_state=3).fit(X, y)
        theirs = getattr(svm, name)(**params, probability=True, random_state=3).fit(X, y)
        np.testing.assert_allclose(ours.probA_, theirs.probA_, rtol=0, atol=1e-9)
        np.testing.assert_allclose(ours.probB_, theirs.probB_, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=0,
                               atol=1e-9)
