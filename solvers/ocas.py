"""OCAS: optimized cutting planes for the L1-loss (hinge) linear SVM.

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight[label of row i]):

    min_w  F(w) = 1/2 ||w||^2 + R(w),   R(w) = sum_i C_i max(0, 1 - y_i w.x_i)

(the paper's C/m is our C_i). With bias="augment" every x_i carries one more constant
feature of value B (regularised, like LIBLINEAR -B); bias="none" fits no intercept.

Algorithm: Franc & Sonnenburg, "Optimized Cutting Plane Algorithm for Support Vector
Machines", ICML 2008, Algorithm 1. The risk is bounded from below by cutting planes
R(w) >= <a_k, w> + b_k taken at points w_c (Eq. 5, with per-example C_i):
a_k = -s_k, s_k = sum_{i in V} C_i y_i x_i, b_k = sum_{i in V} C_i, V = {i: y_i w_c.x_i <= 1}.
The reduced problem F_t(w) = 1/2 ||w||^2 + max(0, max_k <a_k, w> + b_k) (Eq. 3) is solved in
its dual, a QP on the simplex (the zero plane is the slack variable beta_0):

    max_beta D(beta) = b'beta - 1/2 beta'H beta,  beta >= 0,  sum_k beta_k <= 1,
    H_kl = <s_k, s_l>,  w_t = sum_k beta_k s_k,

by a primal active-set method (a few small KKT solves per iteration), warm-started from
the previous iteration's beta. One iteration:
  1. reduced problem -> w_t and D(beta) <= F_t(w_t) <= F(w*);
  2. outputs y_i w_t.x_i;
  3. exact line search w_best <- argmin_{k >= 0} F((1 - k) w_best + k w_t) (Appendix A:
     G'(k) is increasing and piecewise linear; only the breakpoints k_i > 0 are sorted);
  4. the stop test;
  5. a new cutting plane at w_c = (1 - lambda) w_best + lambda w_t, lambda = 0.1 (Eq. 8).
w_best = 0 before the first iteration (or the warm start `w0`, e.g. the w of a dual CD
solver that stalled), and the first plane is taken there.

Stop rule (Eq. 9): F(w_best) - D(beta) <= eps * |F(w_best)| (eps default 1e-3), or
<= eps_abs when given. D(beta) is the dual value of the current reduced-problem iterate, a
lower bound of the optimum F(w*), so the reported dual and gap = F(w_best) - D(beta) >= 0
certify the returned w_best.

Parallelism (Section 3.1): the outputs X w_t, the line-search breakpoints and the new
cutting-plane sum sum_i C_i y_i x_i run in Numba `prange` loops over row chunks of equal
nnz; each chunk owns its slice of the outputs and its own accumulator, reduced after the
loop in chunk order. The chunks depend on the data only, not on the thread count, so a
run gives bit-identical results with any `threads` (set for the call with
numba.set_num_threads and restored afterwards).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from numba import njit, prange

from solvers import parallel
from solvers._kernel_helpers import reduce_chunks, row_axpy, signed_margins
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor
from solvers.objectives import primal_objective

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = ({}, {"bias": "none"})

LAMBDA = 0.1  # the cutting-plane point w_c = (1 - LAMBDA) w_best + LAMBDA w_t (Eq. 8)
QP_TOLERANCE = 0.05  # the reduced problem is solved to this fraction of the outer target
QP_MAX_STEPS_PER_PLANE = 10


def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Solve one binary problem with OCAS; `params` as filled by validate_params("ocas")."""
    t_start = time.perf_counter()
    eps = float(params["eps"])
    eps_abs = params.get("eps_abs")
    with parallel.numba_threads(int(params.get("threads", 1))) as threads:
        state = _OcasState(problem, _warm_start(problem, params.get("w0")))
        t_iterate = time.perf_counter()
        exit_reason = _iterate(state, eps, eps_abs, int(params["max_iter"]), monitor)
        t_objective = time.perf_counter()
        w = state.w_best[: problem.n_weights].copy()
        if not np.all(np.isfinite(w)):
            exit_reason = "numerical_error"
        primal = primal_objective(problem, w, "l1")
    t_end = time.perf_counter()
    dual = state.dual
    timings = {"setup_s": t_iterate - t_start, "objective_s": t_end - t_objective}
    timings.update(state.timings)
    return BinarySolution(
        w=w,
        iterations=state.iteration,
        exit_reason=exit_reason,
        primal=primal,
        dual=dual,
        gap=primal - dual,
        violation=(primal - dual) / max(abs(primal), 1e-300),
        details={"active_size": state.n_loss, "n_cuts": state.n_planes,
                 "n_active_cuts": int(np.count_nonzero(state.beta[1: state.n_planes + 1])),
                 "qp_steps": state.qp_steps, "threads": threads},
        timings=timings,
    )


