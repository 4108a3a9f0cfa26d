"""The DCD solver and the shared objectives: naive references, toy problems with known
answers, agreement with SciPy and LIBLINEAR, limits, progress and determinism."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import dcd, dual_cd
from solvers._kernel_helpers import next_below
from solvers.backbone import Budget, ProgressMonitor, seed_state
from solvers.dual_cd import STATUS_EXIT
from solvers.inputs import as_csr_arrays
from solvers.objectives import (
    LinearProblem,
    dual_box,
    dual_objective,
    margins,
    primal_objective,
    qbar_diagonal,
)
from solvers.params import validate_params
from solvers.train import fit
from testkit.datasets import load_any, load_local
from tests.solvers.naive import (
    augment,
    cyclic_dcd,
    dual_by_lbfgsb,
    dual_value,
    primal,
    primal_l2_by_lbfgs,
    random_sparse_problem,
    w_of_alpha,
)

LOSSES = ("l1", "l2")
LIBLINEAR_SOLVER = {"l1": 3, "l2": 1}


def make_problem(X: Any, y: np.ndarray, cost: Any = 1.0, bias_scale: float = 0.0) -> LinearProblem:
    arrays = as_csr_arrays(X)
    cost_array = np.broadcast_to(np.asarray(cost, dtype=np.float64), (arrays.n_rows,)).copy()
    return LinearProblem(arrays, np.asarray(y, dtype=np.float64), cost_array, bias_scale)


def solve(problem: LinearProblem, monitor: ProgressMonitor | None = None, **params: Any) -> Any:
    applied = validate_params("dcd", params)
    return dcd.solve(problem, applied, monitor or ProgressMonitor(None, None))


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


# --------------------------------------------------------------------------------------
# objectives vs the naive dense formulas


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("bias_scale", [None, 1.0, 2.5])
def test_objectives_match_dense_formulas(loss: str, bias_scale: float | None) -> None:
    X, y = random_sparse_problem(40, 7, 0.4, seed=1)
    rng = np.random.default_rng(2)
    cost = rng.uniform(0.1, 3.0, size=40)
    problem = make_problem(X, y, cost, bias_scale or 0.0)
    Xa = augment(X, bias_scale)
    w = rng.normal(size=problem.n_weights)
    assert primal_objective(problem, w, loss) == pytest.approx(
        primal(Xa, y, cost, w, loss), rel=1e-13
    )
    np.testing.assert_allclose(margins(problem, w), y * (Xa @ w), rtol=1e-13, atol=1e-13)

    alpha = rng.uniform(0.0, 1.0, size=40) * (cost if loss == "l1" else 2.0)
    w_alpha = w_of_alpha(Xa, y, alpha)
    assert dual_objective(problem, alpha, w_alpha, loss) == pytest.approx(
        dual_value(Xa, y, cost, alpha, loss), rel=1e-12
    )


def test_objective_rejects_wrong_weight_length() -> None:
    X, y = random_sparse_problem(10, 3, 0.5, seed=3)
    problem = make_problem(X, y, 1.0, bias_scale=1.0)
    with pytest.raises(ValueError, match="4 weights"):
        primal_objective(problem, np.zeros(3), "l1")


# --------------------------------------------------------------------------------------
# toy problems with known answers


@pytest.mark.parametrize("C", [0.1, 0.25, 1.0, 5.0])
def test_two_point_problem_has_the_closed_form_optimum(C: float) -> None:
    # x = +1 (y = +1), x = -1 (y = -1), no bias: P(w) = w^2/2 + 2C loss(1 - w)
    # l1: w* = min(1, 2C);  l2: w* = 4C / (1 + 4C)
    X = np.array([[1.0], [-1.0]])
    y = np.array([1.0, -1.0])
    for loss, expected in (("l1", min(1.0, 2 * C)), ("l2", 4 * C / (1 + 4 * C))):
        result = fit(X, y, loss=loss, C=C, bias="none", eps=1e-10)
        assert result.exit_reason == "converged"
        assert result.coef[0, 0] == pytest.approx(expected, rel=1e-9)
        assert result.intercept[0] == 0.0
        assert result.duality_gap == pytest.approx(0.0, abs=1e-9)


def test_separable_problem_with_bias_is_symmetric() -> None:
    # symmetric around the origin: the (regularised) bias weight must be 0 at the optimum
    X = np.array([[2.0, 1.0], [1.0, 2.0], [-2.0, -1.0], [-1.0, -2.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    result = fit(X, y, loss="l1", C=10.0, eps=1e-10)
    assert result.intercept[0] == pytest.approx(0.0, abs=1e-9)
    # hard-margin SVM of these points: w = (1/3, 1/3), margins exactly 1
    np.testing.assert_allclose(result.coef[0], [1 / 3, 1 / 3], rtol=1e-8)


# --------------------------------------------------------------------------------------
# tiny problems vs SciPy and the naive DCD


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("bias_scale", [None, 1.0])
def test_tiny_problem_matches_scipy(loss: str, bias_scale: float | None) -> None:
    X, y = random_sparse_problem(60, 6, 0.6, seed=5)
    cost = np.where(y > 0, 2.0, 0.5)
    Xa = augment(X, bias_scale)
    if loss == "l2":
        w_ref = primal_l2_by_lbfgs(Xa, y, cost)
        lower = upper = primal(Xa, y, cost, w_ref, loss)
    else:
        alpha_ref, w_ref = dual_by_lbfgsb(Xa, y, cost, loss)
        # weak duality brackets the optimum between the reference's dual and primal values
        lower = dual_value(Xa, y, cost, alpha_ref, loss)
        upper = primal(Xa, y, cost, w_ref, loss)
        assert upper - lower < 1e-6 * upper
    solution = solve(
        make_problem(X, y, cost, bias_scale or 0.0), loss=loss, eps=1e-9, max_iter=100_000
    )
    assert solution.exit_reason == "converged"
    assert lower * (1 - 1e-9) <= solution.primal <= upper * (1 + 1e-9)
    assert solution.gap < 1e-8 * solution.primal
    # strongly convex primal: the optimal w is unique
    np.testing.assert_allclose(solution.w, w_ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("loss", LOSSES)
def test_tiny_problem_matches_naive_cyclic_dcd(loss: str) -> None:
    X, y = random_sparse_problem(30, 4, 0.7, seed=7)
    cost = np.full(30, 0.7)
    _, w_ref = cyclic_dcd(X, y, cost, loss, max_sweeps=20_000)
    solution = solve(make_problem(X, y, cost), loss=loss, C=0.7, eps=1e-10, max_iter=100_000)
    np.testing.assert_allclose(solution.w, w_ref, rtol=1e-6, atol=1e-8)
    assert solution.primal == pytest.approx(primal(X, y, cost, w_ref, loss), rel=1e-10)
    # the dual value is the naive one, computed from alpha with the explicit Qbar
    assert solution.dual == pytest.approx(dual_value(X, y, cost, solution.alpha, loss), rel=1e-10)
    np.testing.assert_allclose(solution.w, w_of_alpha(X, y, solution.alpha), atol=1e-12)


@pytest.mark.parametrize("loss", LOSSES)
def test_dual_variables_stay_in_the_box(loss: str) -> None:
    X, y = random_sparse_problem(80, 5, 0.5, seed=8)
    cost = np.random.default_rng(9).uniform(0.2, 2.0, size=80)
    solution = solve(make_problem(X, y, cost, 1.0), loss=loss, eps=1e-6)
    assert np.all(solution.alpha >= 0)
    if loss == "l1":
        assert np.all(solution.alpha <= cost)


# --------------------------------------------------------------------------------------
# agreement with LIBLINEAR on the benchmark data sets


def liblinear_weights(model: Any, label_index: int = 0) -> np.ndarray:
    """LIBLINEAR's w for "label_index vs rest", with the weight of its -B 1 feature last."""
    w, b = model.get_decfun(label_index)
    return np.append(np.asarray(w, dtype=np.float64), b)  # -B 1: b = w_bias * 1


