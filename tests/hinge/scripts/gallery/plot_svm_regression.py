"""Follows scikit-learn's gallery example "Support Vector Regression (SVR) using linear
and non-linear kernels" (examples/svm/plot_svm_regression.py): SVR with the RBF, linear
and polynomial kernels on a noisy sine (seeded here, so that two runs see the same data).

Prints, for each kernel, the support (row indices), the dual coefficients, the intercept
and the predictions on the training rows.
"""

import numpy as np
from sklearn.svm import SVR


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


rng = np.random.RandomState(0)
X = np.sort(5 * rng.rand(40, 1), axis=0)
y = np.sin(X).ravel()
y[::5] += 3 * (0.5 - rng.rand(8))

models = {
    "RBF": SVR(kernel="rbf", C=100, gamma=0.1, epsilon=0.1),
    "Linear": SVR(kernel="linear", C=100, gamma="auto"),
    "Polynomial": SVR(kernel="poly", C=100, gamma="auto", degree=3, epsilon=0.1, coef0=1),
}
for name, svr in models.items():
    predicted = svr.fit(X, y).predict(X)
    print(name, "support_", svr.support_.tolist())
    print(name, "other training rows", np.setdiff1d(np.arange(len(X)), svr.support_).tolist())
    show(name + " dual_coef_", svr.dual_coef_)
    show(name + " intercept_", svr.intercept_)
    show(name + " predictions", predicted)
