"""Dense Newton: the primal L2-loss SVM (or logistic regression) by Newton steps solved
exactly, for few features (d + 1 <= MAX_WEIGHTS).

Problem (per binary problem, as solvers/tron.py): min_w f(w) = 1/2 ||w||^2 + sum_i C_i
loss(m_i), m_i = y_i w.z_i (z_i = x_i with the bias feature B for bias="augment"),
loss = max(0, 1 - m)^2 ("l2") or log(1 + exp(-m)) ("logistic").

Why: TRON solves the Newton system H s = -g by conjugate gradient; on unscaled data
(features spanning 1e-2..1e3, or all positive and large as madelon's) H = I + Z'DZ has a
condition number of 1e10 and more, CG makes no headway and TRON reaches its iteration
limit far from the optimum (LIBLINEAR -s 2 too). With few features the Newton system is
small: we form H (dense, (d+1)^2) and solve it by Cholesky, which is indifferent to the
conditioning up to float64 precision. This is the semismooth Newton method for the
squared hinge (Keerthi & DeCoste 2005, "A modified finite Newton method for fast solution
of large scale linear SVMs", JMLR 6; generalised Hessian over the active set
{i : m_i < 1}), with a backtracking (Armijo) line search along the Newton direction.

Stop rule: the gradient certificate ||grad f(w)||^2 <= 2 tol f(w) (f is 1-strongly
convex, so f(w) - f* <= ||grad f(w)||^2 / 2): exit "converged"; a line search that no
longer decreases f in float64: "stalled"; max_iter Newton steps: "max_iter". Each step
costs a pass over the data and O(nnz * (d+1) + (d+1)^3) for H (SciPy / LAPACK).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import scipy.linalg
import scipy.sparse as sp

from solvers import parallel
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor

MAX_WEIGHTS = 2000  # (d + 1)^2 doubles for H: 32 MB
ARMIJO = 1e-4
DENSE_ROWS_LIMIT = 1 << 24  # active rows x weights up to this: H by a dense product
WARMUP_VARIANTS: tuple[dict[str, Any], ...] = ({"loss": "l2"}, {"loss": "logistic"})


DENSE_DESIGN_LIMIT = 1 << 22  # rows x weights up to this (32 MB): Z y as a dense array


def _design(problem: LinearProblem) -> sp.csr_matrix:
    X = problem.X
    Z = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.n_rows, X.n_features))
    if problem.bias_scale > 0:
        Z = sp.hstack([Z, np.full((X.n_rows, 1), problem.bias_scale)], format="csr")
    return Z


def _signed_design(problem: LinearProblem) -> sp.csr_matrix | np.ndarray:
    """diag(y) Z: dense (BLAS products, no SciPy sparse overhead per Newton step, which
    dominated the small sets) when it has at most DENSE_DESIGN_LIMIT entries, else CSR."""
    X = problem.X
    if X.n_rows * problem.n_weights <= DENSE_DESIGN_LIMIT:
        dense = np.zeros((X.n_rows, problem.n_weights))
        rows = np.repeat(np.arange(X.n_rows), np.diff(X.indptr))
        dense[rows, X.indices] = X.data
        if problem.bias_scale > 0:
            dense[:, -1] = problem.bias_scale
        dense *= problem.y[:, None]
        return dense
    return sp.csr_matrix(_design(problem).multiply(problem.y[:, None]))


def _value(cost: np.ndarray, w: np.ndarray, m: np.ndarray, loss: str) -> float:
    """f(w) from w and its margins m = y * (Z w)."""
    if loss == "l2":
        slack = np.maximum(0.0, 1.0 - m)
        return 0.5 * float(w @ w) + float(cost @ (slack * slack))
    return 0.5 * float(w @ w) + float(cost @ np.logaddexp(0.0, -m))


def _objective(Zy: sp.csr_matrix | np.ndarray, cost: np.ndarray, w: np.ndarray, loss: str
               ) -> tuple[float, np.ndarray]:
    """f(w) and the margins m = y * (Z w)."""
    m = np.asarray(Zy @ w)
    return _value(cost, w, m, loss), m


def _hessian(Zy: sp.csr_matrix | np.ndarray, h: np.ndarray) -> np.ndarray:
    """H = I + Zy_A' diag(h_A) Zy_A over the active rows A = {h_i > 0}."""
    active = np.flatnonzero(h)
    if isinstance(Zy, np.ndarray):
        Za = Zy[active]
        H = Za.T @ (h[active, None] * Za)
    else:
        Za = Zy[active]
        if Za.shape[0] * Za.shape[1] <= DENSE_ROWS_LIMIT:  # BLAS on the dense rows
            dense = Za.toarray()
            H = dense.T @ (h[active, None] * dense)
        else:
            H = np.asarray((Za.T @ sp.diags(h[active]) @ Za).todense())
    H[np.diag_indices_from(H)] += 1.0
    return H


