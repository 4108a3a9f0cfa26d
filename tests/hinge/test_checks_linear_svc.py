"""scikit-learn's estimator checks on LinearSVC, each LIBLINEAR formulation:
tests/hinge/estimator_checks.py."""

from hinge.sklearn import HingeLinearSVC
from tests.hinge.estimator_checks import checks_test

ESTIMATORS = [
    HingeLinearSVC(),
    HingeLinearSVC(dual=True, loss="hinge"),
    HingeLinearSVC(penalty="l1", dual=False),
    HingeLinearSVC(multi_class="crammer_singer"),
    HingeLinearSVC(tol_rule="gap", tol=1e-6),
]

test_sklearn_compatible_estimator = checks_test(ESTIMATORS)
