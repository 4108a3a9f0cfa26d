"""Instance weights through the API (app.domain.weights): a weight column at upload, the
dataset's summary, a job's sample_weight ("dataset", "none", a list), the 422s, and the
done-when check of issue 26: weighted C-SVC (breast_cancer) and epsilon-SVR (diabetes)
trained through the API (the worker's job function) match scikit-learn's SVC / SVR with
sample_weight (its LIBSVM): the dual objective within 1e-6 relative, the support-vector
counts within 1% and the decision values' correlation >= 0.99999.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn import datasets as skdata
from sklearn import svm as sksvm
from sklearn.datasets import dump_svmlight_file

from app.settings import Settings
from testkit.bundled import load, scale_columns
from workers.training import run_job


def weights_of(n: int, seed: int, zeros: int = 5) -> np.ndarray:
    """Weights in [0.2, 3] with a few rows of weight 0, printed exactly in text (%.4f)."""
    rng = np.random.default_rng(seed)
    w = np.round(rng.uniform(0.2, 3.0, n), 4)
    w[rng.choice(n, zeros, replace=False)] = 0.0
    return w


def csv_bytes(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> bytes:
    header = ",".join(["label", *(f"f{j}" for j in range(X.shape[1])), "weight"])
    lines = [header] + [",".join([repr(float(t)), *(repr(float(v)) for v in row),
                                  repr(float(u))]) for row, t, u in zip(X, y, w, strict=True)]
    return ("\n".join(lines) + "\n").encode()


def svmlight_with_weight_last(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    dump_svmlight_file(np.hstack([X, w[:, None]]), y, buffer, zero_based=False)
    return buffer.getvalue()


def upload(client: TestClient, body: bytes, query: str) -> dict[str, Any]:
    response = client.post(f"/v1/datasets{query}", content=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def submit(client: TestClient, dataset_id: str, params: dict[str, Any],
           solver: str = "smo", **extra: Any) -> Any:
    return client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": solver,
                                         "params": params, **extra})


def train(client: TestClient, settings: Settings, dataset_id: str, params: dict[str, Any],
          **extra: Any) -> dict[str, Any]:
    response = submit(client, dataset_id, params, **extra)
    assert response.status_code == 202, response.text
    job = response.json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    return dict(client.get(f"/v1/jobs/{job['id']}").json())


def decision_values(client: TestClient, model_id: str, X: np.ndarray) -> np.ndarray:
    rows = [[float(v) for v in row] for row in X]
    response = client.post(f"/v1/models/{model_id}/predict", json={"instances": rows})
    assert response.status_code == 200, response.text
    return np.asarray(response.json()["decision_values"], dtype=np.float64).reshape(-1)


def rbf(A: np.ndarray, gamma: float) -> np.ndarray:
    sq = (A ** 2).sum(axis=1)
    return np.asarray(np.exp(-gamma * (sq[:, None] + sq[None, :] - 2 * A @ A.T)))


def assert_matches(result: dict[str, Any], objective: float, n_support: int,
                   ours: np.ndarray, theirs: np.ndarray) -> None:
    assert abs(result["dual_objective"] - objective) <= 1e-6 * abs(objective)
    assert abs(result["n_support"] - n_support) <= 0.01 * n_support
    assert np.corrcoef(ours, theirs)[0, 1] >= 0.99999


def test_weighted_c_svc_matches_scikit_learns_svc_with_sample_weight(
        client: TestClient, settings: Settings) -> None:
    X_sparse, y = load("cancer")
    X = X_sparse.toarray()
    w = weights_of(X.shape[0], seed=3)
    dataset = upload(client, csv_bytes(X, y, w), "?format=csv&weight_column=weight")
    assert dataset["features"] == X.shape[1] and "weight" not in dataset["feature_names"]
    stats = dataset["weight_stats"]
    assert stats["zeros"] == 5 and stats["max"] == w.max()
    assert stats["sum"] == pytest.approx(w.sum(), rel=1e-12)
    C, gamma, eps = 2.0, 0.05, 1e-8
    job = train(client, settings, dataset["id"], {"C": C, "gamma": gamma, "eps": eps})
    assert job["params"]["sample_weight"] == "dataset"
    reference = sksvm.SVC(C=C, gamma=gamma, tol=eps).fit(X, y, sample_weight=w)
    b = reference.dual_coef_[0]  # y_i a_i
    # support_ counts the rows of weight > 0 only: the vectors themselves are the sure way
    objective = 0.5 * b @ rbf(reference.support_vectors_, gamma) @ b - np.abs(b).sum()
    # sklearn's decision value is positive for classes_[1] (+1), as ours
    assert_matches(job["result"], objective, reference.support_.shape[0],
                   decision_values(client, job["model_id"], X),
                   reference.decision_function(X))
    # unweighted ("none") is another model; the same weights given per job are the same
    plain = train(client, settings, dataset["id"], {"C": C, "gamma": gamma, "eps": eps},
                  sample_weight="none")
    assert "sample_weight" not in plain["params"]
    assert abs(plain["result"]["dual_objective"] - objective) > 1e-3 * abs(objective)
    listed = train(client, settings, dataset["id"], {"C": C, "gamma": gamma, "eps": eps},
                   sample_weight=[float(v) for v in w])
    assert listed["result"]["dual_objective"] == pytest.approx(
        job["result"]["dual_objective"], rel=1e-12)


def test_weighted_epsilon_svr_matches_scikit_learns_svr_with_sample_weight(
        client: TestClient, settings: Settings) -> None:
    features, target = skdata.load_diabetes(return_X_y=True)
    X = scale_columns(np.asarray(features, dtype=np.float64))
    y = np.round((target - target.mean()) / target.std(), 6)
    w = weights_of(X.shape[0], seed=5)
    body = svmlight_with_weight_last(X, y, w)
    dataset = upload(client, body, f"?weight_column={X.shape[1] + 1}")
    assert dataset["task"] == "regression" and dataset["features"] == X.shape[1]
    assert dataset["weight_stats"]["zeros"] == 5
    C, epsilon, gamma, eps = 3.0, 0.2, 0.3, 1e-8
    job = train(client, settings, dataset["id"], {"formulation": "epsilon_svr", "C": C,
                                                  "epsilon": epsilon, "gamma": gamma,
                                                  "eps": eps})
    # the stored values: dump_svmlight_file writes %.16g, exact for float64
    reference = sksvm.SVR(C=C, epsilon=epsilon, gamma=gamma, tol=eps).fit(
        X, y, sample_weight=w)
    b = reference.dual_coef_[0]
    targets = y[w > 0][reference.support_]  # support_ indexes the rows of weight > 0
    assert np.array_equal(X[w > 0][reference.support_], reference.support_vectors_)
    objective = (0.5 * b @ rbf(reference.support_vectors_, gamma) @ b
                 + epsilon * np.abs(b).sum() - targets @ b)
    assert_matches(job["result"], objective, reference.support_.shape[0],
                   decision_values(client, job["model_id"], X), reference.predict(X))


def test_weighted_scaled_fit_and_split_keep_the_weights(
        client: TestClient, settings: Settings) -> None:
    X_sparse, y = load("iris")
    X = X_sparse.toarray()
    w = weights_of(X.shape[0], seed=7, zeros=0)
    dataset = upload(client, csv_bytes(X, y, w), "?format=csv&weight_column=weight")
    split = client.post(f"/v1/datasets/{dataset['id']}/split",
                        json={"test_fraction": 0.3, "seed": 1})
    assert split.status_code == 201, split.text
    parts = split.json()
    total = parts["train"]["weight_stats"]["sum"] + parts["test"]["weight_stats"]["sum"]
    assert total == pytest.approx(w.sum(), rel=1e-12)
    page = client.get(f"/datasets/{dataset['id']}").text  # the dashboard shows them
    assert "Instance weights" in page and 'id="weight-stats"' in page
    job = train(client, settings, parts["train"]["id"], {"scale": "minmax", "C": 1.0})
    assert job["params"]["sample_weight"] == "dataset" and job["model_id"]


def test_weights_are_checked_with_clear_422s(client: TestClient) -> None:
    X_sparse, y = load("iris")
    X = X_sparse.toarray()
    w = weights_of(X.shape[0], seed=9, zeros=0)
    bad = w.copy()
    bad[4] = -1.0
    response = client.post("/v1/datasets?format=csv&weight_column=weight",
                           content=csv_bytes(X, y, bad))
    assert response.status_code == 422 and "row 4" in response.text
    response = client.post("/v1/datasets?format=csv&weight_column=nope",
                           content=csv_bytes(X, y, w))
    assert response.status_code == 422 and "no column 'nope'" in response.text
    response = client.post("/v1/datasets?format=csv&weight_column=weight",
                           content=csv_bytes(X, y, np.zeros_like(w)))
    assert response.status_code == 422 and "every weight is 0" in response.text
    dataset = upload(client, csv_bytes(X, y, w), "?format=csv&weight_column=weight")
    plain = upload(client, csv_bytes(X, y, w), "?format=csv&name=unweighted")
    assert plain["weight_stats"] is None and "weight" in plain["feature_names"]
    assert "Instance weights" not in client.get(f"/datasets/{plain['id']}").text
    short = submit(client, plain["id"], {}, sample_weight=[1.0] * 10)
    assert short.status_code == 422 and "10 weights for 150 rows" in short.text
    negative = submit(client, plain["id"], {}, sample_weight=[-1.0] * 150)
    assert negative.status_code == 422 and "finite numbers >= 0" in negative.text
    unweighted_solver = submit(client, dataset["id"], {}, solver="acf")
    assert unweighted_solver.status_code == 422
    assert "takes no instance weights" in unweighted_solver.text
    assert submit(client, dataset["id"], {}, solver="acf",
                  sample_weight="none").status_code == 202
    assert submit(client, dataset["id"], {"loss": "l1"}, solver="dcd").status_code == 202
    calibrated = submit(client, dataset["id"], {"probability": True})
    assert calibrated.status_code == 422 and "probability" in calibrated.text


def test_a_search_on_a_weighted_dataset_trains_unweighted(
        client: TestClient, settings: Settings) -> None:
    from sqlalchemy import select

    from app.domain.orm import SearchTask
    from app.infra.db import session_scope
    from workers.search import run_search_task

    X_sparse, y = load("iris")
    w = weights_of(X_sparse.shape[0], seed=2, zeros=0)
    dataset = upload(client, csv_bytes(X_sparse.toarray(), y, w),
                     "?format=csv&weight_column=weight")
    response = client.post("/v1/searches", json={
        "dataset_id": dataset["id"], "solver": "dcd", "space": {"C": [0.5, 2.0]},
        "cv": {"folds": 2, "seed": 1}})
    assert response.status_code == 202, response.text
    search = response.json()
    with session_scope(settings.database_url) as session:
        ids = list(session.scalars(select(SearchTask.id)
                                   .where(SearchTask.search_id == search["id"])))
    assert all(run_search_task(settings, i, "test") == "succeeded" for i in ids)
    assert client.get(f"/v1/searches/{search['id']}").json()["status"] == "succeeded"


@pytest.mark.parametrize(("solver", "params", "regression"), [
    ("smo", {"formulation": "nu_svc", "nu": 0.3, "gamma": 0.5}, False),
    ("smo", {"formulation": "one_class", "nu": 0.2, "gamma": 0.5}, False),
    ("smo", {"formulation": "nu_svr", "nu": 0.4, "C": 2.0, "gamma": 0.5}, True),
    ("tron", {"C": 1.0}, False),
    ("linear_svr", {"C": 1.0}, True),
])
def test_every_weighted_solver_gets_the_stored_weights(
        client: TestClient, settings: Settings, solver: str, params: dict[str, Any],
        regression: bool) -> None:
    """The job's fit is the solver's fit with the dataset's weights (the solvers' own
    tests certify those against LIBSVM / LIBLINEAR)."""
    from solvers import fit

    X_sparse, labels = load("cancer")
    X = X_sparse.toarray()
    y = X[:, 0] + 0.5 * X[:, 1] if regression else labels
    w = weights_of(X.shape[0], seed=13)
    dataset = upload(client, csv_bytes(X, y, w), "?format=csv&weight_column=weight"
                     + ("&task=regression" if regression else ""))
    response = submit(client, dataset["id"], params, solver=solver)
    assert response.status_code == 202, response.text
    assert run_job(settings, response.json()["id"], "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{response.json()['id']}").json()
    direct = fit(X_sparse, y, solver=solver, sample_weight=w, **params)
    unweighted = fit(X_sparse, y, solver=solver, **params)
    key = "dual_objective" if solver == "smo" else "primal_objective"
    assert job["result"][key] == pytest.approx(getattr(direct, key), rel=1e-9)
    assert getattr(unweighted, key) != pytest.approx(getattr(direct, key), rel=1e-6)
