"""hinge.sklearn in this process: HingeSVC against scikit-learn's SVC (LIBSVM) on the same
problem, HingeLinearSVC against the certified optimum of its problem, scikit-learn's
attribute conventions, Pipeline and GridSearchCV, and the errors of fit.

SVC and HingeSVC solve the same dual with the same stop rule (tol is LIBSVM's eps on the
maximal violating pair); at tol 1e-3 both stop near, not at, the optimum, so decision
values are compared by correlation (>= 0.99999) and labels exactly, and at tol 1e-8 the
dual coefficients and intercepts to 1e-5.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import MaxAbsScaler, StandardScaler
from sklearn.svm import SVC

from hinge.sklearn import HingeLinearSVC, HingeSVC, svmlight_bytes
from solvers.svmlight import parse_stream
from testkit import bundled
from testkit.certified import certified_optimum, primal_value


def _data(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    return bundled.load(name)


def _dense(X: Any) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


# ---- HingeSVC against scikit-learn's SVC ------------------------------------------------

SVC_CASES = [
    ("cancer", {"kernel": "rbf", "C": 10.0, "gamma": "scale"}),
    ("cancer", {"kernel": "linear", "C": 1.0}),
    ("cancer", {"kernel": "poly", "C": 1.0, "degree": 3, "gamma": "auto", "coef0": 1.0}),
    ("cancer", {"kernel": "sigmoid", "C": 1.0, "gamma": 0.01, "coef0": 0.0}),
    ("wine", {"kernel": "rbf", "C": 3.0, "gamma": "scale"}),
    ("iris", {"kernel": "rbf", "C": 1.0, "gamma": 0.5, "decision_function_shape": "ovo"}),
    ("iris", {"kernel": "linear", "C": 0.5, "class_weight": "balanced"}),
    ("wine", {"kernel": "rbf", "C": 2.0, "class_weight": {1: 3.0, 3: 0.5}}),
]


@pytest.mark.parametrize(("name", "params"), SVC_CASES,
                         ids=[f"{n}-{p['kernel']}-{i}" for i, (n, p) in enumerate(SVC_CASES)])
def test_svc_decision_values_and_labels_are_libsvm_s(name: str, params: dict[str, Any]) -> None:
    X, y = _data(name)
    ours = HingeSVC(**params).fit(X, y)
    theirs = SVC(**params).fit(X, y)
    assert ours._gamma == pytest.approx(theirs._gamma, rel=1e-12)
    mine, ref = ours.decision_function(X), theirs.decision_function(X)
    assert mine.shape == ref.shape
    correlation = np.corrcoef(mine.ravel(), ref.ravel())[0, 1]
    assert correlation >= 0.99999, correlation
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    # the same support vectors, in the same order (by class, then by row)
    np.testing.assert_array_equal(ours.n_support_, theirs.n_support_)
    np.testing.assert_array_equal(ours.support_, theirs.support_)
    assert ours.dual_coef_.shape == theirs.dual_coef_.shape
    assert ours.intercept_.shape == theirs.intercept_.shape
    assert ours.converged_ and ours.fit_status_ == 0
    assert ours.n_iter_.shape == theirs.n_iter_.shape


@pytest.mark.parametrize("name", ["cancer", "iris"])
def test_svc_dual_coef_and_intercept_signs_at_a_tight_tol(name: str) -> None:
    X, y = _data(name)
    params = {"kernel": "rbf", "C": 2.0, "gamma": 0.2, "tol": 1e-8}
    ours = HingeSVC(**params).fit(X, y)
    theirs = SVC(**params).fit(X, y)
    np.testing.assert_array_equal(ours.support_, theirs.support_)
    np.testing.assert_allclose(_dense(ours.dual_coef_), _dense(theirs.dual_coef_), atol=1e-5)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, atol=1e-5)
    np.testing.assert_allclose(_dense(ours.support_vectors_), _dense(theirs.support_vectors_))
    np.testing.assert_allclose(ours.decision_function(X), theirs.decision_function(X),
                               atol=1e-5)


@pytest.mark.parametrize(("name", "rows"), [("wine", 3), ("cancer", 1)])
def test_svc_linear_kernel_coef_is_sklearn_s(name: str, rows: int) -> None:
    X, y = _data(name)
    ours = HingeSVC(kernel="linear", C=1.0, tol=1e-8).fit(X, y)
    theirs = SVC(kernel="linear", C=1.0, tol=1e-8).fit(X, y)
    assert ours.coef_.shape == theirs.coef_.shape == (rows, X.shape[1])  # one per pair
    np.testing.assert_allclose(ours.coef_, _dense(theirs.coef_), atol=1e-5)
    if rows == 1:
        np.testing.assert_allclose(X @ ours.coef_[0] + ours.intercept_[0],
                                   ours.decision_function(X), atol=1e-9)
    with pytest.raises(AttributeError, match="linear kernel"):
        _ = HingeSVC(kernel="rbf").fit(X, y).coef_


def test_svc_dense_input_gives_dense_attributes_sparse_gives_sparse() -> None:
    X, y = _data("iris")
    dense = HingeSVC(C=1.0).fit(X.toarray(), y)
    sparse = HingeSVC(C=1.0).fit(X, y)
    assert isinstance(dense.support_vectors_, np.ndarray)
    assert isinstance(dense.dual_coef_, np.ndarray)
    assert sp.issparse(sparse.support_vectors_) and sp.issparse(sparse.dual_coef_)
    np.testing.assert_array_equal(dense.support_vectors_, sparse.support_vectors_.toarray())
    np.testing.assert_allclose(dense.decision_function(X), sparse.decision_function(X))


def test_svc_break_ties_predicts_the_argmax_of_the_ovr_values() -> None:
    X, y = _data("wine")
    clf = HingeSVC(C=1.0, break_ties=True).fit(X, y)
    np.testing.assert_array_equal(clf.predict(X),
                                  clf.classes_[np.argmax(clf.decision_function(X), axis=1)])
    np.testing.assert_array_equal(clf.predict(X), SVC(C=1.0, break_ties=True).fit(X, y)
                                  .predict(X))


def test_svc_probabilities_sum_to_one_and_follow_the_decision_value() -> None:
    X, y = _data("cancer")
    clf = HingeSVC(C=1.0, probability=True, random_state=3).fit(X, y)
    probabilities = clf.predict_proba(X)
    assert probabilities.shape == (y.size, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-12)
    order = np.argsort(clf.decision_function(X))
    assert np.all(np.diff(probabilities[order, 1]) >= -1e-12)
    assert clf.probA_.shape == clf.probB_.shape == (1,) and clf.probA_[0] < 0
    np.testing.assert_allclose(clf.predict_log_proba(X), np.log(probabilities))
    assert not hasattr(HingeSVC().fit(X, y), "predict_proba")


# ---- HingeLinearSVC against the certified optimum ---------------------------------------

LINEAR_CASES = [
    ("auto", "squared_hinge", True),
    ("tron", "squared_hinge", True),
    ("dcd", "hinge", True),
    ("acf", "squared_hinge", False),
    ("ocas", "hinge", True),
]


@pytest.mark.parametrize(("solver", "loss", "fit_intercept"), LINEAR_CASES)
def test_linear_svc_reaches_the_certified_optimum(solver: str, loss: str,
                                                  fit_intercept: bool) -> None:
    """Every one-vs-rest output is within tol of its problem's certified optimum (clarabel
    to 1e-9), and the estimator says converged with a gap <= tol."""
    X, y = _data("wine")
    C, tol = 0.5, 1e-4
    clf = HingeLinearSVC(solver=solver, loss=loss, C=C, tol=tol,
                         fit_intercept=fit_intercept).fit(X, y)
    assert clf.coef_.shape == (3, X.shape[1])
    assert clf.converged_ and clf.relative_gap_ is not None and clf.relative_gap_ <= tol
    short = "l1" if loss == "hinge" else "l2"
    bias = "augment" if fit_intercept else None
    intercepts = np.broadcast_to(np.asarray(clf.intercept_, dtype=np.float64), (3,))
    for k, label in enumerate(clf.classes_):
        signs = np.where(y == label, 1.0, -1.0)
        reference = certified_optimum(X, signs, C=C, loss=short, bias=bias)  # type: ignore[arg-type]
        primal = primal_value(X, signs, clf.coef_[k], float(intercepts[k]), C=C, loss=short,
                              bias=bias)
        assert reference.relative_suboptimality(primal) <= tol
    if not fit_intercept:
        assert clf.intercept_ == 0.0


def test_linear_svc_binary_shapes_and_signs_are_linear_svc_s() -> None:
    X, y = _data("cancer")
    clf = HingeLinearSVC(C=1.0, tol=1e-6).fit(X, y)
    assert clf.coef_.shape == (1, X.shape[1]) and clf.intercept_.shape == (1,)
    values = clf.decision_function(X)
    assert values.shape == (y.size,)
    np.testing.assert_allclose(values, X @ clf.coef_[0] + clf.intercept_[0])
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[(values > 0).astype(int)])
    assert isinstance(clf.n_iter_, int) and clf.n_iter_ >= 1
    # the optimum of the problem LinearSVC solves (LIBLINEAR -s 1 -B 1)
    signs = np.where(y == clf.classes_[1], 1.0, -1.0)
    reference = certified_optimum(X, signs, C=1.0, loss="l2", bias="augment",
                                  method="liblinear")
    primal = primal_value(X, signs, clf.coef_[0], clf.intercept_[0], C=1.0, loss="l2",
                          bias="augment")
    assert reference.relative_suboptimality(primal) <= 1e-6


def test_linear_svc_class_weight_is_a_cost_per_class() -> None:
    X, y = _data("cancer")
    weights = {-1.0: 2.0, 1.0: 0.5}
    clf = HingeLinearSVC(C=1.0, tol=1e-6, class_weight=weights).fit(X, y)
    signs = np.where(y == 1.0, 1.0, -1.0)
    reference = certified_optimum(X, signs, C=1.0, loss="l2", bias="augment",
                                  class_weight=weights)
    primal = primal_value(X, signs, clf.coef_[0], clf.intercept_[0], C=1.0, loss="l2",
                          bias="augment", class_weight=weights)
    assert reference.relative_suboptimality(primal) <= 1e-6


def test_labels_may_be_strings_and_sparse_equals_dense() -> None:
    X, y = _data("iris")
    names = np.array(["setosa", "versicolor", "virginica"])[y.astype(int) - 1]
    sparse = HingeLinearSVC(solver="tron").fit(X, names)
    dense = HingeLinearSVC(solver="tron").fit(X.toarray(), names)
    np.testing.assert_array_equal(sparse.classes_, ["setosa", "versicolor", "virginica"])
    np.testing.assert_allclose(sparse.coef_, dense.coef_)
    assert set(sparse.predict(X)) <= set(names)
    svc = HingeSVC().fit(X, names)
    np.testing.assert_array_equal(svc.predict(X), SVC().fit(X, names).predict(X))


# ---- in scikit-learn's machinery --------------------------------------------------------


def test_grid_search_over_a_pipeline_scores_as_sklearn_svc() -> None:
    """The same grid over the same folds: identical predictions, so identical CV scores."""
    X, y = _data("wine")
    grid = {"svc__C": [0.5, 5.0], "svc__gamma": ["scale", 0.05]}
    folds = KFold(3, shuffle=True, random_state=0)
    ours = GridSearchCV(Pipeline([("scale", MaxAbsScaler()), ("svc", HingeSVC())]), grid,
                        cv=folds).fit(X, y)
    theirs = GridSearchCV(Pipeline([("scale", MaxAbsScaler()), ("svc", SVC())]), grid,
                          cv=folds).fit(X, y)
    np.testing.assert_array_equal(ours.cv_results_["mean_test_score"],
                                  theirs.cv_results_["mean_test_score"])
    assert ours.best_params_ == theirs.best_params_
    np.testing.assert_array_equal(ours.predict(X), theirs.predict(X))


def test_linear_svc_in_a_pipeline_and_a_grid_search() -> None:
    X, y = _data("iris")
    pipe = make_pipeline(StandardScaler(with_mean=False),
                         HingeLinearSVC(solver="dcd", tol=1e-4))
    search = GridSearchCV(pipe, {"hingelinearsvc__C": [0.01, 1.0],
                                 "hingelinearsvc__loss": ["hinge", "squared_hinge"]}, cv=3)
    search.fit(X, y)
    assert search.best_score_ > 0.9
    best = search.best_estimator_[-1]
    assert best.converged_ and best.coef_.shape == (3, 4)


# ---- errors of fit ----------------------------------------------------------------------


@pytest.mark.parametrize(("estimator", "message"), [
    (HingeSVC(kernel="precomputed"), "kernel must be one of"),
    (HingeSVC(gamma="bogus"), "gamma must be 'scale', 'auto' or a number"),
    (HingeSVC(gamma=0.0), "gamma must be > 0"),
    (HingeSVC(tol=-1.0), "tol must be > 0"),
    (HingeSVC(cache_size=0.0), "cache_size must be >= 1"),
    (HingeSVC(decision_function_shape="ovo", break_ties=True), "break_ties"),
    (HingeSVC(class_weight="heavy"), "class_weight must be None, 'balanced'"),
    (HingeLinearSVC(solver="smo"), "solver must be one of"),
    (HingeLinearSVC(loss="log"), "loss must be 'hinge' or 'squared_hinge'"),
    (HingeLinearSVC(solver="ocas", loss="squared_hinge"), "does not fit loss"),
    (HingeLinearSVC(solver="tron", loss="hinge"), "does not fit loss"),
    (HingeLinearSVC(C=0.0), "C must be > 0"),
    (HingeLinearSVC(intercept_scaling=-1.0), "intercept_scaling must be > 0"),
    (HingeLinearSVC(n_jobs=0), "n_jobs must be None, -1 or a positive integer"),
])
def test_fit_refuses_bad_parameters_in_sklearn_s_names(estimator: Any, message: str) -> None:
    X, y = _data("iris")
    with pytest.raises(ValueError, match=message):
        estimator.fit(X, y)


def test_one_class_is_refused() -> None:
    X, _ = _data("iris")
    with pytest.raises(ValueError, match="at least 2 classes"):
        HingeSVC().fit(X[:10], np.ones(10))


def test_svmlight_bytes_round_trip_exactly() -> None:
    X, y = _data("cancer")
    X = X.multiply(np.pi).tocsr()
    parsed = parse_stream([svmlight_bytes(X, y)])
    np.testing.assert_array_equal(parsed.y, y)
    np.testing.assert_array_equal(parsed.to_csr(X.shape[1]).toarray(), X.toarray())
