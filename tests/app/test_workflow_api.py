"""The practical workflow through the API: split, train with scale and probability, predict,
evaluate (inline and on a worker), export the model with its svm-scale range file.

Real components: the API in a TestClient, the SQLite database and broker of the embedded
default, the worker's job and evaluation functions called directly (no Celery eager mode).
Evaluation figures are checked against scikit-learn's metrics computed from the
predictions the API returns for the same rows.
"""

from __future__ import annotations

import io
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn import metrics as skm
from sklearn.datasets import load_svmlight_file
from sqlalchemy import update

from app.api.main import create_app
from app.domain.orm import Dataset, Evaluation, utcnow
from app.domain.services.splits import split_rows
from app.domain.sweep import sweep
from app.infra.db import session_scope
from app.settings import Settings
from testkit import bundled
from tests.support import BLOB_BACKENDS, IN_CI, bearer
from workers.evaluation import run_evaluation
from workers.training import run_job


@pytest.fixture(params=BLOB_BACKENDS)
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test of this module runs with blobs in local files and in an S3 store."""
    return str(request.param)


def _upload(client: TestClient, text: bytes, name: str) -> dict[str, Any]:
    response = client.post(f"/v1/datasets?name={name}", content=text)
    assert response.status_code == 201, response.text
    return dict(response.json())


def _train(client: TestClient, settings: Settings, dataset_id: str, solver: str,
           **params: Any) -> dict[str, Any]:
    response = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": solver,
                                             "params": params})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert run_job(settings, job_id, "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{job_id}").json()
    return dict(client.get(f"/v1/models/{job['model_id']}").json(), job=job)


def _lines(name: str, start: int, stop: int) -> list[bytes]:
    """Lines start..stop-1 of a bundled set (testkit.bundled) as svmlight."""
    return bundled.svmlight_bytes(name).splitlines()[start:stop]


def _predict(client: TestClient, model_id: str, lines: list[bytes]) -> dict[str, Any]:
    response = client.post(f"/v1/models/{model_id}/predict", content=b"\n".join(lines),
                           headers={"content-type": "text/plain"})
    assert response.status_code == 200, response.text
    return dict(response.json())


def _labels(lines: list[bytes]) -> np.ndarray:
    return np.array([float(line.split()[0]) for line in lines])


def assert_report_is_scikit_learns(report: dict[str, Any], y: np.ndarray,
                                   predicted: dict[str, Any]) -> None:
    """Every figure of the report equals scikit-learn's on the same predictions, to 1e-12."""
    classes = np.array(predicted["classes"])
    labels = np.array(predicted["labels"])
    close = {"rel": 1e-12, "abs": 1e-12}
    assert report["classes"] == predicted["classes"]
    assert report["n_samples"] == y.size
    assert report["accuracy"] == pytest.approx(skm.accuracy_score(y, labels), **close)
    assert report["balanced_accuracy"] == pytest.approx(
        skm.balanced_accuracy_score(y, labels), **close)
    assert report["confusion_matrix"] == skm.confusion_matrix(y, labels, labels=classes).tolist()
    precision, recall, f1, support = skm.precision_recall_fscore_support(
        y, labels, labels=classes, zero_division=0)
    for i, row in enumerate(report["per_class"]):
        assert row["class"] == classes[i]
        assert row["precision"] == pytest.approx(precision[i], **close)
        assert row["recall"] == pytest.approx(recall[i], **close)
        assert row["f1"] == pytest.approx(f1[i], **close)
        assert row["support"] == support[i]
    assert report["macro"]["f1"] == pytest.approx(
        skm.f1_score(y, labels, labels=classes, average="macro", zero_division=0), **close)
    assert report["weighted"]["precision"] == pytest.approx(
        skm.precision_score(y, labels, labels=classes, average="weighted", zero_division=0),
        **close)
    probabilities = predicted.get("probabilities")
    if classes.size == 2:
        scores = np.array(predicted["decision_values"])
        positive = y == classes[1]
        assert report["roc_auc"] == pytest.approx(skm.roc_auc_score(positive, scores), **close)
        assert report["average_precision"] == pytest.approx(
            skm.average_precision_score(positive, scores), **close)
        fpr, tpr, _ = skm.roc_curve(positive, scores)
        if fpr.size <= 200:
            assert report["roc_curve"]["fpr"] == pytest.approx(fpr.tolist(), **close)
            assert report["roc_curve"]["tpr"] == pytest.approx(tpr.tolist(), **close)
        assert len(report["roc_curve"]["fpr"]) <= 200
        assert len(report["precision_recall_curve"]["recall"]) <= 200
    if probabilities is None:
        assert "log_loss" not in report and report["has_probabilities"] is False
        return
    p = np.array(probabilities)
    assert report["log_loss"] == pytest.approx(skm.log_loss(y, p, labels=classes), **close)
    if classes.size == 2:
        brier = skm.brier_score_loss(y == classes[1], p[:, 1])
    else:
        brier = skm.brier_score_loss(y, p, labels=classes)
    assert report["brier_score"] == pytest.approx(brier, **close)


