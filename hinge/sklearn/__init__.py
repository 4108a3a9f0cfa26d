"""scikit-learn estimators on Hinge's solvers: every estimator of `sklearn.svm` and
LIBLINEAR's logistic regression, with scikit-learn's parameters, attributes and errors.

    from hinge.sklearn import SVC, SVR, LinearSVC   # or HingeSVC, HingeSVR, ...

    clf = SVC(C=10, gamma="scale").fit(X, y)              # in this process
    clf = LinearSVC(server="http://hinge:8000", api_key=key).fit(X, y)   # remote

Every scikit-learn SVM: SVC, NuSVC, SVR, NuSVR, OneClassSVM (Hinge's SMO, formulations
c_svc, nu_svc, epsilon_svr, nu_svr, one_class), LinearSVC (dcd, tron, l1_cd,
crammer_singer), LinearSVR (linear_svr) and LogisticRegression with the liblinear
solver's parameters (tron, logistic_dcd, l1_cd); HingeSVC, ... are the same classes.

Each is a subclass of scikit-learn's estimator whose training step runs Hinge's solvers
(solvers.fit) or a job of a running Hinge service (`server=`, `api_key=`);
docs/from-sklearn.md says what differs. scikit-learn is an optional extra (`pip install
hinge[sklearn]`); the Hinge server never imports this package (import-linter contracts in
pyproject.toml).
"""

# sklearn.svm's one function, l1_min_c (a bound on C computed from the data, no
# training), is scikit-learn's own: `from sklearn.svm import SVC, l1_min_c` swaps too
from sklearn.svm import l1_min_c

from hinge.sklearn._liblinear import (
    HingeLinearSVC,
    HingeLinearSVR,
    HingeLogisticRegression,
    LinearSVC,
    LinearSVR,
    LogisticRegression,
)
from hinge.sklearn._libsvm import (
    SVC,
    SVR,
    HingeNuSVC,
    HingeNuSVR,
    HingeOneClassSVM,
    HingeSVC,
    HingeSVR,
    NuSVC,
    NuSVR,
    OneClassSVM,
)
from hinge.sklearn._service import svmlight_bytes

# The classes carry scikit-learn's names (SVC, ..., so that a script's
# `from sklearn.svm import SVC, SVR` becomes `from hinge.sklearn import SVC, SVR` and
# nothing else changes: make_pipeline's step names, reprs, messages); HingeSVC, ... are
# the same classes under Hinge's names.

__all__ = ["SVC", "SVR", "HingeLinearSVC", "HingeLinearSVR", "HingeLogisticRegression",
           "HingeNuSVC", "HingeNuSVR", "HingeOneClassSVM", "HingeSVC", "HingeSVR",
           "LinearSVC", "LinearSVR", "LogisticRegression", "NuSVC", "NuSVR", "OneClassSVM",
           "l1_min_c", "svmlight_bytes"]
