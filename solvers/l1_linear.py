"""L1-regularised linear classification: the L2-loss SVM by coordinate descent with a line
search (LIBLINEAR -s 5) and logistic regression by newGLMNET (LIBLINEAR -s 6).

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight * sample weight):

    min_w  P(w) = ||w||_1 + sum_i C_i loss(y_i w.x_i),
    loss = "l2": max(0, 1 - m)^2 (-s 5);  "logistic": log(1 + exp(-m)) (-s 6).

With bias="augment" every x_i carries one more constant feature of value B, regularised
(by |w_B|) like LIBLINEAR -B without -R. Both methods work on the columns of X (CSC).

loss "l2": Chang, Hsieh & Lin, "Coordinate descent method for large-scale L2-loss linear
SVM", JMLR 2008 (CDN; Algorithm 2 with the L1 term as in Yuan, Chang, Hsieh & Lin, "A
comparison of optimization methods and software for large-scale L1-regularized linear
classification", JMLR 2010, Section 4.1.2), as LIBLINEAR 2.50's `solve_l1r_l2_svc`: for
each feature j of a random permutation of the active set, the Newton direction of the
one-variable problem with the L1 term (soft threshold), then a backtracking line search
(sigma 0.01, at most 20 halvings) tested first by the cheap upper bound
C_j d^2 + G d + ... and then exactly from b_i = 1 - y_i w.x_i, kept up to date.

loss "logistic": Yuan, Ho & Lin, "An improved GLMNET for L1-regularized logistic
regression", JMLR 2012 (newGLMNET, Algorithm 3), as LIBLINEAR 2.50's `solve_l1r_lr`: each
Newton iteration minimises the quadratic model of the loss plus ||w + d||_1 by coordinate
descent over the active features (inner shrinking, stop at an inner tolerance relative to
the first iteration's gradient violation, starting at 1, times 0.25 after an inner solve
that took one cycle), then a line search on w + t d (t = 1, 1/2, ..., at most 20; the
sufficient decrease 0.01 t (grad.d + ||w + d||_1 - ||w||_1)).

Stop rule (both, LIBLINEAR's): the 1-norm of the minimum-norm subgradient over the
active features <= eps' times its value at the first iteration, eps' = eps *
max(min(#pos, #neg), 1) / n (LIBLINEAR's primal_solver_tol), with the outer shrinking of
features at 0 whose gradient lies strictly inside (-1, 1) (beyond +-Gmax_old / n); a
shrunk run is confirmed by one pass over all features. Whether the model is converged is
decided by the certificate (solvers/l1_objectives.py: a scaled feasible dual point).

After LIBLINEAR's rule holds (and the fit gives tol), w is polished by orthant-wise Newton
steps until the certificate proves tol (`_orthant_newton`: the certificate needs every
coordinate's violation small, and coordinate descent leaves large ones along directions of
high curvature, the bias column first); only steps that lower P are taken, so the optimum
is unchanged. Where that does not reach tol (a9a's collinear one-hot groups), the fallback's
eps / 10 continues as before.

Where we depart: our RNG (xorshift64*); a per-row C_i; the loss change of the logistic
line search summed as log1p(sigma(-m) expm1(-y x.d)) per row (no exp(w.x) kept, which
overflows); wpd reset to w at each Newton iteration; a logistic line search that finds no
decrease ends the run as stalled; a warm start w0 (the fallback rule's eps / 10 restart),
whose stop rule is measured against the violation at w = 0 (a cold start's reference),
not at w0.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from numba import njit

from solvers._kernel_helpers import shuffle_sweep
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor, rng_of
from solvers.l1_objectives import bounds_at, primal_value
from solvers.objectives import margins, transpose_times

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = (
    {"loss": "l2"},
    {"loss": "logistic"},
    {"loss": "l2", "bias": "none"},
)

SIGMA = 0.01  # sufficient decrease of both line searches
LINE_SEARCH_STEPS = 20
INNER_MAX_ITER = 1000  # newGLMNET's coordinate-descent cycles per Newton iteration
NU = 1e-12  # newGLMNET's Hessian diagonal shift
# the orthant-wise Newton polish after LIBLINEAR's rule holds (`_orthant_newton`)
POLISH_MAX_ITER, POLISH_PATIENCE = 30, 5
POLISH_CG_STEPS, POLISH_CG_TOL, POLISH_RIDGE = 50, 0.01, 1e-10


def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Solve one binary problem; `params` as filled by validate_params("l1_cd")."""
    started = time.perf_counter()
    loss = params["loss"]
    w = np.zeros(problem.n_weights)
    if params.get("w0") is not None:
        w[:] = np.asarray(params["w0"], dtype=np.float64)
    positives = int(np.count_nonzero(problem.y > 0))
    n_rows = problem.X.n_rows
    tolerance = float(params["eps"]) * max(min(positives, n_rows - positives), 1) / n_rows
    rng = rng_of(params)
    method = _cdn if loss == "l2" else _newglmnet
    cols = columns(problem, signed=loss == "l2")
    iterations, exit_reason, violation = method(
        _Run(problem, w, tolerance, int(params["max_iter"]), rng, monitor), cols
    )
    polish = 0
    if exit_reason == "converged" and params.get("tol") is not None:
        polish = _orthant_newton(problem, w, loss, float(params["tol"]), monitor, cols)
    if not np.all(np.isfinite(w)):
        exit_reason = "numerical_error"
    primal = primal_value(problem, w, loss)
    return BinarySolution(
        w,
        iterations,
        exit_reason,
        primal,
        violation=violation,
        details={
            "nonzero_weights": int(np.count_nonzero(w[: problem.X.n_features])),
            "newton_polish": polish,
        },
        timings={"iterate_s": time.perf_counter() - started},
    )


