"""The TRON solver: kernels against dense formulas, certified optima, agreement with
LIBLINEAR -s 2 / -s 0, threads, class weights, limits, progress, warm start.

Certificates used throughout: f is 1-strongly convex, so for any w
    f(w) - f* <= ||grad f(w)||^2 / 2   and   ||w - w*|| <= ||grad f(w)||;
a reference (L-BFGS, LIBLINEAR) is trusted only as far as its own gradient says.
"""

from __future__ import annotations

import itertools
from typing import Any

import numba
import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from scipy.special import expit

from solvers import _tron_kernels as kernels
from solvers import grain, parallel, tron
from solvers.objectives import LinearProblem, primal_objective
from solvers.train import ProgressMonitor, as_csr_arrays
from testkit.datasets import LOCAL_NAMES, load_dataset, load_local

LOSSES = ("l2", "logistic")
LIBLINEAR_SOLVER = {"l2": 2, "logistic": 0}


def make_problem(X: Any, y: np.ndarray, cost: Any = 1.0, bias_scale: float = 0.0) -> LinearProblem:
    arrays = as_csr_arrays(X)
    cost_array = np.broadcast_to(np.asarray(cost, dtype=np.float64), (arrays.n_rows,)).copy()
    return LinearProblem(arrays, np.asarray(y, dtype=np.float64), cost_array, bias_scale)


def run(problem: LinearProblem, monitor: ProgressMonitor | None = None,
        w0: np.ndarray | None = None, **params: Any) -> Any:
    return tron.solve(problem, {**tron.DEFAULTS, **params},
                      monitor or ProgressMonitor(None, None), w0=w0)


def augmented(problem: LinearProblem) -> sp.csr_matrix:
    """X with the bias column B appended (when the problem has one), as SciPy CSR."""
    X = problem.X
    matrix = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.n_rows, X.n_features))
    if problem.bias_scale > 0:
        matrix = sp.hstack([matrix, np.full((X.n_rows, 1), problem.bias_scale)]).tocsr()
    return matrix


def objective(problem: LinearProblem, w: np.ndarray, loss: str) -> float:
    """f(w), dense NumPy (log(1 + exp(-m)) as logaddexp)."""
    m = problem.y * (augmented(problem) @ w)
    losses = np.maximum(0.0, 1.0 - m) ** 2 if loss == "l2" else np.logaddexp(0.0, -m)
    return float(0.5 * w @ w + problem.cost @ losses)


def gradient(problem: LinearProblem, w: np.ndarray, loss: str) -> np.ndarray:
    """grad f(w) = w + X'u, u_i = 2 C_i y_i (m_i - 1) [m_i < 1] or -C_i y_i sigma(-m_i)."""
    Xa = augmented(problem)
    m = problem.y * (Xa @ w)
    if loss == "l2":
        u = np.where(m < 1.0, 2.0 * problem.cost * problem.y * (m - 1.0), 0.0)
    else:
        u = -problem.cost * problem.y * expit(-m)
    return w + Xa.T @ u


def tolerance(problem: LinearProblem, eps: float) -> float:
    """LIBLINEAR's eps' = eps * max(min(#pos, #neg), 1) / n."""
    positives = int(np.sum(problem.y > 0))
    n = problem.y.shape[0]
    return eps * max(min(positives, n - positives), 1) / n


