"""solvers/linear_tasks.py: Crammer-Singer, linear SVR (l1 / l2, dual and primal) and the
linear one-class SVM reach a primal objective within 1e-3 of the optimum (an interior-point
QP, testkit/certified_tasks.py) on scikit-learn's bundled sets, say converged only when
their certificate holds, honour sample weights, and export to LIBLINEAR model files whose
`predict` (liblinear-official) gives Hinge's predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_diabetes, load_digits, load_iris, load_wine

from solvers.formats import liblinear_model_text
from solvers.inputs import as_csr_arrays
from solvers.linear_tasks import augmented
from solvers.models import LinearModel, model_from_bytes, model_to_bytes
from solvers.train import fit
from testkit import certified_tasks as ref

REL = 1e-3


def _scaled(X: np.ndarray) -> sp.csr_matrix:
    return sp.csr_matrix(X / np.maximum(np.abs(X).max(axis=0), 1e-12))


def _classes(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return _scaled(X[:300]), y[:300].astype(float)
    X, y = {"iris": load_iris, "wine": load_wine}[name](return_X_y=True)
    return _scaled(X), y.astype(float)


def _regression(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    if name == "diabetes":
        X, y = load_diabetes(return_X_y=True)
        return _scaled(X), (y - y.mean()) / y.std()
    rng = np.random.default_rng(3)
    X = sp.random(200, 60, density=0.05, random_state=4, format="csr")
    return X, np.asarray(X @ rng.normal(size=60)).ravel() + 0.1 * rng.normal(size=200)


def _rows(X: sp.csr_matrix, bias_scale: float) -> sp.csr_matrix:
    A = augmented(as_csr_arrays(X), bias_scale)
    return sp.csr_matrix((A.data, A.indices, A.indptr), shape=(A.n_rows, A.n_features))


def _full_weights(model: LinearModel, bias_scale: float) -> np.ndarray:
    if bias_scale <= 0:
        return model.coef
    return np.hstack([model.coef, (model.intercept / bias_scale)[:, None]])


def _check_certificate(result: Any, primal: float, optimum: float) -> None:
    assert result.converged
    assert result.relative_gap <= result.params["tol"]
    assert result.dual_objective <= optimum + 1e-9 * abs(optimum)  # a true lower bound
    assert abs(primal - result.primal_objective) <= 1e-9 * abs(primal)
    assert (primal - optimum) / abs(optimum) <= REL


@pytest.mark.parametrize("name", ["iris", "wine", "digits"])
@pytest.mark.parametrize("bias", ["augment", "none"])
def test_crammer_singer_reaches_the_optimum(name: str, bias: str) -> None:
    X, y = _classes(name)
    result = fit(X, y, solver="crammer_singer", C=0.5, bias=bias)
    model = result.model
    assert isinstance(model, LinearModel) and model.coef.shape[0] == np.unique(y).size
    B = 1.0 if bias == "augment" else 0.0
    label = np.searchsorted(model.classes, y)
    cost = np.full(y.size, 0.5)
    rows = _rows(X, B)
    primal = ref.cs_primal(rows, label, cost, _full_weights(model, B))
    optimum = ref.cs_optimum(rows, label, cost, model.classes.size)
    _check_certificate(result, primal, optimum)
    scores = model.decision_function(X)
    np.testing.assert_array_equal(model.predict(X)[0], model.classes[scores.argmax(axis=1)])


def test_crammer_singer_two_classes_and_weights() -> None:
    X, y = _classes("wine")
    keep = y < 2
    X, y = X[keep], y[keep]
    weights = np.linspace(0.0, 2.0, y.size)
    result = fit(X, y, solver="crammer_singer", sample_weight=weights, bias="none")
    assert result.model.coef.shape[0] == 2  # one vector per class, as LIBLINEAR -s 4
    live = weights > 0
    label = np.searchsorted(result.model.classes, y)
    primal = ref.cs_primal(X[live], label[live], weights[live], result.model.coef)
    optimum = ref.cs_optimum(X[live], label[live], weights[live], 2)
    _check_certificate(result, primal, optimum)


@pytest.mark.parametrize("name", ["diabetes", "sparse"])
@pytest.mark.parametrize(("loss", "method"), [("l1", "dual"), ("l2", "dual"), ("l2", "primal")])
def test_linear_svr_reaches_the_optimum(name: str, loss: str, method: str) -> None:
    X, y = _regression(name)
    result = fit(X, y, solver="linear_svr", C=2.0, epsilon=0.1, loss=loss, method=method)
    model = result.model
    assert isinstance(model, LinearModel) and model.task == "regression"
    rows = _rows(X, 1.0)
    cost = np.full(y.size, 2.0)
    primal = ref.svr_primal(rows, y, cost, _full_weights(model, 1.0)[0], loss, 0.1)
    optimum = ref.svr_optimum(rows, y, cost, loss, 0.1)
    _check_certificate(result, primal, optimum)
    labels, values = model.predict(X)
    np.testing.assert_allclose(labels, values)
    np.testing.assert_allclose(values, X @ model.coef[0] + model.intercept[0])


def test_linear_svr_sample_weights_scale_the_cost() -> None:
    X, y = _regression("diabetes")
    weights = np.where(np.arange(y.size) % 3 == 0, 3.0, 0.5)
    result = fit(X, y, solver="linear_svr", loss="l1", sample_weight=weights, bias="none")
    primal = ref.svr_primal(X, y, weights, result.model.coef[0], "l1", 0.1)
    optimum = ref.svr_optimum(X, y, weights, "l1", 0.1)
    _check_certificate(result, primal, optimum)


@pytest.mark.parametrize("name", ["iris", "wine"])
@pytest.mark.parametrize("nu", [0.1, 0.5])
def test_linear_one_class_reaches_the_optimum(name: str, nu: float) -> None:
    X, _ = _classes(name)
    weights = np.where(np.arange(X.shape[0]) % 4 == 0, 2.0, 1.0)
    result = fit(X, None, solver="linear_one_class", nu=nu, sample_weight=weights)
    model = result.model
    assert isinstance(model, LinearModel) and model.task == "outlier"
    rho = -float(model.intercept[0])
    primal = ref.one_class_primal(X, weights, model.coef[0], rho, nu)
    optimum = ref.one_class_optimum(X, weights, nu)
    _check_certificate(result, primal, optimum)
    labels, values = model.predict(X)
    assert set(np.unique(labels)) <= {-1.0, 1.0}
    np.testing.assert_array_equal(labels, np.where(values > 0, 1.0, -1.0))
    outliers = float(weights @ (labels < 0)) / float(weights.sum())
    assert outliers <= nu + 0.05  # nu bounds the (weighted) fraction of outliers


def test_converged_false_when_the_certificate_does_not_hold() -> None:
    X, y = _classes("digits")
    result = fit(X, y, solver="crammer_singer", C=10.0, max_iter=2)
    assert not result.converged and result.exit_reason == "max_iter"
    assert result.relative_gap > result.params["tol"] and result.warnings
    X, y = _regression("diabetes")
    result = fit(X, y, solver="linear_svr", loss="l1", C=100.0, max_iter=1, tol=1e-9)
    assert not result.converged and result.warnings


def test_models_keep_their_task_when_stored() -> None:
    X, y = _regression("sparse")
    for result in (fit(X, y, solver="linear_svr"), fit(X, None, solver="linear_one_class")):
        stored = model_from_bytes("linear", model_to_bytes(result.model))
        assert isinstance(stored, LinearModel) and stored.task == result.model.task
        np.testing.assert_array_equal(stored.predict(X)[0], result.model.predict(X)[0])


_EXPORTS = [
    ("crammer_singer", {}, "MCSVM_CS"),
    ("crammer_singer", {"bias": "none"}, "MCSVM_CS"),
    ("linear_svr", {"loss": "l2", "method": "primal"}, "L2R_L2LOSS_SVR"),
    ("linear_svr", {"loss": "l2"}, "L2R_L2LOSS_SVR_DUAL"),
    ("linear_svr", {"loss": "l1", "bias_scale": 2.0}, "L2R_L1LOSS_SVR_DUAL"),
    ("linear_one_class", {"nu": 0.3}, "ONECLASS_SVM"),
]


@pytest.mark.parametrize(("solver", "params", "solver_type"), _EXPORTS)
def test_liblinear_predict_reproduces_exported_models(
    solver: str, params: dict[str, Any], solver_type: str, tmp_path: Path
) -> None:
    liblinearutil = pytest.importorskip("liblinear.liblinearutil")
    if solver == "crammer_singer":
        X, y = _classes("wine")
    else:
        X, y = _regression("sparse")
    result = fit(X, None if solver == "linear_one_class" else y, solver=solver, **params)
    text = liblinear_model_text(result.model, result.params)
    assert text.startswith(f"solver_type {solver_type}\n")
    path = tmp_path / "model.txt"
    path.write_text(text)
    model = liblinearutil.load_model(str(path))
    labels, _, values = liblinearutil.predict([], X, model, "-q")
    ours, our_values = result.model.predict(X)
    np.testing.assert_allclose(
        np.asarray(values).reshape(our_values.shape), our_values, rtol=1e-9, atol=1e-12
    )
    np.testing.assert_array_equal(np.asarray(labels), ours)


# -- parity with LIBLINEAR 2.50 at -e 1e-6 on the shared sets ---------------------------


def _liblinear_weights(
    args: str, y: np.ndarray, X: sp.csr_matrix, tmp_path: Path
) -> tuple[np.ndarray, dict[str, list[str]]]:
    """LIBLINEAR's model (weights (rows, outputs) and header) trained with `args`."""
    pytest.importorskip("liblinear.liblinearutil")
    return ref.liblinear_model(args, y, X, tmp_path / "reference.model")


