"""Regression and outlier models through the API: a dataset's task at upload, a job's task
checked against it, predict, evaluation and export (app.domain.tasks).

Training runs the worker's job function directly (as in test_jobs.py). The diabetes test
checks the served model against scikit-learn's SVR (LIBSVM) the way
tests/solvers/test_smo_formulations.py checks the solver: the dual objective, the support
vectors and the predictions.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient
from sklearn import datasets as skdata
from sklearn import svm as sksvm
from sklearn.datasets import dump_svmlight_file, load_svmlight_file
from sqlalchemy import select

from app.domain.orm import SearchTask
from app.domain.tasks import dataset_task, outlier_report, regression_report
from app.infra.db import session_scope
from app.settings import Settings
from solvers import fit
from solvers.formats import read_libsvm_model_text
from testkit.bundled import scale_columns
from testkit.datagen import smooth_regression
from workers.search import fold_of_rows, run_search_task
from workers.training import run_job

libsvm = pytest.importorskip("libsvm.svmutil")


def svmlight_bytes(X: Any, y: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)
    return buffer.getvalue()


def upload(client: TestClient, body: bytes, query: str = "") -> dict[str, Any]:
    response = client.post(f"/v1/datasets{query}", content=body)
    assert response.status_code == 201, response.text
    return dict(response.json())


def train(client: TestClient, settings: Settings, dataset_id: str, **params: Any) -> dict[str, Any]:
    response = client.post(
        "/v1/jobs", json={"dataset_id": dataset_id, "solver": "smo", "params": params}
    )
    assert response.status_code == 202, response.text
    job = response.json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    return dict(client.get(f"/v1/jobs/{job['id']}").json())


def predict(client: TestClient, model_id: str, X: np.ndarray) -> dict[str, Any]:
    rows = [[float(v) for v in row] for row in X]
    response = client.post(f"/v1/models/{model_id}/predict", json={"instances": rows})
    assert response.status_code == 200, response.text
    return dict(response.json())


def evaluate(client: TestClient, model_id: str, dataset_id: str) -> dict[str, Any]:
    response = client.post(f"/v1/models/{model_id}/evaluations", json={"dataset_id": dataset_id})
    assert response.status_code in (200, 201, 202), response.text
    evaluation = response.json()
    assert evaluation["status"] == "succeeded", evaluation
    return dict(evaluation["report"])


# -- the dataset's task ------------------------------------------------------------------


def test_task_of_labels() -> None:
    assert dataset_task(np.array([1.0, -1.0, 1.0]), "auto", 1000) == "classification"
    assert dataset_task(np.array([1.0, 2.5]), "auto", 1000) == "regression"
    assert dataset_task(np.arange(5.0), "auto", 4) == "regression"
    assert dataset_task(np.arange(5.0), "auto", 5) == "classification"
    assert dataset_task(np.array([1.0, 2.5]), "classification", 1000) == "classification"
    assert dataset_task(np.array([1.0, -1.0]), "regression", 1000) == "regression"


def test_twenty_thousand_distinct_labels_make_a_regression_dataset_end_to_end(
    client: TestClient, settings: Settings
) -> None:
    X, y = smooth_regression(20_000)
    assert np.unique(y).shape[0] == 20_000  # far over HINGE_MAX_CLASSES (1000)
    dataset = upload(client, svmlight_bytes(X, y), "?name=wave")
    assert dataset["task"] == "regression"
    assert dataset["labels"] == [] and dataset["class_counts"] == {}
    stats = dataset["label_stats"]
    parsed = load_svmlight_file(io.BytesIO(svmlight_bytes(X, y)), zero_based=False)[1]
    assert stats["distinct"] == 20_000
    assert stats["min"] == parsed.min() and stats["max"] == parsed.max()
    assert stats["mean"] == pytest.approx(parsed.mean(), rel=1e-12)
    assert stats["std"] == pytest.approx(parsed.std(), rel=1e-12)
    assert stats["quantiles"]["0.5"] == pytest.approx(np.median(parsed), rel=1e-12)
    assert client.get(f"/v1/datasets/{dataset['id']}").json()["task"] == "regression"

    job = train(
        client, settings, dataset["id"], formulation="epsilon_svr", C=1.0, epsilon=0.3, gamma=0.5
    )
    assert job["task"] == "regression"
    assert job["result"]["train_accuracy"] is None
    train_figures = job["result"]["train_metrics"]
    assert train_figures["r2"] > 0.85  # the target is smooth; its noise is 0.1
    model = client.get(f"/v1/models/{job['model_id']}").json()
    assert model["task"] == "regression" and model["labels"] == []

    answer = predict(client, model["id"], X[:5])
    assert answer["task"] == "regression" and answer["classes"] == []
    assert answer["labels"] == answer["decision_values"]
    assert np.max(np.abs(np.array(answer["labels"]) - y[:5])) < 0.5

    report = evaluate(client, model["id"], dataset["id"])
    assert report["task"] == "regression"
    assert report["mse"] == pytest.approx(train_figures["mse"], rel=1e-12)
    assert report["rmse"] == pytest.approx(np.sqrt(report["mse"]), rel=1e-12)

    # the dashboard: the targets' statistics instead of class counts, the task
    assert "Regression targets" in client.get(f"/datasets/{dataset['id']}").text
    assert "regression: " in client.get("/datasets").text
    assert "· regression ·" in client.get(f"/jobs/{job['id']}").text
    page = client.get(f"/models/{model['id']}").text
    assert "· regression ·" in page and 'data-field="r2"' in page

    exported = client.get(f"/v1/models/{model['id']}/export")
    assert exported.status_code == 200, exported.text
    assert exported.text.startswith("svm_type epsilon_svr\n")
    kernel = read_libsvm_model_text(exported.text)
    assert kernel.n_support == job["result"]["n_support"]
    np.testing.assert_allclose(
        kernel.predict(parsed_rows(X[:5]))[0], answer["labels"], rtol=1e-9, atol=1e-9
    )


def parsed_rows(X: np.ndarray) -> Any:
    return load_svmlight_file(
        io.BytesIO(svmlight_bytes(X, np.zeros(X.shape[0]))), n_features=X.shape[1], zero_based=False
    )[0]


def test_integer_targets_are_regression_when_the_upload_says_so(client: TestClient) -> None:
    body = b"1 1:1\n2 1:2\n3 1:3\n"
    assert upload(client, body)["task"] == "classification"
    dataset = upload(client, body, "?task=regression")
    assert dataset["task"] == "regression" and dataset["label_stats"]["max"] == 3.0
    refused = client.post("/v1/datasets?task=ranking", content=body)
    assert refused.status_code == 422


def test_the_class_limit_holds_for_classification_only(
    client: TestClient, settings: Settings
) -> None:
    labels = np.arange(settings.max_classes + 1, dtype=np.float64)
    body = svmlight_bytes(np.ones((labels.shape[0], 1)), labels)
    refused = client.post("/v1/datasets?task=classification", content=body)
    assert refused.status_code == 422
    assert "max_classes" in refused.json()["error"]["message"]
    assert upload(client, body)["task"] == "regression"


def test_a_classification_job_on_a_regression_dataset_is_422(client: TestClient) -> None:
    dataset = upload(client, b"0.5 1:1\n1.5 1:2\n2.5 1:3\n")
    assert dataset["task"] == "regression"
    response = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "smo"})
    assert response.status_code == 422, response.text
    assert "a classification model but dataset" in response.json()["error"]["message"]


def test_a_regression_model_is_evaluated_on_a_regression_dataset_only(
    client: TestClient, settings: Settings
) -> None:
    X, y = smooth_regression(60, seed=8)
    dataset = upload(client, svmlight_bytes(X, y))
    job = train(client, settings, dataset["id"], formulation="epsilon_svr", gamma=0.5)
    classes = upload(client, svmlight_bytes(X, np.where(y > 0, 1.0, -1.0)))
    response = client.post(
        f"/v1/models/{job['model_id']}/evaluations", json={"dataset_id": classes["id"]}
    )
    assert response.status_code == 422, response.text
    message = response.json()["error"]["message"]
    assert "is a regression model but dataset" in message and "task=regression" in message
    assert "formulation" not in message


def test_a_one_class_job_labels_inliers_and_outliers(
    client: TestClient, settings: Settings, tmp_path: Path
) -> None:
    """one_class trains on any dataset and ignores its labels; with labels +1 / -1 the
    evaluation scores the outlier class."""
    rng = np.random.default_rng(1)
    inliers = 0.3 * rng.standard_normal((200, 2))
    outliers = rng.uniform(2.0, 3.0, size=(10, 2)) * rng.choice([-1.0, 1.0], (10, 2))
    X = np.vstack([inliers, outliers])
    y = np.r_[np.ones(200), -np.ones(10)]
    dataset = upload(client, svmlight_bytes(X, y))
    assert dataset["task"] == "classification"
    job = train(client, settings, dataset["id"], formulation="one_class", nu=0.05, gamma=1.0)
    assert job["task"] == "outlier"
    assert job["result"]["train_metrics"]["outlier_fraction"] == pytest.approx(0.05, abs=0.03)
    answer = predict(client, job["model_id"], np.array([[0.0, 0.0], [0.0, 6.0]]))
    assert answer["task"] == "outlier" and answer["classes"] == [-1.0, 1.0]
    assert answer["labels"] == [1.0, -1.0]
    assert answer["decision_values"][0] > 0 > answer["decision_values"][1]
    # a labelled hold-out: new inliers, and outliers far from every training row
    angles = rng.uniform(0, 2 * np.pi, 5)
    held_X = np.vstack(
        [0.3 * rng.standard_normal((50, 2)), 6.0 * np.c_[np.cos(angles), np.sin(angles)]]
    )
    held_y = np.r_[np.ones(50), -np.ones(5)]
    held = upload(client, svmlight_bytes(held_X, held_y))
    report = evaluate(client, job["model_id"], held["id"])
    predicted = np.array(predict(client, job["model_id"], held_X)["labels"])
    assert report["task"] == "outlier"
    assert report["outlier_fraction"] == np.mean(predicted == -1)
    assert report["outlier_recall"] == 1.0 and report["roc_auc"] == 1.0
    assert report["true_outlier_fraction"] == pytest.approx(5 / 55)
    assert 'data-field="outlier_recall"' in client.get(f"/models/{job['model_id']}").text
    # svm-predict on the exported file: the same labels and decision values
    path = tmp_path / "one_class.model"
    path.write_text(client.get(f"/v1/models/{job['model_id']}/export").text)
    assert path.read_text().startswith("svm_type one_class\n")
    labels, _, values = libsvm.svm_predict(
        [0] * held_X.shape[0], sp.csr_matrix(held_X), libsvm.svm_load_model(str(path)), "-q"
    )
    assert labels == predicted.tolist()
    np.testing.assert_allclose(
        np.ravel(values),
        predict(client, job["model_id"], held_X)["decision_values"],
        rtol=1e-9,
        atol=1e-12,
    )


def test_outlier_report_against_scikit_learn() -> None:
    from sklearn import metrics

    rng = np.random.default_rng(2)
    y = np.where(rng.uniform(size=300) < 0.1, -1.0, 1.0)
    scores = rng.standard_normal(300) + y
    predicted = np.where(scores > 0, 1.0, -1.0)
    report = outlier_report(y, predicted, scores)
    outlier, flagged = y == -1, predicted == -1
    assert report["outlier_fraction"] == np.mean(flagged)
    assert report["outlier_precision"] == pytest.approx(
        metrics.precision_score(outlier, flagged), rel=1e-12
    )
    assert report["outlier_recall"] == pytest.approx(
        metrics.recall_score(outlier, flagged), rel=1e-12
    )
    assert report["roc_auc"] == pytest.approx(metrics.roc_auc_score(outlier, -scores), rel=1e-12)
    assert "labels_note" in outlier_report(np.array([0.0, 1.0]), np.ones(2), np.ones(2))


def test_regression_report_against_scikit_learn_and_svm_predict() -> None:
    from sklearn import metrics

    rng = np.random.default_rng(3)
    y = rng.standard_normal(100)
    predicted = y + 0.3 * rng.standard_normal(100)
    report = regression_report(y, predicted)
    assert report["mse"] == pytest.approx(metrics.mean_squared_error(y, predicted), rel=1e-12)
    assert report["rmse"] == pytest.approx(np.sqrt(report["mse"]), rel=1e-12)
    assert report["mae"] == pytest.approx(metrics.mean_absolute_error(y, predicted), rel=1e-12)
    assert report["r2"] == pytest.approx(metrics.r2_score(y, predicted), rel=1e-12)
    # svm-predict's "Squared correlation coefficient" is Pearson's r squared
    assert report["squared_correlation"] == pytest.approx(
        np.corrcoef(y, predicted)[0, 1] ** 2, rel=1e-10
    )


def diabetes_svmlight() -> bytes:
    """scikit-learn's diabetes set, target standardised and features scaled to [-1, 1]
    (as tests/solvers/test_smo_formulations.py's regression_set)."""
    features, target = skdata.load_diabetes(return_X_y=True)
    target = (target - target.mean()) / target.std()
    return svmlight_bytes(scale_columns(np.asarray(features, dtype=np.float64)), target)


def test_diabetes_through_the_api_matches_scikit_learns_svr(
    client: TestClient, settings: Settings, tmp_path: Path
) -> None:
    body = diabetes_svmlight()
    X, y = load_svmlight_file(io.BytesIO(body), zero_based=False)  # the stored values
    X = X.toarray()
    dataset = upload(client, body, "?name=diabetes")
    assert dataset["task"] == "regression"
    C, epsilon, gamma, eps = 3.0, 0.2, 0.3, 1e-8
    job = train(
        client,
        settings,
        dataset["id"],
        formulation="epsilon_svr",
        C=C,
        epsilon=epsilon,
        gamma=gamma,
        eps=eps,
    )
    reference = sksvm.SVR(C=C, epsilon=epsilon, gamma=gamma, tol=eps).fit(X, y)
    # LIBSVM's dual objective 1/2 b'Kb + epsilon |b|_1 - y'b at b = a - a* (dual_coef_)
    b = reference.dual_coef_[0]
    support = X[reference.support_]
    sq = (support**2).sum(axis=1)
    K = np.exp(-gamma * (sq[:, None] + sq[None, :] - 2 * support @ support.T))
    objective = 0.5 * b @ K @ b + epsilon * np.abs(b).sum() - y[reference.support_] @ b
    result = job["result"]
    assert abs(result["dual_objective"] - objective) <= 1e-6 * abs(objective)
    assert (
        abs(result["n_support"] - reference.support_.shape[0]) <= 0.01 * reference.support_.shape[0]
    )
    answer = predict(client, job["model_id"], X)
    theirs = reference.predict(X)
    assert np.corrcoef(answer["labels"], theirs)[0, 1] >= 0.99999
    np.testing.assert_allclose(answer["labels"], theirs, rtol=0, atol=1e-5)
    # the exported file, as svm-predict reads it, predicts the same values
    path = tmp_path / "diabetes.model"
    path.write_text(client.get(f"/v1/models/{job['model_id']}/export").text)
    assert path.read_text().startswith("svm_type epsilon_svr\n")
    values = libsvm.svm_predict(
        [0] * X.shape[0], sp.csr_matrix(X), libsvm.svm_load_model(str(path)), "-q"
    )[0]
    np.testing.assert_allclose(values, answer["labels"], rtol=1e-9, atol=1e-9)


def test_nu_svr_with_probability_gives_the_laplace_width(
    client: TestClient, settings: Settings
) -> None:
    dataset = upload(client, diabetes_svmlight(), "?name=diabetes")
    job = train(
        client,
        settings,
        dataset["id"],
        formulation="nu_svr",
        nu=0.5,
        C=1.0,
        gamma=0.3,
        probability=True,
    )
    answer = predict(client, job["model_id"], np.zeros((1, 10)))
    assert answer["probabilities"] is None
    assert answer["sigma"] is not None and answer["sigma"] > 0
    exported = client.get(f"/v1/models/{job['model_id']}/export").text
    assert exported.startswith("svm_type nu_svr\n")
    prob_a = [line for line in exported.splitlines() if line.startswith("probA ")]
    assert len(prob_a) == 1 and "probB" not in exported
    assert float(prob_a[0].split()[1]) == pytest.approx(answer["sigma"], rel=1e-12)


def test_a_regression_dataset_splits_without_strata(client: TestClient) -> None:
    X, y = smooth_regression(40, seed=4)
    dataset = upload(client, svmlight_bytes(X, y))
    response = client.post(f"/v1/datasets/{dataset['id']}/split", json={"test_fraction": 0.25})
    assert response.status_code == 201, response.text
    parts = response.json()
    for part in (parts["train"], parts["test"]):
        assert part["task"] == "regression" and part["split_stratified"] is False
    assert parts["train"]["rows"] + parts["test"]["rows"] == 40


# -- searches ------------------------------------------------------------------------------


def test_a_regression_search_optimises_neg_mse_over_c_epsilon_and_gamma(
    client: TestClient, settings: Settings
) -> None:
    X, y = smooth_regression(300, seed=5)
    dataset = upload(client, svmlight_bytes(X, y))
    space = {"C": [0.5, 4.0], "epsilon": [0.05, 0.3], "gamma": [0.5]}
    response = client.post(
        "/v1/searches",
        json={
            "dataset_id": dataset["id"],
            "solver": "smo",
            "space": space,
            "params": {"formulation": "epsilon_svr"},
            "cv": {"folds": 3, "seed": 1},
        },
    )
    assert response.status_code == 202, response.text
    created = response.json()
    assert created["spec"]["metric"] == "neg_mse"  # a regression dataset's default
    assert created["spec"]["cv"]["stratified"] is False
    with session_scope(settings.database_url) as session:
        ids = list(
            session.scalars(select(SearchTask.id).where(SearchTask.search_id == created["id"]))
        )
    assert all(run_search_task(settings, i, "test") == "succeeded" for i in ids)
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded" and body["total"] == body["done"] == 12
    best = max(body["points"], key=lambda p: p["mean"])
    assert body["best"]["index"] == best["index"]
    refit = client.get(f"/v1/jobs/{body['refit_job_id']}").json()
    assert refit["task"] == "regression" and refit["params"]["epsilon"] == best["values"]["epsilon"]
    # a point's score: minus the mean squared error of its fold models
    parsed = load_svmlight_file(io.BytesIO(svmlight_bytes(X, y)), zero_based=False)
    Xs, ys = parsed[0], parsed[1]
    fold = fold_of_rows(ys, 3, False, 1)
    point = body["points"][0]
    expected = []
    for k in range(3):
        result = fit(
            Xs[fold != k], ys[fold != k], solver="smo", formulation="epsilon_svr", **point["values"]
        )
        predicted = result.model.predict(Xs[fold == k])[0]
        expected.append(-float(np.mean((predicted - ys[fold == k]) ** 2)))
    assert point["scores"] == pytest.approx(expected, rel=1e-6)


def test_an_auto_linear_regression_search_scores_neg_mse(
    client: TestClient, settings: Settings
) -> None:
    """auto with formulation epsilon_svr: a regression search of linear SVR (its choice,
    refitted as an auto regression job)."""
    X, y = smooth_regression(200, seed=7)
    dataset = upload(client, svmlight_bytes(X, y))
    response = client.post(
        "/v1/searches",
        json={
            "dataset_id": dataset["id"],
            "space": {"C": [0.25, 4.0], "loss": ["l1", "l2"]},
            "params": {"formulation": "epsilon_svr", "epsilon": 0.05},
            "cv": {"folds": 3, "seed": 2},
        },
    )
    assert response.status_code == 202, response.text
    created = response.json()
    assert created["solver"] == "auto" and created["spec"]["metric"] == "neg_mse"
    with session_scope(settings.database_url) as session:
        ids = list(
            session.scalars(select(SearchTask.id).where(SearchTask.search_id == created["id"]))
        )
    assert all(run_search_task(settings, i, "test") == "succeeded" for i in ids)
    body = client.get(f"/v1/searches/{created['id']}").json()
    assert body["status"] == "succeeded" and body["done"] == 12
    assert all(p["converged"] and p["nonzero_weights"] is None for p in body["points"])
    parsed = load_svmlight_file(io.BytesIO(svmlight_bytes(X, y)), zero_based=False)
    Xs, ys = parsed[0], parsed[1]
    fold = fold_of_rows(ys, 3, False, 2)
    point = body["points"][-1]
    expected = []
    for k in range(3):
        result = fit(Xs[fold != k], ys[fold != k], solver="auto", formulation="epsilon_svr",
                     epsilon=0.05, **point["values"])
        assert result.auto is not None and result.auto["chosen"] == "linear_svr"
        predicted = result.model.predict(Xs[fold == k])[0]
        expected.append(-float(np.mean((predicted - ys[fold == k]) ** 2)))
    assert point["scores"] == pytest.approx(expected, rel=1e-6)
    assert run_job(settings, body["refit_job_id"], "test") == "succeeded"
    refit = client.get(f"/v1/jobs/{body['refit_job_id']}").json()
    assert refit["task"] == "regression"
    assert refit["result"]["auto"]["chosen"] == "linear_svr"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"metric": "accuracy", "params": {"formulation": "nu_svr"}}, "neg_mse, r2"),
        ({"params": {"formulation": "one_class"}}, "no metric"),
    ],
)
def test_a_search_metric_must_score_the_task(
    client: TestClient, body: dict[str, Any], words: str
) -> None:
    X, y = smooth_regression(30, seed=6)
    dataset = upload(client, svmlight_bytes(X, y))
    search = {"dataset_id": dataset["id"], "solver": "smo", "space": {"nu": [0.2, 0.5]}}
    response = client.post("/v1/searches", json={**search, **body})
    assert response.status_code == 422, response.text
    assert words in response.json()["error"]["message"]