def _warm_start(problem: LinearProblem, w0: Any) -> np.ndarray | None:
    """w0 (problem.n_weights entries) padded to the state's size, or None."""
    if w0 is None:
        return None
    start = np.asarray(w0, dtype=np.float64)
    if start.shape != (problem.n_weights,) or not np.all(np.isfinite(start)):
        raise ValueError(f"w0 must be {problem.n_weights} finite weights, got shape "
                         f"{start.shape}")
    padded = np.zeros(problem.X.n_features + 1)
    padded[: problem.n_weights] = start
    return padded


def chunk_bounds(indptr: np.ndarray, n_weights: int) -> np.ndarray:
    """Row chunks of the parallel loops (1 accumulator vector(s) per chunk)."""
    return parallel.chunk_bounds(indptr, n_weights, accumulators=1)


class _OcasState:
    """Arrays of the iteration: w_best, outputs, cutting planes, the reduced problem."""

    def __init__(self, problem: LinearProblem, w0: np.ndarray | None = None) -> None:
        X = problem.X
        self.problem = problem
        self.rows = (X.data, X.indices, X.indptr)
        self.bias_scale = float(problem.bias_scale)
        n, size = X.n_rows, X.n_features + 1  # last slot: the bias feature (0 if none)
        self.bounds = chunk_bounds(X.indptr, size)
        n_chunks = self.bounds.shape[0] - 1
        self.w_best = np.zeros(size)
        self.w_t = np.zeros(size)
        self.out_best = np.zeros(n)  # y_i w_best.x_i
        self.out_t = np.zeros(n)  # y_i w_t.x_i
        self.breaks = np.empty(n)
        self.jumps = np.empty(n)
        self.chunk_acc = np.zeros((n_chunks, size))
        self.chunk_sums = np.zeros((n_chunks, 4))
        self.plane = np.zeros(size)
        # cutting planes s_k (sparse, k = 1..n_planes; slot 0 is the zero plane)
        self.plane_ptr = np.zeros(2, dtype=np.int64)
        self.plane_idx = np.zeros(max(size, 16), dtype=np.int32)
        self.plane_val = np.zeros(max(size, 16))
        self.n_planes = 0
        capacity = 64
        self.H = np.zeros((capacity, capacity))
        self.b = np.zeros(capacity)
        self.beta = np.zeros(capacity)
        self.beta[0] = 1.0  # all mass on the zero plane: w = 0
        self.grad = np.zeros(capacity)  # H beta - b
        self.iteration = 0
        self.qp_steps = 0
        self.primal = float(np.sum(problem.cost))  # F(0)
        self.dual = 0.0
        self.plane_offset = 0.0  # b of the plane summed by the last step_and_cut
        self.n_loss = n
        self.timings = {"qp_s": 0.0, "output_s": 0.0, "line_search_s": 0.0, "cut_s": 0.0}
        if w0 is not None:  # warm start: w_best = w0, the first plane is taken there
            self.w_best[:] = w0
            signed_margins(self.rows, problem.y, self.w_best, self.bias_scale, self.bounds,
                            self.out_best)
            self.out_t[:] = self.out_best

    # ---- one OCAS iteration, in steps

    def solve_reduced_problem(self, tolerance: float) -> None:
        started = time.perf_counter()
        m = self.n_planes + 1
        self.qp_steps += int(_qp_simplex(self.H, self.b, self.beta, self.grad, m, tolerance,
                                         QP_MAX_STEPS_PER_PLANE * m + 100))
        self.dual = float(_qp_dual_value(self.b, self.beta, self.grad, m))
        _combine_planes(self.beta, (self.plane_ptr, self.plane_idx, self.plane_val), m,
                        self.w_t)
        self.timings["qp_s"] += time.perf_counter() - started

    def compute_outputs(self) -> None:
        started = time.perf_counter()
        signed_margins(self.rows, self.problem.y, self.w_t, self.bias_scale, self.bounds,
                        self.out_t)
        self.timings["output_s"] += time.perf_counter() - started

    def line_search(self) -> float:
        """k* = argmin_{k >= 0} F(w_best + k (w_t - w_best)) (Appendix A)."""
        started = time.perf_counter()
        direction = self.w_t - self.w_best
        a0 = float(direction @ direction)
        b0 = float(self.w_best @ direction)
        slope = _breakpoints_kernel(self.out_best, self.out_t, self.problem.cost, self.bounds,
                                    self.breaks, self.jumps, self.chunk_sums)
        k = float(_line_search_root(self.breaks, self.jumps, self.bounds, self.chunk_sums,
                                    a0, b0 + slope))
        self.timings["line_search_s"] += time.perf_counter() - started
        return k

    def step_and_cut(self, k: float) -> None:
        """w_best += k (w_t - w_best); F(w_best); the cutting plane at w_c (summed, not added)."""
        started = time.perf_counter()
        if k != 0.0:
            self.w_best += k * (self.w_t - self.w_best)
        _update_and_cut(self.rows, (self.problem.y, self.problem.cost),
                        (self.out_best, self.out_t), (k, LAMBDA, self.bias_scale), self.bounds,
                        self.chunk_acc, self.chunk_sums)
        reduce_chunks(self.chunk_acc, self.plane)
        sums = self.chunk_sums.sum(axis=0)  # tiny; chunk order fixed
        self.primal = 0.5 * float(self.w_best @ self.w_best) + float(sums[0])
        self.n_loss = int(sums[2])
        self.plane_offset = float(sums[1])
        self.timings["cut_s"] += time.perf_counter() - started

    def add_plane(self) -> None:
        started = time.perf_counter()
        nonzero = np.flatnonzero(self.plane)
        self._store_plane(nonzero, self.plane[nonzero])
        k = self.n_planes  # index of the new plane (slot 0 is the zero plane)
        if k >= self.H.shape[0]:
            self._grow(2 * self.H.shape[0])
        column = np.zeros(k + 1)
        _plane_dots(self.plane, (self.plane_ptr, self.plane_idx, self.plane_val), k, column)
        self.H[k, 1: k + 1] = column[1:]
        self.H[1: k + 1, k] = column[1:]
        self.b[k] = self.plane_offset
        self.beta[k] = 0.0
        # grad_k = (H beta)_k - b_k; and every other gradient is unchanged (beta_k = 0)
        self.grad[k] = float(column[1:] @ self.beta[1: k + 1]) - self.plane_offset
        self.timings["cut_s"] += time.perf_counter() - started

    def _store_plane(self, indices: np.ndarray, values: np.ndarray) -> None:
        start = int(self.plane_ptr[self.n_planes])
        end = start + indices.shape[0]
        if end > self.plane_idx.shape[0]:
            grown = max(end, 2 * self.plane_idx.shape[0])
            self.plane_idx = np.concatenate([self.plane_idx, np.zeros(grown, np.int32)])
            self.plane_val = np.concatenate([self.plane_val, np.zeros(grown)])
        self.plane_idx[start:end] = indices
        self.plane_val[start:end] = values
        self.n_planes += 1
        if self.n_planes + 1 >= self.plane_ptr.shape[0]:
            self.plane_ptr = np.concatenate([self.plane_ptr, np.zeros_like(self.plane_ptr)])
        # plane k occupies plane_ptr[k - 1]:plane_ptr[k] (k >= 1)
        self.plane_ptr[self.n_planes] = end

    def _grow(self, capacity: int) -> None:
        old = self.H.shape[0]
        H = np.zeros((capacity, capacity))
        H[:old, :old] = self.H
        self.H = H
        for name in ("b", "beta", "grad"):
            array = np.zeros(capacity)
            array[:old] = getattr(self, name)
            setattr(self, name, array)

    def snapshot(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "primal": self.primal, "dual": self.dual,
                "gap": self.primal - self.dual,
                "violation": (self.primal - self.dual) / max(abs(self.primal), 1e-300),
                "active_size": self.n_loss}


