"""solvers.formats: LIBLINEAR model files written and read back, and the errors of models
a format cannot hold (LIBSVM's round trip is tested in test_kernels.py)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from solvers.formats import ModelFormatError, liblinear_model_text, read_liblinear_model_text
from solvers.models import LinearModel, model_from_bytes, model_to_bytes
from solvers.train import fit


def _rows(seed: int) -> sp.csr_matrix:
    return sp.random(30, 6, density=0.5, random_state=seed, format="csr")


@pytest.mark.parametrize("labels", [[-1.0, 1.0], [3.0, 7.0], [1.0, 2.0, 5.0]])
@pytest.mark.parametrize("bias", ["augment", "none"])
def test_liblinear_text_round_trip(labels: list[float], bias: str) -> None:
    X = _rows(0)
    y = np.array(labels)[np.arange(30) % len(labels)]
    result = fit(X, y, solver="dcd", bias=bias, bias_scale=2.0)
    model = result.model
    assert isinstance(model, LinearModel)
    read = read_liblinear_model_text(liblinear_model_text(model, result.params))
    assert read.classes.tolist() == labels
    np.testing.assert_array_equal(read.coef, model.coef)
    np.testing.assert_allclose(read.intercept, model.intercept, rtol=1e-15, atol=0.0)
    X_new = _rows(1)
    assert read.predict(X_new)[0].tolist() == model.predict(X_new)[0].tolist()


def test_liblinear_refuses_what_it_cannot_hold() -> None:
    model = LinearModel(np.array([0.5, 1.0]), np.ones((1, 2)), np.array([0.0]))
    with pytest.raises(ModelFormatError, match="32-bit integers"):
        liblinear_model_text(model, {"bias": "augment"})
    free = LinearModel(np.array([0.0, 1.0]), np.ones((1, 2)), np.array([0.25]))
    with pytest.raises(ModelFormatError, match="free intercept"):
        liblinear_model_text(free, {"bias": "free"})
    with pytest.raises(ModelFormatError, match="no 'w' line"):
        read_liblinear_model_text("solver_type L2R_L1LOSS_SVC_DUAL\n")


def test_every_fit_result_carries_a_servable_model() -> None:
    X = _rows(2)
    y = np.where(np.arange(30) % 2 == 0, 1.0, -1.0)
    for solver in ("dcd", "smo"):
        result = fit(X, y, solver=solver)
        stored = model_from_bytes(result.model.kind, model_to_bytes(result.model))
        assert type(stored) is type(result.model)
        np.testing.assert_array_equal(stored.predict(X)[1], result.model.predict(X)[1])
        np.testing.assert_array_equal(result.predict(X), result.model.predict(X)[0])
