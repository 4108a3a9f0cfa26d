"""Follows scikit-learn's gallery example "SVM-Anova: SVM with univariate feature
selection" (examples/svm/plot_svm_anova.py): iris with 36 non-informative features, a
Pipeline of SelectPercentile(chi2), StandardScaler and SVC(gamma="auto"), and
cross_val_score (5 folds) for each percentile of features kept.

Prints, for each percentile, the five fold accuracies, their mean and standard deviation.
"""

import numpy as np
from sklearn.datasets import load_iris
from sklearn.feature_selection import SelectPercentile, chi2
from sklearn.model_selection import cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC


def show(label, values):
    values = np.ravel(np.asarray(values, dtype=float))
    print(label, " ".join(f"{v:.6g}" if abs(v) >= 1e-9 else "0" for v in values))


X, y = load_iris(return_X_y=True)
rng = np.random.RandomState(0)
X = np.hstack((X, 2 * rng.random((X.shape[0], 36))))

clf = Pipeline([("anova", SelectPercentile(chi2)), ("scaler", StandardScaler()),
                ("svc", SVC(gamma="auto"))])
for percentile in (1, 3, 6, 10, 15, 20, 30, 40, 60, 80, 100):
    clf.set_params(anova__percentile=percentile)
    scores = cross_val_score(clf, X, y)
    show(f"percentile {percentile} fold scores", scores)
    show(f"percentile {percentile} mean std", [scores.mean(), scores.std()])
