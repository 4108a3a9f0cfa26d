"""Kernel (SMO) models through the service: stored support vectors, predict, LIBSVM export."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.datasets import load_svmlight_file

from app.settings import Settings
from testkit import bundled
from workers.training import run_job


def _train(client: TestClient, settings: Settings, dataset_id: str, **params) -> dict:
    response = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "smo",
                                             "params": params})
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert run_job(settings, job_id, "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["result"]["exit_reason"] == "converged"
    assert job["result"]["n_support"] > 0
    return client.get(f"/v1/models/{job['model_id']}").json()


@pytest.mark.parametrize("kernel", ["rbf", "poly"])
def test_kernel_model_predicts_like_libsvm_from_its_export(
    client: TestClient, settings: Settings, cancer_id: str, cancer_bytes: bytes,
    tmp_path: Path, kernel: str,
) -> None:
    from libsvm import svmutil

    model = _train(client, settings, cancer_id, kernel=kernel, C=1.0)
    X_all, _ = load_svmlight_file(io.BytesIO(cancer_bytes))
    assert model["kind"] == "kernel" and model["n_features"] == X_all.shape[1]
    predicted = client.post(f"/v1/models/{model['id']}/predict", content=cancer_bytes,
                            headers={"content-type": "text/plain"})
    assert predicted.status_code == 200, predicted.text
    body = predicted.json()
    assert np.shape(body["decision_values"]) == (X_all.shape[0],)

    export = client.get(f"/v1/models/{model['id']}/export")
    assert export.status_code == 200
    assert export.text.startswith("svm_type c_svc")
    path = tmp_path / "cancer.model"
    path.write_text(export.text)
    loaded = svmutil.svm_load_model(str(path))
    y, X = svmutil.svm_read_problem(str(_write(tmp_path, cancer_bytes)))
    labels, _, values = svmutil.svm_predict(y, X, loaded, "-q")
    assert labels == body["labels"]
    # LIBSVM's binary value is positive for its first label; ours for classes[1]
    sign = 1.0 if loaded.get_labels()[0] == body["classes"][1] else -1.0
    np.testing.assert_allclose(sign * np.ravel(values), body["decision_values"], rtol=1e-8,
                               atol=1e-10)
    assert client.get(f"/v1/models/{model['id']}/export?format=liblinear").status_code == 422


def _write(tmp_path: Path, text: bytes) -> Path:
    path = tmp_path / "data.txt"
    path.write_bytes(text)
    return path


def test_multiclass_one_vs_one_kernel_model(client: TestClient, settings: Settings) -> None:
    lines = bundled.svmlight_bytes("digits").splitlines(keepends=True)  # 10 classes
    train_text, test_text = b"".join(lines[:1200]), b"".join(lines[1200:])
    upload = client.post("/v1/datasets", content=train_text)
    model = _train(client, settings, upload.json()["id"], kernel="rbf")
    response = client.post(f"/v1/models/{model['id']}/predict", content=test_text,
                           headers={"content-type": "text/plain"})
    assert response.status_code == 200, response.text
    body = response.json()
    _, y_test = load_svmlight_file(io.BytesIO(test_text), n_features=model["n_features"])
    k = len(body["classes"])
    assert k == 10
    assert np.shape(body["decision_values"]) == (y_test.size, k * (k - 1) // 2)  # per pair
    # rbf one-vs-one with the default gamma scores about 0.92 here (chance is 0.1)
    assert float(np.mean(np.array(body["labels"]) == y_test)) > 0.85


def test_kernel_params_are_validated(client: TestClient, cancer_id: str) -> None:
    for params, field in (({"kernel": "laplace"}, "params.kernel"),
                          ({"gamma": 0}, "params.gamma"),
                          ({"degree": 0}, "params.degree"),
                          ({"loss": "l1"}, "params.loss")):
        response = client.post("/v1/jobs", json={"dataset_id": cancer_id, "solver": "smo",
                                                 "params": params})
        assert response.status_code == 422, response.text
        assert response.json()["error"]["detail"]["field"] == field
