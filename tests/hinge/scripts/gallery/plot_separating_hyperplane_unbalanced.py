"""Follows scikit-learn's gallery example "SVM: Separating hyperplane for unbalanced
classes" (examples/svm/plot_separating_hyperplane_unbalanced.py): SVC(kernel="linear")
on 1000 + 100 blobs, without and with class_weight={1: 10}, each boundary drawn by
DecisionBoundaryDisplay (contour at level 0).

Prints, for both fits, coef_, intercept_, class_weight_, the support vectors per class,
the training predictions per class and the display's decision function (summary).
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


X, y = make_blobs(n_samples=[1000, 100], centers=[[0.0, 0.0], [2.0, 2.0]],
                  cluster_std=[1.5, 0.5], random_state=0, shuffle=False)
clf = SVC(kernel="linear", C=1.0).fit(X, y)
wclf = SVC(kernel="linear", class_weight={1: 10}).fit(X, y)

fig, ax = plt.subplots()
ax.scatter(X[:, 0], X[:, 1], c=y, edgecolors="k")
for name, model, color in (("plain", clf, "k"), ("weighted", wclf, "r")):
    display = DecisionBoundaryDisplay.from_estimator(
        model, X, plot_method="contour", colors=color, levels=[0], alpha=0.5,
        linestyles=["-"], ax=ax, grid_resolution=40)
    show(name + " coef_", model.coef_)
    show(name + " intercept_", model.intercept_)
    show(name + " class_weight_", model.class_weight_)
    print(name, "n_support_", model.n_support_.tolist())
    print(name, "training predictions per class", np.bincount(model.predict(X)).tolist())
    Z = display.response
    show(name + " grid decision_function min max mean", [Z.min(), Z.max(), Z.mean()])
    print(name, "grid points on the positive side", int((Z > 0).sum()))
plt.close(fig)