def _iterate(
    state: _OcasState, eps: float, eps_abs: float | None, max_iter: int,
    monitor: ProgressMonitor,
) -> str:
    # the first cutting plane, at w_best (0, or the warm start w0)
    state.step_and_cut(0.0)
    state.add_plane()
    while True:
        target = eps * abs(state.primal)
        if eps_abs is not None:
            target = max(target, float(eps_abs))
        state.solve_reduced_problem(QP_TOLERANCE * target)
        state.compute_outputs()
        k = state.line_search()
        state.step_and_cut(k)
        state.iteration += 1
        if not (math.isfinite(state.primal) and math.isfinite(state.dual)):
            return "numerical_error"
        gap = state.primal - state.dual
        if gap <= eps * abs(state.primal) or (eps_abs is not None and gap <= eps_abs):
            return "converged"
        stop = monitor.stop_reason(state.iteration, max_iter, state.snapshot)
        if stop is not None:
            return stop
        state.add_plane()


# --------------------------------------------------------------------------------------
# Kernels. Row loops: solvers/_kernel_helpers.py; unsigned counters: no negative-index
# wraparound code in inner loops.


@njit(cache=True, parallel=True)
def _breakpoints_kernel(out_best, out_t, cost, bounds, breaks, jumps, chunk_sums):
    """The loss part of G'(0+) and the breakpoints k_i > 0 of G (Appendix A).

    Loss term i of G(k) = F(w_best + k (w_t - w_best)): C_i max(0, slack_i - k delta_i),
    slack_i = 1 - out_best_i, delta_i = out_t_i - out_best_i; its slope is -C_i delta_i
    while active, and G' jumps up by C_i |delta_i| at k_i = slack_i / delta_i. Each chunk
    writes its breakpoints k_i > 0 (and jumps) compactly at the start of its own slice and
    their count to chunk_sums[c, 3]. Returns the loss part of G'(0+).
    """
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        slope = 0.0
        count = bounds[c]
        for i in range(bounds[c], bounds[c + 1]):
            slack = 1.0 - out_best[i]
            delta = out_t[i] - out_best[i]
            if slack > 0.0 or (slack == 0.0 and delta < 0.0):  # active just right of 0
                slope -= cost[i] * delta
            if (slack > 0.0 and delta > 0.0) or (slack < 0.0 and delta < 0.0):
                breaks[count] = slack / delta
                jumps[count] = cost[i] * abs(delta)
                count += 1
        chunk_sums[c, 0] = slope
        chunk_sums[c, 3] = count - bounds[c]
    total = 0.0
    for c in range(n_chunks):
        total += chunk_sums[c, 0]
    return total


