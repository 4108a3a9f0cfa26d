"""Gram: the dual of the L1- or L2-loss linear SVM on the full Gram matrix, by a
primal-dual interior-point method, for few examples (n <= MAX_ROWS).

Problem (per binary problem, as solvers/dcd.py; bias "augment" regularised, or "none"):

    dual  min_a  D(a) = 1/2 a'Qbar a - e'a,   0 <= a_i <= U_i   (no equality constraint),
          Qbar_ij = y_i y_j (x_i.x_j + B^2) + D_ij,   l1: U_i = C_i, D = 0;
          l2: U_i = inf, D_ii = 1/(2 C_i);   w = sum_i y_i a_i z_i at the end.

Why: on unscaled data (madelon: 500 dense features of values 37..822) the dual CD (dcd,
acf) and the cutting planes (ocas) crawl: Qbar's eigenvalues spread over many orders of
magnitude, a coordinate step or a cutting plane moves little, and for the hinge loss
there is no smooth primal for Newton (newton, tron). Even a greedy coordinate descent on
the exact gradient with second-order selection reached only a relative gap of 3e-3 on
madelon l1 in 60 s. An interior-point method is indifferent to that conditioning: each
iteration solves (Qbar + diag(z/a + s/(U - a))) da = r by Cholesky (LAPACK), and the
number of iterations (typically 15..40) hardly depends on the data.

Method: Mehrotra's predictor-corrector (Nocedal & Wright, "Numerical Optimization", 2nd
ed., Algorithm 16.4, for the bound-constrained QP) with multipliers z >= 0 of a >= 0 and
s >= 0 of a <= U (none where U = inf), infeasible start a = U/2 (l1) or a = 1/max Qbar_ii
(l2), z = s = 1, and the step to the boundary damped by 0.99.

Stop rule: a is strictly inside the box, so it is dual feasible, and with the margins
m = Qa (Q = Qbar - diag(D)) and ||w(a)||^2 = a'Qa the primal P(w(a)) and the dual value
-D(a) cost O(n^2) per iteration: converged when (P - (-D)) / P <= min(eps, tol / 10);
the fit's tol then decides `converged` from the certificate recomputed at the returned
w (solvers/certificate.py). "stalled" when the Newton system can no longer be solved or
a step makes no progress; max_iter counts interior-point iterations. Limits, progress
and cancellation act between iterations (one iteration: one Cholesky, n^3 / 3 flops,
about 0.02 s at n = 1000 and 2..5 s at n = 5000, BLAS on one thread: a9a-5k-x4,
n = 5000, took 23 iterations, 105 s on a loaded two-core machine).
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
from solvers.objectives import check_loss, dual_box, dual_objective, primal_objective

MAX_ROWS = 5000  # n^2 doubles for Qbar: 200 MB
WARMUP_VARIANTS: tuple[dict[str, Any], ...] = ({"loss": "l1"}, {"loss": "l2", "bias": "none"})
STEP_TO_BOUNDARY = 0.99


def gram_matrix(problem: LinearProblem) -> np.ndarray:
    """Q = diag(y) (Z Z') diag(y), Z = [X, B 1] (or X), dense (n, n)."""
    X = problem.X
    matrix = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.n_rows, X.n_features))
    if X.n_rows * X.n_features <= 1 << 24 and matrix.nnz > X.n_rows * X.n_features // 8:
        dense = matrix.toarray()
        Q = dense @ dense.T  # BLAS
    else:
        Q = np.asarray((matrix @ matrix.T).todense())
    Q = np.ascontiguousarray(Q, dtype=np.float64)
    Q += problem.bias_scale * problem.bias_scale
    Q *= problem.y[:, None]
    Q *= problem.y[None, :]
    if not np.all(np.isfinite(Q)):
        raise ValueError("some inner products x_i.x_j are not finite float64 (overflow or "
                         "NaN); scale the features")
    return Q