# ---- split ------------------------------------------------------------------------------


def test_split_is_deterministic_stratified_and_records_its_parent(
        client: TestClient, cancer_id: str, cancer_bytes: bytes) -> None:
    url = f"/v1/datasets/{cancer_id}/split"
    first = client.post(url, json={"test_fraction": 0.3, "seed": 7})
    assert first.status_code == 201, first.text
    train, test = first.json()["train"], first.json()["test"]
    X, y = load_svmlight_file(io.BytesIO(cancer_bytes))
    for part, name in ((train, "train"), (test, "test")):
        assert part["parent_id"] == cancer_id and part["split_part"] == name
        assert part["split_seed"] == 7 and part["split_test_fraction"] == 0.3
        assert part["split_stratified"] is True and part["features"] == X.shape[1]
        assert client.get(f"/v1/datasets/{part['id']}").json() == part
    assert train["rows"] + test["rows"] == y.size
    # stratified: round(30%) of each class goes to test, the rest to train
    labels, counts = np.unique(y, return_counts=True)
    assert test["class_counts"] == {f"{label:g}": round(0.3 * n)
                                    for label, n in zip(labels, counts, strict=True)}
    assert train["class_counts"] == {f"{label:g}": int(n) - round(0.3 * n)
                                     for label, n in zip(labels, counts, strict=True)}
    # the rows are exactly the documented shuffle's
    expected = split_rows(y, 0.3, True, 7)
    assert test["nnz"] == X[expected].nnz and train["nnz"] == X[~expected].nnz

    again = client.post(url, json={"test_fraction": 0.3, "seed": 7}).json()
    assert again["test"]["sha256"] == test["sha256"]
    assert again["train"]["sha256"] == train["sha256"]
    other = client.post(url, json={"test_fraction": 0.3, "seed": 8}).json()
    assert other["test"]["sha256"] != test["sha256"]
    plain = client.post(url, json={"test_fraction": 0.3, "stratify": False, "seed": 7}).json()
    assert plain["test"]["rows"] == round(0.3 * y.size)
    assert plain["test"]["split_stratified"] is False


@pytest.mark.parametrize(("body", "status"), [
    ({"test_fraction": 0}, 422), ({"test_fraction": 1}, 422), ({"test_fraction": 0.001}, 422),
    ({"seed": -1}, 422), ({"test_fraction": 0.2, "shuffle": True}, 422),
])
def test_split_refuses_bad_input(client: TestClient, cancer_id: str, body: dict[str, Any],
                                 status: int) -> None:
    response = client.post(f"/v1/datasets/{cancer_id}/split", json=body)
    assert response.status_code == status, response.text
    assert "error" in response.json()