def _line_search_root(breaks: np.ndarray, jumps: np.ndarray, bounds: np.ndarray,
                      chunk_sums: np.ndarray, a0: float, slope0: float) -> float:
    """argmin_{k >= 0} of G, with G'(k) = a0 k + slope0 + (jumps of breakpoints <= k).

    Gathers the chunks' breakpoints k_i > 0, keeps those below the root of a0 k + slope0
    (jumps only raise G', so the minimiser is never beyond it), sorts only them (NumPy's
    sort: several times faster than a compiled quicksort), and walks the sorted
    breakpoints until 0 is in the subdifferential.
    """
    if slope0 >= 0.0:
        return 0.0
    limit = -slope0 / a0 if a0 > 0.0 else math.inf
    total = int(chunk_sums[:, 3].sum())
    ks, js = np.empty(total), np.empty(total)
    count = int(_gather_breakpoints(breaks, jumps, bounds, chunk_sums, limit, ks, js))
    order = np.argsort(ks[:count])
    return float(_walk_breakpoints(ks, js, order, a0, slope0))


@njit(cache=True)
def _gather_breakpoints(breaks, jumps, bounds, chunk_sums, limit, ks, js):
    """The chunks' breakpoints (and jumps) <= limit, compacted into ks, js; their count."""
    total = 0
    for c in range(bounds.shape[0] - 1):
        start = bounds[c]
        for j in range(start, start + np.int64(chunk_sums[c, 3])):
            if breaks[j] <= limit:
                ks[total] = breaks[j]
                js[total] = jumps[j]
                total += 1
    return total


