"""One-class probabilities as LIBSVM 3.37 gives them (`-s 2 -b 1`, svm.cpp's
svm_one_class_probability and predict_one_class_probability): ten prob_density_marks from
the training rows' decision values, P(inlier) by the bin of a decision value. Checked
against libsvm-official 3.37 on generated data: the marks to 1e-9, the probabilities
exactly, the exported file's prob_density_marks as svm-predict -b 1 reads it."""

from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import datasets as skdata

from solvers.calibration import one_class_density_marks
from solvers.formats import libsvm_model_text
from solvers.models import Pipeline, model_from_bytes, model_to_bytes
from solvers.probability import one_class_probability
from solvers.train import fit
from tests.solvers.naive_kernels import libsvm_train

svmutil = pytest.importorskip("libsvm.svmutil")


def novelty_set(seed: int, n: int = 300) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Training rows (two blobs and 5% uniform noise) and held-out rows around them."""
    rng = np.random.default_rng(seed)
    blobs, _ = skdata.make_blobs(n_samples=n, n_features=4, centers=2, cluster_std=0.25,
                                 center_box=(-0.6, 0.6), random_state=seed)
    noise = rng.uniform(-1, 1, size=(n // 20, 4))
    held = rng.uniform(-1, 1, size=(200, 4))
    return sp.csr_matrix(np.vstack([blobs, noise])), sp.csr_matrix(held)


def libsvm_marks(model: object) -> np.ndarray:
    return np.array([model.prob_density_marks[i] for i in range(10)])  # type: ignore[attr-defined]


@pytest.mark.parametrize(("seed", "nu", "gamma"), [(1, 0.1, 1.0), (2, 0.3, 2.0),
                                                   (3, 0.5, 0.5)])
def test_one_class_probabilities_match_libsvm(seed: int, nu: float, gamma: float) -> None:
    X, held = novelty_set(seed)
    eps = 1e-10
    result = fit(X, None, solver="smo", formulation="one_class", nu=nu, gamma=gamma,
                 eps=eps, probability=True)
    assert isinstance(result.model, Pipeline)
    calibration = result.model.calibration
    assert calibration is not None and calibration.layout == "density"
    theirs = libsvm_train(X, np.ones(X.shape[0]),
                          f"-s 2 -t 2 -g {gamma!r} -n {nu!r} -e {eps!r} -b 1")
    marks = libsvm_marks(theirs.model)
    np.testing.assert_allclose(calibration.A, marks, rtol=1e-9, atol=1e-12)
    # predictions of held-out rows: [P(-1 outlier), P(+1 inlier)] = LIBSVM's [1 - p, p]
    labels, _, probabilities = result.model.predict_with_probabilities(held)
    their_labels, _, their_probabilities = svmutil.svm_predict(
        [0] * held.shape[0], held, theirs.model, "-b 1 -q")
    their_p = np.array([row[0] for row in their_probabilities])
    assert probabilities is not None
    np.testing.assert_array_equal(probabilities[:, 1], their_p)
    np.testing.assert_array_equal(probabilities[:, 0], 1 - their_p)
    np.testing.assert_array_equal(labels, their_labels)
    # the model round-trips through storage and LIBSVM's file format
    stored = model_from_bytes(result.model.kind, model_to_bytes(result.model))
    assert isinstance(stored, Pipeline) and stored.calibration is not None
    np.testing.assert_array_equal(stored.calibration.A, calibration.A)
    text = libsvm_model_text(result.model.estimator, density_marks=calibration.A)
    assert "\nprob_density_marks " in text
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "one_class.model")
        with open(path, "w") as handle:
            handle.write(text)
        exported = svmutil.svm_load_model(path)
        np.testing.assert_array_equal(libsvm_marks(exported), calibration.A)
        read_back = svmutil.svm_predict([0] * held.shape[0], held, exported, "-b 1 -q")[2]
    np.testing.assert_array_equal([row[0] for row in read_back], probabilities[:, 1])


def test_the_bins_are_libsvms_at_and_between_the_marks() -> None:
    marks = np.array([-0.9, -0.5, -0.3, -0.2, -0.05, 0.05, 0.1, 0.3, 0.5, 0.8])
    values = np.array([-1.0, -0.9, -0.6, -0.5, 0.0, 0.79, 0.8, 0.81, np.nextafter(-0.9, 0)])
    # -0.9: not below marks[0], below marks[1] -> 0.1; 0.8 equals the last mark: LIBSVM's
    # loop finds no mark above it and leaves 0
    np.testing.assert_array_equal(one_class_probability(marks, values),
                                  [0.001, 0.1, 0.1, 0.2, 0.5, 0.9, 0.0, 0.999, 0.1])


def test_too_few_values_on_one_side_give_no_marks() -> None:
    assert one_class_density_marks(np.r_[-np.ones(4), np.ones(20)]) is None
    assert one_class_density_marks(np.r_[-np.ones(20), np.ones(4)]) is None
    assert one_class_density_marks(np.ones(30)) is None  # no negative value at all
    marks = one_class_density_marks(np.arange(-10.0, 10.0))
    assert marks is not None and marks.shape == (10,)
    assert np.all(np.diff(marks) >= 0)


def test_a_one_class_fit_without_enough_outliers_keeps_its_model_with_a_warning() -> None:
    X, _ = novelty_set(4, n=40)
    result = fit(X, None, solver="smo", formulation="one_class", nu=0.05, gamma=0.1,
                 probability=True)
    assert any("too few to bin" in w for w in result.warnings)
    assert result.model.predict(X)[0].shape == (X.shape[0],)


@pytest.mark.parametrize("params", [
    {"formulation": "one_class", "nu": 0.2, "gamma": 1.0, "probability": True},
    {"formulation": "one_class", "nu": 0.3, "kernel": "poly", "degree": 2, "gamma": 0.5},
    {"formulation": "epsilon_svr", "C": 1.0, "epsilon": 0.1, "gamma": 0.5},
    {"formulation": "nu_svr", "C": 1.0, "nu": 0.4, "probability": True},
])
def test_onnx_export_of_one_class_and_svr_kernel_models_predicts_like_the_model(
        params: dict[str, object]) -> None:
    """The graph's labels (+1 / -1, or the value), decision values and one-class
    probabilities are the model's (a regression model's Laplace width stays out)."""
    ort = pytest.importorskip("onnxruntime")
    from solvers.onnx_graph import onnx_model_bytes

    X, held = novelty_set(5)
    y = X.toarray()[:, 0] - X.toarray()[:, 1] ** 2
    one_class = params["formulation"] == "one_class"
    result = fit(X, None if one_class else y, solver="smo", **params)  # type: ignore[arg-type]
    session = ort.InferenceSession(onnx_model_bytes(result.model))
    outputs = {o.name: v for o, v in zip(session.get_outputs(), session.run(
        None, {session.get_inputs()[0].name: held.toarray()}), strict=True)}
    labels, values = result.model.predict(held)
    np.testing.assert_allclose(outputs["decision_values"], values, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(outputs["label"], labels, rtol=1e-10, atol=1e-12)
    if one_class and params.get("probability"):
        np.testing.assert_array_equal(outputs["probabilities"],
                                      result.model.predict_with_probabilities(held)[2])
    else:
        assert "probabilities" not in outputs