def assert_converged_claim(problem: LinearProblem, result: Any, loss: str, eps: float) -> None:
    """`converged` must mean ||grad f(w)|| <= eps' ||grad f(0)|| at the returned w."""
    assert result.exit_reason == "converged"
    g = np.linalg.norm(gradient(problem, result.w, loss))
    g0 = np.linalg.norm(gradient(problem, np.zeros(problem.n_weights), loss))
    assert g <= tolerance(problem, eps) * g0 * (1 + 1e-9)
    assert result.violation == pytest.approx(g / g0, rel=1e-6, abs=1e-13)  # rounding of g


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def random_problem(n: int, d: int, seed: int, density: float = 0.5
                   ) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * (rng.random((n, d)) < density)
    y = np.where(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    y[0], y[1] = 1.0, -1.0
    return X, y


def unscaled_cancer() -> tuple[sp.csr_matrix, np.ndarray]:
    """cancer (testkit.bundled) with its columns multiplied by seeded factors from 1e-2 to
    1e3."""
    X, y = load_local("cancer")
    factors = 10.0 ** np.random.default_rng(12).uniform(-2.0, 3.0, size=X.shape[1])
    return sp.csr_matrix(X @ sp.diags(factors)), y


def binary_labels(y: np.ndarray, positive: float | None = None) -> np.ndarray:
    return np.where(y == (y.max() if positive is None else positive), 1.0, -1.0)


# --------------------------------------------------------------------------------------
# kernels against dense formulas


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("bias_scale", [0.0, 1.0, 2.5])
def test_kernels_match_dense_formulas(loss: str, bias_scale: float) -> None:
    X, y = random_problem(60, 7, seed=1)
    rng = np.random.default_rng(2)
    problem = make_problem(X, y, rng.uniform(0.1, 3.0, size=60), bias_scale)
    kind = kernels.L2 if loss == "l2" else kernels.LOGISTIC
    state = tron._TronState(problem.X, problem.y, problem.cost, bias_scale, kind)
    assert state.bounds.shape[0] - 1 > 1  # several chunks: the reductions are exercised
    w = np.zeros(problem.X.n_features + 1)
    w[: problem.n_weights] = rng.normal(size=problem.n_weights) * 0.5
    state.w[:] = w
    state.evaluate()
    wn = w[: problem.n_weights]
    Xa = augmented(problem)
    assert state.f == pytest.approx(objective(problem, wn, loss), rel=1e-13)
    np.testing.assert_allclose(state.margins, y * (Xa @ wn), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(state.grad[: problem.n_weights], gradient(problem, wn, loss),
                               rtol=1e-12, atol=1e-12)
    # H = I + X' diag(h) X, M = 0.99 + 0.01 diag(H)
    m = y * (Xa @ wn)
    if loss == "l2":
        h = np.where(m < 1.0, 2.0 * problem.cost, 0.0)
    else:
        h = problem.cost * expit(m) * expit(-m)
    H = np.eye(problem.n_weights) + (Xa.T @ sp.diags(h) @ Xa).toarray()
    np.testing.assert_allclose(state.precond[: problem.n_weights], 0.99 + 0.01 * np.diag(H),
                               rtol=1e-13)
    assert state.active_size == int(np.count_nonzero(h))
    v = np.zeros_like(w)
    v[: problem.n_weights] = rng.normal(size=problem.n_weights)
    out = np.empty_like(v)
    for n_groups in range(1, state.bounds.shape[0]):
        quadratic = kernels.hessian_vector(state.rows, bias_scale, state.bounds, state.active,
                                           n_groups, state.chunk_acc, state.chunk_sums, v, out)
        np.testing.assert_allclose(out[: problem.n_weights], H @ v[: problem.n_weights],
                                   rtol=1e-12, atol=1e-12)
        assert quadratic + v @ v == pytest.approx(v @ (out), rel=1e-12)
    # the loss change of a step, summed per example
    s = state.cg_vectors[0]
    s[:] = v * 1e-3
    change = state.loss_change()
    expected = objective(problem, wn + s[: problem.n_weights], loss) - objective(problem, wn, loss)
    expected -= float(wn @ s[: problem.n_weights]) + 0.5 * float(s @ s)
    assert change == pytest.approx(expected, rel=1e-7)
    np.testing.assert_allclose(state.new_margins, y * (Xa @ (wn + s[: problem.n_weights])),
                               rtol=1e-12, atol=1e-12)


def test_wide_products_reduce_in_parallel_identically() -> None:
    """Wide data (n_weights * groups above the parallel-reduction threshold): the parallel
    reduction of H v and of the gradient agrees with dense formulas, for 1 and 2 threads."""
    X = sp.random(300, 30_000, density=0.002, random_state=4, format="csr")
    y = np.where(np.arange(300) % 3 == 0, 1.0, -1.0)
    problem = make_problem(X, y, 2.0, bias_scale=1.0)
    results = []
    for threads in (1, 2):
        with parallel.numba_threads(threads):
            state = tron._TronState(problem.X, problem.y, problem.cost, 1.0, kernels.L2)
            state.w[:] = np.random.default_rng(5).normal(size=state.w.shape[0]) * 0.1
            state.evaluate()
            state.n_groups = state.bounds.shape[0] - 1
            assert state.w.shape[0] * state.n_groups >= kernels._PARALLEL_REDUCTION
            grad_norm = kernels.gradient_and_preconditioner(
                state.rows, 1.0, state.bounds, state.active, state.n_groups, state.chunk_acc,
                state.w, tron.ALPHA_PCG, state.grad, state.precond)
            v = np.random.default_rng(6).normal(size=state.w.shape[0])
            out = np.empty_like(v)
            kernels.hessian_vector(state.rows, 1.0, state.bounds, state.active, state.n_groups,
                                   state.chunk_acc, state.chunk_sums, v, out)
            results.append((grad_norm, state.grad.copy(), out))
    assert results[0][0] == results[1][0]
    assert np.array_equal(results[0][1], results[1][1]) and np.array_equal(results[0][2],
                                                                           results[1][2])
    w = state.w
    np.testing.assert_allclose(results[0][1], gradient(problem, w, "l2"), rtol=1e-12,
                               atol=1e-12)
    Xa = augmented(problem)
    h = np.where(y * (Xa @ w) < 1.0, 4.0, 0.0)
    np.testing.assert_allclose(out, v + Xa.T @ (h * (Xa @ v)), rtol=1e-12, atol=1e-12)


def newton_cpp_pcg(H: np.ndarray, g: np.ndarray, M: np.ndarray, eps_cg: float
                   ) -> tuple[np.ndarray, int]:
    """LIBLINEAR 2.50's newton.cpp pcg, literally (dense): its quadratic-model stop rule
    with Q = -(s'r - s'g) / 2 recomputed from s, r, g at every step."""
    s = np.zeros_like(g)
    r = -g
    z = r / M
    d = z.copy()
    ztr = float(z @ r)
    cgtol = min(eps_cg, np.sqrt(np.sqrt(ztr)))
    q = 0.0
    for i in range(1, max(g.shape[0], 5) + 1):
        hd = H @ d
        alpha = ztr / float(d @ hd)
        s = s + alpha * d
        r = r - alpha * hd
        q_new = -0.5 * (float(s @ r) - float(s @ g))
        q_diff = q_new - q
        assert q_new <= 0 and q_diff <= 0
        if i * q_diff >= cgtol * q_new:
            return s, i
        q = q_new
        z = r / M
        znew = float(z @ r)
        d = z + (znew / ztr) * d
        ztr = znew
    raise AssertionError("no stop within the CG cap")


@pytest.mark.parametrize("eps_cg", [tron.EPS_CG, 0.05])
@pytest.mark.parametrize("seed", [3, 4, 5])
def test_cg_stops_where_newton_cpp_does(seed: int, eps_cg: float) -> None:
    """The CG of one Newton step (no trust-region cut) takes as many steps as newton.cpp's
    pcg and ends at its s; the model value kept by recurrence is g's + s'Hs / 2."""
    X, y = random_problem(200, 30, seed=seed)
    X = X @ (np.eye(30) + 0.3 * np.random.default_rng(seed).normal(size=(30, 30)))  # correlated
    problem = make_problem(X, y, 1.0, bias_scale=1.0)
    state = tron._TronState(problem.X, problem.y, problem.cost, 1.0, kernels.L2)
    state.evaluate()
    Xa = augmented(problem)
    h = np.where(y * (Xa @ state.w) < 1.0, 2.0, 0.0)
    H = np.eye(31) + (Xa.T @ sp.diags(h) @ Xa).toarray()
    expected, steps = newton_cpp_pcg(H, state.grad.copy(), state.precond.copy(), eps_cg)
    assert steps >= (2 if eps_cg == tron.EPS_CG else 9)  # the rule is exercised
    kernels.cg_start(state.grad, state.precond, eps_cg, np.inf, state.cg_vectors,
                     state.cg_scalars, state.cg_counters)
    status = kernels.cg_steps(state.rows, 1.0, state.bounds, state.active, state.n_groups,
                              state.chunk_acc, state.chunk_sums, state.precond,
                              state.cg_vectors, state.cg_scalars, state.cg_counters, 1000)
    assert status == kernels.CG_CONVERGED
    assert state.cg_counters[0] == steps
    s = state.cg_vectors[0]
    assert np.linalg.norm(s - expected) <= 1e-10 * np.linalg.norm(expected)  # CG rounding
    model = float(state.grad @ s + 0.5 * s @ H @ s)
    assert state.cg_scalars[kernels._Q] == pytest.approx(model, rel=1e-9)


@pytest.mark.parametrize("step", [1e-9, 1e-4, 0.5, 3.0, 40.0, -40.0])
@pytest.mark.parametrize("margin", [-800.0, -30.0, -1.0, 0.0, 0.3, 0.999, 1.0, 2.0, 30.0, 800.0])
@pytest.mark.parametrize("loss", LOSSES)
def test_loss_change_is_accurate_without_overflow(loss: str, margin: float, step: float) -> None:
    """loss(m + t) - loss(m) to near full relative precision (exact rationals as reference)."""
    from fractions import Fraction
    from math import exp, log1p

    kind = kernels.L2 if loss == "l2" else kernels.LOGISTIC
    change = kernels._loss_change(margin, step, kind)
    assert np.isfinite(change)
    if loss == "l2":
        def exact(m: Fraction) -> Fraction:
            return max(Fraction(0), 1 - m) ** 2

        reference = float(exact(Fraction(margin) + Fraction(step)) - exact(Fraction(margin)))
        assert change == pytest.approx(reference, rel=1e-12, abs=1e-300)
    else:
        # reference from the derivative bound where the change is tiny, else softplus directly
        def softplus(m: float) -> float:
            return max(-m, 0.0) + log1p(exp(-abs(m)))

        reference = softplus(margin + step) - softplus(margin)
        tol = 1e-12 * max(abs(reference), 1e-300) + 1e-15 * abs(softplus(margin))
        if abs(step) < 1e-6:
            reference = -step * float(expit(-margin))  # first order, error O(step^2)
            tol = 1e-6 * abs(reference) + 1e-300
        assert abs(change - reference) <= tol


# --------------------------------------------------------------------------------------
# certified optima on small problems


def lbfgs_optimum(problem: LinearProblem, loss: str) -> np.ndarray:
    def value_and_gradient(w: np.ndarray) -> tuple[float, np.ndarray]:
        return objective(problem, w, loss), gradient(problem, w, loss)

    result = scipy.optimize.minimize(
        value_and_gradient, np.zeros(problem.n_weights), jac=True, method="L-BFGS-B",
        options={"ftol": 1e-16, "gtol": 1e-12, "maxiter": 100_000, "maxcor": 30},
    )
    return np.asarray(result.x)


@pytest.mark.parametrize("method", tron.METHODS)
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize(("seed", "bias_scale", "C"), [(3, 1.0, 1.0), (4, 0.0, 10.0),
                                                       (5, 2.0, 0.1), (6, 1.0, 1000.0)])
def test_matches_a_certified_optimum(loss: str, seed: int, bias_scale: float, C: float,
                                     method: str) -> None:
    X, y = random_problem(80, 6, seed)
    cost = C * np.random.default_rng(seed).uniform(0.5, 2.0, size=80)
    problem = make_problem(X, y, cost, bias_scale)
    reference = lbfgs_optimum(problem, loss)
    f_ref = objective(problem, reference, loss)
    g_ref = np.linalg.norm(gradient(problem, reference, loss))
    assert g_ref**2 / 2 <= 1e-10 * f_ref  # the reference is within 1e-10 of f*
    result = run(problem, loss=loss, eps=1e-10, method=method)
    assert_converged_claim(problem, result, loss, 1e-10)
    assert result.primal == pytest.approx(objective(problem, result.w, loss), rel=1e-12)
    assert relative(result.primal, f_ref) <= 1e-8
    g = np.linalg.norm(gradient(problem, result.w, loss))
    assert np.linalg.norm(result.w - reference) <= g + g_ref
    if loss == "l2":
        assert result.primal == pytest.approx(primal_objective(problem, result.w, "l2"),
                                              rel=1e-12)


def test_separable_two_points_have_the_closed_form_optimum() -> None:
    # x = +-1, no bias: f(w) = w^2/2 + 2 C max(0, 1 - w)^2 -> w* = 4C / (1 + 4C)
    problem = make_problem(np.array([[1.0], [-1.0]]), np.array([1.0, -1.0]), 2.0)
    result = run(problem, eps=1e-12)
    assert result.exit_reason == "converged"
    assert result.w[0] == pytest.approx(8.0 / 9.0, rel=1e-12)


def test_no_data_signal_gives_w_zero_at_once() -> None:
    problem = make_problem(sp.csr_matrix((5, 3)), np.array([1.0, -1, 1, -1, 1]))
    result = run(problem)
    assert result.exit_reason == "converged" and result.iterations == 0
    assert np.array_equal(result.w, np.zeros(3)) and result.violation == 0.0


def test_hinge_loss_is_refused() -> None:
    X, y = random_problem(10, 2, seed=0)
    with pytest.raises(ValueError, match="dcd or ocas"):
        run(make_problem(X, y), loss="l1")


# --------------------------------------------------------------------------------------
# agreement with LIBLINEAR


@pytest.fixture(scope="module")
def liblinear() -> Any:
    from liblinear import liblinearutil

    return liblinearutil


def liblinear_w(liblinear: Any, X: Any, y: np.ndarray, options: str, label: float = 1.0
                ) -> np.ndarray:
    """LIBLINEAR's (w, b) for the output of `label` with -B 1 (labels +-1 given)."""
    model = liblinear.train(liblinear.problem(y, X, bias=1), options + " -B 1 -q")
    labels = model.get_labels()
    if len(labels) == 2:
        w, b = model.get_decfun(0)
        sign = 1.0 if labels[0] == label else -1.0
        return sign * np.append(np.asarray(w, dtype=np.float64), b)
    w, b = model.get_decfun(labels.index(label))
    return np.append(np.asarray(w, dtype=np.float64), b)


def unscaled_set(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    if name == "cancer_unscaled":
        return unscaled_cancer()
    X, y = load_local(name) if name in LOCAL_NAMES else load_dataset(name)
    return X, y


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize(("name", "C"), [
    # local sets (testkit.datasets) like a9a, ijcnn1, unscaled heart and madelon.t
    ("onehot", 1.0), ("dense", 4.0), ("cancer_unscaled", 1.0), ("madelon-like", 1e-4),
    *(pytest.param(name, C, marks=pytest.mark.parity)
      for name, C in [("a9a", 1.0), ("ijcnn1", 4.0), ("madelon.t", 1e-4)])])
def test_agrees_with_liblinear(liblinear: Any, loss: str, name: str, C: float) -> None:
    X, labels = unscaled_set(name)
    y = binary_labels(labels)
    problem = make_problem(X, y, C, bias_scale=1.0)
    eps = 1e-6
    w_lib = liblinear_w(liblinear, X, y, f"-s {LIBLINEAR_SOLVER[loss]} -e {eps} -c {C}")
    result = run(problem, loss=loss, eps=eps)
    assert_converged_claim(problem, result, loss, eps)
    f_lib = objective(problem, w_lib, loss)
    assert relative(result.primal, f_lib) <= 1e-6
    # certified: ||w - w*|| <= ||grad f(w)|| for both, so they are this close
    g = np.linalg.norm(gradient(problem, result.w, loss))
    g_lib = np.linalg.norm(gradient(problem, w_lib, loss))
    assert np.linalg.norm(result.w - w_lib) <= g + g_lib
    assert np.linalg.norm(result.w - w_lib) <= 1e-2 * np.linalg.norm(w_lib)


def test_one_vs_rest_outputs_agree_with_liblinear(liblinear: Any) -> None:
    X, labels = load_local("onehot3")  # like dna.scale: 3 classes, 0/1 features
    w_all = []
    for positive in np.unique(labels):
        y = binary_labels(labels, positive)
        problem = make_problem(X, y, 0.5, bias_scale=1.0)
        result = run(problem, eps=1e-5)
        assert_converged_claim(problem, result, "l2", 1e-5)
        w_all.append(result.w)
        w_lib = liblinear_w(liblinear, X, labels, "-s 2 -e 1e-5 -c 0.5", label=positive)
        assert relative(result.primal, objective(problem, w_lib, "l2")) <= 1e-6
    assert len(w_all) == np.unique(labels).size == 3


# --------------------------------------------------------------------------------------
# class weights, threads, determinism


@pytest.mark.parametrize("loss", LOSSES)
def test_cost_weights_equal_repeated_rows(loss: str) -> None:
    X, y = random_problem(70, 5, seed=8)
    repeats = np.random.default_rng(9).integers(1, 4, size=70)
    weighted = make_problem(X, y, repeats.astype(np.float64), bias_scale=1.0)
    repeated = make_problem(np.repeat(X, repeats, axis=0), np.repeat(y, repeats), 1.0, 1.0)
    a = run(weighted, loss=loss, eps=1e-11)
    b = run(repeated, loss=loss, eps=1e-11)
    assert a.exit_reason == b.exit_reason == "converged"
    assert a.primal == pytest.approx(b.primal, rel=1e-11)
    np.testing.assert_allclose(a.w, b.w, rtol=1e-8, atol=1e-9)


def test_class_weights_agree_with_liblinear_weights(liblinear: Any) -> None:
    X, labels = load_local("wine")
    y = binary_labels(labels)
    cost = np.where(y > 0, 3.0, 1.0) * 2.0
    problem = make_problem(X, y, cost, bias_scale=1.0)
    result = run(problem, eps=1e-7)
    assert_converged_claim(problem, result, "l2", 1e-7)
    w_lib = liblinear_w(liblinear, X, y, "-s 2 -e 1e-7 -c 2 -w1 3")
    assert relative(result.primal, objective(problem, w_lib, "l2")) <= 1e-8


@pytest.mark.parametrize("force", ["fine", "alternate", None])
@pytest.mark.parametrize("loss", LOSSES)
def test_threads_give_bit_identical_results(monkeypatch: pytest.MonkeyPatch, loss: str,
                                            force: str | None) -> None:
    """On 2 threads throughout, switched at every CG call, or as the grain meter
    measures (solvers/grain.py): the fit of one thread."""
    monkeypatch.setattr(grain, "FORCE", force)
    X, labels = load_local("onehot")
    problem = make_problem(X, binary_labels(labels), 1.0, bias_scale=1.0)
    chunks = parallel.chunk_bounds(problem.X.indptr, problem.X.n_features + 1, accumulators=2)
    assert chunks.shape[0] - 1 > 2
    one = run(problem, loss=loss, eps=1e-4, threads=1)
    two = run(problem, loss=loss, eps=1e-4, threads=2)
    again = run(problem, loss=loss, eps=1e-4, threads=1)
    assert one.details["threads"] == 1
    limit = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    assert two.details["threads"] == min(2, limit)
    assert np.array_equal(one.w, again.w)
    assert np.array_equal(one.w, two.w) and one.iterations == two.iterations
    assert one.primal == two.primal
    assert one.details["fine_grained_share"] == 0.0
    if force == "fine" and two.details["threads"] > 1:
        assert two.details["fine_grained_share"] == 1.0
    elif force == "alternate" and two.details["threads"] > 1:
        assert 0.0 < two.details["fine_grained_share"] < 1.0


def test_threads_setting_is_restored() -> None:
    before = numba.get_num_threads()
    X, y = random_problem(40, 3, seed=2)
    run(make_problem(X, y), threads=64)
    assert numba.get_num_threads() == before


# --------------------------------------------------------------------------------------
# limits, progress, cancellation, warm start


def test_max_iter_reports_max_iter() -> None:
    X, labels = load_local("onehot")
    problem = make_problem(X, binary_labels(labels), 1.0, bias_scale=1.0)
    result = run(problem, max_iter=1, eps=1e-8)
    assert result.exit_reason == "max_iter" and result.iterations == 1
    assert np.all(np.isfinite(result.w))
    assert result.primal < objective(problem, np.zeros(problem.n_weights), "l2")
    assert result.violation > tolerance(problem, 1e-8)


def test_progress_events_and_cancellation() -> None:
    X, labels = load_local("onehot")
    problem = make_problem(X, binary_labels(labels), 1.0, bias_scale=1.0)
    events: list[dict[str, Any]] = []

    def cancel_third(event: dict[str, Any]) -> bool:
        events.append(event)
        return len(events) >= 3

    result = run(problem, ProgressMonitor(cancel_third, None, interval=0.0), eps=1e-12)
    assert result.exit_reason == "cancelled"
    assert len(events) == 3 and result.iterations == events[-1]["iteration"]
    for event in events:
        assert {"iteration", "elapsed_s", "primal", "dual", "gap", "violation", "active_size",
                "grad_norm"} <= set(event)
        # the strong-convexity bound P* >= P(w) - ||grad P(w)||^2 / 2, the certificate's
        assert event["gap"] == pytest.approx(0.5 * event["grad_norm"] ** 2, rel=1e-12)
        assert event["dual"] == pytest.approx(event["primal"] - event["gap"], rel=1e-12)
        assert 0 < event["active_size"] <= X.shape[0]
        assert event["violation"] == pytest.approx(
            event["grad_norm"] / result.details["grad_norm0"])
    assert events[-1]["primal"] <= events[0]["primal"]  # accepted steps only decrease f
    assert result.primal == pytest.approx(objective(problem, result.w, "l2"), rel=1e-12)
    assert result.primal == pytest.approx(events[-1]["primal"], rel=1e-9)


def test_max_seconds_stops_the_solver() -> None:
    X, labels = load_local("dense")
    problem = make_problem(X, binary_labels(labels), 1.0, bias_scale=1.0)
    result = run(problem, ProgressMonitor(None, 1e-9), eps=1e-12)
    assert result.exit_reason == "max_seconds"
    assert np.all(np.isfinite(result.w))


@pytest.mark.parametrize("loss", LOSSES)
def test_warm_start_from_the_optimum_converges_at_once(loss: str) -> None:
    X, labels = load_local("dense")
    problem = make_problem(X, binary_labels(labels), 2.0, bias_scale=1.0)
    cold = run(problem, loss=loss, eps=1e-6)
    assert cold.iterations > 2
    warm = run(problem, w0=cold.w, loss=loss, eps=1e-6)
    assert_converged_claim(problem, warm, loss, 1e-6)
    assert warm.iterations <= 1
    # from a perturbed start it still reaches the same optimum; w0 via params too
    start = cold.w + np.random.default_rng(3).normal(size=cold.w.shape[0])
    perturbed = run(problem, loss=loss, eps=1e-6, w0=start)
    via_params = tron.solve(problem, {**tron.DEFAULTS, "loss": loss, "eps": 1e-6, "w0": start},
                            ProgressMonitor(None, None))
    assert_converged_claim(problem, perturbed, loss, 1e-6)
    assert np.array_equal(perturbed.w, np.asarray(via_params.w))
    g = np.linalg.norm(gradient(problem, perturbed.w, loss))
    g_cold = np.linalg.norm(gradient(problem, cold.w, loss))
    assert np.linalg.norm(perturbed.w - cold.w) <= g + g_cold


def test_warm_start_of_the_wrong_shape_is_refused() -> None:
    X, y = random_problem(20, 3, seed=1)
    problem = make_problem(X, y, bias_scale=1.0)
    with pytest.raises(ValueError, match="4 weights"):
        run(problem, w0=np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        run(problem, w0=np.array([0.0, np.nan, 0.0, 0.0]))


@pytest.mark.parametrize("method", tron.METHODS)
def test_tiny_eps_ends_honestly(method: str) -> None:
    """An eps beyond float64 precision ends stalled (no further progress in float64) or max_iter
    with the violation reported, never a false claim, and within the iteration limit."""
    X, y = unscaled_cancer()
    problem = make_problem(X, binary_labels(y), 10.0, bias_scale=1.0)
    result = run(problem, eps=1e-300, max_iter=500, method=method)
    assert result.exit_reason in ("stalled", "max_iter")
    assert result.details["stall"] is not None or result.exit_reason == "max_iter"
    g = np.linalg.norm(gradient(problem, result.w, "l2"))
    g0 = np.linalg.norm(gradient(problem, np.zeros(problem.n_weights), "l2"))
    assert g / g0 < 1e-9  # it got as far as float64 allows


def test_unknown_method_is_refused() -> None:
    X, y = random_problem(20, 3, seed=1)
    with pytest.raises(ValueError, match="method must be one of"):
        run(make_problem(X, y), method="dogleg")


@pytest.mark.parametrize("loss", LOSSES)
def test_line_search_takes_newton_cpp_steps(loss: str) -> None:
    """Each line-search iteration is one accepted step whose length passed newton.cpp's
    Armijo test f(w + a s) - f(w) <= 0.01 a g's: the objective never increases, and on
    unscaled data both methods reach the same optimum."""
    X, y = unscaled_cancer()
    problem = make_problem(X, binary_labels(y), 1.0, bias_scale=1.0)
    primals: list[float] = []
    monitor = ProgressMonitor(lambda e: bool(primals.append(e["primal"])), None, interval=0.0)
    line = run(problem, monitor, loss=loss, eps=1e-8, method="line_search")
    region = run(problem, loss=loss, eps=1e-8, method="trust_region")
    assert_converged_claim(problem, line, loss, 1e-8)
    assert_converged_claim(problem, region, loss, 1e-8)
    assert line.iterations == line.details["newton_steps"] > 1
    # (events also come from within a long CG solve, at the same w)
    assert len(primals) > 1 and primals[-1] < primals[0]
    assert all(b <= a for a, b in itertools.pairwise(primals))
    g = np.linalg.norm(gradient(problem, line.w, loss))
    g_region = np.linalg.norm(gradient(problem, region.w, loss))
    assert np.linalg.norm(line.w - region.w) <= g + g_region
