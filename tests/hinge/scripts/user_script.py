"""A scikit-learn user's script, as scikit-learn's examples write one: fit every SVM of
sklearn.svm and a liblinear logistic regression on scikit-learn's bundled data, inside a
Pipeline and a GridSearchCV, and print what it found. tests/hinge/test_sklearn.py runs it
as written and again with the one import line swapped for Hinge's."""

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR, LinearSVC, LinearSVR, NuSVC, NuSVR, OneClassSVM

X, y = load_iris(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
for name, clf in (("rbf", SVC(C=1.0)), ("nu", NuSVC(nu=0.3)),
                  ("linear", SVC(kernel="linear", decision_function_shape="ovo"))):
    clf.fit(X_train, y_train)
    print(name, clf.n_support_.tolist(), round(clf.score(X_test, y_test), 6),
          np.round(clf.decision_function(X_test[:2]), 6).tolist())

search = GridSearchCV(make_pipeline(StandardScaler(), SVC()),
                      {"svc__C": [0.1, 1, 10], "svc__gamma": ["scale", 0.01]},
                      cv=KFold(5, shuffle=True, random_state=0))
search.fit(X, y)
print("best", search.best_params_, search.cv_results_["rank_test_score"].tolist())

Xc, yc = load_breast_cancer(return_X_y=True)
Xc = StandardScaler().fit_transform(Xc)
print("LinearSVC", LinearSVC(C=0.1, tol=1e-8, max_iter=100_000).fit(Xc, yc).score(Xc, yc))
print("LogisticRegression",
      LogisticRegression(solver="liblinear", tol=1e-8).fit(Xc, yc).score(Xc, yc))

Xd, yd = load_diabetes(return_X_y=True)
for name, reg in (("SVR", SVR(C=50.0, epsilon=5.0)), ("NuSVR", NuSVR(C=50.0, nu=0.4))):
    print(name, round(reg.fit(Xd, yd).score(Xd, yd), 6))
Xs = StandardScaler().fit_transform(Xd)
svr = LinearSVR(C=1.0, loss="squared_epsilon_insensitive", tol=1e-8, max_iter=100_000)
print("LinearSVR", round(svr.fit(Xs, yd / 100).score(Xs, yd / 100), 4))
outliers = OneClassSVM(nu=0.1, gamma=0.1).fit(X)
print("OneClassSVM", int((outliers.predict(X) == -1).sum()))