@pytest.fixture(scope="module")
def liblinear() -> Any:
    from liblinear import liblinearutil

    return liblinearutil


PARITY = pytest.mark.parity


@pytest.mark.parametrize("name", [
    "onehot", "dense", "text",  # like a9a, ijcnn1 and a sparse text set (testkit.datasets)
    pytest.param("a9a", marks=PARITY), pytest.param("w8a", marks=PARITY),
    pytest.param("ijcnn1", marks=PARITY)])
@pytest.mark.parametrize("loss", LOSSES)
def test_primal_objective_matches_liblinear(name: str, loss: str, liblinear: Any) -> None:
    X, y = load_any(name)
    prob = liblinear.problem(y, X, bias=1)
    model = liblinear.train(prob, f"-s {LIBLINEAR_SOLVER[loss]} -e 1e-6 -B 1 -c 1 -q")
    positive = model.get_labels()[0]
    problem = make_problem(X, np.where(y == positive, 1.0, -1.0), 1.0, bias_scale=1.0)
    reference = primal_objective(problem, liblinear_weights(model), loss)

    result = fit(X, y, loss=loss, eps=1e-3, C=1.0)
    assert result.exit_reason in ("converged", "max_iter")
    assert relative(result.primal_objective, reference) < 1e-3
    # the duality gap is a certificate: never negative beyond rounding, and small
    assert result.duality_gap is not None and result.dual_objective is not None
    assert result.duality_gap >= -1e-9 * result.primal_objective
    assert result.duality_gap < 1e-3 * result.primal_objective
    assert result.dual_objective <= reference * (1 + 1e-12)