@njit(cache=True)
def _walk_breakpoints(ks, js, order, a0, slope0):
    """The root of G' along the breakpoints ks[order] (ascending), G'(0+) = slope0 < 0."""
    slope = slope0  # G'(k) = a0 k + slope between breakpoints
    for q in range(order.shape[0]):
        k = ks[order[q]]
        if a0 * k + slope >= 0.0:  # the root lies before this breakpoint
            return -slope / a0
        slope += js[order[q]]
        if a0 * k + slope >= 0.0:  # 0 in the subdifferential at the breakpoint
            return k
    if a0 > 0.0:
        return -slope / a0
    return 0.0  # a0 = 0: w_t = w_best (cannot happen with slope0 < 0)


@njit(cache=True, parallel=True)
def _update_and_cut(rows, labels, outputs, settings, bounds, chunk_acc, chunk_sums):
    """Move out_best to w_best + k (w_t - w_best), and sum the cutting plane at w_c.

    rows = (data, indices, indptr); labels = (y, C); outputs = (out_best, out_t), out_best
    updated in place; settings = (k, lambda, B). Per chunk c: chunk_acc[c] = sum over
    violators V of C_i y_i x_i (bias feature in the last slot), chunk_sums[c] = (loss sum
    at the new w_best, sum_V C_i, number of examples with positive loss, -).
    """
    data, indices, indptr = rows
    y, cost = labels
    out_best, out_t = outputs
    k, lam, bias_scale = settings
    bias_slot = chunk_acc.shape[1] - 1
    for c in prange(bounds.shape[0] - 1):
        acc = chunk_acc[c]
        acc[:] = 0.0
        loss = 0.0
        offset = 0.0
        n_loss = 0
        for i in range(bounds[c], bounds[c + 1]):
            # out_best <- out_best + k (out_t - out_best); out_c at (1-lam) w_best + lam w_t
            best = out_best[i] + k * (out_t[i] - out_best[i])
            out_best[i] = best
            if best < 1.0:
                loss += cost[i] * (1.0 - best)
                n_loss += 1
            if best + lam * (out_t[i] - best) <= 1.0:
                # acc += C_i y_i x_i
                scale = cost[i] * y[i]
                row_axpy(scale, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]),
                          acc)
                acc[bias_slot] += scale * bias_scale
                offset += cost[i]
        chunk_sums[c, 0] = loss
        chunk_sums[c, 1] = offset
        chunk_sums[c, 2] = n_loss


