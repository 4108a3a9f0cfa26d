"""`dcd` with `threads` > 1: the asynchronous sweeps of solvers/_dcd_parallel.py reach the
sequential solver's certified optimum, return w = w(alpha) inside the box with an honest
gap, stop only when the gap holds, and give the same arithmetic on one thread (the grain
meter's sequential mode) every time."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from solvers import dcd, grain
from solvers.backbone import ProgressMonitor
from solvers.inputs import as_csr_arrays
from solvers.objectives import LinearProblem
from solvers.params import ParamError, validate_params
from solvers.train import fit
from testkit.datagen import text_like
from tests.solvers.naive import dual_value, primal, w_of_alpha

LOSSES = ("l1", "l2")


@pytest.fixture(scope="module")
def text() -> tuple[Any, np.ndarray]:
    return text_like(3_000, 2_000, seed=3)


def problem_of(X: Any, y: np.ndarray, C: float = 1.0, bias_scale: float = 1.0) -> LinearProblem:
    return LinearProblem(as_csr_arrays(X), np.asarray(y, dtype=np.float64),
                         np.full(X.shape[0], C), bias_scale)


def solve(problem: LinearProblem, alpha0: Any = None, **params: Any) -> Any:
    applied = {**validate_params("dcd", params), "alpha0": alpha0}
    return dcd.solve(problem, applied, ProgressMonitor(None, None))


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("threads", [2, 3])
def test_threads_reach_the_sequential_certified_optimum(text: Any, loss: str,
                                                        threads: int) -> None:
    """Both run to a relative gap of 1e-11: primal values within 1e-9 relative, and each
    certified by its own dual value."""
    X, y = text
    fits = {t: fit(X, y, solver="dcd", C=1.0, loss=loss, threads=t, tol=1e-11, eps=1e-6)
            for t in (1, threads)}
    for result in fits.values():
        assert result.converged and result.relative_gap <= 1e-11
    one, many = fits[1].primal_objective, fits[threads].primal_objective
    assert abs(one - many) <= 1e-9 * one
    assert np.allclose(fits[1].coef, fits[threads].coef, rtol=0, atol=1e-4)


@pytest.mark.parametrize("loss", LOSSES)
def test_rounds_keep_w_of_alpha_the_box_and_an_honest_gap(text: Any, loss: str) -> None:
    X, y = text
    C = 2.0
    problem = problem_of(X, y, C)
    solution = solve(problem, C=C, loss=loss, threads=2, eps=0.01)
    alpha = solution.alpha
    assert np.all(alpha >= 0.0)
    if loss == "l1":
        assert np.all(alpha <= C)
    Xa, cost = np.hstack([X.toarray(), np.ones((X.shape[0], 1))]), np.full(X.shape[0], C)
    w = w_of_alpha(Xa, y, alpha)
    assert np.allclose(solution.w, w, rtol=0, atol=1e-10 * max(1.0, np.abs(w).max()))
    assert solution.primal == pytest.approx(primal(Xa, y, cost, solution.w, loss), rel=1e-12)
    assert solution.dual == pytest.approx(dual_value(Xa, y, cost, alpha, loss), rel=1e-10)
    assert solution.gap >= -1e-9 * solution.primal
    assert solution.details["parts"] == 2 and solution.details["rounds"] > 0
    assert solution.details["resync_drift"] >= 0.0 and solution.details["hot_features"] >= 1


@pytest.mark.parametrize("mode", ["fine", "sequential", "alternate"])
def test_every_mode_certifies_and_one_thread_repeats_its_bits(
        text: Any, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """Whichever threads run the parts (the grain meter's choices), the sweeps stop with
    the gap of (w(alpha), alpha) within tol; on one thread (sequential) the parts run one
    after another, so two fits are bit-identical."""
    X, y = text
    problem = problem_of(X, y)
    monkeypatch.setattr(grain, "FORCE", mode)
    first = solve(problem, C=1.0, loss="l1", threads=2, eps=0.01, tol=1e-4)
    assert first.exit_reason == "converged" and first.gap <= 1e-4 * first.primal
    Xa = np.hstack([X.toarray(), np.ones((X.shape[0], 1))])
    assert np.allclose(first.w, w_of_alpha(Xa, y, first.alpha), rtol=0, atol=1e-10)
    if mode == "sequential":
        again = solve(problem, C=1.0, loss="l1", threads=2, eps=0.01, tol=1e-4)
        assert np.array_equal(again.w, first.w) and again.iterations == first.iterations
        assert np.array_equal(again.alpha, first.alpha)


@pytest.mark.parametrize("loss", LOSSES)
def test_the_sweeps_stop_only_when_the_gap_holds(text: Any, loss: str) -> None:
    """With a loose projected-gradient rule (eps 1) the stop rule holds long before the
    gap: the sweeps go on (gap checks, the rule's eps halved after each that fails) until
    the gap is within tol."""
    X, y = text
    problem = problem_of(X, y)
    loose = solve(problem, C=1.0, loss=loss, threads=2, eps=1.0, tol=1e-5)
    assert loose.exit_reason == "converged" and loose.gap <= 1e-5 * loose.primal
    checks = loose.details["gap_checks"]
    assert checks >= 2 and loose.details["final_eps"] == 0.5 ** (checks - 1)


def test_hot_features_are_the_frequent_ones_and_the_bias_last() -> None:
    from solvers import _dcd_parallel as par

    indices = np.array([0, 1, 0, 2, 0, 1, 3], dtype=np.int32)  # feature 0 in 3 rows, 1 in 2
    hot, slot_of = par.hot_features(indices, 4, 5, 0.4)
    assert hot.tolist() == [0, 1, 5]  # more than 0.4 x 4 rows, then the bias feature
    assert slot_of.tolist() == [0, 1, -1, -1, -1, 2]


def test_one_thread_is_the_sequential_kernel(text: Any) -> None:
    """threads: 1 (the default) runs the sequential kernel: no parts, and the same bits
    as a fit that never names threads."""
    X, y = text
    problem = problem_of(X, y)
    default = solve(problem, C=1.0, loss="l1", eps=0.01)
    one = solve(problem, C=1.0, loss="l1", eps=0.01, threads=1)
    assert "parts" not in one.details
    assert np.array_equal(one.w, default.w) and one.iterations == default.iterations


def test_a_warm_start_and_few_rows_work(text: Any) -> None:
    X, y = text
    problem = problem_of(X, y, 4.0)
    cold = solve(problem_of(X, y, 1.0), C=1.0, loss="l2", eps=0.01)
    warm = solve(problem, C=4.0, loss="l2", eps=0.01, threads=2, alpha0=cold.alpha)
    assert warm.exit_reason == "converged" and warm.gap <= 1e-2 * warm.primal
    tiny = solve(problem_of(X[:3], y[:3]), C=1.0, loss="l1", threads=2)  # < 2 rows a part
    assert tiny.exit_reason == "converged" and "parts" not in tiny.details


def test_threads_is_a_dcd_parameter_with_bounds() -> None:
    assert validate_params("dcd", {"threads": 4})["threads"] == 4
    assert validate_params("dcd", {})["threads"] == 1
    with pytest.raises(ParamError):
        validate_params("dcd", {"threads": 0})


@pytest.mark.parametrize("threads", [2, 3])
def test_logistic_threads_reach_the_sequential_certified_optimum(text: Any,
                                                                 threads: int) -> None:
    X, y = text
    fits = {t: fit(X, y, solver="logistic_dcd", C=1.0, threads=t, tol=1e-11, eps=1e-7)
            for t in (1, threads)}
    for result in fits.values():
        assert result.converged and result.relative_gap <= 1e-11
        assert [step["solver"] for step in result.path] == ["logistic_dcd"]
    one, many = fits[1].primal_objective, fits[threads].primal_objective
    assert abs(one - many) <= 1e-9 * one


def test_logistic_rounds_keep_w_of_alpha_and_the_open_box(
        text: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from solvers import logistic_dual

    X, y = text
    problem = problem_of(X, y, 3.0)
    results = {}
    for mode in ("fine", "sequential", "alternate"):
        monkeypatch.setattr(grain, "FORCE", mode)
        params = validate_params("logistic_dcd", {"C": 3.0, "threads": 2, "eps": 0.01})
        results[mode] = logistic_dual.solve(problem, params, ProgressMonitor(None, None))
    first = results["fine"]
    for other in results.values():  # the same arithmetic whichever threads run the parts
        assert np.array_equal(other.w, first.w) and other.iterations == first.iterations
    alpha = first.alpha
    assert np.all(alpha > 0.0) and np.all(alpha < 3.0)
    w = w_of_alpha(np.hstack([X.toarray(), np.ones((X.shape[0], 1))]), y, alpha)
    assert np.allclose(first.w, w, rtol=0, atol=1e-10 * max(1.0, np.abs(w).max()))
    assert first.gap >= -1e-9 * first.primal and first.details["parts"] == 2


def test_auto_keeps_its_dual_cd_choice_on_one_thread(text: tuple[Any, np.ndarray]) -> None:
    """A fit's threads reach auto's other choices, never dcd's parallel rounds (they take
    more sweeps than a second core wins back on 2 cores: Param.from_auto)."""
    X, y = text
    chosen = fit(X, y, solver="auto", C=1.0, loss="l1", threads=2)
    assert chosen.auto is not None and chosen.auto["chosen"] == "dcd"
    assert chosen.params["threads"] == 1
    named = fit(X, y, solver="dcd", C=1.0, loss="l1", threads=2)
    assert named.params["threads"] == 2


def test_the_result_records_the_threads_and_parts(text: Any) -> None:
    """A fit's output says how it ran: the threads that ran the parts (at most what Numba
    has), the parts, and on one thread neither."""
    import numba

    X, y = text
    two = fit(X, y, solver="dcd", C=1.0, loss="l1", threads=2)
    output = two.per_output[0]
    assert two.params["threads"] == 2 and output["parts"] == 2
    assert output["threads"] == min(2, numba.config.NUMBA_NUM_THREADS)
    assert two.converged and output["relative_gap"] <= two.params["tol"]
    one = fit(X, y, solver="dcd", C=1.0, loss="l1", threads=1).per_output[0]
    assert "parts" not in one and "threads" not in one