def test_split_of_an_unknown_dataset_is_a_404(client: TestClient) -> None:
    response = client.post("/v1/datasets/nope/split", json={})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


# ---- training parameters ---------------------------------------------------------------


def test_standard_scaling_of_sparse_data_is_a_422_that_says_why(
        client: TestClient, cancer_id: str) -> None:
    sparse = _upload(client, b"\n".join(_lines("onehot", 0, 200)), "onehot-200")
    response = client.post("/v1/jobs", json={"dataset_id": sparse["id"], "solver": "dcd",
                                             "params": {"scale": "standard"}})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["detail"] == {"field": "params.scale"}
    assert "needs dense data" in error["message"] and "maxabs" in error["message"]
    dense = client.post("/v1/jobs", json={"dataset_id": cancer_id, "solver": "dcd",
                                          "params": {"scale": "standard"}})
    assert dense.status_code == 202, dense.text
    assert dense.json()["params"]["scale"] == "standard"
    for params in ({"scale": "log"}, {"probability": "yes"}, {"scale_lower": 0.5}):
        refused = client.post("/v1/jobs", json={"dataset_id": cancer_id, "params": params})
        assert refused.status_code == 422, params


def test_solvers_list_the_workflow_parameters(client: TestClient) -> None:
    for solver in client.get("/v1/solvers").json()["data"]:
        names = {p["name"]: p for p in solver["params"]}
        assert names["scale"]["choices"] == ["none", "minmax", "maxabs", "standard"]
        assert names["probability"]["default"] is False


def test_an_unscaled_job_carries_a_warning(client: TestClient, settings: Settings) -> None:
    # breast_cancer as scikit-learn ships it: feature ranges from about 0.03 to about 4000
    dataset = _upload(client, b"\n".join(_lines("cancer_raw", 0, 400)), "cancer-raw-400")
    model = _train(client, settings, dataset["id"], "smo")
    warnings = model["job"]["result"]["warnings"]
    assert len(warnings) == 1 and '"scale": "minmax"' in warnings[0]
    scaled = _train(client, settings, dataset["id"], "smo", scale="minmax")["job"]["result"]
    assert not scaled.get("warnings"), scaled["warnings"]


# ---- the guide's workflow end to end ---------------------------------------------------