@njit(cache=True, parallel=True)
def _plane_dots(dense, planes, n_old, out):
    """out[k] = <s_k, dense> for the stored planes k = 1..n_old (out[0] = 0, zero plane)."""
    ptr, idx, val = planes
    out[0] = 0.0
    for k in prange(1, n_old + 1):
        total = 0.0
        for q in range(ptr[k - 1], ptr[k]):
            total += dense[idx[q]] * val[q]
        out[k] = total


@njit(cache=True)
def _combine_planes(beta, planes, m, w):
    """w = sum_{k=1}^{m-1} beta_k s_k (the reduced problem's solution)."""
    ptr, idx, val = planes
    w[:] = 0.0
    for k in range(1, m):
        b_k = beta[k]
        if b_k != 0.0:
            for q in range(ptr[k - 1], ptr[k]):
                w[idx[q]] += b_k * val[q]


@njit(cache=True)
def _qp_dual_value(b, beta, grad, m):
    """D(beta) = b'beta - 1/2 beta'H beta = 1/2 (b'beta - beta'grad), grad = H beta - b."""
    total = 0.0
    for k in range(m):
        total += beta[k] * (b[k] - grad[k])
    return 0.5 * total


@njit(cache=True)
def _qp_simplex(H, b, beta, grad, m, tolerance, max_steps):
    """min_beta f = 1/2 beta'H beta - b'beta on the simplex sum_{k<m} beta_k = 1, beta >= 0.

    Slot 0 is the zero plane (H[0] = 0, b[0] = 0), the slack of sum_{k>=1} beta_k <= 1.
    Primal active-set method, warm-started from beta: the free set is the support of beta
    plus the index of the smallest gradient; the equality-constrained problem on it (KKT
    system, H_FF + ridge I with a tiny ridge: cutting planes are often linearly dependent)
    gives the target, a ratio test keeps beta >= 0 (a blocking variable leaves the set).
    Stops when the Frank-Wolfe gap beta'grad - min_j grad_j (>= f(beta) - f*) <= tolerance.
    grad = H beta - b is kept up to date. Returns the number of steps taken.
    """
    largest = 0.0
    for k in range(m):
        largest = max(largest, H[k, k])
    ridge = 1e-13 * max(largest, 1e-300)
    free = np.empty(m, dtype=np.int64)
    steps = 0
    while steps < max_steps:
        weighted = 0.0
        g_min = np.inf
        j_min = -1
        for k in range(m):
            weighted += beta[k] * grad[k]
            if grad[k] < g_min:
                g_min = grad[k]
                j_min = k
        if weighted - g_min <= tolerance:
            break
        f = 0
        for k in range(m):
            if beta[k] > 0.0 or k == j_min:
                free[f] = k
                f += 1
        while True:
            # [H_FF + ridge I, 1; 1', 0] [x; nu] = [b_F; 1]
            K = np.zeros((f + 1, f + 1))
            rhs = np.zeros(f + 1)
            for a in range(f):
                for c in range(f):
                    K[a, c] = H[free[a], free[c]]
                K[a, a] += ridge
                K[a, f] = 1.0
                K[f, a] = 1.0
                rhs[a] = b[free[a]]
            rhs[f] = 1.0
            solution = np.linalg.solve(K, rhs)
            # largest t in (0, 1] with beta_F + t (x - beta_F) >= 0
            t = 1.0
            block = -1
            for a in range(f):
                x = solution[a]
                if x < 0.0:
                    current = beta[free[a]]
                    ratio = current / (current - x)
                    if ratio < t:
                        t = ratio
                        block = a
            if t <= 0.0 and f > 1:  # a variable at 0 would go negative: drop it
                free[block] = free[f - 1]
                f -= 1
                continue
            break
        for a in range(f):
            k = free[a]
            beta[k] += t * (solution[a] - beta[k])
            if beta[k] < 0.0 or (a == block and t < 1.0):
                beta[k] = 0.0
        # grad = H beta - b
        for k in range(m):
            total = -b[k]
            for a in range(f):
                total += H[k, free[a]] * beta[free[a]]
            grad[k] = total
        steps += 1
    return steps
