"""Dual coordinate descent for L2-regularised logistic regression (LIBLINEAR -s 7).

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight * sample weight):

    primal  min_w  P(w) = 1/2 ||w||^2 + sum_i C_i log(1 + exp(-y_i w.x_i))
    dual    min_a  D(a) = 1/2 ||w(a)||^2 + sum_i [a_i log a_i + (C_i - a_i) log(C_i - a_i)
                                               - C_i log C_i],   0 < a_i < C_i,
    w(a) = sum_i y_i a_i x_i, kept up to date. -D(a) <= P* for every feasible a, so the
    returned `dual` (the maximised value -D(a)) is a certificate: P(w(a)) - (-D(a)) >= 0.
    With bias="augment" every x_i carries one more constant feature of value B.

Algorithm: Yu, Huang & Lin, "Dual coordinate descent methods for logistic regression and
maximum entropy models", Machine Learning 2011, Algorithm 3 (a modified Newton method on
each one-variable sub-problem, with the pair a_i, C_i - a_i stored separately so that
neither loses precision near a bound), as LIBLINEAR 2.50's `solve_l2r_lr_dual`: start
a_i = min(1e-3 C_i, 1e-8); each sweep visits a random permutation of the rows; the inner
Newton iteration stops when |g'(z)| < innereps (1e-2, divided by 10 after a sweep with at
most n/10 inner steps, down to min(1e-8, eps)), at most 100 steps, z <- 0.1 z when a step
would leave (0, C_i).

Stop rule (LIBLINEAR's): the largest |g'| of a sweep (at the start of each sub-problem)
< eps (default 0.1). Whether the model is converged is decided by the certificate (tol).
Where we depart: our RNG (xorshift64*; with `sweeps` "sklearn" scikit-learn's
LIBLINEAR's generator and its sum of ||x_i||^2, solvers.backbone.rng_of), a per-row C_i,
max_iter (default 1000; LIBLINEAR 300 before switching to -s 0, which the fallback rule
does here too), and a warm start `alpha0` (an earlier fit's dual point; clipped into the open box).

Each compiled call runs one sweep; the monitor acts between sweeps.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any

import numba
import numpy as np
from numba import njit

from solvers import _logistic_parallel as kernels
from solvers import parallel
from solvers._kernel_helpers import row_axpy, shuffle_sweep
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor, rng_of
from solvers.dual_cd import sklearn_qbar
from solvers.grain import GrainMeter
from solvers.objectives import margins, qbar_diagonal

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = ({}, {"bias": "none"}, {"threads": 2},
                                               {"sweeps": "sklearn"})

INNER_EPS_START = 1e-2


def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Solve one binary problem; `params` as filled by validate_params("logistic_dcd")."""
    started = time.perf_counter()
    X, cost = problem.X, problem.cost
    eps, max_iter = float(params["eps"]), int(params["max_iter"])
    alpha = _start(cost, params.get("alpha0"))
    w = np.zeros(X.n_features + 1)  # last slot: the bias feature (stays 0 if none)
    coefficients = problem.y * alpha[:, 0]
    _accumulate(X.data, X.indices, X.indptr, coefficients, problem.bias_scale, w)
    row_norms = qbar_diagonal(problem, np.zeros(X.n_rows))
    if params.get("sweeps", "hinge") == "sklearn":  # LIBLINEAR's sum: x_ij^2, then B^2
        sklearn_qbar(X.data, X.indptr, np.zeros(X.n_rows), float(problem.bias_scale),
                     row_norms)
    index = np.arange(X.n_rows, dtype=np.int64)
    rng = rng_of(params)
    inner_eps, inner_eps_min = INNER_EPS_START, min(1e-8, eps)
    iteration, exit_reason, violation = 0, "max_iter", math.inf
    threads = int(params.get("threads", 1))
    rounds: _ParallelSweeps | None = None
    context = contextlib.ExitStack()
    if threads > 1 and X.n_rows >= 2 * threads:
        context.enter_context(parallel.numba_threads(threads))
        rounds = _ParallelSweeps(problem, threads, alpha, w, row_norms, index, rng)

    def event() -> dict[str, Any]:  # the objectives at w(a): one pass over the data
        weights = w[: problem.n_weights]
        primal, dual = primal_value(problem, weights), dual_value(weights, alpha, cost)
        return {
            "iteration": iteration,
            "violation": violation,
            "active_size": X.n_rows,
            "primal": primal,
            "dual": dual,
            "gap": primal - dual,
        }

    with context:
        while True:
            stop = monitor.stop_reason(iteration, max_iter, event)
            if stop is not None:
                exit_reason = stop
                break
            if rounds is not None:
                violation, newton_steps = rounds.sweep(inner_eps)
            else:
                violation, newton_steps = _sweep(
                    (X.data, X.indices, X.indptr), problem.y, cost, row_norms, alpha, w,
                    index, rng, (problem.bias_scale, inner_eps))
            iteration += 1
            if not math.isfinite(violation):
                exit_reason = "numerical_error"
                break
            if violation < eps:
                exit_reason = "converged"
                break
            if newton_steps <= X.n_rows // 10:
                inner_eps = max(inner_eps_min, 0.1 * inner_eps)
    weights = w[: problem.n_weights].copy()
    primal = primal_value(problem, weights)
    dual = dual_value(weights, alpha, cost)
    return BinarySolution(
        weights,
        iteration,
        exit_reason,
        primal,
        dual=dual,
        gap=primal - dual,
        violation=violation,
        alpha=alpha[:, 0].copy(),
        details={"active_size": X.n_rows, **(rounds.details() if rounds else {})},
        timings={"iterate_s": time.perf_counter() - started},
    )