def _shared(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    from testkit.datasets import load_dataset

    return load_dataset(name)


def _check_against(result: Any, reference: float) -> None:
    """Our certified primal within 1e-3 of LIBLINEAR's at a tight eps (or below it), and
    our dual bound below LIBLINEAR's primal (the certificate is a true bound)."""
    assert result.converged
    assert result.primal_objective <= reference + REL * abs(reference)
    assert result.dual_objective <= reference + 1e-9 * abs(reference)


@pytest.mark.parity
def test_crammer_singer_matches_liblinear(tmp_path: Path) -> None:
    X, y = _shared("dna.scale")
    weights, header = _liblinear_weights("-s 4 -c 1 -B 1 -e 1e-6", y, X, tmp_path)
    classes = np.unique(y)
    W = np.zeros((classes.size, weights.shape[0]))
    W[np.searchsorted(classes, [float(v) for v in header["label"]])] = weights.T
    label = np.searchsorted(classes, y)
    reference = ref.cs_primal(_rows(X, 1.0), label, np.ones(y.size), W)
    _check_against(fit(X, y, solver="crammer_singer"), reference)


@pytest.mark.parity
@pytest.mark.parametrize("name", ["heart_scale", "a9a", "mushrooms"])
@pytest.mark.parametrize(
    ("s", "loss", "method"), [("11", "l2", "primal"), ("12", "l2", "dual"), ("13", "l1", "dual")]
)
def test_linear_svr_matches_liblinear(
    name: str, s: str, loss: str, method: str, tmp_path: Path
) -> None:
    X, labels = _shared(name)
    y = np.where(labels == labels.max(), 1.0, -1.0)  # the labels as regression targets
    # -s 11 is LIBLINEAR's exact Newton; its dual CD at 1e-6 still stops at its sweep limit
    weights, _ = _liblinear_weights(
        "-s 11 -c 1 -p 0.1 -B 1 -e 1e-6" if loss == "l2" else "-s 13 -c 1 -p 0.1 -B 1 -e 1e-6",
        y,
        X,
        tmp_path,
    )
    reference = ref.svr_primal(_rows(X, 1.0), y, np.ones(y.size), weights[:, 0], loss, 0.1)
    result = fit(X, y, solver="linear_svr", epsilon=0.1, loss=loss, method=method)
    _check_against(result, reference)


@pytest.mark.parity
@pytest.mark.parametrize("name", ["heart_scale", "a9a", "mushrooms"])
def test_linear_one_class_matches_liblinear(name: str, tmp_path: Path) -> None:
    X, y = _shared(name)
    weights, header = _liblinear_weights("-s 21 -n 0.1 -e 1e-6", y, X, tmp_path)
    reference = ref.one_class_primal(
        X, np.ones(y.size), weights[:, 0], float(header["rho"][0]), 0.1
    )
    result = fit(X, None, solver="linear_one_class", nu=0.1)
    _check_against(result, reference)
    # LIBLINEAR's predict on our exported model gives our labels
    liblinearutil = pytest.importorskip("liblinear.liblinearutil")
    path = tmp_path / "ours.model"
    path.write_text(liblinear_model_text(result.model, result.params))
    labels, _, _ = liblinearutil.predict([], X, liblinearutil.load_model(str(path)), "-q")
    np.testing.assert_array_equal(labels, result.model.predict(X)[0])


@pytest.mark.parametrize("solver", ["crammer_singer", "linear_svr", "linear_one_class"])
def test_onnx_export_predicts_like_the_model(solver: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    from solvers.onnx_graph import onnx_model_bytes

    X, y = _regression("diabetes") if solver == "linear_svr" else _classes("iris")
    result = fit(X, None if solver == "linear_one_class" else y, solver=solver)
    session = ort.InferenceSession(onnx_model_bytes(result.model))
    feed = session.get_inputs()[0]
    dtype = np.float32 if feed.type == "tensor(float)" else np.float64
    labels, values = session.run(None, {feed.name: X.toarray().astype(dtype)})[:2]
    ours, our_values = result.model.predict(X)
    if solver != "linear_svr":  # a regression model's label is its value
        np.testing.assert_array_equal(labels, ours)
    np.testing.assert_allclose(values, our_values, rtol=1e-5, atol=1e-5)


def test_linear_svr_probability_is_the_laplace_width() -> None:
    X, y = _regression("diabetes")
    result = fit(X, y, solver="linear_svr", probability=True)
    sigma = result.model.calibration.sigma  # type: ignore[union-attr]
    residual = float(np.mean(np.abs(y - result.model.predict(X)[1])))
    # LIBSVM's width: the mean absolute cross-validated residual (outliers dropped)
    assert sigma is not None and 0.8 * residual < sigma < 1.5 * residual
