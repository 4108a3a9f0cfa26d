"""Follows scikit-learn's gallery example "SVM with custom kernel"
(examples/svm/plot_custom_kernel.py): SVC with a callable kernel k(x, z) = x M z' (M =
diag(2, 1)) on the first two iris features, its predictions drawn by
DecisionBoundaryDisplay (pcolormesh).

Prints the support, the dual coefficients, the intercepts, the decision function on some
training rows, and the class counts of the predictions on the display's grid and on the
training rows.
"""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from sklearn import datasets
from sklearn.inspection import DecisionBoundaryDisplay
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


iris = datasets.load_iris()
X, Y = iris.data[:, :2], iris.target


def my_kernel(X, Y):
    M = np.array([[2, 0], [0, 1.0]])
    return np.dot(np.dot(X, M), Y.T)


clf = SVC(kernel=my_kernel)
clf.fit(X, Y)
fig, ax = plt.subplots()
display = DecisionBoundaryDisplay.from_estimator(
    clf, X, response_method="predict", plot_method="pcolormesh", shading="auto", ax=ax,
    grid_resolution=40)
ax.scatter(X[:, 0], X[:, 1], c=Y, edgecolors="k")
print("support_", clf.support_.tolist())
print("n_support_", clf.n_support_.tolist())
show("dual_coef_", clf.dual_coef_)
show("intercept_", clf.intercept_)
show("decision_function", clf.decision_function(X[::10]))
print("grid predictions per class", np.bincount(display.response.ravel().astype(int)).tolist())
print("training predictions per class", np.bincount(clf.predict(X)).tolist())
plt.close(fig)
