"""Follows scikit-learn's gallery example "L1 Penalty and Sparsity in Logistic
Regression" (examples/linear_model/plot_logistic_l1_l2_sparsity.py) as it was written
for the liblinear solver: small against large digits (standardised), LogisticRegression
with the L1 and the L2 penalty for C = 1, 0.1 and 0.01 (tol=0.01), their sparsity and
training accuracy.

tol=0.01 stops both solvers far from the optimum, where the number of exact zeros and
the accuracy depend on the solver's path; what is determined is the objective, which the
test compares at the certified tolerance, and the weights of the L2 fit. Prints both.
"""

import numpy as np
from sklearn import datasets
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


# random_state=None draws the solvers' seeds from NumPy's global generator: seeded here,
# so that two runs fit with the same seeds
np.random.seed(0)
X, y = datasets.load_digits(return_X_y=True)
X = StandardScaler().fit_transform(X)
y = (y > 4).astype(int)

for C in (1, 0.1, 0.01):
    for penalty, l1_ratio in (("l1", 1.0), ("l2", 0.0)):
        clf = LogisticRegression(C=C, l1_ratio=l1_ratio, tol=0.01, solver="liblinear")
        clf.fit(X, y)
        signs = np.where(y == clf.classes_[1], 1.0, -1.0)
        w = np.r_[clf.coef_.ravel(), clf.intercept_ / clf.intercept_scaling]
        loss = np.logaddexp(0.0, -signs * clf.decision_function(X)).sum()
        reg = np.abs(w).sum() if penalty == "l1" else 0.5 * w @ w
        print(f"C={C} {penalty} primal objective (tol={clf.tol}, penalty={penalty}) "
              f"{reg + C * loss:.10g}")
        if penalty == "l2":
            show(f"C={C} {penalty} weights and scaled intercept", w)
