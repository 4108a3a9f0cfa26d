"""GET/DELETE /v1/models, predict and export, on models trained by the real job function."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.datasets import load_svmlight_file

from app.api.main import create_app
from app.settings import Settings
from testkit import bundled
from tests.support import BLOB_BACKENDS, bearer, embedded_settings, make_key, migrate
from workers.training import run_job


@pytest.fixture(params=BLOB_BACKENDS)
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test of this module runs with blobs in local files and in an S3 store."""
    return str(request.param)


def _train(client: TestClient, settings: Settings, dataset_id: str, **params) -> dict:
    job = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                        "params": params}).json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    job = client.get(f"/v1/jobs/{job['id']}").json()
    return client.get(f"/v1/models/{job['model_id']}").json()


@pytest.fixture
def cancer_model(client: TestClient, settings: Settings, cancer_id: str) -> dict:
    return _train(client, settings, cancer_id, eps=0.01)


def _cancer_arrays(cancer_bytes: bytes):
    X, y = load_svmlight_file(io.BytesIO(cancer_bytes))
    return X.tocsr(), y


def _weights(client: TestClient, model_id: str) -> tuple[np.ndarray, float]:
    """w and b read back from the LIBLINEAR export (checked against LIBLINEAR below)."""
    text = client.get(f"/v1/models/{model_id}/export", params={"format": "liblinear"}).text
    lines = text.splitlines()
    start = lines.index("w") + 1
    values = np.array([float(line.split()[0]) for line in lines[start:]])
    bias = float(next(line.split()[1] for line in lines if line.startswith("bias ")))
    return values[:-1], values[-1] * bias


def test_predict_json_and_text_agree_with_the_weights(
    client: TestClient, cancer_model: dict, cancer_bytes: bytes
) -> None:
    X, y = _cancer_arrays(cancer_bytes)
    w, b = _weights(client, cancer_model["id"])
    expected = X @ w + b
    lines = cancer_bytes.decode().splitlines()[:50]
    instances = []
    for line in lines:
        pairs = [p.split(":") for p in line.split()[1:]]
        instances.append({"indices": [int(i) for i, _ in pairs],
                          "values": [float(v) for _, v in pairs]})
    by_json = client.post(f"/v1/models/{cancer_model['id']}/predict",
                          json={"instances": instances})
    assert by_json.status_code == 200, by_json.text
    body = by_json.json()
    np.testing.assert_allclose(body["decision_values"], expected[:50], rtol=1e-12, atol=1e-12)
    assert body["labels"] == [1.0 if v > 0 else -1.0 for v in expected[:50]]
    assert body["classes"] == [-1.0, 1.0]

    # text/plain: labels optional (drop them on half the lines)
    text = "\n".join(line if i % 2 else line.split(" ", 1)[1] for i, line in enumerate(lines))
    by_text = client.post(f"/v1/models/{cancer_model['id']}/predict", content=text,
                          headers={"content-type": "text/plain"})
    assert by_text.status_code == 200, by_text.text
    assert by_text.json()["decision_values"] == body["decision_values"]
    accuracy = np.mean(np.array(body["labels"]) == y[:50])
    assert accuracy > 0.75


def test_index_beyond_the_model_is_ignored(client: TestClient, cancer_model: dict) -> None:
    url = f"/v1/models/{cancer_model['id']}/predict"
    base = client.post(url, json={"instances": [{"indices": [1, 3], "values": [0.5, -1]}]})
    extra = client.post(url, json={"instances": [{"indices": [1, 3, 500],
                                                  "values": [0.5, -1, 9.0]}]})
    assert base.status_code == extra.status_code == 200
    assert base.json()["decision_values"] == extra.json()["decision_values"]


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        ('{"instances": [{"indices": [1], "values": [NaN]}]}', "application/json", 422),
        ('{"instances": [{"indices": [1], "values": [Infinity]}]}', "application/json", 422),
        ('{"instances": [{"indices": [0], "values": [1.0]}]}', "application/json", 422),
        ('{"instances": [{"indices": [1, 2], "values": [1.0]}]}', "application/json", 422),
        ('{"rows": []}', "application/json", 422),
        ("not json", "application/json", 422),
        ("1:nan\n", "text/plain", 422),
        ("1:1 1:2\n", "text/plain", 422),
    ],
)
def test_bad_predict_input_is_4xx_never_500(client: TestClient, cancer_model: dict, body: str,
                                            content_type: str, status: int) -> None:
    response = client.post(f"/v1/models/{cancer_model['id']}/predict", content=body,
                           headers={"content-type": content_type})
    assert response.status_code == status, response.text
    assert response.json()["error"]["message"]


