"""The OCAS solver: its kernels against naive NumPy/SciPy versions, toy problems with known
answers, agreement with LIBLINEAR and DCD, threads, limits, progress and degenerate input."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from sklearn import datasets as skdata

from solvers import ocas
from solvers.backbone import ProgressMonitor
from solvers.inputs import as_csr_arrays
from solvers.objectives import LinearProblem, primal_objective
from solvers.params import validate_params
from solvers.train import fit
from testkit.datagen import text_like
from testkit.datasets import load_any, load_local
from tests.solvers.naive import augment, primal, random_sparse_problem


def make_problem(X: Any, y: np.ndarray, cost: Any = 1.0, bias_scale: float = 0.0) -> LinearProblem:
    arrays = as_csr_arrays(X)
    cost_array = np.broadcast_to(np.asarray(cost, dtype=np.float64), (arrays.n_rows,)).copy()
    return LinearProblem(arrays, np.asarray(y, dtype=np.float64), cost_array, bias_scale)


def solve(problem: LinearProblem, monitor: ProgressMonitor | None = None, **params: Any) -> Any:
    applied = validate_params("ocas", params)
    return ocas.solve(problem, applied, monitor or ProgressMonitor(None, None))


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def rows_of(X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    A = as_csr_arrays(X)
    return A.data, A.indices, A.indptr


# --------------------------------------------------------------------------------------
# kernels vs naive versions


@pytest.mark.parametrize("bias_scale", [0.0, 2.0])
def test_outputs_and_cutting_plane_match_numpy(bias_scale: float) -> None:
    X, y = random_sparse_problem(97, 6, 0.5, seed=1)
    Xa = augment(X, bias_scale or None)
    rng = np.random.default_rng(2)
    cost = rng.uniform(0.5, 2.0, 97)
    w = np.append(rng.normal(size=6), rng.normal() if bias_scale else 0.0)
    bounds = ocas.chunk_bounds(as_csr_arrays(X).indptr, 7)
    out = np.empty(97)
    ocas.signed_margins(rows_of(X), y, w, bias_scale, bounds, out)
    np.testing.assert_allclose(out, y * (Xa @ w[: Xa.shape[1]]), rtol=1e-13, atol=1e-13)

    # w_best moves by k towards w_t; the cut is taken at (1 - lam) w_best + lam w_t
    w_t = np.append(rng.normal(size=6), rng.normal() if bias_scale else 0.0)
    out_t = y * (Xa @ w_t[: Xa.shape[1]])
    out_best = out.copy()
    acc = np.zeros((bounds.shape[0] - 1, 7))
    sums = np.zeros((bounds.shape[0] - 1, 4))
    k, lam = 0.3, 0.1
    ocas._update_and_cut(rows_of(X), (y, cost), (out_best, out_t), (k, lam, bias_scale), bounds,
                         acc, sums)
    plane = np.empty(7)
    ocas.reduce_chunks(acc, plane)
    w_best = w + k * (w_t - w)
    expected_best = y * (Xa @ w_best[: Xa.shape[1]])
    np.testing.assert_allclose(out_best, expected_best, rtol=1e-12, atol=1e-12)
    w_c = (1 - lam) * w_best + lam * w_t
    violators = y * (Xa @ w_c[: Xa.shape[1]]) <= 1.0
    expected_plane = (cost * y * violators) @ Xa
    np.testing.assert_allclose(plane[: Xa.shape[1]], expected_plane, rtol=1e-12, atol=1e-12)
    assert sums[:, 1].sum() == pytest.approx(cost[violators].sum(), rel=1e-13)
    assert sums[:, 0].sum() == pytest.approx(
        cost @ np.maximum(0.0, 1.0 - expected_best), rel=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_exact_line_search_matches_a_brute_force_minimum(seed: int) -> None:
    X, y = random_sparse_problem(60, 5, 0.6, seed=seed)
    rng = np.random.default_rng(seed)
    cost = rng.uniform(0.2, 3.0, 60)
    w_best, w_t = rng.normal(size=5) * 0.3, rng.normal(size=5)
    if seed == 0:
        w_best[:] = 0.0  # the first iteration: from w_best = 0

    def G(k: float) -> float:
        return primal(X, y, cost, w_best + k * (w_t - w_best), "l1")

    out_best, out_t = y * (X @ w_best), y * (X @ w_t)
    bounds = ocas.chunk_bounds(as_csr_arrays(X).indptr, 6)
    breaks, jumps = np.empty(60), np.empty(60)
    sums = np.zeros((bounds.shape[0] - 1, 4))
    slope = ocas._breakpoints_kernel(out_best, out_t, cost, bounds, breaks, jumps, sums)
    direction = w_t - w_best
    k = ocas._line_search_root(breaks, jumps, bounds, sums, direction @ direction,
                               w_best @ direction + slope)
    assert k >= 0.0
    # G is convex and piecewise quadratic: compare with a bounded scalar minimiser on
    # [0, 10] (brute force) - the exact k can only be better
    grid = np.linspace(0.0, 10.0, 20001)
    values = np.array([G(g) for g in grid])
    start = grid[np.argmin(values)]
    brute = scipy.optimize.minimize_scalar(G, bounds=(max(0.0, start - 1e-3), start + 1e-3),
                                           method="bounded", options={"xatol": 1e-12})
    assert G(k) <= brute.fun + 1e-10 * abs(brute.fun)
    assert G(k) <= G(0.0)


def test_line_search_stays_at_zero_when_w_t_is_no_better() -> None:
    X, _ = random_sparse_problem(40, 4, 0.7, seed=3)
    cost = np.ones(40)
    w_best = np.zeros(4)
    out = np.zeros(40)
    bounds = ocas.chunk_bounds(as_csr_arrays(X).indptr, 5)
    breaks, jumps = np.empty(40), np.empty(40)
    sums = np.zeros((bounds.shape[0] - 1, 4))
    slope = ocas._breakpoints_kernel(out, out, cost, bounds, breaks, jumps, sums)
    assert slope == 0.0 and sums[:, 3].sum() == 0
    assert ocas._line_search_root(breaks, jumps, bounds, sums, 0.0, w_best @ w_best + slope) == 0


@pytest.mark.parametrize("seed", range(4))
def test_reduced_problem_solver_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = 8
    planes = rng.normal(size=(m - 1, 5)) * rng.uniform(0.1, 3.0, size=(m - 1, 1))
    H = np.zeros((m, m))
    H[1:, 1:] = planes @ planes.T
    b = np.append(0.0, rng.uniform(0.5, 3.0, m - 1))
    beta = np.zeros(m)
    beta[0] = 1.0
    grad = H @ beta - b
    steps = ocas._qp_simplex(H, b, beta, grad, m, 1e-13, 100_000)
    assert steps > 0
    assert beta.min() >= 0.0 and beta.sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(grad, H @ beta - b, atol=1e-10)

    def objective(x: np.ndarray) -> float:
        return float(0.5 * x @ H @ x - b @ x)

    reference = scipy.optimize.minimize(
        objective, np.full(m, 1.0 / m), jac=lambda x: H @ x - b, method="SLSQP",
        bounds=[(0.0, None)] * m,
        constraints=[{"type": "eq", "fun": lambda x: x.sum() - 1.0,
                      "jac": lambda x: np.ones(m)}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert objective(beta) <= reference.fun + 1e-9 * max(1.0, abs(reference.fun))
    assert ocas._qp_dual_value(b, beta, grad, m) == pytest.approx(-objective(beta), rel=1e-12)


# --------------------------------------------------------------------------------------
# toy problems with known answers


@pytest.mark.parametrize("C", [0.1, 0.25, 1.0, 5.0])
def test_two_point_problem_has_the_closed_form_optimum(C: float) -> None:
    # x = +1 (y = +1), x = -1 (y = -1), no bias: P(w) = w^2/2 + 2C max(0, 1 - w), w* = min(1, 2C)
    X = np.array([[1.0], [-1.0]])
    y = np.array([1.0, -1.0])
    result = fit(X, y, solver="ocas", C=C, bias="none", eps=1e-12)
    assert result.exit_reason == "converged"
    assert result.coef[0, 0] == pytest.approx(min(1.0, 2 * C), rel=1e-9)
    assert result.intercept[0] == 0.0
    assert result.duality_gap is not None and 0 <= result.duality_gap <= 1e-9


def test_separable_problem_gives_the_hard_margin_solution() -> None:
    X = np.array([[2.0, 1.0], [1.0, 2.0], [-2.0, -1.0], [-1.0, -2.0]])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    result = fit(X, y, solver="ocas", C=10.0, eps=1e-12)
    assert result.exit_reason == "converged"
    np.testing.assert_allclose(result.coef[0], [1 / 3, 1 / 3], rtol=1e-7)
    assert result.intercept[0] == pytest.approx(0.0, abs=1e-8)


# --------------------------------------------------------------------------------------
# agreement with LIBLINEAR (-s 3, tight) and with DCD


@pytest.fixture(scope="module")
def liblinear() -> Any:
    from liblinear import liblinearutil

    return liblinearutil


def liblinear_reference(liblinear: Any, X: Any, y: np.ndarray, C: float) -> tuple[float, Any]:
    """LIBLINEAR -s 3 -e 1e-6 -B 1 optimum, evaluated with our objective; and the problem."""
    model = liblinear.train(liblinear.problem(y, X, bias=1), f"-s 3 -e 1e-6 -B 1 -c {C} -q")
    w, b = model.get_decfun(0)
    positive = model.get_labels()[0]
    problem = make_problem(X, np.where(y == positive, 1.0, -1.0), C, bias_scale=1.0)
    return primal_objective(problem, np.append(np.asarray(w, dtype=np.float64), b), "l1"), problem


def text_set() -> tuple[sp.csr_matrix, np.ndarray]:
    return text_like(4000, 3000, seed=5)


@pytest.mark.parametrize("name", [
    "onehot", "dense", "text",  # like a9a, ijcnn1 (testkit.datasets) and text
    *(pytest.param(name, marks=pytest.mark.parity) for name in ["a9a", "w8a", "ijcnn1"])])
def test_primal_objective_matches_liblinear(name: str, liblinear: Any) -> None:
    X, y = text_set() if name == "text" else load_any(name)
    reference, _ = liblinear_reference(liblinear, X, y, 1.0)
    result = fit(X, y, solver="ocas", C=1.0)
    assert result.exit_reason == "converged"
    assert relative(result.primal_objective, reference) < 1e-3
    # the certificate: dual <= optimum <= primal, gap <= eps |primal|
    assert result.dual_objective is not None and result.duality_gap is not None
    assert result.dual_objective <= reference * (1 + 1e-9)
    assert 0 <= result.duality_gap <= 1e-3 * result.primal_objective * (1 + 1e-9)


@pytest.mark.parametrize(
    ("name", "C"),
    [("cancer", 10.0), pytest.param("onehot", 1.0, marks=pytest.mark.slow), ("text", 1.0)],
)
def test_weights_agree_with_dcd(name: str, C: float) -> None:
    X, y = text_set() if name == "text" else load_local(name)
    ours = fit(X, y, solver="ocas", C=C, eps=1e-6)
    dcd = fit(X, y, solver="dcd", loss="l1", C=C, eps=1e-4, max_iter=100_000)
    w_ours = np.append(ours.coef[0], ours.intercept[0])
    w_dcd = np.append(dcd.coef[0], dcd.intercept[0])
    assert np.linalg.norm(w_ours - w_dcd) <= 1e-2 * np.linalg.norm(w_dcd)
    assert relative(ours.primal_objective, dcd.primal_objective) < 1e-4


def test_bias_none_and_class_weights_match_the_naive_objective() -> None:
    X, y = random_sparse_problem(300, 8, 0.5, seed=21)
    result = fit(X, y, solver="ocas", C=2.0, bias="none", class_weight={"1": 3.0}, eps=1e-8)
    cost = np.where(y > 0, 6.0, 2.0)
    assert result.intercept[0] == 0.0
    assert result.primal_objective == pytest.approx(primal(X, y, cost, result.coef[0], "l1"),
                                                    rel=1e-12)
    assert result.duality_gap is not None and result.duality_gap <= 1e-8 * result.primal_objective


# --------------------------------------------------------------------------------------
# threads, determinism, limits, progress


def test_threads_do_not_change_the_result() -> None:
    X, y = text_set()
    one = fit(X, y, solver="ocas", threads=1)
    two = fit(X, y, solver="ocas", threads=2)
    again = fit(X, y, solver="ocas", threads=1)
    assert np.array_equal(one.coef, again.coef)  # single thread: deterministic
    # the chunks do not depend on the thread count: even bit-identical
    assert relative(two.primal_objective, one.primal_objective) < 1e-9
    assert np.array_equal(one.coef, two.coef) and one.iterations == two.iterations


def test_threads_setting_is_restored() -> None:
    import numba

    before = numba.get_num_threads()
    X, y = random_sparse_problem(50, 4, 0.5, seed=4)
    result = fit(X, y, solver="ocas", threads=64)
    assert numba.get_num_threads() == before
    assert result.per_output[0]["threads"] == min(64, numba.config.NUMBA_NUM_THREADS)


def test_max_iter_reports_max_iter_and_keeps_a_usable_model() -> None:
    X, y = load_local("onehot")
    result = fit(X, y, solver="ocas", max_iter=2)
    assert result.exit_reason == "max_iter"
    assert result.iterations == 2
    assert np.all(np.isfinite(result.coef)) and np.isfinite(result.intercept[0])
    assert np.mean(result.predict(X) == y) > 0.7
    assert result.dual_objective is not None and result.duality_gap is not None
    assert 0 < result.dual_objective < result.primal_objective


def test_fallback_false_makes_max_iter_a_hard_cap() -> None:
    """Unscaled breast cancer is far from its optimum after two cutting planes: by default
    the fallback rule continues with the interior point (569 rows), past max_iter, to a
    certified model; fallback=False (hinge.sklearn's tol_rule="liblinear") stops at
    max_iter, uncertified, with the certificate's warning."""
    X, y = skdata.load_breast_cancer(return_X_y=True)
    continued = fit(X, y, solver="ocas", max_iter=2)
    assert [step["solver"] for step in continued.path] == ["ocas", "gram"]
    assert continued.converged and continued.iterations > 2
    capped = fit(X, y, solver="ocas", max_iter=2, fallback=False)
    assert [(step["solver"], step["exit"]) for step in capped.path] == [("ocas", "max_iter")]
    assert capped.iterations == 2 and capped.exit_reason == "max_iter"
    assert not capped.converged
    assert len(capped.warnings) == 1 and "ocas stopped at max_iter" in capped.warnings[0]


def test_progress_events_and_cancellation() -> None:
    X, y = load_local("onehot")
    events: list[dict[str, Any]] = []

    def cancel_second(event: dict[str, Any]) -> bool:
        events.append(event)
        return len(events) >= 2

    monitor = ProgressMonitor(cancel_second, None, interval=0.0)
    result = solve(make_problem(X, y, 1.0, 1.0), monitor, eps=1e-12, max_iter=10_000)
    assert result.exit_reason == "cancelled"
    assert len(events) == 2 and result.iterations == events[-1]["iteration"]
    for event in events:
        assert {"iteration", "elapsed_s", "primal", "dual", "gap", "violation",
                "active_size"} <= set(event)
        assert event["gap"] == pytest.approx(event["primal"] - event["dual"])
        assert event["gap"] >= 0 and 0 < event["active_size"] <= X.shape[0]
    assert events[1]["primal"] <= events[0]["primal"]  # F(w_best) never increases
    assert events[1]["dual"] >= events[0]["dual"]  # the reduced problems only grow
    assert np.all(np.isfinite(result.w))


def test_max_seconds_stops_the_solver() -> None:
    X, y = load_local("onehot")
    result = fit(X, y, solver="ocas", C=100.0, eps=1e-12, max_seconds=0.3)
    assert result.exit_reason == "max_seconds"
    assert result.train_seconds < 0.3 + 1.0
    assert np.all(np.isfinite(result.coef))


# --------------------------------------------------------------------------------------
# degenerate input


@pytest.mark.parametrize("bias", ["augment", "none"])
def test_all_zero_rows(bias: str) -> None:
    X, y = random_sparse_problem(60, 5, 0.6, seed=6)
    X[::4] = 0.0
    result = fit(sp.csr_matrix(X), y, solver="ocas", bias=bias, eps=1e-9)
    assert result.exit_reason == "converged"
    w = result.coef[0] if bias == "none" else np.append(result.coef[0], result.intercept[0])
    Xa = augment(X, 1.0 if bias == "augment" else None)
    assert result.primal_objective == pytest.approx(primal(Xa, y, np.ones(60), w, "l1"),
                                                    rel=1e-12)


def test_only_zero_rows_without_bias_give_w_zero() -> None:
    X = sp.csr_matrix((4, 3))
    result = fit(X, np.array([1.0, -1.0, 1.0, -1.0]), solver="ocas", bias="none")
    assert result.exit_reason == "converged"
    assert np.all(result.coef == 0.0)
    assert result.primal_objective == pytest.approx(4.0)


def test_duplicate_rows_equal_doubled_cost_and_constant_feature_is_harmless() -> None:
    X, y = random_sparse_problem(80, 4, 0.7, seed=7)
    X = np.hstack([X, np.full((80, 1), 3.0)])  # a constant feature
    doubled = fit(np.vstack([X, X]), np.concatenate([y, y]), solver="ocas", eps=1e-10)
    weighted = fit(X, y, solver="ocas", C=2.0, eps=1e-10)
    assert relative(doubled.primal_objective, weighted.primal_objective) < 1e-9
    np.testing.assert_allclose(doubled.coef, weighted.coef, rtol=1e-5, atol=1e-7)
    assert math.isfinite(doubled.intercept[0])
