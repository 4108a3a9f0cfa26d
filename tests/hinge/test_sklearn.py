"""hinge.sklearn in scikit-learn's machinery: a Pipeline + GridSearchCV over each Hinge
estimator ranks the grid as the same search over scikit-learn's estimator; a user's
script runs unchanged with the import swapped (tests/hinge/scripts/user_script.py, the
README's example); Hinge's own attributes (the certificate); labels of any type; the
svmlight bytes that remote fits upload."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn import datasets, svm
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import hinge.sklearn as hs
from hinge.sklearn import HingeLinearSVC, HingeSVC, svmlight_bytes
from solvers.svmlight import parse_stream
from testkit import bundled

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).parent / "scripts" / "user_script.py"

# estimator name, scikit-learn's estimator, grid, data set, scoring
GRIDS: list[tuple[str, Any, dict[str, list[Any]], str]] = [
    ("SVC", svm.SVC(), {"C": [0.1, 1.0, 10.0], "gamma": ["scale", 0.02]}, "wine"),
    ("NuSVC", svm.NuSVC(), {"nu": [0.1, 0.3, 0.5], "gamma": ["scale", 0.02]}, "wine"),
    ("SVR", svm.SVR(), {"C": [1.0, 100.0], "epsilon": [0.1, 10.0]}, "diabetes"),
    ("NuSVR", svm.NuSVR(), {"C": [1.0, 100.0], "nu": [0.2, 0.6]}, "diabetes"),
    ("LinearSVC", svm.LinearSVC(tol=1e-8, max_iter=100_000),
     {"C": [0.001, 0.1, 10.0], "loss": ["hinge", "squared_hinge"]}, "cancer"),
    ("LinearSVR", svm.LinearSVR(tol=1e-8, max_iter=100_000, epsilon=0.1,
                                loss="squared_epsilon_insensitive"),
     {"C": [0.0001, 0.001, 0.01, 1.0]}, "diabetes_scaled"),
    ("LogisticRegression", LogisticRegression(solver="liblinear", tol=1e-8),
     {"C": [0.001, 0.1, 10.0]}, "cancer"),
    ("OneClassSVM", svm.OneClassSVM(), {"nu": [0.05, 0.2, 0.5], "gamma": ["scale", 0.1]},
     "blobs_outliers"),
]
# an estimator without a score method: scored on its +1 / -1 labels
SCORING = {"OneClassSVM": "accuracy"}


def _grid_data(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "blobs_outliers":  # inliers +1 around one centre, uniform outliers -1
        rng = np.random.RandomState(0)
        inliers, _ = datasets.make_blobs(200, n_features=2, centers=[[0.0, 0.0]],
                                         random_state=0)
        outliers = rng.uniform(-6.0, 6.0, (20, 2))
        return np.vstack([inliers, outliers]), np.r_[np.ones(200), -np.ones(20)]
    if name == "diabetes_scaled":
        X, y = datasets.load_diabetes(return_X_y=True)
        return X, (y - y.mean()) / y.std()
    loader = {"wine": datasets.load_wine, "diabetes": datasets.load_diabetes,
              "cancer": datasets.load_breast_cancer}[name]
    return loader(return_X_y=True)


@pytest.mark.parametrize(("name", "theirs", "grid", "data"), GRIDS,
                         ids=[g[0] for g in GRIDS])
def test_grid_search_ranks_as_sklearn_s(name: str, theirs: Any, grid: dict[str, list[Any]],
                                        data: str) -> None:
    X, y = _grid_data(data)
    ours = getattr(hs, name)(**theirs.get_params())
    folds = KFold(3, shuffle=True, random_state=0)
    params = {f"model__{key}": values for key, values in grid.items()}
    results = []
    for model in (ours, theirs):
        search = GridSearchCV(Pipeline([("scale", StandardScaler()), ("model", model)]),
                              params, cv=folds, scoring=SCORING.get(name))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append(search.fit(X, y))
    mine, ref = results
    np.testing.assert_array_equal(mine.cv_results_["rank_test_score"],
                                  ref.cv_results_["rank_test_score"])
    exact = name in ("SVC", "NuSVC", "SVR", "NuSVR", "OneClassSVM")  # LIBSVM's SMO path
    np.testing.assert_allclose(mine.cv_results_["mean_test_score"],
                               ref.cv_results_["mean_test_score"],
                               rtol=0, atol=1e-9 if exact else 1e-3)
    assert mine.best_params_ == ref.best_params_


def test_a_users_script_runs_unchanged_with_hinge_s_import() -> None:
    """The script as written (scikit-learn) and with its imports of sklearn.svm and
    LogisticRegression swapped for hinge.sklearn's: the same output."""
    source = SCRIPT.read_text()
    swapped = source.replace("from sklearn.svm import", "from hinge.sklearn import").replace(
        "from sklearn.linear_model import LogisticRegression",
        "from hinge.sklearn import LogisticRegression")
    assert swapped != source
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    outputs = [subprocess.run([sys.executable, "-c", text], capture_output=True, text=True,
                              env=env, cwd=ROOT, timeout=300, check=True).stdout
               for text in (source, swapped)]
    assert outputs[0].count("\n") >= 10
    assert outputs[1] == outputs[0]


