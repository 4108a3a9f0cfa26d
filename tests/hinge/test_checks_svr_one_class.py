"""scikit-learn's estimator checks on SVR, NuSVR and OneClassSVM:
tests/hinge/estimator_checks.py."""

from hinge.sklearn import HingeNuSVR, HingeOneClassSVM, HingeSVR
from tests.hinge.estimator_checks import checks_test

ESTIMATORS = [
    HingeSVR(),
    HingeNuSVR(),
    HingeOneClassSVM(),
]

test_sklearn_compatible_estimator = checks_test(ESTIMATORS)
