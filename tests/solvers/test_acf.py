"""The ACF solver (Glasmachers & Dogan 2013): a line-by-line naive reference of Algorithms
3-5, toy problems with known answers, agreement with DCD and LIBLINEAR, limits, progress,
determinism and degenerate inputs."""

from __future__ import annotations

import functools
import itertools
import math
import time
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import acf, dual_cd
from solvers.backbone import Budget, ProgressMonitor, seed_state
from solvers.dual_cd import STATUS_EXIT
from solvers.inputs import as_csr_arrays
from solvers.objectives import LinearProblem, primal_objective
from solvers.params import validate_params
from solvers.svmlight import load_svmlight
from solvers.train import fit
from testkit.datasets import LOCAL_NAMES, load_local
from testkit.paths import DATA_DIR
from tests.solvers.naive import (
    augment,
    dual_by_lbfgsb,
    dual_value,
    primal,
    primal_l2_by_lbfgs,
    qbar,
    random_sparse_problem,
    upper_bounds,
    w_of_alpha,
)

LOSSES = ("l1", "l2")
LIBLINEAR_SOLVER = {"l1": 3, "l2": 1}


def make_problem(X: Any, y: np.ndarray, cost: Any = 1.0, bias_scale: float = 0.0) -> LinearProblem:
    arrays = as_csr_arrays(X)
    cost_array = np.broadcast_to(np.asarray(cost, dtype=np.float64), (arrays.n_rows,)).copy()
    return LinearProblem(arrays, np.asarray(y, dtype=np.float64), cost_array, bias_scale)


def solve(problem: LinearProblem, monitor: ProgressMonitor | None = None, **params: Any) -> Any:
    applied = validate_params("acf", params)
    return acf.solve(problem, applied, monitor or ProgressMonitor(None, None))


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


