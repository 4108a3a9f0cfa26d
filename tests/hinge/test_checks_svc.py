"""scikit-learn's estimator checks on SVC and NuSVC:
tests/hinge/estimator_checks.py."""

from hinge.sklearn import HingeNuSVC, HingeSVC
from tests.hinge.estimator_checks import checks_test

ESTIMATORS = [
    HingeSVC(),
    HingeSVC(kernel="linear"),
    HingeSVC(kernel="poly", break_ties=True),
    HingeNuSVC(),
]

test_sklearn_compatible_estimator = checks_test(ESTIMATORS)
