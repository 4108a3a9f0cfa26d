"""scikit-learn's own estimator checks (`check_estimator`'s suite) on Hinge's estimators,
in the default suite: every check of scikit-learn's API contract (cloning, parameters
stored verbatim, validation in fit, input checks, fitted attributes, pickling,
classifier behaviour on blobs, class weights, sparse input, ...)."""

from __future__ import annotations

from typing import Any

from sklearn.utils.estimator_checks import parametrize_with_checks

from hinge.sklearn import HingeLinearSVC, HingeSVC

ESTIMATORS = [
    HingeLinearSVC(),
    HingeLinearSVC(solver="dcd", loss="hinge"),
    HingeSVC(),
    HingeSVC(probability=True),
]


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator: Any, check: Any) -> None:
    check(estimator)