def primal_value(problem: LinearProblem, w: np.ndarray) -> float:
    """P(w) = 1/2 ||w||^2 + sum_i C_i log(1 + exp(-y_i w.x_i))."""
    return 0.5 * float(w @ w) + float(
        np.sum(problem.cost * np.logaddexp(0.0, -margins(problem, w)))
    )


def dual_value(w: np.ndarray, alpha: np.ndarray, cost: np.ndarray) -> float:
    """-D(a) for w = w(a), alpha[:, 0] = a and alpha[:, 1] = C - a (both > 0)."""
    entropy = alpha[:, 0] * np.log(alpha[:, 0]) + alpha[:, 1] * np.log(alpha[:, 1])
    return -0.5 * float(w @ w) - float(np.sum(entropy - cost * np.log(cost)))


def _start(cost: np.ndarray, alpha0: Any) -> np.ndarray:
    """(n, 2): a and C - a; LIBLINEAR's start, or alpha0 clipped into the open box."""
    if alpha0 is None:
        first = np.minimum(1e-3 * cost, 1e-8)
    else:
        first = np.asarray(alpha0, dtype=np.float64)
        if first.shape != cost.shape or not np.all(np.isfinite(first)):
            raise ValueError(f"alpha0 must be {cost.shape[0]} finite values")
        margin = np.minimum(1e-3 * cost, 1e-8)
        first = np.clip(first, margin, cost - margin)
    return np.ascontiguousarray(np.column_stack([first, cost - first]))


@njit(cache=True)
def _accumulate(data, indices, indptr, coefficients, bias_scale, w):
    bias_slot = w.shape[0] - 1
    for i in range(indptr.shape[0] - 1):
        # w += c_i x_i (and c_i B in the bias slot)
        row_axpy(coefficients[i], data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]), w)
        w[bias_slot] += coefficients[i] * bias_scale


@njit(cache=True, error_model="numpy")
def _sweep(rows, y, cost, row_norms, alpha, w, index, rng, settings):
    """One sweep of LIBLINEAR's solve_l2r_lr_dual over a random permutation; returns
    (largest |g'| at the start of a sub-problem, inner Newton steps)."""
    data, indices, indptr = rows
    bias_scale, inner_eps = settings
    n_rows = indptr.shape[0] - 1
    shuffle_sweep(index, n_rows, rng)
    largest = 0.0
    newton_steps = 0
    for s in range(n_rows):
        i = index[s]
        g_start, inner = kernels.row_step(data, indices, np.uint64(indptr[i]),
                                          np.uint64(indptr[i + 1]), i, y, cost, row_norms,
                                          alpha, w, bias_scale, inner_eps)
        if math.isnan(g_start):
            return math.nan, newton_steps
        largest = max(largest, g_start)
        newton_steps += inner
    return largest, newton_steps


# Work per part and round, as dcd's (solvers/dcd.py)
ROUND_FACTOR, MIN_PART_WORK = 4, 1 << 18
MERGE_CHUNKS = 64


