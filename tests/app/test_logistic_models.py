"""Logistic regression and L1-regularised models through the API (solvers logistic_dcd,
tron with loss logistic, l1_cd, auto with penalty l1): a job trains, predict returns the
model's own probabilities, and LIBLINEAR's predict -b 1 on the exported file gives them.

Real components: the API in a TestClient on the embedded default (SQLite), the worker's
job function called directly."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from scipy.special import expit
from sklearn.datasets import load_svmlight_file

from app.settings import Settings
from workers.training import run_job

MIN_PROBABILITY = 1e-7  # two classes: probabilities kept within [1e-7, 1 - 1e-7]


def _train(
    client: TestClient, settings: Settings, dataset_id: str, solver: str, **params: Any
) -> dict[str, Any]:
    response = client.post(
        "/v1/jobs", json={"dataset_id": dataset_id, "solver": solver, "params": params}
    )
    assert response.status_code == 202, response.text
    assert run_job(settings, response.json()["id"], "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{response.json()['id']}").json()
    return dict(client.get(f"/v1/models/{job['model_id']}").json(), job=job)


@pytest.mark.parametrize(
    ("solver", "params", "solver_type"),
    [
        ("logistic_dcd", {}, "L2R_LR_DUAL"),
        ("tron", {"loss": "logistic"}, "L2R_LR"),
        ("auto", {"loss": "logistic", "penalty": "l1"}, "L1R_LR"),
        ("auto", {"loss": "logistic"}, "L2R_LR"),  # cancer: few features, auto picks tron
    ],
)
def test_a_logistic_job_predicts_its_probabilities(
    client: TestClient,
    settings: Settings,
    cancer_id: str,
    cancer_bytes: bytes,
    tmp_path: Path,
    solver: str,
    params: dict[str, Any],
    solver_type: str,
) -> None:
    from liblinear import liblinearutil

    model = _train(client, settings, cancer_id, solver, **params)
    assert model["job"]["status"] == "succeeded"
    predicted = client.post(
        f"/v1/models/{model['id']}/predict",
        content=cancer_bytes,
        headers={"content-type": "text/plain"},
    ).json()
    values = np.array(predicted["decision_values"])
    probabilities = np.array(predicted["probabilities"])
    expected = np.clip(expit(values), MIN_PROBABILITY, 1 - MIN_PROBABILITY)
    np.testing.assert_allclose(probabilities[:, 1], expected, rtol=1e-12, atol=1e-15)
    exported = client.get(f"/v1/models/{model['id']}/export?format=liblinear")
    assert exported.status_code == 200
    assert exported.text.startswith(f"solver_type {solver_type}\n")
    path = tmp_path / "cancer.model"
    path.write_text(exported.text)
    X, y = load_svmlight_file(io.BytesIO(cancer_bytes))
    loaded = liblinearutil.load_model(str(path))
    labels, _, theirs = liblinearutil.predict(y, X.tocsr(), loaded, "-b 1 -q")
    weights = [float(line.split()[0]) for line in exported.text.split("w\n")[1].splitlines()]
    nonzero = int(np.count_nonzero(weights[:-1]))  # the last row: the bias feature
    # the model's page says where its probabilities come from, and an L1 model's support
    page = client.get(f"/models/{model['id']}").text
    assert ('<dd data-field="probabilities">logistic regression: σ of the decision '
            'value</dd>') in page
    if params.get("penalty") == "l1":  # the job reports the sparse model's support
        assert model["job"]["result"]["nonzero_weights"] == [nonzero]
        assert nonzero < X.shape[1]
        assert 'data-field="nonzero_weights"' in page and f">{nonzero}</dd>" in page
    else:
        assert model["job"]["result"]["nonzero_weights"] is None
        assert 'data-field="nonzero_weights"' not in page
    assert labels == predicted["labels"]
    order = [predicted["classes"].index(label) for label in loaded.get_labels()]
    np.testing.assert_allclose(
        np.array(theirs), probabilities[:, order], rtol=1e-9, atol=MIN_PROBABILITY
    )


def test_penalty_l1_with_the_hinge_loss_is_a_422(client: TestClient, cancer_id: str) -> None:
    response = client.post(
        "/v1/jobs",
        json={"dataset_id": cancer_id, "solver": "auto", "params": {"penalty": "l1", "loss": "l1"}},
    )
    assert response.status_code == 422
    assert "penalty 'l1' takes loss" in response.text


def test_an_svm_model_page_says_it_gives_no_probabilities(
    client: TestClient, cancer_model_id: str
) -> None:
    page = client.get(f"/models/{cancer_model_id}").text
    assert '<dd data-field="probabilities">none (decision values only)</dd>' in page
