"""scale_target: a regression job trains on the standardised target and its model predicts,
evaluates and exports on the original scale (solvers/workflow.py folds the inverse into
the model's coefficients and intercept)."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient
from sklearn import datasets as skdata
from sklearn.datasets import dump_svmlight_file

from app.settings import Settings
from solvers import fit
from testkit.bundled import scale_columns
from workers.training import run_job

libsvm = pytest.importorskip("libsvm.svmutil")


def test_a_scaled_target_is_predicted_evaluated_and_exported_on_the_original_scale(
        client: TestClient, settings: Settings, tmp_path: Path) -> None:
    features, target = skdata.load_diabetes(return_X_y=True)
    X = scale_columns(np.asarray(features, dtype=np.float64))
    y = np.asarray(target, dtype=np.float64)  # 25 .. 346: far from [-1, 1]
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)
    uploaded = client.post("/v1/datasets?task=regression", content=buffer.getvalue())
    assert uploaded.status_code == 201, uploaded.text
    dataset_id = uploaded.json()["id"]
    params = {"formulation": "epsilon_svr", "C": 2.0, "epsilon": 0.1, "gamma": 0.3,
              "eps": 1e-8, "scale_target": True}
    submitted = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "smo",
                                              "params": params})
    assert submitted.status_code == 202, submitted.text
    assert run_job(settings, submitted.json()["id"], "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{submitted.json()['id']}").json()
    answer = client.post(f"/v1/models/{job['model_id']}/predict",
                         json={"instances": X.tolist()}).json()
    values = np.asarray(answer["labels"])
    # the same fit on the standardised target, mapped back by hand
    mean, std = y.mean(), y.std()
    plain = fit(sp.csr_matrix(X), (y - mean) / std, solver="smo",
                **{k: v for k, v in params.items() if k != "scale_target"})
    expected = plain.model.predict(sp.csr_matrix(X))[0] * std + mean
    np.testing.assert_allclose(values, expected, rtol=1e-10, atol=1e-9)
    assert job["result"]["dual_objective"] == pytest.approx(plain.dual_objective, rel=1e-12)
    assert abs(np.mean(values) - mean) < 0.2 * std  # the original scale, not z-scores
    # evaluation: the figures of the original-scale values
    evaluation = client.post(f"/v1/models/{job['model_id']}/evaluations",
                             json={"dataset_id": dataset_id}).json()
    assert evaluation["report"]["mse"] == pytest.approx(np.mean((values - y) ** 2),
                                                        rel=1e-9)
    # the exported LIBSVM file carries the folded coefficients: svm-predict agrees
    path = tmp_path / "scaled.model"
    path.write_text(client.get(f"/v1/models/{job['model_id']}/export").text)
    predicted = libsvm.svm_predict([0] * X.shape[0], sp.csr_matrix(X),
                                   libsvm.svm_load_model(str(path)), "-q")[0]
    np.testing.assert_allclose(predicted, values, rtol=1e-10, atol=1e-9)


def test_scale_target_is_for_regression_only(client: TestClient) -> None:
    body = b"1 1:0.5\n-1 1:-0.5\n1 1:0.4\n-1 1:-0.3\n"
    dataset = client.post("/v1/datasets", content=body).json()
    response = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "smo",
                                             "params": {"scale_target": True}})
    assert response.status_code == 422
    assert "scale_target applies to regression" in response.text
