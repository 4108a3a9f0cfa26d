"""GET /v1/models/{id}/export?format=onnx: the graph, run by onnxruntime on dense rows,
gives Hinge's predict: labels equal, decision values and probabilities within 1e-6
relative (what we measure is far closer: the same arithmetic, summed in another order)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient

from app.client import HingeClient
from app.settings import Settings
from testkit import bundled
from testkit.paths import REPO
from tests.app.test_model_import import hinge_predict, upload
from workers.training import run_job

ort = pytest.importorskip("onnxruntime")
libsvm = pytest.importorskip("libsvm.svmutil")
liblinear = pytest.importorskip("liblinear.liblinearutil")


def run_graph(graph: bytes, X: sp.csr_matrix) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input"]
    assert session.get_inputs()[0].type == "tensor(double)"
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"input": X.toarray()}), strict=True))


def same_as_predict(client: TestClient, model_id: str, X: sp.csr_matrix) -> dict[str, Any]:
    response = client.get(f"/v1/models/{model_id}/export", params={"format": "onnx"})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/octet-stream"
    out = run_graph(response.content, X)
    answer = hinge_predict(client, model_id, X)
    np.testing.assert_array_equal(out["label"], answer["labels"])
    values = np.array(answer["decision_values"])
    assert out["decision_values"].shape == values.shape
    np.testing.assert_allclose(out["decision_values"], values, rtol=1e-6, atol=1e-12)
    if answer["probabilities"] is None:
        assert "probabilities" not in out
    else:
        np.testing.assert_allclose(out["probabilities"], answer["probabilities"],
                                   rtol=1e-6, atol=1e-12)
    return {"out": out, "answer": answer}


@pytest.mark.parametrize(("name", "options"), [
    ("cancer", "-s 1 -B 1"),  # linear, two classes
    ("wine", "-s 2"),  # linear, one-vs-rest
])
def test_linear_models(client: TestClient, tmp_path: Path, name: str, options: str) -> None:
    X, y = bundled.load(name)
    path = tmp_path / "linear.model"
    liblinear.save_model(str(path), liblinear.train(y, X, options + " -q"))
    model = upload(client, path).json()
    checked = same_as_predict(client, model["id"], X)
    expected_shape = (X.shape[0],) if name == "cancer" else (X.shape[0], 3)
    assert checked["out"]["decision_values"].shape == expected_shape


@pytest.mark.parametrize(("name", "options"), [
    ("wine", "-t 2 -c 1 -b 1"),  # rbf, one-vs-one, with probabilities
    ("digits", "-t 2 -g 0.02 -b 1"),  # ten classes: 45 pairs, vote ties
    ("cancer", "-t 2 -b 1"),  # rbf, two classes, with probabilities
    ("wine", "-t 1 -d 3 -g 0.1 -r 1"),  # poly
    ("iris", "-t 3 -g 0.1 -r 0"),  # sigmoid
])
def test_kernel_models(client: TestClient, tmp_path: Path, name: str, options: str) -> None:
    X, y = bundled.load(name)
    path = tmp_path / "kernel.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y, X, options + " -q"))
    model = upload(client, path).json()
    same_as_predict(client, model["id"], X)


def test_a_model_whose_file_lists_its_labels_unsorted(client: TestClient,
                                                      tmp_path: Path) -> None:
    """digits shuffled: LIBSVM lists the labels as they first appear; the graph breaks
    vote ties and couples the probabilities in that order, as predict does."""
    X, y = bundled.load("digits")
    rows = np.random.default_rng(2).permutation(X.shape[0])
    path = tmp_path / "digits.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y[rows], X[rows],
                                                      "-t 2 -c 1 -b 1 -q"))
    assert "label 0 1 2" not in path.read_text()
    model = upload(client, path).json()
    same_as_predict(client, model["id"], X)


def test_a_scaled_model_with_probabilities(client: TestClient, tmp_path: Path) -> None:
    """cancer_raw (unscaled, 0.0008 .. 4254) with its svm-scale range file: the graph scales
    the raw rows itself, values at the training min and max included."""
    from libsvm.commonutil import csr_find_scale_param, csr_scale

    X, y = bundled.load("cancer_raw")
    param = csr_find_scale_param(X, lower=-1, upper=1)
    path = tmp_path / "raw.model"
    libsvm.svm_save_model(str(path), libsvm.svm_train(y, csr_scale(X, param),
                                                      "-t 2 -c 4 -b 1 -q"))
    low, high = X.min(axis=0).toarray().ravel(), X.max(axis=0).toarray().ravel()
    range_path = tmp_path / "raw.range"
    range_path.write_text("x\n-1 1\n" + "".join(
        f"{j + 1} {float(low[j])!r} {float(high[j])!r}\n" for j in range(X.shape[1])))
    model = upload(client, path, range_path).json()
    # the training rows (min and max hit exactly) and rows outside the range
    outside = sp.csr_matrix(X[:20].toarray() * 1.5)
    same_as_predict(client, model["id"], sp.vstack([X, outside]).tocsr())


@pytest.mark.parametrize("params", [
    {"scale": "standard", "probability": True},  # one-vs-rest sigmoids, standard scaler
    {"scale": "maxabs", "probability": True},
])
def test_trained_linear_models_with_their_scaler_and_calibration(
        client: TestClient, settings: Settings, params: dict[str, Any]) -> None:
    X, _y = bundled.load("wine")
    dataset = client.post("/v1/datasets", content=bundled.svmlight_bytes("wine")).json()
    job = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd",
                                        "params": params})
    assert job.status_code == 202, job.text
    assert run_job(settings, job.json()["id"], "test-worker") == "succeeded"
    model_id = client.get(f"/v1/jobs/{job.json()['id']}").json()["model_id"]
    checked = same_as_predict(client, model_id, X)
    assert checked["out"]["probabilities"].shape == (X.shape[0], 3)


def test_the_client_exports_and_imports(client: TestClient, tmp_path: Path) -> None:
    X, y = bundled.load("iris")
    path = tmp_path / "iris.model"
    liblinear.save_model(str(path), liblinear.train(y, X, "-s 1 -q"))
    hinge = HingeClient(str(client.base_url), transport=client._transport)
    hinge._http.headers.update(client.headers)
    model = hinge.import_model(path)
    assert model["origin"] is not None and model["origin"]["file_name"] == "iris.model"
    graph = hinge.export_onnx(model["id"])
    labels = run_graph(graph, X)["label"]
    np.testing.assert_array_equal(labels, hinge.predict(model["id"], bundled.dump_svmlight(
        X, np.zeros(X.shape[0])).decode())["labels"])


def test_without_the_onnx_package_the_export_names_the_extra(
        client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = bundled.load("iris")
    path = tmp_path / "iris.model"
    liblinear.save_model(str(path), liblinear.train(y, X, "-s 1 -q"))
    model = upload(client, path).json()
    monkeypatch.setitem(sys.modules, "onnx", None)  # `import onnx` raises ImportError
    response = client.get(f"/v1/models/{model['id']}/export", params={"format": "onnx"})
    assert response.status_code == 503
    assert "pip install 'hinge[onnx]'" in response.json()["error"]["message"]
    assert response.json()["error"]["detail"] == {"extra": "onnx"}
    # the other formats do not need it
    assert client.get(f"/v1/models/{model['id']}/export").status_code == 200


def test_the_server_starts_without_onnx() -> None:
    code = ("import sys; sys.modules['onnx'] = None; sys.modules['onnxruntime'] = None; "
            "import app.api.main, app.domain.services.models, solvers.onnx_graph; "
            "app.api.main.create_app; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.strip() == "ok", done.stderr
