"""Follows scikit-learn's gallery example "One-class SVM with non-linear kernel (RBF)"
(examples/svm/plot_oneclass.py): OneClassSVM(nu=0.1, gamma=0.1) on two Gaussian blobs
(seeded here), errors on the training rows, on new regular rows and on uniform outliers,
and the decision function drawn by DecisionBoundaryDisplay (contourf).

Prints the three error counts, the number of support vectors, the offset, and the
decision function on the display's grid (summary and every 23rd value).
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.svm import OneClassSVM


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


rng = np.random.RandomState(42)
X = 0.3 * rng.randn(100, 2)
X_train = np.r_[X + 2, X - 2]
X = 0.3 * rng.randn(20, 2)
X_test = np.r_[X + 2, X - 2]
X_outliers = rng.uniform(low=-4, high=4, size=(20, 2))

clf = OneClassSVM(nu=0.1, kernel="rbf", gamma=0.1)
clf.fit(X_train)
y_pred_train = clf.predict(X_train)
y_pred_test = clf.predict(X_test)
y_pred_outliers = clf.predict(X_outliers)
print("error train", (y_pred_train == -1).sum(), "/ 200")
print("errors novel regular", (y_pred_test == -1).sum(), "/ 40")
print("errors novel abnormal", (y_pred_outliers == 1).sum(), "/ 40")
print("n_support_", clf.n_support_.tolist(), "support_", clf.support_.tolist())
show("offset_", clf.offset_)
show("score_samples", clf.score_samples(X_test))

fig, ax = plt.subplots()
xx, yy = np.meshgrid(np.linspace(-5, 5, 10), np.linspace(-5, 5, 10))
grid = np.c_[xx.ravel(), yy.ravel()]
display = DecisionBoundaryDisplay.from_estimator(
    clf, grid, response_method="decision_function", plot_method="contourf", ax=ax,
    cmap="PuBu", grid_resolution=50)
Z = display.response
show("grid decision_function min max mean", [Z.min(), Z.max(), Z.mean()])
print("grid points inside the frontier", int((Z > 0).sum()), "of", Z.size)
show("grid decision_function sample", Z.ravel()[::23])
plt.close(fig)