def objectives(H: np.ndarray, upper: np.ndarray, diag: np.ndarray, alpha: np.ndarray
               ) -> tuple[float, float]:
    """(P(w(a)), -D(a)) from Qbar = H = Q + diag(D): margins m = Qa, ||w||^2 = a'Qa."""
    m = H @ alpha - diag * alpha
    quad = float(alpha @ m)
    slack = np.maximum(0.0, 1.0 - m)
    l1 = bool(np.all(np.isfinite(upper)))  # l1: C_i = U_i; l2: C_i = 1 / (2 D_ii)
    loss = float(upper @ slack) if l1 else float(np.sum(slack * slack / (2.0 * diag)))
    return 0.5 * quad + loss, float(alpha.sum()) - 0.5 * quad - 0.5 * float(
        diag @ (alpha * alpha))


def _max_step(x: np.ndarray, dx: np.ndarray) -> float:
    """The largest t in (0, 1] with x + t dx >= 0 (x > 0)."""
    shrinking = dx < 0.0
    if not np.any(shrinking):
        return 1.0
    return min(1.0, float(np.min(-x[shrinking] / dx[shrinking])))


class _InteriorPoint:
    """The iterate (a, z, s) of the bound-constrained QP min 1/2 a'H a - e'a, 0 <= a <= U."""

    def __init__(self, H: np.ndarray, upper: np.ndarray) -> None:
        self.H, self.upper = H, upper
        n = H.shape[0]
        self.finite = np.isfinite(upper)
        self.u = np.where(self.finite, upper, 1.0)  # placeholder where U = inf
        scale = 1.0 / max(float(np.max(np.diag(H))), 1e-300)
        self.a = np.where(self.finite, 0.5 * self.u, scale)
        self.z = np.ones(n)
        self.s = np.where(self.finite, 1.0, 0.0)
        self.m = n + int(np.count_nonzero(self.finite))

    def gap_to_upper(self) -> np.ndarray:
        return np.where(self.finite, self.u - self.a, 1.0)

    def step(self) -> bool:
        """One predictor-corrector step; False when the Newton system cannot be solved or
        the step is zero."""
        H, a, z, s, f = self.H, self.a, self.z, self.s, self.finite
        v = self.gap_to_upper()
        rd = H @ a - 1.0 - z + s
        mu = (float(a @ z) + float(v[f] @ s[f])) / self.m
        K = H.copy()
        K[np.diag_indices_from(K)] += z / a + np.where(f, s / v, 0.0)
        try:
            factor = scipy.linalg.cho_factor(K, overwrite_a=True, check_finite=True)
        except (np.linalg.LinAlgError, ValueError):
            return False

        def direction(rz: np.ndarray, rs: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            rhs = -rd - rz / a + np.where(f, rs / v, 0.0)
            da = scipy.linalg.cho_solve(factor, rhs)
            dz = (-rz - z * da) / a
            ds = np.where(f, (-rs + s * da) / v, 0.0)
            return da, dz, ds

        def lengths(da: np.ndarray, dz: np.ndarray, ds: np.ndarray) -> tuple[float, float]:
            primal = min(_max_step(a, da), _max_step(v[f], -da[f]) if f.any() else 1.0)
            dual = min(_max_step(z, dz), _max_step(s[f], ds[f]) if f.any() else 1.0)
            return primal, dual

        rz, rs = a * z, np.where(f, v * s, 0.0)
        da, dz, ds = direction(rz, rs)
        tp, td = lengths(da, dz, ds)
        affine = (float((a + tp * da) @ (z + td * dz))
                  + float((v[f] - tp * da[f]) @ (s[f] + td * ds[f]))) / self.m
        sigma = (affine / mu) ** 3 if mu > 0 else 0.0
        da, dz, ds = direction(rz + da * dz - sigma * mu,
                               np.where(f, rs - da * ds - sigma * mu, 0.0))
        tp, td = lengths(da, dz, ds)
        tp, td = STEP_TO_BOUNDARY * tp, STEP_TO_BOUNDARY * td
        if not (np.all(np.isfinite(da)) and np.all(np.isfinite(dz))) or (
                tp * float(np.max(np.abs(da), initial=0.0)) == 0.0 and td == 0.0):
            return False
        self.a = np.where(f, np.clip(a + tp * da, 0.0, self.u), np.maximum(a + tp * da, 0.0))
        # stay strictly inside the box (rounding may land a step on a bound)
        self.a = np.where(self.a > 0.0, self.a, a * 1e-3)
        self.a = np.where(f & (self.a >= self.u), self.u - 1e-3 * v, self.a)
        self.z = z + td * dz
        self.s = np.where(f, s + td * ds, 0.0)
        return True


def solve(problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
          ) -> BinarySolution:
    """Solve one binary problem; `params` as filled by validate_params("gram").

    BLAS runs single-threaded here: on a loaded machine OpenBLAS's spinning threads made
    a 600 x 600 Cholesky take 0.9 s instead of 0.005 s (madelon, two cores)."""
    with parallel.single_threaded_blas():
        return _solve(problem, params, monitor)


def _solve(problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
           ) -> BinarySolution:
    t_start = time.perf_counter()
    loss = str(params["loss"])
    check_loss(loss)
    n = problem.X.n_rows
    if n > MAX_ROWS:
        raise ValueError(f"gram holds the {n}x{n} Gram matrix; it takes at most "
                         f"{MAX_ROWS} examples: use dcd or ocas")
    # the stop rule's gap at most tol / 10: the certificate at w must then hold
    eps = min(float(params["eps"]), float(params["tol"]) / 10.0)
    max_iter = int(params["max_iter"])
    upper, diag = dual_box(problem.cost, loss)
    H = gram_matrix(problem)  # Qbar, in place: n^2 doubles, one more per Cholesky
    H[np.diag_indices_from(H)] += diag
    ipm = _InteriorPoint(H, upper)
    t_iterate = time.perf_counter()
    exit_reason, iteration, primal, dual = "max_iter", 0, math.inf, -math.inf
    while True:
        primal, dual = objectives(H, upper, diag, ipm.a)
        if not (math.isfinite(primal) and math.isfinite(dual)):
            exit_reason = "numerical_error"
            break
        if primal - dual <= eps * abs(primal):
            exit_reason = "converged"
            break
        if iteration >= max_iter:
            break
        event = {"iteration": iteration, "primal": primal, "dual": dual,
                 "gap": primal - dual, "violation": None,
                 "active_size": int(np.count_nonzero(ipm.a > 1e-8 * ipm.u))}
        stop = monitor.interruption(lambda event=event: event)  # type: ignore[misc]
        if stop is not None:
            exit_reason = stop
            break
        iteration += 1
        if not ipm.step():
            exit_reason = "stalled"
            break
    t_objective = time.perf_counter()
    alpha = ipm.a
    ya = problem.y * alpha
    X = problem.X
    matrix = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.n_rows, X.n_features))
    w = np.asarray(matrix.T @ ya, dtype=np.float64)
    if problem.bias_scale > 0:
        w = np.append(w, problem.bias_scale * float(ya.sum()))
    if not np.all(np.isfinite(w)):
        exit_reason = "numerical_error"
    primal = primal_objective(problem, w, loss)
    dual = dual_objective(problem, alpha, w, loss)
    return BinarySolution(
        w=w, iterations=iteration, exit_reason=exit_reason, primal=primal, dual=dual,
        gap=primal - dual, alpha=alpha,
        details={"n_support": int(np.count_nonzero(alpha > 1e-8 * ipm.u))},
        timings={"setup_s": t_iterate - t_start, "iterate_s": t_objective - t_iterate,
                 "objective_s": time.perf_counter() - t_objective})