def _derivatives(m: np.ndarray, cost: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """(u, h): grad = w + Zy'u, H = I + Zy' diag(h) Zy."""
    if loss == "l2":
        active = m < 1.0
        return np.where(active, 2.0 * cost * (m - 1.0), 0.0), np.where(active, 2.0 * cost, 0.0)
    sigma = np.exp(-np.logaddexp(0.0, m))  # sigma(-m)
    return -cost * sigma, cost * sigma * (1.0 - sigma)


def solve(problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
          ) -> BinarySolution:
    """Solve one binary problem; params: loss, tol, max_iter, optionally w0.

    BLAS runs single-threaded (as in solvers/gram.py): on a loaded two-core machine
    OpenBLAS's spinning threads made each 501 x 501 Cholesky of madelon take 0.4 s
    instead of a few ms (76 Newton steps: 31 s instead of 2 s)."""
    with parallel.single_threaded_blas():
        return _solve(problem, params, monitor)


def _solve(problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
           ) -> BinarySolution:
    started = time.perf_counter()
    loss = str(params.get("loss", "l2"))
    if problem.n_weights > MAX_WEIGHTS:
        raise ValueError(f"newton forms the {problem.n_weights}^2 Hessian; it takes at most "
                         f"{MAX_WEIGHTS} weights (features + bias): use tron")
    tol, max_iter = float(params["tol"]), int(params["max_iter"])
    Zy = _signed_design(problem)
    cost = problem.cost
    w0 = params.get("w0")
    w = np.zeros(problem.n_weights) if w0 is None else np.array(w0, dtype=np.float64)
    f, m = _objective(Zy, cost, w, loss)
    exit_reason, iteration, grad_norm = "max_iter", 0, math.inf
    while True:
        u, h = _derivatives(m, cost, loss)
        grad = w + Zy.T @ u
        grad_norm = float(np.linalg.norm(grad))
        if not math.isfinite(f) or not math.isfinite(grad_norm):
            exit_reason = "numerical_error"
            break
        if grad_norm * grad_norm <= 2.0 * tol * f:
            exit_reason = "converged"
            break
        if iteration >= max_iter:
            break
        event = {"iteration": iteration, "primal": f, "dual": None, "gap": None,
                 "violation": grad_norm, "active_size": int(np.count_nonzero(h))}
        stop = monitor.interruption(lambda event=event: event)  # type: ignore[misc]
        if stop is not None:
            exit_reason = stop
            break
        step = -scipy.linalg.cho_solve(
            scipy.linalg.cho_factor(_hessian(Zy, h), overwrite_a=True, check_finite=False),
            grad, check_finite=False)
        slope = float(grad @ step)
        # backtracking on the margins of the step (one product, then O(n) per trial, as
        # LIBLINEAR's line search); the accepted point's margins are recomputed exactly
        step_margins = np.asarray(Zy @ step)
        t, improved = 1.0, False
        while t > 1e-20:
            f_new = _value(cost, w + t * step, m + t * step_margins, loss)
            if f_new <= f + ARMIJO * t * slope:
                improved = f_new < f
                break
            t *= 0.5
        iteration += 1
        if not improved:
            exit_reason = "stalled"
            break
        w = w + t * step
        f, m = _objective(Zy, cost, w, loss)
    return BinarySolution(
        w=w, iterations=iteration, exit_reason=exit_reason, primal=f, violation=grad_norm,
        details={"active_size": int(np.count_nonzero(m < 1.0)), "grad_norm": grad_norm,
                 "loss": loss},
        timings={"iterate_s": time.perf_counter() - started})
