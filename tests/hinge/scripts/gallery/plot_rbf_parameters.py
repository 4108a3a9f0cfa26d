"""Follows scikit-learn's gallery example "RBF SVM parameters"
(examples/svm/plot_rbf_parameters.py): GridSearchCV of SVC over C and gamma on the
standardised iris data (StratifiedShuffleSplit, 5 splits), then SVCs for 3 x 3 values of
(C, gamma) on a two-feature, two-class subset with their decision functions on a grid.

The gallery's grid is 13 x 13 (C 1e-2 .. 1e10, gamma 1e-9 .. 1e3); this port takes every
second value (7 x 7, the same range). Prints the best parameters and score, the matrix
of mean validation scores and their ranks, and for each 2-D model its support sizes,
intercept and the grid decision function (summary).
"""

import numpy as np
from sklearn.datasets import load_iris
from sklearn.model_selection import GridSearchCV, StratifiedShuffleSplit
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


iris = load_iris()
X, y = iris.data, iris.target
X_2d = X[:, :2][y > 0]
y_2d = y[y > 0] - 1
scaler = StandardScaler()
X = scaler.fit_transform(X)
X_2d = scaler.fit_transform(X_2d)

C_range = np.logspace(-2, 10, 7)
gamma_range = np.logspace(-9, 3, 7)
cv = StratifiedShuffleSplit(n_splits=5, test_size=0.2, random_state=42)
grid = GridSearchCV(SVC(), param_grid=dict(gamma=gamma_range, C=C_range), cv=cv)
grid.fit(X, y)
print("best parameters", {k: float(f"{v:.6g}") for k, v in grid.best_params_.items()})
show("best score", grid.best_score_)
scores = grid.cv_results_["mean_test_score"].reshape(len(C_range), len(gamma_range))
for C, row in zip(C_range, scores, strict=True):
    show(f"C={C:.0e} mean validation scores", row)
print("ranks", grid.cv_results_["rank_test_score"].tolist())

xx, yy = np.meshgrid(np.linspace(-3, 3, 30), np.linspace(-3, 3, 30))
for C in (1e-2, 1, 1e2):
    for gamma in (1e-1, 1, 1e1):
        clf = SVC(C=C, gamma=gamma).fit(X_2d, y_2d)
        Z = clf.decision_function(np.c_[xx.ravel(), yy.ravel()])
        label = f"gamma=10^{np.log10(gamma):.0f}, C=10^{np.log10(C):.0f}"
        print(label, "n_support_", clf.n_support_.tolist())
        show(label + " intercept_", clf.intercept_)
        show(label + " grid decision_function min max mean", [Z.min(), Z.max(), Z.mean()])
        print(label, "grid points on the positive side", int((Z > 0).sum()))
