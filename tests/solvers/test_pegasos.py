"""The Pegasos solver (Shalev-Shwartz et al. 2007): a naive reference of the mini-batch
update with projection, the reported objective, quality on a9a against LIBLINEAR,
mini-batches, seeds, limits and progress."""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import pegasos
from solvers.backbone import Budget, ProgressMonitor, seed_state
from solvers.inputs import as_csr_arrays
from solvers.objectives import LinearProblem, primal_objective
from solvers.params import validate_params
from solvers.svmlight import load_svmlight
from solvers.train import fit
from testkit.datasets import LOCAL_NAMES, load_local, split
from testkit.paths import DATA_DIR
from tests.solvers.naive import augment, random_sparse_problem


def make_problem(X: Any, y: np.ndarray, cost: Any = 1.0, bias_scale: float = 0.0) -> LinearProblem:
    arrays = as_csr_arrays(X)
    cost_array = np.broadcast_to(np.asarray(cost, dtype=np.float64), (arrays.n_rows,)).copy()
    return LinearProblem(arrays, np.asarray(y, dtype=np.float64), cost_array, bias_scale)


def solve(problem: LinearProblem, monitor: ProgressMonitor | None = None, **params: Any) -> Any:
    applied = validate_params("pegasos", params)
    return pegasos.solve(problem, applied, monitor or ProgressMonitor(None, None))