@pytest.mark.parametrize(("solver", "params"), [("smo", {}), ("dcd", {"loss": "l1"})])
def test_split_train_scaled_with_probabilities_then_evaluate(
        client: TestClient, settings: Settings, cancer_id: str, cancer_bytes: bytes,
        solver: str, params: dict[str, Any]) -> None:
    parts = client.post(f"/v1/datasets/{cancer_id}/split",
                        json={"test_fraction": 0.3, "seed": 3}).json()
    model = _train(client, settings, parts["train"]["id"], solver, scale="minmax",
                   probability=True, **params)
    assert model["params"]["scale"] == "minmax" and model["params"]["probability"] is True

    lines = cancer_bytes.splitlines()
    y_all = _labels(lines)
    test_rows = np.flatnonzero(split_rows(y_all, 0.3, True, 3))
    test_lines = [lines[i] for i in test_rows]
    predicted = _predict(client, model["id"], test_lines)
    probabilities = np.array(predicted["probabilities"])
    assert probabilities.shape == (len(test_lines), 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
    # P(classes[1]) grows with the decision value
    order = np.argsort(predicted["decision_values"])
    assert np.all(np.diff(probabilities[order, 1]) >= -1e-12)

    created = client.post(f"/v1/models/{model['id']}/evaluations",
                          json={"dataset_id": parts["test"]["id"]})
    assert created.status_code == 201, created.text
    evaluation = created.json()
    assert evaluation["status"] == "succeeded" and evaluation["rows"] == len(test_lines)
    assert evaluation["dataset_name"] == "cancer (test)"
    report = evaluation["report"]
    assert_report_is_scikit_learns(report, y_all[test_rows], predicted)
    assert report["accuracy"] > 0.75 and report["roc_auc"] > 0.85

    listed = client.get(f"/v1/models/{model['id']}/evaluations").json()
    assert listed["count"] == 1 and listed["data"][0] == evaluation
    shown = client.get(f"/v1/models/{model['id']}/evaluations/{evaluation['id']}")
    assert shown.json() == evaluation


@pytest.mark.parametrize(("solver", "params"), [("smo", {}), ("smo", {"multiclass": "ovr"}),
                                                ("dcd", {})])
def test_multiclass_evaluation_equals_scikit_learn(client: TestClient, settings: Settings,
                                                   solver: str, params: dict[str, Any]) -> None:
    # the bundled dna-like onehot3: 3 classes, 2,000 rows; the first 500 train, 300 test
    train = _upload(client, b"\n".join(_lines("onehot3", 0, 500)), "onehot3-500")
    test_lines = _lines("onehot3", 500, 800)
    test = _upload(client, b"\n".join(test_lines), "onehot3-test-300")
    model = _train(client, settings, train["id"], solver, probability=True, scale="maxabs",
                   **params)
    predicted = _predict(client, model["id"], test_lines)
    assert np.shape(predicted["probabilities"]) == (300, 3)
    pairs = solver == "smo" and not params
    assert np.shape(predicted["decision_values"]) == (300, 3)  # 3 pairs, or 3 classes
    if pairs:  # one-vs-one: the label has the most votes (positive = first class of a pair)
        values = np.array(predicted["decision_values"])
        votes = np.zeros((300, 3))
        for p, (i, j) in enumerate([(0, 1), (0, 2), (1, 2)]):
            votes[:, i] += values[:, p] > 0
            votes[:, j] += values[:, p] <= 0
        classes = np.array(predicted["classes"])
        np.testing.assert_array_equal(classes[np.argmax(votes, axis=1)], predicted["labels"])
    evaluation = client.post(f"/v1/models/{model['id']}/evaluations",
                             json={"dataset_id": test["id"]}).json()
    assert evaluation["status"] == "succeeded"
    report = evaluation["report"]
    assert_report_is_scikit_learns(report, _labels(test_lines), predicted)
    # onehot3's labels are noisy: the three models score 0.71 to 0.73 on these rows (the
    # most frequent class is 48% of them, chance 1/3)
    assert "roc_auc" not in report and report["accuracy"] > 0.6


def test_a_model_without_probabilities_reports_no_log_loss(
        client: TestClient, settings: Settings, cancer_id: str, cancer_bytes: bytes) -> None:
    model = _train(client, settings, cancer_id, "dcd")
    predicted = _predict(client, model["id"], cancer_bytes.splitlines())
    assert predicted["probabilities"] is None
    evaluation = client.post(f"/v1/models/{model['id']}/evaluations",
                             json={"dataset_id": cancer_id}).json()
    assert_report_is_scikit_learns(evaluation["report"], _labels(cancer_bytes.splitlines()),
                                   predicted)


def test_evaluation_refuses_what_does_not_fit(client: TestClient, settings: Settings,
                                              cancer_id: str) -> None:
    model = _train(client, settings, cancer_id, "dcd")
    url = f"/v1/models/{model['id']}/evaluations"
    assert client.post("/v1/models/nope/evaluations",
                       json={"dataset_id": cancer_id}).status_code == 404
    assert client.get("/v1/models/nope/evaluations").status_code == 404
    assert client.get(f"{url}/nope").status_code == 404
    missing = client.post(url, json={"dataset_id": "nope"})
    assert missing.status_code == 422 and missing.json()["error"]["detail"] == {
        "field": "dataset_id"}
    width = model["n_features"] + 7  # more features than the model has
    wide = _upload(client, f"1 1:1 {width}:1\n-1 2:1\n".encode(), "wide")
    refused = client.post(url, json={"dataset_id": wide["id"]})
    assert refused.status_code == 422 and f"{width} features" in \
        refused.json()["error"]["message"]
    other_labels = _upload(client, b"3 1:1\n-1 2:1\n", "labels")
    refused = client.post(url, json={"dataset_id": other_labels["id"]})
    assert refused.status_code == 422 and "labels the model does not know: 3" in \
        refused.json()["error"]["message"]
    narrow = _upload(client, b"1 1:0.5\n-1 2:-0.5 3:1\n", "narrow")  # fewer features: fine
    assert client.post(url, json={"dataset_id": narrow["id"]}).status_code == 201
    assert client.post(url, json={"dataset_id": cancer_id, "x": 1}).status_code == 422


# ---- evaluations on a worker -----------------------------------------------------------


@pytest.fixture
def queued_settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"evaluate_inline_rows": 0, "max_attempts": 2})


