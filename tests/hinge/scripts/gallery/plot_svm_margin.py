"""Follows scikit-learn's gallery example "SVM Margins Example"
(examples/svm/plot_svm_margin.py): SVC(kernel="linear") on 40 separable points for
C=1 ("unreg") and C=0.05 ("reg"), the separating line, the margin 1 / ||w|| and its
parallels, and the predicted classes on a grid.

Prints, for both values of C, coef_, intercept_, the margin, the line's slope and
intercept, the support vectors and the class counts of the predictions on a 40 x 40 grid.
"""

import numpy as np
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


np.random.seed(0)
X = np.r_[np.random.randn(20, 2) - 2, np.random.randn(20, 2) + 2]
Y = [0] * 20 + [1] * 20

for name, penalty in (("unreg", 1), ("reg", 0.05)):
    clf = SVC(kernel="linear", C=penalty)
    clf.fit(X, Y)
    w = clf.coef_[0]
    a = -w[0] / w[1]
    margin = 1 / np.sqrt(np.sum(clf.coef_**2))
    show(name + " coef_", clf.coef_)
    show(name + " intercept_", clf.intercept_)
    show(name + " margin", margin)
    show(name + " line slope and intercept", [a, -clf.intercept_[0] / w[1]])
    show(name + " support_vectors_", clf.support_vectors_)
    XX, YY = np.mgrid[-4.8:4.2:40j, -6:6:40j]
    Z = clf.predict(np.c_[XX.ravel(), YY.ravel()])
    print(name, "grid predictions per class", np.bincount(Z).tolist())