def _readme_example() -> tuple[str, list[str]]:
    """The README's "From scikit-learn to Hinge" block and the output its comments show."""
    text = (ROOT / "README.md").read_text()
    start = text.index("\n## From scikit-learn to Hinge\n")
    end = text.find("\n## ", start + 1)
    match = re.search(r"```python\n(.*?)\n```", text[start:end], re.S)
    assert match
    lines = match.group(1).splitlines()
    shown: list[str] = []
    while lines and lines[-1].startswith("# "):
        shown.insert(0, lines.pop()[2:])
    return "\n".join(lines) + "\n", shown


def test_the_readme_example_prints_the_same_with_either_import() -> None:
    code, shown = _readme_example()
    swapped = code.replace("from sklearn.svm import", "from hinge.sklearn import")
    assert swapped != code and shown
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}
    for text in (code, swapped):
        out = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True,
                             env=env, cwd=ROOT, timeout=300, check=True).stdout
        assert out.splitlines() == shown


def test_the_rest_of_sklearn_svm_s_names_and_parameters_swap() -> None:
    """`from sklearn.svm import l1_min_c` (scikit-learn's gallery does) and
    LogisticRegression(warm_start=True), which scikit-learn's liblinear solver ignores:
    a second fit is the fresh fit."""
    assert hs.l1_min_c is svm.l1_min_c and "l1_min_c" in hs.__all__
    X, y = datasets.load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    warm = hs.LogisticRegression(warm_start=True, C=0.1, tol=1e-8)
    first = warm.fit(X, y).coef_.copy()
    np.testing.assert_array_equal(warm.set_params(C=0.1).fit(X, y).coef_, first)
    cold = hs.LogisticRegression(C=0.1, tol=1e-8).fit(X, y)
    np.testing.assert_array_equal(cold.coef_, first)
    assert warm.get_params()["warm_start"] is True
    with pytest.raises(ValueError, match="warm_start"):
        hs.LogisticRegression(warm_start="yes").fit(X, y)  # type: ignore[arg-type]


def test_hinge_s_attributes_report_the_certificate() -> None:
    X, y = bundled.load("cancer")
    clf = HingeLinearSVC(tol=1e-6, tol_rule="gap").fit(X, y)
    assert clf.converged_ and clf.relative_gap_ <= 1e-6 and clf.solver_ == "tron"
    assert clf.primal_objective_ > 0 and not hasattr(clf, "model_id_")
    svc = HingeSVC().fit(X, y)
    assert svc.converged_ and svc.solver_ == "smo" and svc.dual_objective_ < 0


def test_labels_may_be_strings() -> None:
    X, y = bundled.load("iris")
    names = np.array(["setosa", "versicolor", "virginica"])[y.astype(int) - 1]
    pairs: list[tuple[Any, Any]] = [(HingeSVC(), svm.SVC()), (hs.NuSVC(), svm.NuSVC())]
    for ours, theirs in pairs:
        np.testing.assert_array_equal(ours.fit(X, names).predict(X),
                                      theirs.fit(X, names).predict(X))
        np.testing.assert_array_equal(ours.classes_, ["setosa", "versicolor", "virginica"])
    lin = HingeLinearSVC().fit(X, names)
    assert set(lin.predict(X)) <= set(names)


def test_svmlight_bytes_round_trip_exactly() -> None:
    X, y = bundled.load("cancer")
    X = X.multiply(np.pi).tocsr()
    parsed = parse_stream([svmlight_bytes(X, y)])
    np.testing.assert_array_equal(parsed.y, y)
    np.testing.assert_array_equal(parsed.to_csr(X.shape[1]).toarray(), X.toarray())


def test_sample_weight_is_routed_as_for_sklearn_s_estimator() -> None:
    """Metadata routing: cross_validate passes sample_weight to a Hinge estimator that
    requests it, and the fold scores are the ones scikit-learn's SVC gets."""
    import sklearn
    from sklearn.model_selection import cross_validate

    X, y = datasets.load_wine(return_X_y=True)
    weights = np.random.RandomState(1).uniform(0.5, 2.0, y.shape[0])
    folds = KFold(3, shuffle=True, random_state=0)
    with sklearn.config_context(enable_metadata_routing=True):
        scores = [cross_validate(model.set_fit_request(sample_weight=True)
                                 .set_score_request(sample_weight=False), X, y, cv=folds,
                                 params={"sample_weight": weights})["test_score"]
                  for model in (HingeSVC(C=2.0), svm.SVC(C=2.0))]
        unweighted = cross_validate(HingeSVC(C=2.0, gamma=1e-4), X, y, cv=folds)
    np.testing.assert_array_equal(scores[0], scores[1])
    assert unweighted["test_score"].shape == (3,)
