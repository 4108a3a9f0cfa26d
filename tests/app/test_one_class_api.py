"""A one-class job with probability true (LIBSVM 3.37's -s 2 -b 1): predict answers
[P(outlier), P(inlier)] per row, the export carries prob_density_marks, and svm_predict -b 1
on the exported file gives the same probabilities."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient
from sklearn.datasets import dump_svmlight_file

from app.settings import Settings
from workers.training import run_job

libsvm = pytest.importorskip("libsvm.svmutil")


def test_a_one_class_model_with_probabilities_through_the_api(
        client: TestClient, settings: Settings, tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    X = np.vstack([rng.normal(0, 0.3, size=(240, 3)), rng.uniform(-1.5, 1.5, size=(20, 3))])
    y = np.r_[np.ones(240), -np.ones(20)]
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)
    dataset = client.post("/v1/datasets", content=buffer.getvalue()).json()
    submitted = client.post("/v1/jobs", json={
        "dataset_id": dataset["id"], "solver": "smo",
        "params": {"formulation": "one_class", "nu": 0.1, "gamma": 1.0, "eps": 1e-10,
                   "probability": True}})
    assert submitted.status_code == 202, submitted.text
    assert run_job(settings, submitted.json()["id"], "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{submitted.json()['id']}").json()
    held = rng.uniform(-1.2, 1.2, size=(50, 3))
    answer = client.post(f"/v1/models/{job['model_id']}/predict",
                         json={"instances": held.tolist()}).json()
    assert answer["task"] == "outlier"
    probabilities = np.array(answer["probabilities"])
    assert probabilities.shape == (50, 2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    inlier = probabilities[:, 1]
    assert set(np.round(inlier, 3)) <= {0.001, 0.999, *(i / 10 for i in range(10))}
    # held-out rows far from the blob are less likely inliers than those in it
    far = np.linalg.norm(held, axis=1) > 1.0
    assert inlier[far].mean() < inlier[~far].mean()
    text = client.get(f"/v1/models/{job['model_id']}/export").text
    assert "\nprob_density_marks " in text
    path = tmp_path / "one_class.model"
    path.write_text(text)
    theirs = libsvm.svm_predict([0] * 50, sp.csr_matrix(held),
                                libsvm.svm_load_model(str(path)), "-b 1 -q")[2]
    np.testing.assert_array_equal([row[0] for row in theirs], inlier)
