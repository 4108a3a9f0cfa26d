"""Follows scikit-learn's gallery example "Regularization path of L1- Logistic
Regression" (examples/linear_model/plot_logistic_path.py): LogisticRegression with the
L1 penalty, solver="liblinear", tol=1e-6, warm_start=True and intercept_scaling=1e4,
fitted for 16 values of C from l1_min_c (sklearn.svm) upwards on two iris classes.

Prints l1_min_c and, for each C, the primal objective of the fit (the L1 problem's
coefficients are not determined by a certificate; the test compares the objective at
the certified tolerance) and how many coefficients are exactly zero at the smallest C.
"""

import numpy as np
from sklearn import datasets
from sklearn.linear_model import LogisticRegression
from sklearn.svm import l1_min_c


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


# random_state=None draws the solvers' seeds from NumPy's global generator: seeded here,
# so that two runs fit with the same seeds
np.random.seed(0)
iris = datasets.load_iris()
X, y = iris.data[iris.target != 2], iris.target[iris.target != 2]
X /= X.max()

min_c = l1_min_c(X, y, loss="log")
show("l1_min_c", min_c)
cs = min_c * np.logspace(0, 10, 16)
clf = LogisticRegression(l1_ratio=1.0, solver="liblinear", tol=1e-6, max_iter=int(1e6),
                         warm_start=True, intercept_scaling=10000.0)
for k, c in enumerate(cs):
    clf.set_params(C=c)
    clf.fit(X, y)
    signs = np.where(y == clf.classes_[1], 1.0, -1.0)
    w = np.r_[clf.coef_.ravel(), clf.intercept_ / clf.intercept_scaling]
    loss = np.logaddexp(0.0, -signs * clf.decision_function(X)).sum()
    print(f"C={c:.6g} primal objective (tol={clf.tol}, penalty=l1) "
          f"{np.abs(w).sum() + c * loss:.10g}")
    if k == 0:
        print(f"C={c:.6g} zero coefficients", int((clf.coef_ == 0).sum()), "of", X.shape[1])
