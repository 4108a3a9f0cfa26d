"""scikit-learn's estimator checks on LinearSVR and LogisticRegression:
tests/hinge/estimator_checks.py."""

from hinge.sklearn import HingeLinearSVR, HingeLogisticRegression
from tests.hinge.estimator_checks import checks_test

ESTIMATORS = [
    HingeLinearSVR(),
    HingeLinearSVR(loss="squared_epsilon_insensitive", dual=False),
    HingeLogisticRegression(),
    HingeLogisticRegression(dual=True),
    HingeLogisticRegression(penalty="l1"),
]

test_sklearn_compatible_estimator = checks_test(ESTIMATORS)
