"""Follows scikit-learn's gallery example "Scaling the regularization parameter for SVCs"
(examples/svm/plot_svm_scale_c.py): LinearSVC with the L1 penalty (squared hinge,
dual=False, tol=1e-3) on 100 x 300 data with 5 informative features, and with the L2
penalty (dual=True, tol=1e-4) on 100 x 60 noisy data, each scored by GridSearchCV over C
with ShuffleSplit for three training fractions (0.7, 0.5, 0.3; test 0.3).

The gallery draws 250 splits per fraction; this port draws 10 (random_state=1). Prints
for each penalty and fraction the mean validation accuracy for each C, and for each
penalty the primal objective of the fit on all rows at the middle C (and its weights for
the L2 penalty), which the test compares at the certified tolerance.
"""

import numpy as np
from sklearn import datasets
from sklearn.model_selection import GridSearchCV, ShuffleSplit
from sklearn.svm import LinearSVC
from sklearn.utils import check_random_state


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


def show_objective(label, clf, X, y):
    """LIBLINEAR's primal, squared hinge (intercept as a feature of value
    intercept_scaling, regularised as the others), and w with the scaled intercept."""
    signs = np.where(y == clf.classes_[1], 1.0, -1.0)
    w = np.r_[clf.coef_.ravel(), clf.intercept_ / clf.intercept_scaling]
    loss = np.maximum(0.0, 1.0 - signs * clf.decision_function(X)) ** 2
    reg = np.abs(w).sum() if clf.penalty == "l1" else 0.5 * w @ w
    print(f"{label} primal objective (tol={clf.tol}, penalty={clf.penalty}) "
          f"{reg + clf.C * loss.sum():.10g}")
    if clf.penalty == "l2":
        show(label + " weights and scaled intercept", w)


# random_state=None draws the solvers' seeds from NumPy's global generator: seeded here,
# so that two runs fit with the same seeds
np.random.seed(0)
rnd = check_random_state(1)
n_samples, n_features = 100, 300
X_1, y_1 = datasets.make_classification(n_samples=n_samples, n_features=n_features,
                                        n_informative=5, random_state=1)
y_2 = np.sign(0.5 - rnd.rand(n_samples))
X_2 = rnd.randn(n_samples, n_features // 5) + y_2[:, np.newaxis]
X_2 += 5 * rnd.randn(n_samples, n_features // 5)

clf_sets = [
    (LinearSVC(penalty="l1", loss="squared_hinge", dual=False, tol=1e-3),
     np.logspace(-2.3, -1.3, 10), X_1, y_1),
    (LinearSVC(penalty="l2", loss="squared_hinge", dual=True, tol=1e-4),
     np.logspace(-4.5, -2, 10), X_2, y_2),
]
for clf, cs, X, y in clf_sets:
    for train_size in np.linspace(0.3, 0.7, 3)[::-1]:
        grid = GridSearchCV(clf, refit=False, param_grid=dict(C=cs),
                            cv=ShuffleSplit(train_size=train_size, test_size=0.3,
                                            n_splits=10, random_state=1))
        grid.fit(X, y)
        show(f"penalty={clf.penalty} fraction {train_size:.2f} mean validation accuracy",
             grid.cv_results_["mean_test_score"])
    show(f"penalty={clf.penalty} C scaled by 1/n_samples", cs * n_samples * 0.5)
    full = clf.set_params(C=cs[5]).fit(X, y)
    show_objective(f"penalty={clf.penalty} C={cs[5]:.6g} all rows", full, X, y)