class _ParallelSweeps:
    """threads > 1: each sweep in rounds of P = threads parts (solvers/_logistic_parallel.py),
    run on the fit's Numba threads or one as the grain meter says (the same arithmetic)."""

    def __init__(self, problem: LinearProblem, parts: int, alpha: np.ndarray, w: np.ndarray,
                 row_norms: np.ndarray, index: np.ndarray, rng: np.ndarray) -> None:
        X = problem.X
        self.problem, self.parts, self.used = problem, parts, numba.get_num_threads()
        numba.set_num_threads(1)  # sequential until the grain meter measures otherwise
        self.rows = (X.data, X.indices, X.indptr)
        self.alpha, self.w, self.row_norms, self.index, self.rng = alpha, w, row_norms, index, rng
        self.old = np.empty_like(alpha)
        self.views = np.ascontiguousarray(np.tile(w, (parts, 1)))
        self.part_hi, self.pos, self.seg = (np.zeros(parts, dtype=np.int64) for _ in range(3))
        self.largest, self.entropy = np.zeros(parts), np.zeros(parts)
        self.steps, self.work_done = (np.zeros(parts, dtype=np.int64) for _ in range(2))
        size = w.shape[0]
        chunks = max(1, min(MERGE_CHUNKS, size // 1024))
        self.feature_bounds = np.linspace(0, size, chunks + 1).astype(np.int64)
        self.chunk_lin, self.chunk_quad = np.zeros(chunks), np.zeros(chunks)
        self.part_work = max(ROUND_FACTOR * size, MIN_PART_WORK)
        self.grain = GrainMeter(self.used)
        self.inner_eps = INNER_EPS_START
        self.rounds, self.smallest_step = 0, 1.0
        self.parallel_seconds = 0.0  # in the calls with the parallel loops (rounds, merges)

    def sweep(self, inner_eps: float) -> tuple[float, int]:
        """One sweep (LIBLINEAR's violation and Newton steps of it)."""
        n = self.problem.X.n_rows
        shuffle_sweep(self.index, n, self.rng)
        for p in range(self.parts):
            self.pos[p], self.part_hi[p] = p * n // self.parts, (p + 1) * n // self.parts
        self.largest[:], self.steps[:] = 0.0, 0
        self.inner_eps = inner_eps
        total = float(self.problem.X.indptr[-1] + n)
        rounds = max(1, int(total // (self.parts * self.part_work)) + 1)  # the sweep's, about
        while self.grain.call(rounds, self._rounds, 0) == 0:
            pass
        return float(self.largest.max()), int(self.steps.sum())

    def _rounds(self, fine: bool, rounds: int) -> tuple[int, int, float]:
        """Up to `rounds` rounds, ending with the sweep: (status 0 going on / 1 done,
        rounds, work)."""
        numba.set_num_threads(self.used if fine else 1)
        problem, work = self.problem, 0
        settings = (float(problem.bias_scale), float(self.inner_eps), float(self.part_work))
        for done in range(rounds):
            if np.array_equal(self.pos, self.part_hi):
                return 1, done, float(work)
            self.seg[:] = self.pos
            started = time.perf_counter()
            kernels.run_round(self.rows, problem.y, problem.cost, self.row_norms, self.alpha,
                              self.old, self.views, self.index, self.part_hi, self.pos,
                              self.largest, self.steps, self.entropy, self.work_done, settings)
            round_seconds = time.perf_counter() - started
            work += int(self.work_done.sum())
            self.rounds += 1
            if not np.all(np.isfinite(self.largest)):
                return 1, done + 1, float(work)
            started = time.perf_counter()
            kernels.merge_terms(self.w, self.views, self.feature_bounds, self.chunk_lin,
                              self.chunk_quad)
            round_seconds += time.perf_counter() - started
            linear, quadratic = float(self.chunk_lin.sum()), float(self.chunk_quad.sum())
            step, entropy = 1.0, float(self.entropy.sum())
            while linear * step + 0.5 * quadratic * step * step + entropy > 0.0:
                step *= 0.5
                if step < 1e-6:
                    step = 0.0  # no decrease found (rounding): the round is undone
                    break
                entropy = float(kernels.entropy_at(self.alpha, self.old, self.index, self.seg,
                                                   self.pos, step))
            if step < 1.0:
                kernels.scale_back(self.alpha, self.old, self.index, self.seg, self.pos, step)
                self.smallest_step = min(self.smallest_step, step)
            started = time.perf_counter()
            kernels.apply_merge(self.w, self.views, self.feature_bounds, step)
            self.parallel_seconds += round_seconds + time.perf_counter() - started
        return (1 if np.array_equal(self.pos, self.part_hi) else 0), rounds, float(work)

    def details(self) -> dict[str, Any]:
        return {"threads": self.used, "parts": self.parts, "rounds": self.rounds,
                "smallest_merge_step": self.smallest_step,
                "fine_grained_share": self.grain.share_fine(),
                "parallel_s": self.parallel_seconds}
