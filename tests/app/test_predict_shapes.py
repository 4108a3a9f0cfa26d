"""Predict input that forgives the obvious (issue 28): dense rows and named features give
what the same sparse rows give; a row of no accepted shape gets a 422 that shows the
shapes; features the model has never seen are ignored with a warning, or refused with
strict. Through the real API, a real SQLite file and a real training run."""

from __future__ import annotations

import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.datasets import load_svmlight_file

from app.domain.predict import ROW_SHAPES
from app.settings import Settings
from workers.training import run_job

NAMES = [f"mean {i}" for i in range(1, 31)]  # names with a space, as pandas frames have


def _train(client: TestClient, settings: Settings, dataset_id: str) -> str:
    job = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd"}).json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    return str(client.get(f"/v1/jobs/{job['id']}").json()["model_id"])


@pytest.fixture
def cancer_dense(cancer_bytes: bytes) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_svmlight_file(io.BytesIO(cancer_bytes), n_features=30)
    return X.toarray(), y


@pytest.fixture
def named_model(client: TestClient, settings: Settings,
                cancer_dense: tuple[np.ndarray, np.ndarray]) -> str:
    """A linear model trained on cancer uploaded as CSV with named columns."""
    X, y = cancer_dense
    lines = [",".join(["label", *NAMES])]
    lines += [",".join([repr(label), *(repr(v) for v in row)])
              for row, label in zip(X.tolist(), y.tolist(), strict=True)]
    response = client.post("/v1/datasets", content="\n".join(lines).encode())
    assert response.status_code == 201, response.text
    assert response.json()["feature_names"] == NAMES
    return _train(client, settings, response.json()["id"])


def _predict(client: TestClient, model_id: str, body: object, **params: str) -> dict:
    response = client.post(f"/v1/models/{model_id}/predict", json=body, params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def _sparse(row: np.ndarray) -> dict[str, list]:
    nonzero = np.flatnonzero(row)
    return {"indices": (nonzero + 1).tolist(), "values": row[nonzero].tolist()}


def test_dense_and_named_rows_answer_what_sparse_rows_answer(
        client: TestClient, named_model: str,
        cancer_dense: tuple[np.ndarray, np.ndarray]) -> None:
    X, _ = cancer_dense
    for count in (1, 3, 40):  # the few-rows path and the sparse product
        rows = X[:count]
        sparse = _predict(client, named_model, {"instances": [_sparse(r) for r in rows]})
        dense = _predict(client, named_model, {"instances": rows.tolist()})
        named = _predict(client, named_model, {"instances": [
            {NAMES[j]: float(r[j]) for j in np.flatnonzero(r)[::-1]} for r in rows]})
        for answer in (dense, named):
            assert answer["labels"] == sparse["labels"]
            assert answer["decision_values"] == sparse["decision_values"]  # bit for bit
            assert answer["warnings"] == []
    # rows of each shape in one request
    mixed = _predict(client, named_model, {"instances": [
        X[0].tolist(), _sparse(X[1]), {NAMES[0]: float(X[2, 0])}]})
    alone = _predict(client, named_model, {"instances": [
        _sparse(X[0]), _sparse(X[1]), {"indices": [1], "values": [float(X[2, 0])]}]})
    assert mixed["decision_values"] == alone["decision_values"]


def test_a_wrong_shape_shows_the_accepted_shapes(client: TestClient, named_model: str
                                                 ) -> None:
    for body in ({"instances": ["abc"]}, {"instances": [[0, "x"]]},
                 {"instances": [{"indices": [1]}]}, {"instances": {"f1": 1}}):
        response = client.post(f"/v1/models/{named_model}/predict", json=body)
        assert response.status_code == 422, (body, response.text)
        assert ROW_SHAPES in response.json()["error"]["message"], body
    response = client.post(f"/v1/models/{named_model}/predict", json={"instances": [[1, 2]]})
    assert response.status_code == 422
    message = response.json()["error"]["message"]
    assert "a dense row of 2 values, but the model has 30 features" in message
    response = client.post(f"/v1/models/{named_model}/predict",
                           json={"instances": [{"indices": [1]}]})
    assert "values: Field required" in response.json()["error"]["message"]


def test_unseen_features_are_ignored_with_a_warning_or_refused_when_strict(
        client: TestClient, named_model: str,
        cancer_dense: tuple[np.ndarray, np.ndarray]) -> None:
    row = cancer_dense[0][0]
    plain = _predict(client, named_model, {"instances": [_sparse(row)]})
    assert plain["warnings"] == []
    extra = _sparse(row)
    extra["indices"] += [31, 40]
    extra["values"] += [2.5, 0.0]  # a zero never matters
    longer = [*row.tolist(), 0.0, 3.0]
    named = {NAMES[j]: float(row[j]) for j in np.flatnonzero(row)} | {"nope": 1.0}
    for body, feature in (({"instances": [extra]}, "31"),
                          ({"instances": [longer]}, "32"),
                          ({"instances": [named]}, "'nope'")):
        answer = _predict(client, named_model, body)
        assert answer["decision_values"] == plain["decision_values"]
        assert len(answer["warnings"]) == 1, answer["warnings"]
        assert f"the model has never seen (30 features): {feature}," in answer["warnings"][0]
        for strict in ({"params": {"strict": "true"}}, {"body": {"strict": True}}):
            response = client.post(f"/v1/models/{named_model}/predict",
                                   json={**body, **strict.get("body", {})},
                                   params=strict.get("params", {}))
            assert response.status_code == 422, response.text
            message = response.json()["error"]["message"]
            assert message.startswith(f"instances[0]: feature {feature} ")
            assert "strict" in message
    quiet = _predict(client, named_model, {"instances": [{**_sparse(row)}]}, strict="true")
    assert quiet["decision_values"] == plain["decision_values"]
    text = client.post(f"/v1/models/{named_model}/predict",
                       content=b"1:0.5 31:1\n", headers={"Content-Type": "text/plain"})
    assert text.status_code == 200 and "31" in text.json()["warnings"][0]
    text = client.post(f"/v1/models/{named_model}/predict?strict=true",
                       content=b"1:0.5 31:1\n", headers={"Content-Type": "text/plain"})
    assert text.status_code == 422
    assert client.post(f"/v1/models/{named_model}/predict?strict=maybe",
                       json={"instances": []}).status_code == 422


def test_named_rows_need_a_dataset_with_names(client: TestClient, settings: Settings,
                                              cancer_id: str) -> None:
    model_id = _train(client, settings, cancer_id)  # svmlight: no feature names
    response = client.post(f"/v1/models/{model_id}/predict",
                           json={"instances": [{"mean 1": 0.5}]})
    assert response.status_code == 422
    assert "has no feature names" in response.json()["error"]["message"]
    dense = _predict(client, model_id, {"instances": [[0.5] + [0.0] * 29]})
    sparse = _predict(client, model_id, {"instances": [{"indices": [1], "values": [0.5]}]})
    assert dense["decision_values"] == sparse["decision_values"]
