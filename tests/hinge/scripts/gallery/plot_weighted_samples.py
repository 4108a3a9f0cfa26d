"""Follows scikit-learn's gallery example "SVM: Weighted samples"
(examples/svm/plot_weighted_samples.py): SVC(gamma=1) on 20 points, fitted with constant
weights and with sample_weight that makes some outliers heavy, and each decision function
on a grid.

Prints, for both fits, the support, dual coefficients, intercept and the decision
function on a 40 x 40 grid (summary and every 31st value).
"""

import numpy as np
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


np.random.seed(0)
X = np.r_[np.random.randn(10, 2) + 1, np.random.randn(10, 2)]
y = [1] * 10 + [-1] * 10
sample_weight_last_ten = abs(np.random.randn(len(X)))
sample_weight_constant = np.ones(len(X))
sample_weight_last_ten[15:] *= 5
sample_weight_last_ten[9] *= 15

clf_weights = SVC(gamma=1)
clf_weights.fit(X, y, sample_weight=sample_weight_last_ten)
clf_no_weights = SVC(gamma=1)
clf_no_weights.fit(X, y)

xx, yy = np.meshgrid(np.linspace(-4, 5, 40), np.linspace(-4, 5, 40))
grid = np.c_[xx.ravel(), yy.ravel()]
for name, clf in (("constant weights", clf_no_weights), ("modified weights", clf_weights)):
    Z = clf.decision_function(grid)
    print(name, "support_", clf.support_.tolist())
    show(name + " dual_coef_", clf.dual_coef_)
    show(name + " intercept_", clf.intercept_)
    show(name + " grid decision_function min max mean", [Z.min(), Z.max(), Z.mean()])
    print(name, "grid points on the positive side", int((Z > 0).sum()))
    show(name + " grid decision_function sample", Z[::31])