@functools.cache
def load(name: str, n_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """A local set (testkit.datasets.load_local), or a shared LIBSVM set through the
    project's parser (parity tests only)."""
    if name in LOCAL_NAMES:
        return load_local(name)
    parsed = load_svmlight(DATA_DIR / f"{name}.xz")
    return parsed.to_csr(n_features), parsed.y


@functools.cache
def train_test(name: str) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
    """a9a with a9a.t (parity), or a local set's seeded split (testkit.datasets.split)."""
    if name in LOCAL_NAMES:
        return split(*load_local(name))
    X, y = load(name)
    return (X, y, *load(f"{name}.t", n_features=X.shape[1]))


def naive_pegasos(
    X: np.ndarray, y: np.ndarray, cost: np.ndarray, C: float, k: int, steps: int, seed: int
) -> np.ndarray:
    """Mini-batch Pegasos on dense arrays with an explicit w, drawing the kernel's samples
    (the same xorshift state through pegasos.next_below): lambda = 1/(C n), eta_t = 1/(lambda t),
    w <- (1 - eta_t lambda) w + eta_t/k sum_{A_t+} (C_i/C) y_i x_i, then w is projected onto
    the ball of radius sqrt(sum_i C_i) (= 1/sqrt(lambda) when every C_i = C)."""
    n = X.shape[0]
    lam = 1.0 / (C * n)
    radius = math.sqrt(cost.sum())
    rng = np.array([seed_state(seed)], dtype=np.uint64)
    w = np.zeros(X.shape[1])
    for t in range(1, steps + 1):
        batch = [pegasos.next_below(rng, n) for _ in range(k)]
        violators = [i for i in batch if y[i] * (X[i] @ w) < 1.0]
        eta = 1.0 / (lam * t)
        w = (1.0 - eta * lam) * w
        for i in violators:
            w = w + eta / k * (cost[i] / C) * y[i] * X[i]
        norm = np.linalg.norm(w)
        if norm > radius:
            w = w * (radius / norm)
    return w


@pytest.mark.parametrize(("k", "bias_scale"), [(1, None), (3, 1.0), (7, 2.0)])
def test_kernel_matches_the_naive_update(k: int, bias_scale: float | None) -> None:
    X, y = random_sparse_problem(50, 6, 0.6, seed=3)
    cost = np.where(y > 0, 2.0, 0.5)  # class weights enter as C_i / C
    problem = make_problem(X, y, cost, bias_scale or 0.0)
    solution = solve(problem, C=1.0, batch_size=k, epochs=4, seed=5,
                     bias="augment" if bias_scale else "none")
    steps = 4 * math.ceil(50 / k)
    assert solution.exit_reason == "epochs_done" and solution.iterations == steps
    w_ref = naive_pegasos(augment(X, bias_scale), y, cost, 1.0, k, steps, seed=5)
    np.testing.assert_allclose(solution.w, w_ref, rtol=1e-10, atol=1e-12)


def test_scale_folding_changes_nothing_but_rounding() -> None:
    # 2000 steps of k = 1: the scale of w = scale * v shrinks like 1/t and is folded into v
    # once per epoch; the result stays the naive one
    X, y = random_sparse_problem(100, 8, 0.5, seed=4)
    solution = solve(make_problem(X, y, 3.0), C=3.0, epochs=20, seed=9, bias="none")
    w_ref = naive_pegasos(X, y, np.full(100, 3.0), 3.0, 1, 2000, seed=9)
    np.testing.assert_allclose(solution.w, w_ref, rtol=1e-9, atol=1e-11)


def test_reported_primal_is_the_objective_of_the_returned_w() -> None:
    X, y = load("onehot")
    for bias in ("none", "augment"):
        result = fit(X, y, solver="pegasos", bias=bias, epochs=2, seed=1)
        assert result.dual_objective is None and result.duality_gap is None
        bias_scale = 1.0 if bias == "augment" else 0.0
        problem = make_problem(X, np.where(y > 0, 1.0, -1.0), 1.0, bias_scale)
        w = result.coef[0] if bias == "none" else np.append(result.coef[0], result.intercept)
        assert result.primal_objective == primal_objective(problem, w, "l1")
        # the projection keeps ||w|| <= 1/sqrt(lambda) = sqrt(C n)
        assert np.linalg.norm(w) <= math.sqrt(X.shape[0]) * (1 + 1e-12)


# --------------------------------------------------------------------------------------
# quality on a9a and on onehot, its local stand-in (C = 1, no bias), against LIBLINEAR
# -s 3 -e 1e-6


@functools.cache
def liblinear_a9a(name: str = "a9a") -> tuple[float, float]:
    """(optimal primal objective, test accuracy in %) of LIBLINEAR's tight l1 solution."""
    from liblinear import liblinearutil

    X, y, X_test, y_test = train_test(name)
    model = liblinearutil.train(liblinearutil.problem(y, X), "-s 3 -e 1e-6 -c 1 -q")
    w, _ = model.get_decfun(model.get_labels().index(1))
    w = np.asarray(w, dtype=np.float64)
    optimum = primal_objective(make_problem(X, y, 1.0), w, "l1")
    accuracy = 100 * np.mean(np.where(X_test @ w > 0, 1.0, -1.0) == y_test)
    return optimum, float(accuracy)


def pegasos_on_a9a(epochs: int, seeds: range, name: str = "a9a"
                   ) -> tuple[list[float], list[float]]:
    """(relative excess primal, test accuracy in %) of Pegasos runs, one per seed."""
    X, y, X_test, y_test = train_test(name)
    optimum, _ = liblinear_a9a(name)
    excess, accuracy = [], []
    for seed in seeds:
        result = fit(X, y, solver="pegasos", epochs=epochs, seed=seed)
        assert result.exit_reason == "epochs_done"
        excess.append(result.primal_objective / optimum - 1)
        accuracy.append(100 * float(np.mean(result.predict(X_test) == y_test)))
    return excess, accuracy


@pytest.mark.parametrize("name", ["onehot", pytest.param("a9a", marks=pytest.mark.parity)])
def test_a9a_after_10_epochs(name: str) -> None:
    # Measured (2026-11, seeds 0-11, k = 1): the last iterate after 10 epochs is 21-148 %
    # above the optimum (median 37 %), test accuracy 70.2-84.6 % (median 82.2 %) against
    # LIBLINEAR's 84.99 %: lambda = 1/(C n) = 3e-5 makes the late steps eta_t = C n / t
    # still large (each moves w by ~0.1 x_i at t = 10 n). The bound is the measured median
    # with a margin; "within a few percent" takes ~100 epochs (next test).
    excess, accuracy = pegasos_on_a9a(10, range(8), name)
    print(name, "excess", np.round(excess, 3), "accuracy", np.round(accuracy, 2))
    assert min(excess) > 0
    assert float(np.median(excess)) < 0.6
    _, reference_accuracy = liblinear_a9a(name)
    # onehot, measured the same way (seeds 0-7): excess 26-67 % (median 35 %), accuracy
    # 77.9-84.6 % (median 81.5 %) against LIBLINEAR's 87.3 %: its noisier labels leave the
    # last iterate further behind, so its margin is 7 points (a9a's: 5)
    margin = {"a9a": 5.0, "onehot": 7.0}[name]
    assert float(np.median(accuracy)) > reference_accuracy - margin


@pytest.mark.slow
@pytest.mark.parametrize("name", ["onehot", pytest.param("a9a", marks=pytest.mark.parity)])
def test_a9a_after_100_epochs_is_within_a_few_percent(name: str) -> None:
    # Measured on a9a: median excess 3.2 % (1.5-6.1 %), median accuracy 84.55 % (min
    # 83.8 %).
    excess, accuracy = pegasos_on_a9a(100, range(6), name)
    print(name, "excess", np.round(excess, 3), "accuracy", np.round(accuracy, 2))
    assert float(np.median(excess)) < 0.05
    _, reference_accuracy = liblinear_a9a(name)
    assert float(np.median(accuracy)) >= reference_accuracy - 1.5


# --------------------------------------------------------------------------------------
# mini-batches, seeds, limits, progress


def test_mini_batch_sets_the_number_of_steps() -> None:
    X, y = random_sparse_problem(101, 6, 0.6, seed=6)
    for k, steps_per_epoch in ((1, 101), (10, 11), (101, 1), (500, 1)):
        result = fit(X, y, solver="pegasos", batch_size=k, epochs=3)
        assert result.exit_reason == "epochs_done"
        assert result.iterations == 3 * steps_per_epoch
        assert result.per_output[0]["epochs"] == 3.0
        assert result.per_output[0]["batch_size"] == k


def test_larger_batches_reduce_the_spread_over_seeds() -> None:
    # same number of examples seen; averaging k sub-gradients lowers the variance of a step
    X, y = random_sparse_problem(400, 10, 0.5, seed=7)
    spreads = []
    for k in (1, 32):
        objectives = [fit(X, y, solver="pegasos", batch_size=k, epochs=20,
                          seed=seed).primal_objective for seed in range(10)]
        spreads.append(np.std(objectives))
    assert spreads[1] < spreads[0]


def test_seed_determines_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = load("onehot")
    first = fit(X, y, solver="pegasos", batch_size=4, epochs=2, seed=11)
    second = fit(X, y, solver="pegasos", batch_size=4, epochs=2, seed=11)
    assert np.array_equal(first.coef, second.coef)
    # splitting the work into many small kernel calls changes nothing either
    monkeypatch.setattr(pegasos, "BUDGET", Budget(initial=1000, maximum=5000))
    chopped = fit(X, y, solver="pegasos", batch_size=4, epochs=2, seed=11)
    assert np.array_equal(first.coef, chopped.coef)
    other = fit(X, y, solver="pegasos", batch_size=4, epochs=2, seed=12)
    assert not np.array_equal(first.coef, other.coef)


def test_max_iter_reports_max_iter() -> None:
    X, y = load("onehot")
    result = fit(X, y, solver="pegasos", max_iter=1000)
    assert result.exit_reason == "max_iter"
    assert result.iterations == 1000
    assert np.all(np.isfinite(result.coef))
    assert math.isfinite(result.primal_objective)


def test_max_seconds_stops_the_solver() -> None:
    X, y = load("dense")
    result = fit(X, y, solver="pegasos", epochs=100_000, max_seconds=0.3)
    assert result.exit_reason == "max_seconds"
    assert 0.3 <= result.train_seconds < 0.8
    assert np.all(np.isfinite(result.coef))


def test_progress_events_and_cancel() -> None:
    X, y = load("dense")
    events: list[dict[str, Any]] = []
    result = fit(X, y, solver="pegasos", epochs=100_000, max_seconds=0.75,
                 progress=events.append)
    assert result.exit_reason == "max_seconds"
    assert 2 <= len(events) <= 4
    for event in events:
        assert {"iteration", "elapsed_s", "primal", "dual", "gap", "violation",
                "active_size", "epoch"} <= set(event)
        assert event["dual"] is None and event["gap"] is None
        assert event["primal"] > 0 and event["epoch"] > 0
    assert all(b["iteration"] > a["iteration"] for a, b in itertools.pairwise(events))
    assert result.timings["progress_s"] < 0.05 * result.train_seconds

    seen: list[dict[str, Any]] = []

    def cancel(event: dict[str, Any]) -> bool:
        seen.append(event)
        return True

    cancelled = fit(X, y, solver="pegasos", epochs=100_000, max_seconds=20.0, progress=cancel)
    assert cancelled.exit_reason == "cancelled"
    assert len(seen) == 1 and cancelled.iterations == seen[0]["iteration"]
    assert cancelled.train_seconds < 1.0


def test_non_finite_margin_stops_the_kernel() -> None:
    X, y = random_sparse_problem(20, 3, 0.8, seed=11)
    state = pegasos._PegasosState(make_problem(X, y), 1.0, 2, 0)
    state.v[:] = np.inf
    state.step_limit = 1000
    assert state.run(10**9) == pegasos._NON_FINITE
    assert state.step == 0
