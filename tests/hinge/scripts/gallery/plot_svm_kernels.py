"""Follows scikit-learn's gallery example "Plot classification boundaries with different
SVM Kernels" (examples/svm/plot_svm_kernels.py): SVC(gamma=2) with the linear, poly, rbf
and sigmoid kernels on 16 points of two classes, each drawn by DecisionBoundaryDisplay
twice (predict as pcolormesh, decision_function as contour at -1, 0, 1).

Prints, for each kernel, the support, dual coefficients, intercept, the class counts of
the predicted grid and the grid decision function (summary and every 41st value).
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


X = np.array([[0.4, -0.7], [-1.5, -1.0], [-1.4, -0.9], [-1.3, -1.2], [-1.1, -0.2],
              [-1.2, -0.4], [-0.5, 1.2], [-1.5, 2.1], [1.0, 1.0], [1.3, 0.8], [1.2, 0.5],
              [0.2, -2.0], [0.5, -2.4], [0.2, -2.3], [0.0, -2.7], [1.3, 2.1]])
y = np.array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1])

for kernel in ("linear", "poly", "rbf", "sigmoid"):
    clf = SVC(kernel=kernel, gamma=2).fit(X, y)
    fig, ax = plt.subplots(figsize=(4, 3))
    common = {"estimator": clf, "X": X, "ax": ax, "grid_resolution": 40}
    classes = DecisionBoundaryDisplay.from_estimator(
        **common, response_method="predict", plot_method="pcolormesh", alpha=0.3)
    values = DecisionBoundaryDisplay.from_estimator(
        **common, response_method="decision_function", plot_method="contour",
        levels=[-1, 0, 1], colors=["k", "k", "k"], linestyles=["--", "-", "--"])
    ax.scatter(clf.support_vectors_[:, 0], clf.support_vectors_[:, 1], s=250,
               facecolors="none", edgecolors="k")
    plt.close(fig)
    print(kernel, "support_", clf.support_.tolist())
    show(kernel + " dual_coef_", clf.dual_coef_)
    show(kernel + " intercept_", clf.intercept_)
    print(kernel, "grid predictions per class",
          np.bincount(classes.response.ravel().astype(int)).tolist())
    Z = values.response
    show(kernel + " grid decision_function min max mean", [Z.min(), Z.max(), Z.mean()])
    show(kernel + " grid decision_function sample", Z.ravel()[::41])