def test_too_many_rows_is_413(tmp_path: Path, cancer_bytes: bytes) -> None:
    settings = embedded_settings(tmp_path / "home", max_predict_rows=5)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
        dataset_id = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
        model = _train(client, settings, dataset_id)
        url = f"/v1/models/{model['id']}/predict"
        ok = client.post(url, json={"instances": [{"indices": [1], "values": [1.0]}] * 5})
        assert ok.status_code == 200
        over = client.post(url, json={"instances": [{"indices": [1], "values": [1.0]}] * 6})
        assert over.status_code == 413
        text = client.post(url, content="1:1\n" * 6, headers={"content-type": "text/plain"})
        assert text.status_code == 413


def test_unknown_model_is_404_everywhere(client: TestClient) -> None:
    for response in (
        client.get("/v1/models/nope"),
        client.delete("/v1/models/nope"),
        client.post("/v1/models/nope/predict", json={"instances": []}),
        client.get("/v1/models/nope/export"),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["error"]["code"] == "not_found"


def test_delete_model(client: TestClient, cancer_model: dict) -> None:
    assert client.delete(f"/v1/models/{cancer_model['id']}").status_code == 204
    assert client.get(f"/v1/models/{cancer_model['id']}").status_code == 404
    assert client.post(f"/v1/models/{cancer_model['id']}/predict",
                       json={"instances": []}).status_code == 404
    assert client.get("/v1/models").json()["count"] == 0


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_liblinear_export_loads_and_predicts_identically(
    client: TestClient, settings: Settings, cancer_id: str, cancer_bytes: bytes,
    tmp_path: Path, loss: str,
) -> None:
    from liblinear import liblinearutil

    model = _train(client, settings, cancer_id, loss=loss, eps=0.01)
    response = client.get(f"/v1/models/{model['id']}/export?format=liblinear")
    assert response.status_code == 200
    path = tmp_path / "cancer.model"
    path.write_text(response.text)
    loaded = liblinearutil.load_model(str(path))
    assert loaded is not None
    X, y = _cancer_arrays(cancer_bytes)
    labels, _, values = liblinearutil.predict(y, X, loaded, "-q")
    ours = client.post(f"/v1/models/{model['id']}/predict",
                       content=cancer_bytes, headers={"content-type": "text/plain"}).json()
    assert labels == ours["labels"]
    np.testing.assert_allclose(np.ravel(values), ours["decision_values"], rtol=1e-9,
                               atol=1e-12)
    assert client.get(f"/v1/models/{model['id']}/export?format=pmml").status_code == 422


def _digits_parts(train_rows: int) -> tuple[bytes, bytes]:
    """scikit-learn's digits (10 classes) as svmlight: the first rows, and the rest."""
    lines = bundled.svmlight_bytes("digits").splitlines(keepends=True)
    return b"".join(lines[:train_rows]), b"".join(lines[train_rows:])


def test_multiclass_one_vs_rest_model(client: TestClient, settings: Settings,
                                      tmp_path: Path) -> None:
    from liblinear import liblinearutil

    train_text, test_text = _digits_parts(1200)
    upload = client.post("/v1/datasets", content=train_text)
    assert upload.status_code == 201
    classes = np.unique(load_svmlight_file(io.BytesIO(train_text))[1]).tolist()
    assert upload.json()["labels"] == classes and len(classes) == 10
    model = _train(client, settings, upload.json()["id"], eps=0.01)
    response = client.post(f"/v1/models/{model['id']}/predict", content=test_text,
                           headers={"content-type": "text/plain"})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["classes"] == classes
    n_features = model["n_features"]
    X_test, y_test = load_svmlight_file(io.BytesIO(test_text), n_features=n_features)
    assert np.shape(body["decision_values"]) == (y_test.size, len(classes))  # one per class
    # linear one-vs-rest on digits scores about 0.92 on these rows (chance is 0.1)
    accuracy = float(np.mean(np.array(body["labels"]) == y_test))
    assert accuracy > 0.85
    path = tmp_path / "digits.model"
    path.write_text(client.get(f"/v1/models/{model['id']}/export").text)
    labels, _, _ = liblinearutil.predict(y_test, X_test, liblinearutil.load_model(str(path)),
                                         "-q")
    assert labels == body["labels"]