def test_a_large_evaluation_runs_on_a_worker_once(queued_settings: Settings, cancer_id: str,
                                                  cancer_bytes: bytes, admin_key: str) -> None:
    with TestClient(create_app(queued_settings), headers=bearer(admin_key)) as client:
        model = _train(client, queued_settings, cancer_id, "smo", probability=True)
        created = client.post(f"/v1/models/{model['id']}/evaluations",
                              json={"dataset_id": cancer_id})
        assert created.status_code == 202, created.text
        queued = created.json()
        assert queued["status"] == "queued" and queued["report"] is None
        assert run_evaluation(queued_settings, queued["id"], "test-worker") == "succeeded"
        assert run_evaluation(queued_settings, queued["id"], "test-worker") == "skipped"
        done = client.get(f"/v1/models/{model['id']}/evaluations/{queued['id']}").json()
        assert done["status"] == "succeeded" and done["attempt"] == 1
        predicted = _predict(client, model["id"], cancer_bytes.splitlines())
        assert_report_is_scikit_learns(done["report"], _labels(cancer_bytes.splitlines()),
                                       predicted)


def test_the_sweep_requeues_a_lost_evaluation_then_fails_it(queued_settings: Settings,
                                                            cancer_id: str,
                                                            admin_key: str) -> None:
    with TestClient(create_app(queued_settings), headers=bearer(admin_key)) as client:
        model = _train(client, queued_settings, cancer_id, "dcd")
        evaluation_id = client.post(f"/v1/models/{model['id']}/evaluations",
                                    json={"dataset_id": cancer_id}).json()["id"]
        url = f"/v1/models/{model['id']}/evaluations/{evaluation_id}"
        old = utcnow() - timedelta(seconds=queued_settings.job_lease_seconds + 5)
        for attempt in (1, 2):
            with session_scope(queued_settings.database_url) as session:  # a worker died
                session.execute(update(Evaluation).where(Evaluation.id == evaluation_id)
                                .values(status="running", attempt=attempt, heartbeat_at=old))
            sweep(queued_settings)
            expected = "queued" if attempt < queued_settings.max_attempts else "failed"
            assert client.get(url).json()["status"] == expected
        assert "worker lost" in client.get(url).json()["error"]


def test_an_evaluation_that_fails_on_a_worker_stores_no_server_path(
        queued_settings: Settings, cancer_id: str, admin_key: str) -> None:
    """The worker stores what app.domain.lifecycle.public_error says (as a job's error), never
    the exception's text: a missing blob file's FileNotFoundError names its path."""
    missing = queued_settings.home / "datasets" / "gone-on-this-server.npz"
    with TestClient(create_app(queued_settings), headers=bearer(admin_key)) as client:
        model = _train(client, queued_settings, cancer_id, "dcd")
        evaluation_id = client.post(f"/v1/models/{model['id']}/evaluations",
                                    json={"dataset_id": cancer_id}).json()["id"]
        with session_scope(queued_settings.database_url) as session:  # the file is gone
            session.execute(update(Dataset).where(Dataset.id == cancer_id)
                            .values(blob_path=str(missing)))
        assert run_evaluation(queued_settings, evaluation_id, "test-worker") == "failed"
        failed = client.get(f"/v1/models/{model['id']}/evaluations/{evaluation_id}").json()
    assert failed["status"] == "failed" and failed["report"] is None
    assert failed["error"] == ("FileNotFoundError: the evaluation's stored data could not "
                               "be read")
    assert str(queued_settings.home) not in failed["error"]
    assert missing.name not in failed["error"]