@pytest.mark.parametrize("loss", LOSSES)
def test_default_eps_converges_with_an_unshrunk_final_pass(loss: str) -> None:
    X, y = load_local("dense")
    result = fit(X, y, loss=loss)
    assert result.exit_reason == "converged"
    out = result.per_output[0]
    assert out["violation"] <= 0.1
    assert out["active_size"] == X.shape[0]  # convergence is only declared unshrunk
    assert result.duality_gap is not None
    assert 0 < result.duality_gap < 0.01 * result.primal_objective


# --------------------------------------------------------------------------------------
# limits, exit reasons, progress


def test_max_iter_reports_max_iter_and_keeps_a_usable_model() -> None:
    X, y = load_local("onehot")
    result = fit(X, y, loss="l1", max_iter=2, fallback=False)
    assert result.exit_reason == "max_iter"
    assert result.iterations == 2
    assert np.all(np.isfinite(result.coef)) and np.isfinite(result.intercept[0])
    predictions = result.predict(X)
    assert set(np.unique(predictions)) <= {-1.0, 1.0}
    assert np.mean(predictions == y) > 0.7  # two sweeps: rough, but a model
    assert result.dual_objective is not None
    assert 0 < result.dual_objective < result.primal_objective


def test_max_seconds_stops_the_solver() -> None:
    X, y = load_local("dense")
    started = time.perf_counter()
    # C = 1000: far from the optimum after 0.3 s even on a fast machine (ACF at C = 1 came
    # so close that its gap rounded to -4e-12)
    result = fit(X, y, loss="l1", C=1000.0, eps=1e-12, max_iter=10_000_000, max_seconds=0.3,
                 fallback=False)  # dcd alone: with a follow-up (ocas) it gets half the time,
    elapsed = time.perf_counter() - started
    assert result.exit_reason == "max_seconds"
    assert 0.3 <= result.train_seconds < 0.3 + 0.5
    assert elapsed < 1.5
    assert np.all(np.isfinite(result.coef))
    assert result.duality_gap is not None and result.duality_gap > 0


def test_progress_events_are_throttled_and_complete() -> None:
    X, y = load_local("onehot")
    events: list[dict[str, Any]] = []
    result = fit(
        X, y, loss="l1", eps=1e-12, max_iter=10_000_000, max_seconds=2.0, progress=events.append,
        fallback=False,  # dcd alone: with a follow-up it would get half of max_seconds
    )
    assert result.exit_reason == "max_seconds"
    assert 2 <= len(events) <= 10  # one every 0.2 s at most
    for event in events:
        assert {
            "iteration",
            "elapsed_s",
            "primal",
            "dual",
            "gap",
            "violation",
            "active_size",
        } <= set(event)
        assert "class_index" not in event  # binary problem
        assert event["gap"] == pytest.approx(event["primal"] - event["dual"])
        assert event["gap"] >= 0
        assert 0 < event["active_size"] <= X.shape[0]
    iterations = [e["iteration"] for e in events]
    assert iterations == sorted(set(iterations)) and iterations[0] >= 1
    times = [e["elapsed_s"] for e in events]
    assert times[0] >= 0.2
    assert all(b - a >= 0.2 for a, b in itertools.pairwise(times))
    # dual coordinate descent maximises the dual step by step: it never goes down (the
    # primal is not monotone: under load the events fell where it had risen by 1.4e-6)
    duals = [e["dual"] for e in events]
    assert all(b >= a - 1e-9 * abs(a) for a, b in itertools.pairwise(duals)), duals
    # an event costs a pass over the data: throttled, reporting stays far below 5 %
    assert result.timings["progress_s"] < 0.05 * result.train_seconds


