"""HingeLinearSVC's dual CD runs the sweeps of scikit-learn's vendored LIBLINEAR (dcd's
sweeps="sklearn": its MT19937 row orders at the seed scikit-learn draws from
random_state, its stop rule, its sums; the rows grouped by class as its train()): the
same epochs (n_iter_), the same ConvergenceWarnings and here the same coefficients, bit
for bit, as LinearSVC at each random_state, for loss hinge (-s 3) and squared_hinge with
dual=True (-s 1), binary and one-vs-rest (one generator across the classes); the same
for LogisticRegression(solver="liblinear", dual=True) (-s 7), and the same epochs for
LinearSVC(penalty="l1") (-s 5, whose coefficients Hinge then polishes to its
certificate), and the same epochs and coefficients for LinearSVR(dual=True) (-s 12,
13)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from sklearn import svm
from sklearn.datasets import (
    load_breast_cancer,
    load_wine,
    make_blobs,
    make_classification,
    make_regression,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from hinge.sklearn import HingeLinearSVC, HingeLinearSVR, HingeLogisticRegression


def _data(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "blobs40":  # plot_linearsvc_support_vectors's data
        return make_blobs(n_samples=40, centers=2, random_state=0)
    if name == "wine":  # three classes
        wine = load_wine()
        return StandardScaler().fit_transform(wine.data), wine.target
    return make_classification(n_samples=300, n_features=10, random_state=3)


# (data, estimator parameters, random_states): stops before max_iter at each, at epochs
# that differ between random_states (the sklearn numbers are in the comments)
CASES: list[tuple[str, dict[str, Any], tuple[int, ...]]] = [
    # the gallery case: 997 at 42 (and 1000 with a warning at 0, 1)
    ("blobs40", {"loss": "hinge", "C": 100}, (42, 0, 1)),
    ("blobs40", {"loss": "squared_hinge", "C": 100}, (0, 1, 42)),  # 979, 994, 970
    ("wine", {"loss": "hinge", "C": 100}, (0, 1, 42)),  # 430, 436, 430
    ("wine", {"loss": "squared_hinge", "C": 1}, (0, 1, 42)),  # 205, 205, 208
    ("clf300", {"loss": "hinge", "C": 1}, (0, 1, 42)),  # 339, 899, 720
    ("clf300", {"loss": "squared_hinge", "C": 1}, (0, 1, 42)),  # 967, 611, 946
    ("clf300", {"loss": "squared_hinge", "C": 1, "class_weight": {0: 2.0, 1: 0.5}}, (1,)),
    ("clf300", {"loss": "hinge", "C": 1, "fit_intercept": False}, (1,)),
]


def _fit(estimator: Any, X: np.ndarray, y: np.ndarray) -> tuple[Any, int]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        estimator.fit(X, y)
    return estimator, sum(issubclass(w.category, ConvergenceWarning) for w in caught)


@pytest.mark.parametrize(("data", "params", "states"), CASES,
                         ids=[f"{d}-{'-'.join(f'{k}={v}' for k, v in p.items())}"
                              for d, p, _ in CASES])
def test_n_iter_and_coefficients_are_linearsvc_s(data: str, params: dict[str, Any],
                                                 states: tuple[int, ...]) -> None:
    X, y = _data(data)
    epochs = []
    for state in states:
        theirs, their_warnings = _fit(svm.LinearSVC(dual=True, random_state=state, **params),
                                      X, y)
        ours, our_warnings = _fit(HingeLinearSVC(dual=True, random_state=state, **params),
                                  X, y)
        assert ours.n_iter_ == theirs.n_iter_, state
        assert our_warnings == their_warnings, state
        np.testing.assert_array_equal(ours.coef_, theirs.coef_)
        np.testing.assert_array_equal(ours.intercept_, theirs.intercept_)
        epochs.append(int(theirs.n_iter_))
    assert min(epochs) < 1000  # at least one stops before max_iter


def test_the_gallery_case_stops_at_997_without_a_warning() -> None:
    X, y = _data("blobs40")
    ours, caught = _fit(HingeLinearSVC(loss="hinge", C=100, random_state=42), X, y)
    assert ours.n_iter_ == 997 and caught == 0


@pytest.mark.parametrize(("loss", "state", "epochs"),
                         [("hinge", 0, 599), ("squared_hinge", 1, 992)])
def test_sample_weights_keep_the_epochs(loss: str, state: int, epochs: int) -> None:
    X, y = _data("clf300")
    weights = np.random.default_rng(0).uniform(0.5, 2.0, size=y.shape[0])
    theirs = svm.LinearSVC(loss=loss, dual=True, random_state=state).fit(
        X, y, sample_weight=weights)
    ours = HingeLinearSVC(loss=loss, dual=True, random_state=state).fit(
        X, y, sample_weight=weights)
    assert ours.n_iter_ == theirs.n_iter_ == epochs
    np.testing.assert_array_equal(ours.coef_, theirs.coef_)


def _standard(loader: Any) -> tuple[np.ndarray, np.ndarray]:
    data = loader()
    return StandardScaler().fit_transform(data.data), data.target


@pytest.mark.parametrize("state", [0, 1, 42])
def test_logistic_dual_epochs_and_coefficients_are_liblinear_s(state: int) -> None:
    X, y = _standard(load_breast_cancer)
    params = {"solver": "liblinear", "dual": True, "C": 1.0, "random_state": state}
    theirs, their_warnings = _fit(LogisticRegression(**params), X, y)
    ours, our_warnings = _fit(HingeLogisticRegression(**params), X, y)
    assert ours.n_iter_.tolist() == theirs.n_iter_.tolist()  # 100, 100, 98
    assert our_warnings == their_warnings
    np.testing.assert_array_equal(ours.coef_, theirs.coef_)


@pytest.mark.parametrize(("data", "C", "state"), [
    ("clf300", 1.0, 0), ("clf300", 1.0, 42), ("cancer", 0.1, 1), ("cancer", 1.0, 0),
    ("wine", 1.0, 0)])
def test_l1_svc_epochs_are_liblinear_s(data: str, C: float, state: int) -> None:
    X, y = _standard(load_breast_cancer) if data == "cancer" else _data(data)
    params = {"penalty": "l1", "dual": False, "C": C, "random_state": state}
    theirs, their_warnings = _fit(svm.LinearSVC(**params), X, y)
    ours, our_warnings = _fit(HingeLinearSVC(**params), X, y)
    assert ours.n_iter_ == theirs.n_iter_  # 32, 70, 159, 406, 183
    assert our_warnings == their_warnings


@pytest.mark.parametrize(("loss", "C", "state", "epochs"), [
    ("epsilon_insensitive", 1.0, 0, 25), ("epsilon_insensitive", 1.0, 1, 27),
    ("epsilon_insensitive", 10.0, 1, 995), ("squared_epsilon_insensitive", 1.0, 0, 206),
    ("squared_epsilon_insensitive", 1.0, 42, 203)])
def test_svr_dual_epochs_and_coefficients_are_liblinear_s(loss: str, C: float, state: int,
                                                          epochs: int) -> None:
    X, y = make_regression(n_samples=200, n_features=8, noise=5.0, random_state=0)
    params = {"loss": loss, "dual": True, "C": C, "random_state": state}
    theirs, their_warnings = _fit(svm.LinearSVR(**params), X, y)
    ours, our_warnings = _fit(HingeLinearSVR(**params), X, y)
    assert ours.n_iter_ == theirs.n_iter_ == epochs
    assert our_warnings == their_warnings
    np.testing.assert_array_equal(ours.coef_, theirs.coef_)
    np.testing.assert_array_equal(ours.intercept_, theirs.intercept_)
