"""scikit-learn's own estimator checks (`check_estimator`'s suite) for every Hinge estimator
and configuration, in the default suite: cloning, parameters stored verbatim, validation
in fit, input checks, fitted attributes, pickling, classifier / regressor / outlier
behaviour, class and sample weights, sparse input, metadata routing, ...

The configurations are split by estimator family over several test files
(tests/hinge/test_checks_*.py, each `test_sklearn_compatible_estimator =
checks_test(ESTIMATORS)`) so that `pytest -n 3 --dist loadfile` spreads them over its
processes.

The checks expected to fail are scikit-learn's own for the same estimator
(sklearn.utils._test_common.instance_generator.PER_ESTIMATOR_XFAIL_CHECKS: LIBSVM's and
LIBLINEAR's sample weights are not equivalent to repeating rows; NuSVC ignores
class_weight), and the same reason for LIBLINEAR's stochastic dual solvers under
LogisticRegression (dual CD, l1 CD: scikit-learn lists those xfails under LinearSVC).
They are strict: one that passes fails the test (and belongs in `_PASSING`).
`decision_function_shape="ovo"` is left out: scikit-learn's SVC fails
check_classifiers_train with it too (it compares predict with the argmax of the ovo
values).
"""

from __future__ import annotations

from typing import Any

import pytest
from sklearn.svm import SVC, SVR, LinearSVC, LinearSVR, NuSVC, NuSVR, OneClassSVM
from sklearn.utils._test_common.instance_generator import PER_ESTIMATOR_XFAIL_CHECKS
from sklearn.utils.estimator_checks import parametrize_with_checks

import hinge.sklearn as hs

# scikit-learn's estimator whose expected failures each Hinge estimator shares
_PARENTS = {hs.SVC: SVC, hs.NuSVC: NuSVC, hs.SVR: SVR, hs.NuSVR: NuSVR,
            hs.OneClassSVM: OneClassSVM, hs.LinearSVC: LinearSVC, hs.LinearSVR: LinearSVR,
            hs.LogisticRegression: LinearSVC}


# scikit-learn's xfails that Hinge's estimators pass (LIBSVM's NuSVC one-label check;
# LinearSVC's n_iter_ check): not expected to fail here
_PASSING = {"check_classifiers_one_label_sample_weights",
            "check_non_transformer_estimators_n_iter"}


class ExpectedCheckFailure(AssertionError):
    """An expected-to-fail check's error, re-raised without the check's traceback."""


def _expected_failed_checks(estimator: Any) -> dict[str, str]:
    if isinstance(estimator, hs.LogisticRegression) and not (
            estimator.dual or estimator._penalty() == "l1"):
        return {}  # the primal Newton solver (tron): deterministic, weights equivalent
    expected = PER_ESTIMATOR_XFAIL_CHECKS.get(_PARENTS[type(estimator)], {})
    return {name: why for name, why in expected.items() if name not in _PASSING}


def checks_test(estimators: list[Any]) -> Any:
    """A test function running every check of parametrize_with_checks on `estimators`
    (a new function per call: each test file its own parameters), the expected failures
    strict. An expected failure is re-raised as a one-line ExpectedCheckFailure: pytest
    formats the traceback of every failed call, xfailed ones too, reading the source of
    each frame (scikit-learn's estimator_checks.py, 5,000 lines, parsed per frame: about
    a second per xfailed check, a third of the checks' time)."""

    @parametrize_with_checks(estimators, expected_failed_checks=_expected_failed_checks,
                             xfail_strict=True)
    def test_sklearn_compatible_estimator(estimator: Any, check: Any,
                                          request: pytest.FixtureRequest) -> None:
        if request.node.get_closest_marker("xfail") is None:
            check(estimator)
            return
        try:
            check(estimator)
        except Exception as exc:  # an expected failure: its message, not its traceback
            raise ExpectedCheckFailure(f"{type(exc).__name__}: {exc}") from None

    return test_sklearn_compatible_estimator