def test_progress_returning_true_cancels() -> None:
    X, y = load_local("dense")
    events: list[dict[str, Any]] = []

    def cancel(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    result = fit(X, y, loss="l2", eps=1e-12, max_iter=10_000_000, max_seconds=20.0, progress=cancel)
    assert result.exit_reason == "cancelled"
    assert len(events) == 1
    assert result.iterations == events[0]["iteration"]
    assert result.train_seconds < 1.0
    assert np.all(np.isfinite(result.coef))


def test_non_finite_gradient_stops_the_kernel() -> None:
    # the kernel must not loop on NaN: it stops with the numerical-error status
    X, y = random_sparse_problem(20, 3, 0.8, seed=11)
    A = as_csr_arrays(X)
    upper, diag = dual_box(np.ones(20), "l1")
    qbar_diag = qbar_diagonal(LinearProblem(A, y, np.ones(20), 1.0), diag)
    w = np.zeros(A.n_features + 1)
    w[:] = np.inf
    state = (
        np.array([0, 20, 0, 0]),
        np.array([np.inf, -np.inf, -np.inf, np.inf, np.nan]),
        np.array([seed_state(0)], dtype=np.uint64),
    )
    status = dcd._dcd_sweeps(
        (A.data, A.indices, A.indptr),
        (y, upper, diag, qbar_diag),
        (np.zeros(20), w, np.arange(20)),
        state,
        (1.0, 0.1, 1000, 10**9, False),  # B, eps, max_iter, budget, spread-only rule
    )
    assert STATUS_EXIT[status] == "numerical_error"


def test_nan_reaching_the_solver_is_refused() -> None:
    # fit validates X; a LinearProblem built by hand with a NaN is refused by the solver
    X, y = random_sparse_problem(20, 3, 0.8, seed=11)
    problem = make_problem(X, y)
    problem.X.data[0] = np.nan
    with pytest.raises(ValueError, match="scale the features"):
        solve(problem, loss="l1")


def test_overflowing_rows_are_refused() -> None:
    X = np.array([[1e200, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="scale the features"):
        fit(X, np.array([1.0, -1.0]))


# --------------------------------------------------------------------------------------
# determinism


def test_same_seed_gives_bit_identical_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = load_local("onehot")
    first = fit(X, y, loss="l1", seed=42)
    second = fit(X, y, loss="l1", seed=42)
    assert np.array_equal(first.coef, second.coef)
    assert np.array_equal(first.intercept, second.intercept)
    assert first.iterations == second.iterations
    # splitting the work into many small kernel calls changes nothing either
    monkeypatch.setattr(dual_cd, "BUDGET", Budget(initial=1000, maximum=5000))
    chopped = fit(X, y, loss="l1", seed=42)
    assert np.array_equal(first.coef, chopped.coef)
    other = fit(X, y, loss="l1", seed=43)
    assert not np.array_equal(first.coef, other.coef)
    assert relative(other.primal_objective, first.primal_objective) < 1e-3


def test_seed_state_is_never_zero() -> None:
    states = {seed_state(seed) for seed in [0, 1, 2, 2**63 - 1]}
    assert 0 not in states and len(states) == 4


def test_permutation_rng_is_uniform_enough() -> None:
    rng = np.array([seed_state(0)], dtype=np.uint64)
    draws = np.array([next_below(rng, 7) for _ in range(7000)])
    assert draws.min() == 0 and draws.max() == 6
    counts = np.bincount(draws, minlength=7)
    assert np.all(np.abs(counts - 1000) < 150)
    assert 0 <= next_below(rng, 2**40) < 2**40


def test_sparse_and_dense_input_give_identical_results() -> None:
    X, y = random_sparse_problem(200, 10, 0.3, seed=12)
    dense = fit(X, y, loss="l2", eps=1e-6)
    sparse = fit(sp.csr_matrix(X), y, loss="l2", eps=1e-6)
    assert np.array_equal(dense.coef, sparse.coef)
    assert math.isfinite(dense.primal_objective)