@functools.cache
def load(name: str, n_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """A local set (testkit.datasets.load_local), or a shared LIBSVM set through the
    project's own parser (parity tests only); cached."""
    if name in LOCAL_NAMES:
        return load_local(name)
    parsed = load_svmlight(DATA_DIR / f"{name}.xz")
    return parsed.to_csr(n_features), parsed.y


@functools.cache
def text_like_problem() -> tuple[sp.csr_matrix, np.ndarray]:
    """A small generated bag-of-words problem (power-law feature frequencies)."""
    from testkit.datagen import text_like

    return text_like(3000, 2000, seed=3)


# --------------------------------------------------------------------------------------
# the naive reference: Algorithms 3-5 on dense arrays, with the kernel's random numbers


def naive_acf(
    X: np.ndarray, y: np.ndarray, cost: np.ndarray, loss: str, eps: float, seed: int,
    max_sweeps: int,
) -> tuple[np.ndarray, int, int]:
    """Glasmachers & Dogan 2013, Algorithm 3 with Algorithms 4 and 5, literally: the dual
    gradient from the explicit Qbar, the schedule as a Python list. It draws the same
    random numbers as the kernel (acf.next_unit for Algorithm 4's coins, acf.next_below
    for the shuffle), so both follow the same path. Returns (alpha, sweeps, steps)."""
    Q = qbar(X, y, cost, loss)
    upper = upper_bounds(cost, loss)
    n = X.shape[0]
    c, p_min, p_max = 1 / 5, 1 / 20, 20.0
    rng = np.array([seed_state(seed)], dtype=np.uint64)
    alpha = np.zeros(n)
    p = np.ones(n)
    reference_gain = 0.0
    can_stop = True
    steps = 0
    for sweep in range(max_sweeps):
        v = 0.0
        # Algorithm 4: the schedule
        N = 0.0
        for value in p:
            N += value
        schedule: list[int] = []
        for i in range(n):
            if len(schedule) >= n:
                break
            m = p[i] * (n - len(schedule)) / N
            copies = math.floor(m)
            if acf.next_unit(rng) < m - copies:
                copies += 1
            schedule += [i] * min(copies, n - len(schedule))
            N -= p[i]
        for t in range(len(schedule) - 1):  # "in random order"
            k = t + acf.next_below(rng, len(schedule) - t)
            schedule[t], schedule[k] = schedule[k], schedule[t]
        for i in schedule:
            g = 1.0 - Q[i] @ alpha  # the paper's g: derivative of the maximised dual
            if alpha[i] > 0 and -g > v:
                v = -g
            if alpha[i] < upper[i] and g > v:
                v = g
            mu = min(max(g / Q[i, i], -alpha[i]), upper[i] - alpha[i])
            alpha[i] += mu
            steps += 1
            # Algorithm 5
            gain = mu * (g - mu / 2 * Q[i, i])
            if sweep == 0:
                reference_gain += gain / n
            else:
                h = c * (gain / reference_gain - 1)
                p[i] = min(max(math.exp(h) * p[i], p_min), p_max)
                reference_gain = (1 - 1 / n) * reference_gain + gain / n
        if v < eps:
            if can_stop:
                return alpha, sweep + 1, steps
            p[:] = 1.0
            can_stop = True
        else:
            can_stop = False
    return alpha, max_sweeps, steps


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("bias_scale", [None, 1.0])
def test_kernel_follows_the_naive_algorithms_3_to_5(loss: str, bias_scale: float | None) -> None:
    X, y = random_sparse_problem(40, 5, 0.6, seed=21)
    cost = np.where(y > 0, 1.5, 0.6)
    Xa = augment(X, bias_scale)
    for max_sweeps in (1, 2, 7, 10_000):
        alpha_ref, sweeps, steps = naive_acf(Xa, y, cost, loss, 1e-6, 4, max_sweeps)
        solution = solve(make_problem(X, y, cost, bias_scale or 0.0), loss=loss, eps=1e-6,
                         seed=4, max_iter=max_sweeps)
        assert solution.iterations == sweeps
        assert solution.details["updates"] == steps
        np.testing.assert_allclose(solution.alpha, alpha_ref, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(solution.w, w_of_alpha(Xa, y, solution.alpha), atol=1e-11)
    assert solution.exit_reason == "converged" and sweeps < 10_000


def test_schedule_is_unbiased_and_has_n_entries() -> None:
    # Algorithm 4: E[copies of i] = p_i n / psum, and the list has exactly n entries
    preference = np.array([0.05, 1.0, 20.0, 3.0, 0.5, 7.0, 1.0, 0.05, 2.0, 10.0])
    n = preference.shape[0]
    schedule = np.zeros(n, dtype=np.int64)
    rng = np.array([seed_state(1)], dtype=np.uint64)
    counts = np.zeros(n)
    builds = 4000
    for _ in range(builds):
        length, distinct = acf._build_schedule(preference, schedule, rng)
        assert length == n
        copies = np.bincount(schedule, minlength=n)
        assert distinct == np.count_nonzero(copies)
        counts += copies
    expected = preference * n / preference.sum()
    np.testing.assert_allclose(counts / builds, expected, atol=0.05)
    # uniform preferences: every variable exactly once, in a shuffled order
    length, distinct = acf._build_schedule(np.ones(n), schedule, rng)
    assert length == n and distinct == n
    assert sorted(schedule.tolist()) == list(range(n))


def test_preference_update_rule() -> None:
    # p <- clip(p exp(c (gain / gain_ref - 1)), 1/20, 20) with c = 1/5
    update = acf._adapted_preference
    assert update(1.0, 2.0, 2.0) == 1.0
    assert update(1.0, 0.0, 2.0) == pytest.approx(math.exp(-0.2), rel=1e-15)
    assert update(1.0, 12.0, 2.0) == pytest.approx(math.exp(1.0), rel=1e-15)
    assert update(19.0, 1e6, 1.0) == 20.0
    assert update(0.051, 0.0, 1.0) == 0.05
    assert update(3.0, 1e308, 1e-300) == 20.0  # overflowing exp is clipped
    # no progress seen yet (gain_ref = 0): a zero gain keeps p, a positive one gets p_max
    assert update(0.7, 0.0, 0.0) == 0.7
    assert update(0.7, 1e-9, 0.0) == 20.0


# --------------------------------------------------------------------------------------
# toy problems with known answers and tiny problems vs SciPy


@pytest.mark.parametrize("C", [0.1, 0.25, 1.0, 5.0])
def test_two_point_problem_has_the_closed_form_optimum(C: float) -> None:
    # x = +1 (y = +1), x = -1 (y = -1), no bias: P(w) = w^2/2 + 2C loss(1 - w)
    # l1: w* = min(1, 2C);  l2: w* = 4C / (1 + 4C)
    X = np.array([[1.0], [-1.0]])
    y = np.array([1.0, -1.0])
    for loss, expected in (("l1", min(1.0, 2 * C)), ("l2", 4 * C / (1 + 4 * C))):
        result = fit(X, y, solver="acf", loss=loss, C=C, bias="none", eps=1e-10)
        assert result.exit_reason == "converged"
        assert result.coef[0, 0] == pytest.approx(expected, rel=1e-9)
        assert result.duality_gap == pytest.approx(0.0, abs=1e-9)


def test_separable_problem_with_bias_is_symmetric() -> None:
    X = np.array([[2.0, 1.0], [1.0, 2.0], [-2.0, -1.0], [-1.0, -2.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    result = fit(X, y, solver="acf", loss="l1", C=10.0, eps=1e-10)
    assert result.intercept[0] == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(result.coef[0], [1 / 3, 1 / 3], rtol=1e-8)


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
        lower = dual_value(Xa, y, cost, alpha_ref, loss)
        upper = primal(Xa, y, cost, w_ref, loss)
    solution = solve(
        make_problem(X, y, cost, bias_scale or 0.0), loss=loss, eps=1e-9, max_iter=100_000
    )
    assert solution.exit_reason == "converged"
    assert lower * (1 - 1e-9) <= solution.primal <= upper * (1 + 1e-9)
    assert -1e-12 * solution.primal <= solution.gap < 1e-8 * solution.primal
    assert solution.dual == pytest.approx(dual_value(Xa, y, cost, solution.alpha, loss), rel=1e-10)
    np.testing.assert_allclose(solution.w, w_ref, rtol=1e-4, atol=1e-5)
    assert np.all(solution.alpha >= 0)
    if loss == "l1":
        assert np.all(solution.alpha <= cost)


# --------------------------------------------------------------------------------------
# agreement with LIBLINEAR and with DCD


def liblinear_primal(X: sp.csr_matrix, y: np.ndarray, loss: str, C: float) -> float:
    """Our primal objective of LIBLINEAR's tight solution (-e 1e-6 -B 1), positive class =
    the larger label, as in `fit`."""
    from liblinear import liblinearutil

    model = liblinearutil.train(
        liblinearutil.problem(y, X, bias=1),
        f"-s {LIBLINEAR_SOLVER[loss]} -e 1e-6 -B 1 -c {C:g} -q",
    )
    positive = float(np.unique(y)[1])
    w, b = model.get_decfun(model.get_labels().index(positive))
    problem = make_problem(X, np.where(y == positive, 1.0, -1.0), C, bias_scale=1.0)
    return primal_objective(problem, np.append(np.asarray(w, dtype=np.float64), b), loss)


# LIBLINEAR's tight -s 1 runs, and everything on w8a, take several seconds each.
# onehot and dense (testkit.datasets) are like a9a and ijcnn1; the shared sets themselves
# are parity tests.
PARITY = pytest.mark.parity
_LIBLINEAR_CASES = [
    ("onehot", "l1"), ("dense", "l1"), ("text-like", "l1"), ("text-like", "l2"),
    pytest.param("onehot", "l2", marks=pytest.mark.slow),
    pytest.param("dense", "l2", marks=pytest.mark.slow),
    pytest.param("a9a", "l1", marks=PARITY), pytest.param("ijcnn1", "l1", marks=PARITY),
    pytest.param("a9a", "l2", marks=[pytest.mark.slow, PARITY]),
    pytest.param("ijcnn1", "l2", marks=[pytest.mark.slow, PARITY]),
    pytest.param("w8a", "l1", marks=[pytest.mark.slow, PARITY]),
    pytest.param("w8a", "l2", marks=[pytest.mark.slow, PARITY]),
]


@pytest.mark.parametrize(("name", "loss"), _LIBLINEAR_CASES)
def test_primal_objective_matches_liblinear(name: str, loss: str) -> None:
    X, y = text_like_problem() if name == "text-like" else load(name)
    C = 1.0
    reference = liblinear_primal(X, y, loss, C)
    result = fit(X, y, solver="acf", loss=loss, C=C, eps=0.01)
    assert result.exit_reason == "converged"
    assert relative(result.primal_objective, reference) < 1e-3
    # the duality gap certifies the primal; the dual never exceeds the optimum
    assert result.duality_gap is not None and result.dual_objective is not None
    assert 0 <= result.duality_gap < 1e-3 * result.primal_objective
    assert result.dual_objective <= reference * (1 + 1e-12)
    assert result.per_output[0]["updates"] >= X.shape[0]


@pytest.mark.parametrize("loss", LOSSES)
def test_default_eps_converges_after_a_uniform_sweep(loss: str) -> None:
    X, y = load("dense")
    result = fit(X, y, solver="acf", loss=loss)
    assert result.exit_reason == "converged"
    out = result.per_output[0]
    assert out["violation"] < 0.1
    assert out["active_size"] == X.shape[0]  # the confirming sweep visits every variable
    assert result.duality_gap is not None
    assert 0 < result.duality_gap < 0.01 * result.primal_objective


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("C", [1.0, 10.0, 100.0])
def test_acf_and_dcd_agree_on_w(loss: str, C: float) -> None:
    # the primal is strongly convex: both must find the same w at a tight tolerance
    X, y = text_like_problem()
    ours = fit(X, y, solver="acf", loss=loss, C=C, eps=1e-5, max_iter=1_000_000)
    theirs = fit(X, y, solver="dcd", loss=loss, C=C, eps=1e-5, max_iter=1_000_000)
    assert ours.exit_reason == theirs.exit_reason == "converged"
    w_ours = np.append(ours.coef[0], ours.intercept)
    w_theirs = np.append(theirs.coef[0], theirs.intercept)
    assert np.linalg.norm(w_ours - w_theirs) <= 1e-2 * np.linalg.norm(w_theirs)
    assert relative(ours.primal_objective, theirs.primal_objective) < 1e-4


# --------------------------------------------------------------------------------------
# limits, exit reasons, progress


def test_max_iter_reports_max_iter_and_keeps_a_usable_model() -> None:
    X, y = load("onehot")
    result = fit(X, y, solver="acf", loss="l1", max_iter=2, fallback=False)
    assert result.exit_reason == "max_iter"
    assert result.iterations == 2
    assert result.per_output[0]["updates"] == 2 * X.shape[0]  # two uniform-length sweeps
    assert np.all(np.isfinite(result.coef)) and np.isfinite(result.intercept[0])
    predictions = result.predict(X)
    assert set(np.unique(predictions)) <= {-1.0, 1.0}
    assert np.mean(predictions == y) > 0.7
    assert result.dual_objective is not None
    assert 0 < result.dual_objective < result.primal_objective


def test_max_seconds_stops_the_solver() -> None:
    X, y = load("dense")
    started = time.perf_counter()
    # C = 1000: far from the optimum after 0.3 s (at C = 1 a fast machine nearly converges,
    # and the gap can round to -4e-12). acf alone: with its follow-up, ocas got the second
    # half of the 0.3 s and, on a quiet machine, certified the fit (CI, stop 21).
    result = fit(X, y, solver="acf", loss="l1", C=1000.0, eps=1e-12, max_iter=10_000_000,
                 max_seconds=0.3, fallback=False)
    elapsed = time.perf_counter() - started
    assert result.exit_reason == "max_seconds"
    assert 0.3 <= result.train_seconds < 0.3 + 0.5
    assert elapsed < 1.5
    assert np.all(np.isfinite(result.coef))
    assert result.duality_gap is not None and result.duality_gap > 0


def test_progress_events_are_throttled_and_complete() -> None:
    X, y = load("onehot")
    events: list[dict[str, Any]] = []
    # C = 1000: takes several seconds even on a fast machine (at C = 1 it may converge)
    result = fit(X, y, solver="acf", loss="l1", C=1000.0, eps=1e-12, max_iter=10_000_000,
                 max_seconds=0.75, progress=events.append,
                 fallback=False)  # acf alone: with a follow-up it gets half of max_seconds
    assert result.exit_reason == "max_seconds"
    assert 2 <= len(events) <= 4
    for event in events:
        assert {"iteration", "elapsed_s", "primal", "dual", "gap", "violation",
                "active_size"} <= set(event)
        assert event["gap"] == pytest.approx(event["primal"] - event["dual"])
        assert event["gap"] >= 0
        assert event["violation"] > 0
        assert 0 < event["active_size"] <= X.shape[0]
    iterations = [e["iteration"] for e in events]
    assert iterations == sorted(set(iterations)) and iterations[0] >= 1
    assert all(b["elapsed_s"] - a["elapsed_s"] >= 0.2 for a, b in itertools.pairwise(events))
    assert result.timings["progress_s"] < 0.05 * result.train_seconds


def test_progress_returning_true_cancels() -> None:
    X, y = load("onehot")
    events: list[dict[str, Any]] = []

    def cancel(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    result = fit(X, y, solver="acf", loss="l2", eps=1e-12, max_iter=10_000_000,
                 max_seconds=20.0, progress=cancel)
    assert result.exit_reason == "cancelled"
    assert len(events) == 1
    assert result.iterations == events[0]["iteration"]
    assert result.train_seconds < 1.0
    assert np.all(np.isfinite(result.coef))


def test_non_finite_gradient_stops_the_kernel() -> None:
    X, y = random_sparse_problem(20, 3, 0.8, seed=11)
    state = acf._AcfState(make_problem(X, y, 1.0, 1.0),
                          {"loss": "l1", "seed": 0, "eps": 0.1, "max_iter": 1000})
    state.w[:] = np.inf
    assert STATUS_EXIT[state.run(10**9)] == "numerical_error"


def test_overflowing_rows_are_refused() -> None:
    X = np.array([[1e200, 0.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="scale the features"):
        fit(X, np.array([1.0, -1.0]), solver="acf")


# --------------------------------------------------------------------------------------
# determinism


def test_same_seed_gives_bit_identical_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = text_like_problem()
    first = fit(X, y, solver="acf", loss="l1", C=10.0, eps=1e-3, seed=42)
    second = fit(X, y, solver="acf", loss="l1", C=10.0, eps=1e-3, seed=42)
    assert np.array_equal(first.coef, second.coef)
    assert first.iterations == second.iterations
    assert first.per_output[0]["updates"] == second.per_output[0]["updates"]
    # splitting the work into many small kernel calls changes nothing either
    monkeypatch.setattr(dual_cd, "BUDGET", Budget(initial=1000, maximum=5000))
    chopped = fit(X, y, solver="acf", loss="l1", C=10.0, eps=1e-3, seed=42)
    assert np.array_equal(first.coef, chopped.coef)
    other = fit(X, y, solver="acf", loss="l1", C=10.0, eps=1e-3, seed=43)
    assert not np.array_equal(first.coef, other.coef)
    assert relative(other.primal_objective, first.primal_objective) < 1e-3


def test_unit_draws_are_uniform_enough() -> None:
    rng = np.array([seed_state(0)], dtype=np.uint64)
    draws = np.array([acf.next_unit(rng) for _ in range(10_000)])
    assert draws.min() >= 0.0 and draws.max() < 1.0
    counts = np.histogram(draws, bins=10, range=(0.0, 1.0))[0]
    assert np.all(np.abs(counts - 1000) < 150)


# --------------------------------------------------------------------------------------
# degenerate inputs


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("bias", ["augment", "none"])
def test_all_zero_rows(loss: str, bias: str) -> None:
    X, y = random_sparse_problem(50, 4, 0.6, seed=13)
    X[::5] = 0.0  # every fifth row has no nonzero at all
    result = fit(sp.csr_matrix(X), y, solver="acf", loss=loss, bias=bias, eps=1e-8,
                 max_iter=100_000)
    reference = fit(sp.csr_matrix(X), y, solver="dcd", loss=loss, bias=bias, eps=1e-8,
                    max_iter=100_000)
    assert result.exit_reason == "converged"
    np.testing.assert_allclose(result.coef, reference.coef, rtol=1e-5, atol=1e-6)
    assert result.duality_gap == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("loss", LOSSES)
def test_duplicate_rows_act_like_a_doubled_cost(loss: str) -> None:
    # each row twice with cost C has the primal of each row once with cost 2C
    X, y = random_sparse_problem(40, 5, 0.6, seed=14)
    doubled = fit(np.vstack([X, X]), np.concatenate([y, y]), solver="acf", loss=loss,
                  eps=1e-9, max_iter=100_000)
    weighted = fit(X, y, solver="acf", loss=loss, C=2.0, eps=1e-9, max_iter=100_000)
    assert doubled.exit_reason == weighted.exit_reason == "converged"
    np.testing.assert_allclose(doubled.coef, weighted.coef, rtol=1e-6, atol=1e-7)
    assert doubled.primal_objective == pytest.approx(weighted.primal_objective, rel=1e-9)


@pytest.mark.parametrize("loss", LOSSES)
def test_constant_feature(loss: str) -> None:
    # a column equal to 3 everywhere acts as a (regularised) bias of scale 3
    X, y = random_sparse_problem(60, 4, 0.6, seed=15)
    with_column = fit(np.hstack([X, np.full((60, 1), 3.0)]), y, solver="acf", loss=loss,
                      bias="none", eps=1e-9, max_iter=100_000)
    augmented = fit(X, y, solver="acf", loss=loss, bias="augment", bias_scale=3.0, eps=1e-9,
                    max_iter=100_000)
    assert with_column.exit_reason == augmented.exit_reason == "converged"
    np.testing.assert_allclose(with_column.coef[0, :4], augmented.coef[0], rtol=1e-6,
                               atol=1e-7)
    assert with_column.coef[0, 4] * 3.0 == pytest.approx(augmented.intercept[0], rel=1e-6)
