"""The linear formulations of solvers/linear_tasks.py through the service: a Crammer-Singer
job (LIBLINEAR -s 4) trained by a worker to the certified optimum, served by predict (the
class of the largest score) and exported as a MCSVM_CS model file that LIBLINEAR's predict
reads to the same labels; linear SVR (regression) and one-class (outlier) jobs likewise."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from fastapi.testclient import TestClient
from sklearn.datasets import dump_svmlight_file, load_diabetes, load_svmlight_file

from app.settings import Settings
from testkit import bundled
from testkit.certified_tasks import cs_optimum
from workers.training import run_job


def test_crammer_singer_job_predicts_and_exports(
    client: TestClient, settings: Settings, tmp_path: Path
) -> None:
    from liblinear.liblinearutil import load_model, predict

    text = bundled.svmlight_bytes("wine")
    dataset_id = client.post("/v1/datasets", content=text).json()["id"]
    response = client.post(
        "/v1/jobs",
        json={"dataset_id": dataset_id, "solver": "crammer_singer", "params": {"C": 0.5}},
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert run_job(settings, job_id, "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{job_id}").json()
    result = job["result"]
    assert result["converged"] is True and result["exit_reason"] == "converged"

    X, y = load_svmlight_file(io.BytesIO(text))
    classes = np.unique(y)
    rows = sp.hstack([X, np.ones((X.shape[0], 1))]).tocsr()  # bias "augment", B = 1
    optimum = cs_optimum(rows, np.searchsorted(classes, y), np.full(y.size, 0.5), classes.size)
    assert 0.0 <= (result["primal_objective"] - optimum) / optimum <= 1e-3

    predicted = client.post(
        f"/v1/models/{job['model_id']}/predict",
        content=text,
        headers={"content-type": "text/plain"},
    )
    assert predicted.status_code == 200, predicted.text
    body = predicted.json()
    scores = np.asarray(body["decision_values"])
    assert scores.shape == (y.size, classes.size)
    assert body["labels"] == classes[scores.argmax(axis=1)].tolist()

    export = client.get(f"/v1/models/{job['model_id']}/export?format=liblinear")
    assert export.status_code == 200, export.text
    assert export.text.startswith("solver_type MCSVM_CS\n")
    path = tmp_path / "wine.model"
    path.write_text(export.text)
    labels, _, values = predict([], X, load_model(str(path)), "-q")
    assert labels == body["labels"]
    np.testing.assert_allclose(values, scores, rtol=1e-9, atol=1e-12)


def _job(
    client: TestClient, settings: Settings, dataset_id: str, solver: str, **params: object
) -> dict:
    response = client.post(
        "/v1/jobs", json={"dataset_id": dataset_id, "solver": solver, "params": params}
    )
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    assert run_job(settings, job_id, "test-worker") == "succeeded"
    return dict(client.get(f"/v1/jobs/{job_id}").json())


def test_linear_svr_and_one_class_jobs_predict_and_export(
    client: TestClient, settings: Settings, tmp_path: Path
) -> None:
    from liblinear.liblinearutil import load_model, predict

    features, target = load_diabetes(return_X_y=True)
    target = (target - target.mean()) / target.std()
    buffer = io.BytesIO()
    dump_svmlight_file(features / np.abs(features).max(axis=0), target, buffer, zero_based=False)
    # one-class without a bias needs data away from the origin (diabetes is centred)
    # auto reaches both through `formulation`: its choice recorded in the result
    for solver, params, body, solver_type in (
        ("linear_svr", {"loss": "l1", "epsilon": 0.1}, buffer.getvalue(), "L2R_L1LOSS_SVR_DUAL"),
        ("linear_one_class", {"nu": 0.2}, bundled.svmlight_bytes("wine"), "ONECLASS_SVM"),
        ("auto", {"formulation": "epsilon_svr", "loss": "l2", "epsilon": 0.1},
         buffer.getvalue(), "L2R_L2LOSS_SVR"),
        ("auto", {"formulation": "one_class", "nu": 0.2}, bundled.svmlight_bytes("wine"),
         "ONECLASS_SVM"),
    ):
        X, _ = load_svmlight_file(io.BytesIO(body))  # the stored values
        dataset = client.post("/v1/datasets", content=body).json()
        job = _job(client, settings, dataset["id"], solver, **params)
        regression = solver == "linear_svr" or params.get("formulation") == "epsilon_svr"
        assert job["task"] == ("regression" if regression else "outlier")
        assert job["result"]["converged"] is True, job["result"]
        if solver == "auto":
            chosen = "linear_svr" if regression else "linear_one_class"
            assert job["result"]["auto"]["chosen"] == chosen, job["result"]["auto"]
        answer = client.post(
            f"/v1/models/{job['model_id']}/predict",
            content=body,
            headers={"content-type": "text/plain"},
        ).json()
        export = client.get(f"/v1/models/{job['model_id']}/export?format=liblinear")
        assert export.status_code == 200, export.text
        assert export.text.startswith(f"solver_type {solver_type}\n")
        path = tmp_path / f"{solver}-{solver_type}.model"
        path.write_text(export.text)
        labels, _, values = predict([], X, load_model(str(path)), "-q")
        assert labels == answer["labels"]
        np.testing.assert_allclose(
            np.ravel(values), answer["decision_values"], rtol=1e-9, atol=1e-12
        )