# ---- export: the model plus the range file in LIBSVM's own tools -----------------------


def _svm_scale() -> str:
    path = shutil.which("svm-scale")
    if path is None:
        message = "svm-scale (Debian package libsvm-tools) is not installed"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return path


def test_libsvm_export_and_range_file_reproduce_predictions_in_libsvm(
        client: TestClient, settings: Settings, tmp_path: Path) -> None:
    from libsvm import svmutil

    # scikit-learn's digits (10 classes, pixel levels / 16): 600 rows to train, 300 to test
    train_lines = _lines("digits", 0, 600)
    test_lines = _lines("digits", 600, 900)
    dataset = _upload(client, b"\n".join(train_lines), "digits-600")
    model = _train(client, settings, dataset["id"], "smo", scale="minmax", probability=True)
    ours = _predict(client, model["id"], test_lines)

    exported = client.get(f"/v1/models/{model['id']}/export?format=libsvm")
    assert exported.status_code == 200 and "\nprobA " in exported.text
    ranges = client.get(f"/v1/models/{model['id']}/export?format=scale")
    assert ranges.status_code == 200 and ranges.text.startswith("x\n-1 1\n")
    (tmp_path / "model").write_text(exported.text)
    (tmp_path / "range").write_text(ranges.text)
    (tmp_path / "test").write_bytes(b"\n".join(test_lines) + b"\n")
    scaled = subprocess.run([_svm_scale(), "-r", str(tmp_path / "range"), str(tmp_path / "test")],
                            check=True, capture_output=True).stdout
    (tmp_path / "test.scaled").write_bytes(scaled)

    loaded = svmutil.svm_load_model(str(tmp_path / "model"))
    y, X = svmutil.svm_read_problem(str(tmp_path / "test.scaled"))
    labels, _, _ = svmutil.svm_predict(y, X, loaded, "-q")
    assert labels == ours["labels"]  # the votes of the pairs (with -b 1 LIBSVM takes argmax p)
    _, _, probabilities = svmutil.svm_predict(y, X, loaded, "-b 1 -q")
    order = np.argsort(loaded.get_labels())
    # svm-scale prints the scaled values with %g (6 digits): probabilities agree to ~1e-5
    np.testing.assert_allclose(np.asarray(probabilities)[:, order], ours["probabilities"],
                               atol=1e-4)


def test_export_scale_needs_a_minmax_model(client: TestClient, settings: Settings,
                                           cancer_id: str) -> None:
    plain = _train(client, settings, cancer_id, "dcd")
    refused = client.get(f"/v1/models/{plain['id']}/export?format=scale")
    assert refused.status_code == 422 and "without scaling" in refused.json()["error"]["message"]
    maxabs = _train(client, settings, cancer_id, "dcd", scale="maxabs")
    refused = client.get(f"/v1/models/{maxabs['id']}/export?format=scale")
    assert refused.status_code == 422 and "only a minmax scaler" in \
        refused.json()["error"]["message"]
    lower_zero = _train(client, settings, cancer_id, "dcd", scale="minmax", scale_lower=0)
    text = client.get(f"/v1/models/{lower_zero['id']}/export?format=scale").text
    assert text.startswith("x\n0 1\n")
    linear = client.get(f"/v1/models/{lower_zero['id']}/export")
    assert linear.status_code == 200 and linear.text.startswith("solver_type")
