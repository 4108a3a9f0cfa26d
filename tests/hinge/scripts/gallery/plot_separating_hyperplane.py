"""Follows scikit-learn's gallery example "SVM: Maximum margin separating hyperplane"
(examples/svm/plot_separating_hyperplane.py): SVC(kernel="linear", C=1000) on 40
separable blobs, its decision function on a 30 x 30 grid (the margins -1, 0, 1) and its
support vectors.

Prints the support vectors, coef_, intercept_, dual coefficients and the grid's decision
function (summary and every 29th value).
"""

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


X, y = make_blobs(n_samples=40, centers=2, random_state=6)
clf = SVC(kernel="linear", C=1000)
clf.fit(X, y)

xx = np.linspace(X[:, 0].min() - 0.5, X[:, 0].max() + 0.5, 30)
yy = np.linspace(X[:, 1].min() - 0.5, X[:, 1].max() + 0.5, 30)
YY, XX = np.meshgrid(yy, xx)
xy = np.vstack([XX.ravel(), YY.ravel()]).T
Z = clf.decision_function(xy).reshape(XX.shape)

print("support_", clf.support_.tolist())
show("support_vectors_", clf.support_vectors_)
show("coef_", clf.coef_)
show("intercept_", clf.intercept_)
show("dual_coef_", clf.dual_coef_)
show("margin width", 2 / np.linalg.norm(clf.coef_))
show("grid decision_function min max mean", [Z.min(), Z.max(), Z.mean()])
print("grid points between the margins", int((np.abs(Z) < 1).sum()))
show("grid decision_function sample", Z.ravel()[::29])
