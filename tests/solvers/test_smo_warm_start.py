"""SMO warm starts along the C values of one gamma (fit(warm_start=..., keep_solver_state=
True)): each fit continues from the previous one's alphas and kernel-column cache, and
reaches the optimum a cold fit and LIBSVM 3.37 reach (dual objective, decision values,
predictions), on a two-class and a one-vs-one problem; a smaller C scales the alphas
into the box; a state of another problem is refused."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from solvers.result import FitResult
from solvers.train import fit
from tests.solvers.naive_kernels import libsvm_options, libsvm_train
from tests.solvers.test_smo import accuracy, dataset, relative

GAMMA = 0.125


def _path(X: Any, y: np.ndarray, cs: list[float], **params: Any
          ) -> list[tuple[FitResult, FitResult]]:
    """(warm, cold) fits at every C, the warm ones chained."""
    fits = []
    previous = None
    for C in cs:
        warm = fit(X, y, solver="smo", C=C, warm_start=previous, keep_solver_state=True,
                   **params)
        cold = fit(X, y, solver="smo", C=C, **params)
        fits.append((warm, cold))
        previous = warm
    return fits


def test_a_warm_c_path_reaches_the_cold_and_libsvm_optimum() -> None:
    X, y = dataset("cancer")
    cs = [2.0 ** e for e in range(-5, 16, 4)]
    for k, (warm, cold) in enumerate(_path(X, y, cs, gamma=GAMMA, eps=1e-6)):
        C = cs[k]
        assert warm.exit_reason == cold.exit_reason == "converged"
        assert warm.per_output[0]["warm_start"] is (k > 0)
        reference = libsvm_train(X, y, libsvm_options("rbf", C=C, gamma=GAMMA, eps=1e-6))
        assert relative(warm.dual_objective, cold.dual_objective) < 1e-6, C
        assert relative(warm.dual_objective, reference.objective) < 1e-6, C
        np.testing.assert_allclose(warm.decision_function(X), cold.decision_function(X),
                                   atol=1e-4)
        np.testing.assert_allclose(warm.decision_function(X),
                                   reference.kernel_model.decision_function(X), atol=1e-4)
        assert np.array_equal(warm.predict(X), cold.predict(X))


def test_one_vs_one_warm_fits_reuse_the_kernel_columns_and_match_libsvm() -> None:
    X, y = dataset("onehot3.train")
    X_test, y_test = dataset("onehot3.test")
    fits = _path(X, y, [1.0, 4.0, 16.0])
    for (warm, cold), C in zip(fits, [1.0, 4.0, 16.0], strict=True):
        reference = libsvm_train(X, y, libsvm_options("rbf", C=C,
                                                      gamma=warm.params["gamma"]))
        assert len(warm.per_output) == 3 and warm.exit_reason == "converged"
        assert relative(warm.dual_objective, reference.objective) < 1e-3, C
        assert relative(warm.dual_objective, cold.dual_objective) < 1e-3, C
        assert abs(accuracy(warm.model, X_test, y_test)
                   - accuracy(reference.kernel_model, X_test, y_test)) <= 0.5
    for warm, cold in fits[1:]:  # the columns the last fit cached are not computed again
        for ours, theirs in zip(warm.per_output, cold.per_output, strict=True):
            assert ours["warm_start"] and not theirs["warm_start"]
            assert ours["kernel_evaluations"] < theirs["kernel_evaluations"]


def test_a_smaller_c_scales_the_alphas_into_the_box() -> None:
    X, y = dataset("cancer")
    large = fit(X, y, solver="smo", C=16.0, gamma=GAMMA, eps=1e-6, keep_solver_state=True)
    warm = fit(X, y, solver="smo", C=1.0, gamma=GAMMA, eps=1e-6, warm_start=large)
    cold = fit(X, y, solver="smo", C=1.0, gamma=GAMMA, eps=1e-6)
    assert warm.exit_reason == "converged" and warm.per_output[0]["warm_start"]
    assert relative(warm.dual_objective, cold.dual_objective) < 1e-6
    assert np.array_equal(warm.predict(X), cold.predict(X))
    assert warm.kernel_states == []  # not kept unless asked


def test_a_state_of_another_problem_is_refused() -> None:
    X, y = dataset("cancer")
    first = fit(X, y, solver="smo", C=1.0, gamma=GAMMA, keep_solver_state=True)
    with pytest.raises(ValueError, match="same rows, classes and kernel"):
        fit(X, y, solver="smo", C=2.0, gamma=2 * GAMMA, warm_start=first)
    cold = fit(X, y, solver="smo", C=1.0, gamma=GAMMA)
    with pytest.raises(ValueError, match="keep_solver_state"):
        fit(X, y, solver="smo", C=2.0, gamma=GAMMA, warm_start=cold)
