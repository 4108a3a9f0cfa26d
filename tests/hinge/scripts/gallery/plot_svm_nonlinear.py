"""Follows scikit-learn's gallery example "Non-linear SVM"
(examples/svm/plot_svm_nonlinear.py): NuSVC(gamma="auto") on the XOR of two Gaussian
features (boolean labels), and its decision function on a grid.

Prints the support per class, the intercept, the training accuracy and the decision
function on a 50 x 50 grid (summary and every 47th value).
"""

import numpy as np
from sklearn.svm import NuSVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


xx, yy = np.meshgrid(np.linspace(-3, 3, 50), np.linspace(-3, 3, 50))
np.random.seed(0)
X = np.random.randn(300, 2)
Y = np.logical_xor(X[:, 0] > 0, X[:, 1] > 0)

clf = NuSVC(gamma="auto")
clf.fit(X, Y)
Z = clf.decision_function(np.c_[xx.ravel(), yy.ravel()])
print("classes_", clf.classes_.tolist())
print("n_support_", clf.n_support_.tolist())
show("intercept_", clf.intercept_)
show("training accuracy", clf.score(X, Y))
show("grid decision_function min max mean", [Z.min(), Z.max(), Z.mean()])
print("grid points on the positive side", int((Z > 0).sum()))
show("grid decision_function sample", Z[::47])
