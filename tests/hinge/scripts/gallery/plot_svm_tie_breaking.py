"""Follows scikit-learn's gallery example "SVM Tie Breaking Example"
(examples/svm/plot_svm_tie_breaking.py): SVC(kernel="linear", C=1,
decision_function_shape="ovr") on three blobs with break_ties=False and True, and the
predictions on a grid over the data.

Prints, for both, the one-vs-one coef_ and intercept_, the class counts of the
predictions on a 100 x 100 grid and on the training rows, and how many grid points the
two settings classify differently.
"""

import numpy as np
from sklearn.datasets import make_blobs
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


X, y = make_blobs(random_state=27)
xs = np.linspace(X[:, 0].min(), X[:, 0].max(), 100)
ys = np.linspace(X[:, 1].min(), X[:, 1].max(), 100)
xx, yy = np.meshgrid(xs, ys)
grid = np.c_[xx.ravel(), yy.ravel()]
predictions = {}
for break_ties in (False, True):
    svm = SVC(kernel="linear", C=1, break_ties=break_ties,
              decision_function_shape="ovr").fit(X, y)
    name = f"break_ties={break_ties}"
    predictions[break_ties] = svm.predict(grid)
    show(name + " coef_", svm.coef_)
    show(name + " intercept_", svm.intercept_)
    print(name, "grid predictions per class", np.bincount(predictions[break_ties]).tolist())
    print(name, "training predictions per class", np.bincount(svm.predict(X)).tolist())
    show(name + " decision_function", svm.decision_function(grid[::1111]))
print("grid points classified differently", int((predictions[False] != predictions[True]).sum()))
