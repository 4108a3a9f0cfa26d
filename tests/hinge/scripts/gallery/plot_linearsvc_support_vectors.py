"""Follows scikit-learn's gallery example "Plot the support vectors in LinearSVC"
(examples/svm/plot_linearsvc_support_vectors.py): LinearSVC(loss="hinge",
random_state=42) on 40 blobs for C=1 and C=100, the support vectors found through the
decision function, and the margins drawn by DecisionBoundaryDisplay.

LinearSVC stops at a tolerance, so its coefficients are the optimum's within what the
solver certifies, and a row on the margin (|f(x)| = 1 at the optimum) can fall either
side of the example's cut |f(x)| <= 1 + 1e-15. Prints what is determined: for each C
the primal objective and the weights (the test compares them at the certified
tolerance), and the rows clearly inside the margin and clearly outside it (by 0.01).
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_blobs
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.svm import LinearSVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


def show_objective(label, clf, X, y):
    """LIBLINEAR's primal (intercept as a feature of value intercept_scaling): 1/2 ||w||^2
    + C sum_i max(0, 1 - y_i f(x_i)), and w with the scaled intercept."""
    signs = np.where(y == clf.classes_[1], 1.0, -1.0)
    w = np.r_[clf.coef_.ravel(), clf.intercept_ / clf.intercept_scaling]
    loss = np.maximum(0.0, 1.0 - signs * clf.decision_function(X))
    print(f"{label} primal objective (tol={clf.tol}, penalty=l2) "
          f"{0.5 * w @ w + clf.C * loss.sum():.10g}")
    show(label + " weights and scaled intercept", w)


X, y = make_blobs(n_samples=40, centers=2, random_state=0)
fig, axes = plt.subplots(1, 2, figsize=(10, 5))
for C, ax in zip([1, 100], axes, strict=True):
    clf = LinearSVC(C=C, loss="hinge", random_state=42).fit(X, y)
    decision_function = clf.decision_function(X)
    ax.scatter(X[:, 0], X[:, 1], c=y, s=30)
    DecisionBoundaryDisplay.from_estimator(
        clf, X, ax=ax, grid_resolution=50, plot_method="contour", colors="k",
        levels=[-1, 0, 1], alpha=0.5, linestyles=["--", "-", "--"])
    show_objective(f"C={C}", clf, X, y)
    print(f"C={C} rows inside the margin",
          np.where(np.abs(decision_function) < 1 - 0.01)[0].tolist())
    print(f"C={C} rows outside the margin",
          np.where(np.abs(decision_function) > 1 + 0.01)[0].tolist())
plt.close(fig)
