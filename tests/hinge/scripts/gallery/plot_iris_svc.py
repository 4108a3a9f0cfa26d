"""Follows scikit-learn's gallery example "Plot different SVM classifiers in the iris
dataset" (examples/svm/plot_iris_svc.py): SVC with the linear, RBF (gamma=0.7) and cubic
polynomial kernels and LinearSVC on the first two iris features, each drawn by
DecisionBoundaryDisplay (response_method="predict").

Prints, for each model, the class counts of its predictions on the display's grid (the
SVCs) and on the training rows, the SVCs' support vectors per class and dual
coefficients, and for LinearSVC (which stops at a tolerance) what is determined: each
one-vs-rest problem's primal objective and weights, compared at the certified tolerance.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn import datasets
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.svm import SVC, LinearSVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


def show_objective(label, clf, k, X, y):
    """The k-th one-vs-rest problem's primal objective (LIBLINEAR's: squared hinge, the
    intercept a feature of value intercept_scaling), and w with the scaled intercept."""
    signs = np.where(y == clf.classes_[k], 1.0, -1.0)
    w = np.r_[clf.coef_[k], clf.intercept_[k] / clf.intercept_scaling]
    loss = np.maximum(0.0, 1.0 - signs * clf.decision_function(X)[:, k]) ** 2
    print(f"{label} primal objective (tol={clf.tol}, penalty=l2) "
          f"{0.5 * w @ w + clf.C * loss.sum():.10g}")
    show(label + " weights and scaled intercept", w)


iris = datasets.load_iris()
X, y = iris.data[:, :2], iris.target
C = 1.0
models = {
    "SVC linear": SVC(kernel="linear", C=C),
    "LinearSVC": LinearSVC(C=C, max_iter=10000),
    "SVC rbf": SVC(kernel="rbf", gamma=0.7, C=C),
    "SVC poly": SVC(kernel="poly", degree=3, gamma="auto", C=C),
}
fig, axes = plt.subplots(2, 2)
for (name, clf), ax in zip(models.items(), axes.ravel(), strict=True):
    clf.fit(X, y)
    display = DecisionBoundaryDisplay.from_estimator(
        clf, X, response_method="predict", grid_resolution=40, alpha=0.8, ax=ax,
        xlabel=iris.feature_names[0], ylabel=iris.feature_names[1])
    ax.scatter(X[:, 0], X[:, 1], c=y, s=20, edgecolors="k")
    ax.set_title(name)
    print(name, "training predictions per class", np.bincount(clf.predict(X)).tolist())
    if name == "LinearSVC":  # a certified-tolerance solver: what is determined
        for k, label in enumerate(clf.classes_):
            show_objective(f"LinearSVC class {label} against the rest", clf, k, X, y)
        continue
    print(name, "grid predictions per class",
          np.bincount(display.response.ravel().astype(int), minlength=3).tolist())
    print(name, "n_support_", clf.n_support_.tolist())
    show(name + " dual_coef_", clf.dual_coef_)
    show(name + " intercept_", clf.intercept_)
    show(name + " decision_function", clf.decision_function(X[::15]))
plt.close(fig)