def columns(problem: LinearProblem, signed: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, indices, indptr) of Z as CSC, Z = X with the bias column B appended (if
    any), each row times y_i when `signed`."""
    X = problem.X
    csc = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.n_rows, X.n_features)).tocsc()
    csc.sort_indices()
    data = np.asarray(csc.data, dtype=np.float64)
    rows = np.asarray(csc.indices, dtype=np.int64)
    indptr = np.asarray(csc.indptr, dtype=np.int64)
    if problem.bias_scale > 0:  # the bias column last: every row, value B
        n = X.n_rows
        data = np.concatenate([data, np.full(n, float(problem.bias_scale))])
        rows = np.concatenate([rows, np.arange(n, dtype=np.int64)])
        indptr = np.append(indptr, indptr[-1] + n)
    if signed:
        data = data * problem.y[rows]
    return np.ascontiguousarray(data), np.ascontiguousarray(rows), np.ascontiguousarray(indptr)


def _reference_violation(problem: LinearProblem, w: np.ndarray, slope: float) -> float:
    """The stop rule's reference: -1.0 for a cold start (the first iteration's violation
    becomes it, as in LIBLINEAR); for a warm start (w != 0, the fallback rule's eps / 10)
    the violation at w = 0, sum_j max(|Z'(slope C y)|_j - 1, 0) (slope: the loss's
    -derivative at margin 0), so that eps / 10 asks ten times less of the gradient rather
    than eps' times less than at an already accurate w."""
    if not np.any(w):
        return -1.0
    v = transpose_times(problem, slope * problem.cost * problem.y)
    return float(np.maximum(np.abs(v) - 1.0, 0.0).sum())


class _Run(NamedTuple):
    """What both methods work on: w is updated in place; tolerance is LIBLINEAR's eps'."""

    problem: LinearProblem
    w: np.ndarray
    tolerance: float
    max_iter: int
    rng: np.ndarray
    monitor: ProgressMonitor

    def stop(self, iteration: int, violation: float, active: int, loss: str) -> str | None:
        """The monitor's stop before an iteration (progress events with the certificate's
        bounds at w)."""
        return self.monitor.stop_reason(
            iteration, self.max_iter,
            functools.partial(_event, iteration, violation, active, self.problem, self.w, loss))


def _event(iteration: int, violation: float, active: int, problem: LinearProblem,
           w: np.ndarray, loss: str) -> dict[str, Any]:
    """A progress event with the certificate's bounds at w (one pass over the data)."""
    primal, duals = bounds_at(problem, w, loss)
    dual = max(duals.values())
    return {"iteration": iteration, "violation": violation, "active_size": active,
            "primal": primal, "dual": dual, "gap": primal - dual}


def _cdn(run: _Run, cols: tuple[np.ndarray, np.ndarray, np.ndarray]) -> tuple[int, str, float]:
    """LIBLINEAR's solve_l1r_l2_svc on w in place, cols = columns(signed=True): (iterations,
    exit reason, violation)."""
    problem, w, tolerance, rng = run.problem, run.w, run.tolerance, run.rng
    cost = problem.cost
    b = 1.0 - margins(problem, w)  # b_i = 1 - y_i w.x_i
    data, _, indptr = cols
    # xj_sq_j = sum_i C_i (y_i x_ij)^2
    xj_sq = np.add.reduceat(np.append(cost[cols[1]] * data * data, 0.0), indptr[:-1]) * (
        np.diff(indptr) > 0
    )
    n_weights = w.shape[0]
    index = np.arange(n_weights, dtype=np.int64)
    active, gmax_old, gnorm1_init = n_weights, math.inf, _reference_violation(problem, w, 2.0)
    iteration, violation = 0, math.inf
    while True:
        stop = run.stop(iteration, violation, active, "l2")
        if stop is not None:
            return iteration, stop, violation
        gmax_new, gnorm1, active = _cdn_sweep(cols, cost, b, w, xj_sq, index, rng, active, gmax_old)
        if not math.isfinite(gnorm1):
            return iteration + 1, "numerical_error", gnorm1
        if gnorm1_init < 0.0:  # a cold start: the first sweep's, as LIBLINEAR
            gnorm1_init = gnorm1
        iteration += 1
        violation = gnorm1 / gnorm1_init if gnorm1_init > 0 else 0.0
        if gnorm1 <= tolerance * gnorm1_init:
            if active == n_weights:
                return iteration, "converged", violation
            active, gmax_old = n_weights, math.inf  # confirm by a pass over all features
            continue
        gmax_old = gmax_new


@njit(cache=True, inline="always")
def _violation(g, w_j, shrink_band):
    """The minimum-norm subgradient |.| of G + d|w_j| at w_j (G the loss's derivative), or
    -1.0 when w_j = 0 is to be shrunk (G + 1 > band and G - 1 < -band)."""
    if w_j > 0.0:
        return abs(g + 1.0)
    if w_j < 0.0:
        return abs(g - 1.0)
    if g + 1.0 < 0.0:
        return -(g + 1.0)
    if g - 1.0 > 0.0:
        return g - 1.0
    if g + 1.0 > shrink_band and g - 1.0 < -shrink_band:
        return -1.0
    return 0.0


@njit(cache=True, inline="always")
def _soft_newton_step(g, h, w_j):
    """argmin_d |w_j + d| + G d + H d^2 / 2 (the soft threshold)."""
    if g + 1.0 < h * w_j:
        return -(g + 1.0) / h
    if g - 1.0 > h * w_j:
        return -(g - 1.0) / h
    return -w_j


@njit(cache=True, error_model="numpy")
def _cdn_sweep(cols, cost, b, w, xj_sq, index, rng, active, gmax_old):
    """One sweep of solve_l1r_l2_svc over a random permutation of index[:active];
    returns (largest violation, sum of violations, new active size)."""
    data, rows, indptr = cols
    n_rows = b.shape[0]
    shuffle_sweep(index, active, rng)
    gmax_new, gnorm1, s = 0.0, 0.0, 0
    while s < active:
        j = index[s]
        # G = -2 sum_{b_i > 0} C_i z_ij b_i;  H = 2 sum_{b_i > 0} C_i z_ij^2
        g_loss = 0.0
        h = 0.0
        for k in range(indptr[j], indptr[j + 1]):
            i = rows[k]
            if b[i] > 0.0:
                scaled = cost[i] * data[k]
                g_loss -= scaled * b[i]
                h += scaled * data[k]
        g_loss *= 2.0
        g = g_loss
        h = max(2.0 * h, 1e-12)
        violation = _violation(g, w[j], gmax_old / n_rows)
        if violation < 0.0:  # shrunk
            active -= 1
            index[s] = index[active]
            index[active] = j
            continue
        gmax_new = max(gmax_new, violation)
        gnorm1 += violation
        s += 1
        d = _soft_newton_step(g, h, w[j])
        if abs(d) < 1.0e-12:
            continue
        delta = abs(w[j] + d) - abs(w[j]) + g * d
        d_old = 0.0
        loss_old = 0.0
        searched = 0
        while searched < LINE_SEARCH_STEPS:
            d_diff = d_old - d
            cond = abs(w[j] + d) - abs(w[j]) - SIGMA * delta
            if xj_sq[j] * d * d + g_loss * d + cond <= 0.0:
                # b -= d z_j (from the last trial, b holds b - d_old z_j)
                for k in range(indptr[j], indptr[j + 1]):
                    b[rows[k]] += d_diff * data[k]
                break
            loss_new = 0.0
            for k in range(indptr[j], indptr[j + 1]):
                i = rows[k]
                if searched == 0 and b[i] > 0.0:
                    loss_old += cost[i] * b[i] * b[i]
                b_new = b[i] + d_diff * data[k]
                b[i] = b_new
                if b_new > 0.0:
                    loss_new += cost[i] * b_new * b_new
            if cond + loss_new - loss_old <= 0.0:
                break
            d_old = d
            d *= 0.5
            delta *= 0.5
            searched += 1
        w[j] += d
        if searched >= LINE_SEARCH_STEPS:  # b drifted through 20 halvings: recompute
            b[:] = 1.0
            for jj in range(w.shape[0]):
                if w[jj] != 0.0:
                    for k in range(indptr[jj], indptr[jj + 1]):
                        b[rows[k]] -= w[jj] * data[k]
    return gmax_new, gnorm1, active


def _newglmnet(
    run: _Run, cols: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> tuple[int, str, float]:
    """LIBLINEAR's solve_l1r_lr on w in place, cols = columns(signed=False): (Newton
    iterations, exit reason, violation)."""
    problem, w, tolerance, rng = run.problem, run.w, run.tolerance, run.rng
    data, rows, indptr = cols
    cost, y = problem.cost, problem.y
    n_weights, n_rows = w.shape[0], y.shape[0]
    negatives = np.where(y < 0, cost, 0.0)
    # xjneg_sum_j = sum_{y_i = -1} C_i x_ij
    xjneg_sum = np.add.reduceat(np.append(negatives[rows] * data, 0.0), indptr[:-1]) * (
        np.diff(indptr) > 0
    )
    z = y * margins(problem, w)  # w.x_i
    index = np.arange(n_weights, dtype=np.int64)
    hdiag, grad, wpd, xtd = (
        np.zeros(n_weights),
        np.zeros(n_weights),
        np.zeros(n_weights),
        np.zeros(n_rows),
    )
    gmax_old, gnorm1_init, inner_eps = math.inf, _reference_violation(problem, w, 0.5), 1.0
    iteration, violation, active, unmoved = 0, math.inf, n_weights, 0
    while True:
        stop = run.stop(iteration, violation, active, "logistic")
        if stop is not None:
            return iteration, stop, violation
        tau = cost * np.exp(-np.logaddexp(0.0, z))  # C_i sigma(-w.x_i)
        curvature = tau * np.exp(-np.logaddexp(0.0, -z))  # C_i sigma(z) sigma(-z)
        gmax_new, gnorm1, active = _glmnet_gradient(
            cols, curvature, tau, xjneg_sum, w, (hdiag, grad), index, gmax_old, n_rows
        )
        if not math.isfinite(gnorm1):
            return iteration, "numerical_error", gnorm1
        if gnorm1_init < 0.0:  # a cold start: the first sweep's, as LIBLINEAR
            gnorm1_init = gnorm1
        violation = gnorm1 / gnorm1_init if gnorm1_init > 0 else 0.0
        # LIBLINEAR's rule: the violation is small, or ten quadratic models in a row moved
        # no coordinate (w can change no more in float64: the certificate then decides)
        if gnorm1 <= tolerance * gnorm1_init or unmoved >= 10:
            return iteration, "converged", violation
        unmoved += 1
        wpd[:] = w
        xtd[:] = 0.0
        cycles, moved = _glmnet_quadratic(
            cols, curvature, (hdiag, grad), w, wpd, xtd, index, active, rng, inner_eps * gnorm1_init
        )
        if moved:
            unmoved = 0
        if not _glmnet_line_search(problem, w, wpd, xtd, grad, z):
            return iteration + 1, "stalled", violation
        if cycles == 1:
            inner_eps *= 0.25
        iteration += 1
        gmax_old = gmax_new


@njit(cache=True, error_model="numpy")
def _glmnet_gradient(cols, curvature, tau, xjneg_sum, w, out, index, gmax_old, n_rows):
    """The gradient and Hessian diagonal of the loss at w, and the outer shrinking of
    solve_l1r_lr: (largest violation, sum of violations, active size); index[:active]
    lists the active features."""
    data, rows, indptr = cols
    hdiag, grad = out
    active = 0
    gmax_new = 0.0
    gnorm1 = 0.0
    for j in range(w.shape[0]):
        # H_jj = nu + sum_i x_ij^2 D_i;  grad_j = -sum_i x_ij tau_i + xjneg_sum_j
        h = NU
        dot = 0.0
        for k in range(indptr[j], indptr[j + 1]):
            h += data[k] * data[k] * curvature[rows[k]]
            dot += data[k] * tau[rows[k]]
        hdiag[j] = h
        grad[j] = -dot + xjneg_sum[j]
        violation = _violation(grad[j], w[j], gmax_old / n_rows)
        if violation >= 0.0:  # not shrunk: active
            index[active] = j
            active += 1
            gmax_new = max(gmax_new, violation)
            gnorm1 += violation
    return gmax_new, gnorm1, active


@njit(cache=True, error_model="numpy")
def _glmnet_quadratic(
    cols, curvature, derivatives, w, wpd, xtd, index, active, rng, inner_tolerance
):
    """Coordinate descent on the quadratic model grad.d + d'Hd/2 + ||w + d||_1 over wpd =
    w + d (xtd = X d kept); returns the number of cycles and whether any coordinate
    moved."""
    data, rows, indptr = cols
    hdiag, grad = derivatives
    n_rows = xtd.shape[0]
    qp_active = active
    qp_gmax_old = np.inf
    cycles = 0
    moved = False
    while cycles < INNER_MAX_ITER:
        shuffle_sweep(index, qp_active, rng)
        qp_gmax_new = 0.0
        qp_gnorm1 = 0.0
        s = 0
        while s < qp_active:
            j = index[s]
            h = hdiag[j]
            # G = grad_j + nu (wpd_j - w_j) + sum_i x_ij D_i (X d)_i
            g = grad[j] + (wpd[j] - w[j]) * NU
            for k in range(indptr[j], indptr[j + 1]):
                g += data[k] * curvature[rows[k]] * xtd[rows[k]]
            violation = _violation(g, wpd[j], qp_gmax_old / n_rows)
            if violation < 0.0:  # shrunk (inner level)
                qp_active -= 1
                index[s] = index[qp_active]
                index[qp_active] = j
                continue
            step = _soft_newton_step(g, h, wpd[j])
            s += 1
            # as LIBLINEAR: a coordinate that does not move counts in neither the inner
            # stop rule's sums nor as a change (a feature scaled by 1e4, say the bias of
            # intercept_scaling=1e4, keeps a violation its step of < 1e-12 cannot mend)
            if abs(step) < 1.0e-12:
                continue
            moved = True
            qp_gmax_new = max(qp_gmax_new, violation)
            qp_gnorm1 += violation
            step = min(max(step, -10.0), 10.0)
            # wpd_j += step;  X d += step x_j
            wpd[j] += step
            for k in range(indptr[j], indptr[j + 1]):
                xtd[rows[k]] += step * data[k]
        cycles += 1
        if qp_gnorm1 <= inner_tolerance:
            if qp_active == active:
                break
            qp_active = active  # reactivate and confirm
            qp_gmax_old = np.inf
            continue
        qp_gmax_old = qp_gmax_new
    return cycles, moved


def _glmnet_line_search(
    problem: LinearProblem,
    w: np.ndarray,
    wpd: np.ndarray,
    xtd: np.ndarray,
    grad: np.ndarray,
    z: np.ndarray,
) -> bool:
    """w <- w + t d for the first t = 1, 1/2, ... with sufficient decrease (z = X w kept);
    False when none of LINE_SEARCH_STEPS trials decreases enough (w unchanged)."""
    return bool(_glmnet_line_search_kernel(w, wpd, xtd, grad, z, problem.y, problem.cost))


@njit(cache=True, error_model="numpy")
def _glmnet_line_search_kernel(w, wpd, xtd, grad, z, y, cost):
    """The trials of `_glmnet_line_search`: with d = wpd - w and delta = grad.d +
    ||w + d||_1 - ||w||_1, accept t when ||w + t d||_1 - ||w||_1 + sum_i C_i (log(1 +
    exp(-m_i - t y_i x_i.d)) - log(1 + exp(-m_i))) <= SIGMA t delta, each row's loss
    change as log1p(sigma(-m_i) expm1(-t y_i x_i.d)) (m_i = y_i w.x_i)."""
    n_weights = w.shape[0]
    norm = 0.0
    full_delta = 0.0
    for j in range(n_weights):
        norm += abs(w[j])
        full_delta += grad[j] * (wpd[j] - w[j]) + abs(wpd[j])
    full_delta -= norm
    n_rows = z.shape[0]
    sigma_neg = np.empty(n_rows)
    for i in range(n_rows):  # sigma(-m_i) without overflow
        m = y[i] * z[i]
        e = math.exp(-abs(m))
        sigma_neg[i] = e / (1.0 + e) if m >= 0.0 else 1.0 / (1.0 + e)
    step = 1.0
    for _ in range(LINE_SEARCH_STEPS):
        trial_norm = 0.0
        for j in range(n_weights):
            trial_norm += abs(w[j] + step * (wpd[j] - w[j]))
        change = 0.0
        for i in range(n_rows):
            change += cost[i] * math.log1p(sigma_neg[i] * math.expm1(-y[i] * step * xtd[i]))
        if trial_norm - norm + change - SIGMA * step * full_delta <= 0.0:
            for j in range(n_weights):
                w[j] = w[j] + step * (wpd[j] - w[j])
            for i in range(z.shape[0]):
                z[i] += step * xtd[i]
            return True
        step *= 0.5
    return False


def _loss_pieces(problem: LinearProblem, m: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """(a, h) at the margins m: the loss's multipliers a_i = -C_i loss'(m_i) and curvatures
    h_i = C_i loss''(m_i) (l2: 2 C_i on the rows with m_i < 1, its generalised Hessian)."""
    cost = problem.cost
    if loss == "l2":
        slack = 1.0 - m
        return 2.0 * cost * np.maximum(slack, 0.0), 2.0 * cost * (slack > 0.0)
    sigma_neg = np.exp(-np.logaddexp(0.0, m))  # sigma(-m)
    return cost * sigma_neg, cost * sigma_neg * np.exp(-np.logaddexp(0.0, -m))


def _orthant_newton(
    problem: LinearProblem,
    w: np.ndarray,
    loss: str,
    tol: float,
    monitor: ProgressMonitor,
    cols: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> int:
    """Polish w in place by orthant-wise Newton steps until the certificate
    (l1_objectives.bounds_at) proves the relative gap <= tol; returns the steps taken.

    Why: the certificate scales the loss's multipliers a(w) until ||Z'(y a)||_inf <= 1, so it
    needs every coordinate's subgradient violation small, while coordinate descent leaves
    large violations along directions of high curvature (the bias column, dense features:
    the gradient there is the curvature times a tiny error of w), fixing one coordinate at a
    time undoes the others. A Newton step on all free coordinates at once removes them. The
    free set S: the non-zero weights, with their signs, and the zero weights whose
    violation |Z'(y a)|_j > 1, with the sign of Z'(y a)_j; on that orthant P is smooth
    (||w||_1 linear): direction by CG on H_SS d = -g_S, H = Z_S' diag(h) Z_S (+ a 1e-10
    ridge), then w + t d with the coordinates that change sign set to 0 (the orthant
    projection), t = 1, 1/2, ... until P decreases by 0.01 t g'd (P computed exactly). Every
    accepted step lowers P, so the optimum is the one coordinate descent converges to;
    `converged` still rests on the certificate alone. Stops when the certificate holds,
    after POLISH_MAX_ITER steps, when the gap has not reached a new low for POLISH_PATIENCE
    steps (a9a's collinear one-hot groups: the fallback's eps / 10 continues), when no step
    decreases P, or at the time limit."""
    # Z or its signed rows (cols): the Hessian Z_S' diag(h) Z_S is the same (y_i^2 = 1)
    Z = sp.csc_matrix(cols, shape=(problem.X.n_rows, w.shape[0]))
    best, stale = math.inf, 0
    for step in range(POLISH_MAX_ITER):
        primal, bounds = bounds_at(problem, w, loss)
        gap = (primal - max(bounds.values())) / max(abs(primal), 1e-300)
        if gap <= tol or monitor.out_of_time():
            return step
        best, stale = (gap, 0) if gap < best else (best, stale + 1)
        if stale >= POLISH_PATIENCE:
            return step
        a, h = _loss_pieces(problem, margins(problem, w), loss)
        v = transpose_times(problem, problem.y * a)
        sign = np.where(w != 0.0, np.sign(w), np.where(np.abs(v) > 1.0, np.sign(v), 0.0))
        free = np.flatnonzero(sign)
        if free.size == 0:
            return step
        g = sign[free] - v[free]
        ZS = Z[:, free]
        d = _cg(lambda x, ZS=ZS, h=h: ZS.T @ (h * (ZS @ x)) + POLISH_RIDGE * x, g)
        slope = float(g @ d)
        if not slope < 0.0:
            return step
        t = 1.0
        for _ in range(LINE_SEARCH_STEPS):
            trial = w.copy()
            moved = w[free] + t * d
            trial[free] = np.where(moved * sign[free] < 0.0, 0.0, moved)
            if primal_value(problem, trial, loss) <= primal + SIGMA * t * slope:
                w[:] = trial
                break
            t *= 0.5
        else:
            return step
    return POLISH_MAX_ITER


def _cg(hessian_times: Any, g: np.ndarray) -> np.ndarray:
    """d ~ -H^-1 g by conjugate gradient, until ||r|| <= POLISH_CG_TOL ||g|| or
    POLISH_CG_STEPS steps."""
    d = np.zeros_like(g)
    r = -g
    p = r.copy()
    rr = float(r @ r)
    stop = POLISH_CG_TOL * POLISH_CG_TOL * rr
    for _ in range(POLISH_CG_STEPS):
        hp = hessian_times(p)
        curvature = float(p @ hp)
        if not curvature > 0.0:
            break
        alpha = rr / curvature
        d += alpha * p
        r -= alpha * hp
        rr_new = float(r @ r)
        if rr_new <= stop:
            break
        p = r + (rr_new / rr) * p
        rr = rr_new
    return d
