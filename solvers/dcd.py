"""Dual coordinate descent (DCD) for L1- and L2-loss linear SVMs, with shrinking.

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight[label of row i]):

    primal  min_w  1/2 ||w||^2 + sum_i C_i max(0, 1 - y_i w.x_i)^p,   p = 1 (l1) or 2 (l2)
    dual    min_a  D(a) = 1/2 a'Qbar a - e'a,   0 <= a_i <= U_i,
            Qbar = Q + diag(D_ii), Q_ij = y_i y_j x_i.x_j,
            l1: U_i = C_i, D_ii = 0;   l2: U_i = inf, D_ii = 1/(2 C_i);
    w(a) = sum_i y_i a_i x_i is maintained during the iterations. With bias="augment" every
    x_i carries one more constant feature of value B (regularised, like LIBLINEAR -B).

Algorithm: Hsieh, Chang, Lin, Keerthi & Sundararajan, "A Dual Coordinate Descent Method
for Large-scale Linear SVM", ICML 2008: Algorithm 1 (one-variable Newton step
a_i <- min(max(a_i - G/Qbar_ii, 0), U_i) with G = y_i w.x_i - 1 + D_ii a_i), the random
permutation of Section 3.1 and the shrinking of Section 3.2, as LIBLINEAR 2.50's
`solve_l2r_l1l2_svc` (linear.cpp) implements them, with three differences: a per-example
C_i (LIBLINEAR has one C per class), our own RNG (xorshift64*, not the C library's rand(),
so the permutations differ from LIBLINEAR's) and no sweep limit of its own (LIBLINEAR
stops at 300 sweeps; here max_iter, default 1000). Shrinking: a variable at a bound leaves
the active set when its gradient G lies beyond the previous sweep's projected-gradient
extremes (G > PGmax_old at a_i = 0, G < PGmin_old at a_i = U_i).

Stop rule (LIBLINEAR >= 2.42): after a sweep, with PGmax / PGmin the largest / smallest
projected gradient over the active set, PGmax - PGmin <= eps and |PGmax| <= eps and
|PGmin| <= eps. (Before 2.42 LIBLINEAR tested the spread PGmax - PGmin alone, which
accepts a sweep whose free variables all share one large gradient.) When it holds and the
active set is the full set, converged; otherwise the active set is reset to all
variables, shrinking is disabled for one full pass, and only when that unshrunk pass also
satisfies the test is the problem converged. A sweep that visits no variable (all shrunk)
also resets the active set (LIBLINEAR would keep sweeping the empty set until max_iter).
"violation" reports max(PGmax - PGmin, |PGmax|, |PGmin|) of the last sweep.
The returned objectives are P(w) and the maximised dual value -D(a) (duality gap >= 0).

The compiled kernel runs a bounded amount of work (about `work_budget` nonzeros) and
returns to Python, so the wrapper can enforce max_seconds, emit throttled progress events
and honour cancellation; the kernel's whole state lives in arrays, so splitting the work
into calls does not change a single bit of the result.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numba
import numpy as np
from numba import njit

from solvers import _dcd_parallel as par
from solvers import dual_cd, parallel
from solvers._kernel_helpers import next_below
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor
from solvers.grain import GrainMeter

WARMUP_VARIANTS = dual_cd.WARMUP_VARIANTS

# counters[] slots (int64) and bounds[] slots (float64) of the kernel state, in the order
# the kernel loads and stores them.
_ITERATION, _ACTIVE_SIZE, _POSITION, _IN_SWEEP = 0, 1, 2, 3
_PG_MAX_OLD, _PG_MIN_OLD, _PG_MAX_NEW, _PG_MIN_NEW, _LAST_VIOLATION = 0, 1, 2, 3, 4

# LIBLINEAR skips the update when |projected gradient| <= this.
_PG_ZERO = 1.0e-12


def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Solve one binary problem with DCD; `params` as filled by validate_params("dcd").
    With `threads` > 1 the parallel rounds of solvers/_dcd_parallel.py (threads = 1 is the
    sequential kernel, bit for bit as before)."""
    threads = int(params.get("threads", 1))
    if threads <= 1 or problem.X.n_rows < 2 * threads:
        return dual_cd.solve_dual(_DcdState, problem, params, monitor)
    with parallel.numba_threads(threads):
        return dual_cd.solve_dual(_ParallelDcdState, problem, params, monitor)


class _DcdState(dual_cd.DualState):
    """DualState plus the shrinking state: the active set and the PG extremes."""

    def __init__(self, problem: LinearProblem, params: dict[str, Any]) -> None:
        super().__init__(problem, params)
        X = problem.X
        self.counters = np.array([0, X.n_rows, 0, 0], dtype=np.int64)
        self.bounds = np.array([math.inf, -math.inf, -math.inf, math.inf, math.nan])
        index = np.arange(X.n_rows, dtype=np.int64)
        self._use_kernel(_dcd_sweeps, (self.alpha, self.w, index),
                         (self.counters, self.bounds, self.rng))

    def progress(self) -> dict[str, Any]:
        return {"violation": float(self.bounds[_LAST_VIOLATION]),
                "active_size": int(self.counters[_ACTIVE_SIZE])}


# Work per part and round: ROUND_FACTOR x n_weights nonzeros (the merge costs about
# 2 (parts + 1) n_weights memory operations), at least MIN_PART_WORK: each round costs
# half a dozen Python-level calls (with 2^14 a 2-thread fit of the 20,000 x 20,000 text
# set spent 71% of its wall time outside the rounds, on a loaded machine).
ROUND_FACTOR, MIN_PART_WORK = 4, 1 << 18
MERGE_CHUNKS = 64  # feature chunks of the merge


class _ParallelDcdState(dual_cd.DualState):
    """The state of the parallel rounds (solvers/_dcd_parallel.py): P = threads parts,
    each with its own view of w; the Numba threads set for the fit (`used`) run them, or
    one thread, as the grain meter says. Built inside parallel.numba_threads."""

    def __init__(self, problem: LinearProblem, params: dict[str, Any]) -> None:
        super().__init__(problem, params)
        self.parts, self.used = int(params["threads"]), numba.get_num_threads()
        numba.set_num_threads(1)  # sequential until the grain meter measures otherwise
        n, size, parts = problem.X.n_rows, self.w.shape[0], self.parts
        self.counters = np.array([0, n, 0, 0], dtype=np.int64)
        self.bounds = np.array([math.inf, -math.inf, math.nan, 1.0])
        self.index = np.arange(n, dtype=np.int64)
        self.scratch = np.empty(n, dtype=np.int64)
        self.delta = np.zeros(n)
        self.views = np.ascontiguousarray(np.tile(self.w, (parts, 1)))
        self.part_lo, self.part_hi, self.part_end, self.pos, self.seg = (
            np.zeros(parts, dtype=np.int64) for _ in range(5))
        self.pg_max, self.pg_min, self.lin, self.quad = (np.zeros(parts) for _ in range(4))
        self.work_done = np.zeros(parts, dtype=np.int64)
        self.status = np.zeros(parts, dtype=np.int64)
        chunks = max(1, min(MERGE_CHUNKS, size // 1024))
        self.feature_bounds = np.linspace(0, size, chunks + 1).astype(np.int64)
        self.chunk_lin, self.chunk_quad = np.zeros(chunks), np.zeros(chunks)
        self.part_work = max(ROUND_FACTOR * size, MIN_PART_WORK)
        self.grain = GrainMeter(self.used)
        self.parallel_seconds = 0.0  # in the calls with the parallel loops (rounds, merges)
        self.rows = (problem.X.data, problem.X.indices, problem.X.indptr)
        self.labels = (problem.y, self.upper, self.diag, self.qbar_diag)

    def run(self, budget: int) -> int:
        rounds = max(1, budget // (self.part_work * self.parts))
        return self.grain.call(rounds, self._rounds, dual_cd.PAUSED)

    def _rounds(self, fine: bool, rounds: int) -> tuple[int, int, float]:
        """Up to `rounds` rounds on the threads (fine) or one: (status, rounds, work).
        The parts are the data's, so both give the same arithmetic."""
        numba.set_num_threads(self.used if fine else 1)
        counters, bounds, work = self.counters, self.bounds, 0
        bias_scale = float(self.problem.bias_scale)
        for done in range(rounds):
            if counters[par.IN_SWEEP] == 0:
                if counters[par.ITERATION] >= self.max_iter:
                    return dual_cd.MAX_ITER, done, float(work)
                par.start_sweep(self.index, counters, self.rng, self.part_lo, self.part_hi,
                                self.part_end, self.pos, self.pg_max, self.pg_min)
            self.seg[:] = self.pos
            started = time.perf_counter()
            par.run_round(self.rows, self.labels, self.alpha, self.views, self.index,
                          self.delta, self.part_hi, self.pos, self.pg_max, self.pg_min,
                          self.lin, self.quad, self.work_done, self.status,
                          (bias_scale, float(bounds[par.PG_MAX_OLD]),
                           float(bounds[par.PG_MIN_OLD]), self.part_work))
            self.parallel_seconds += time.perf_counter() - started
            work += int(self.work_done.sum())
            counters[par.ROUNDS] += 1
            if np.any(self.status == dual_cd.NON_FINITE):
                return dual_cd.NON_FINITE, done + 1, float(work)
            self._merge()
            if np.array_equal(self.pos, self.part_hi):
                status = par.end_sweep(self.index, self.scratch, counters, bounds,
                                       self.part_lo, self.part_hi, self.part_end,
                                       self.pg_max, self.pg_min, self.eps,
                                       self.problem.X.n_rows)
                if status == dual_cd.CONVERGED:
                    return status, done + 1, float(work)
        return dual_cd.PAUSED, rounds, float(work)

    def _merge(self) -> None:
        """w and alpha += step x the parts' steps, step by exact line search on [0, 1]."""
        started = time.perf_counter()
        par.merge_terms(self.w, self.views, self.feature_bounds, self.chunk_lin,
                        self.chunk_quad)
        linear = float(self.lin.sum()) + float(self.chunk_lin.sum())
        quadratic = float(self.quad.sum()) + float(self.chunk_quad.sum())
        step = 1.0
        if quadratic > 0.0 and -linear < quadratic:
            step = max(-linear / quadratic, 0.0)
            par.scale_back(self.alpha, self.upper, self.delta, self.index, self.seg,
                           self.pos, step)
            self.bounds[par.SMALLEST_STEP] = min(self.bounds[par.SMALLEST_STEP], step)
        par.apply_merge(self.w, self.views, self.feature_bounds, step)
        self.parallel_seconds += time.perf_counter() - started

    def progress(self) -> dict[str, Any]:
        return {"violation": float(self.bounds[par.LAST_VIOLATION]),
                "active_size": int(self.counters[par.ACTIVE_SIZE])}

    def details(self) -> dict[str, Any]:
        return {**super().details(), "threads": self.used, "parts": self.parts,
                "rounds": int(self.counters[par.ROUNDS]),
                "smallest_merge_step": float(self.bounds[par.SMALLEST_STEP]),
                "fine_grained_share": self.grain.share_fine(),
                "parallel_s": self.parallel_seconds}


@njit(cache=True, error_model="numpy")
def _dcd_sweeps(rows, labels, variables, state, settings):
    """Run DCD sweeps until convergence, max_iter, a non-finite gradient or the work budget.

    rows = (data, indices, indptr) of X; labels = (y, U, D, Qbar_ii); variables =
    (alpha, w, index) with w[-1] the bias-feature weight; state = (counters, bounds, rng)
    as described by the _ITERATION... and _PG_... slots; settings = (B, eps, max_iter,
    work_budget). Returns a status code; all progress is kept in the arrays.
    """
    indptr = rows[2]
    alpha, w, index = variables
    counters, bounds, rng = state
    bias_scale, eps, max_iter, work_budget = settings

    n_rows = indptr.shape[0] - 1
    iteration, active_size, s, in_sweep = counters
    pg_max_old, pg_min_old, pg_max_new, pg_min_new = bounds[:_LAST_VIOLATION]
    work = 0
    status = dual_cd.MAX_ITER

    while iteration < max_iter:
        if in_sweep == 0:
            if work >= work_budget:
                status = dual_cd.PAUSED
                break
            in_sweep = 1
            s = 0
            pg_max_new = -np.inf
            pg_min_new = np.inf
            # index[:active_size] = random permutation of itself (Fisher-Yates)
            for t in range(active_size - 1):
                j = t + next_below(rng, active_size - t)
                swap = index[t]
                index[t] = index[j]
                index[j] = swap

        while s < active_size:
            if work >= work_budget:
                break
            i = np.uint64(index[s])  # unsigned: no negative-index wraparound code
            # row i's bounds, a_i, U_i and G = y_i w.x_i - 1 + D_ii a_i (gradient of D along a_i)
            start, end, row_work, g, a_i, u_i = dual_cd.visit(rows, labels, alpha, w, bias_scale, i)
            work += row_work
            if not np.isfinite(g):
                status = dual_cd.NON_FINITE
                break

            # projected gradient; shrink a_i if it sits at a bound beyond last sweep's extremes
            pg = 0.0
            if a_i == 0.0:
                if g > pg_max_old:
                    active_size -= 1
                    index[s] = index[active_size]
                    index[active_size] = np.int64(i)
                    continue
                elif g < 0.0:
                    pg = g
            elif a_i == u_i:
                if g < pg_min_old:
                    active_size -= 1
                    index[s] = index[active_size]
                    index[active_size] = np.int64(i)
                    continue
                elif g > 0.0:
                    pg = g
            else:
                pg = g
            if pg > pg_max_new:
                pg_max_new = pg
            if pg < pg_min_new:
                pg_min_new = pg

            if abs(pg) > _PG_ZERO:
                # a_i <- min(max(a_i - G / Qbar_ii, 0), U_i);  w += (a_i_new - a_i) y_i x_i
                dual_cd.coordinate_step(rows, labels, alpha, w, bias_scale, i, start, end, g)
            s += 1

        status = dual_cd.sweep_status(status, s, active_size)
        if status != dual_cd.MAX_ITER:
            break

        # end of a sweep: the stop rule, then LIBLINEAR's update of the shrinking bounds
        in_sweep = 0
        iteration += 1
        spread = pg_max_new - pg_min_new
        bounds[_LAST_VIOLATION] = max(spread, abs(pg_max_new), abs(pg_min_new))
        # LIBLINEAR: spread <= eps and |PGmax| <= eps and |PGmin| <= eps (PGmax >= PGmin
        # when a variable was visited; an empty sweep passes and unshrinks)
        if spread <= eps and pg_max_new <= eps and pg_min_new >= -eps:
            if active_size == n_rows:
                status = dual_cd.CONVERGED
                break
            active_size = n_rows  # one unshrunk pass must confirm convergence
            pg_max_old = np.inf
            pg_min_old = -np.inf
            continue
        pg_max_old = pg_max_new if pg_max_new > 0.0 else np.inf
        pg_min_old = pg_min_new if pg_min_new < 0.0 else -np.inf

    counters[:] = (iteration, active_size, s, in_sweep)
    bounds[:_LAST_VIOLATION] = (pg_max_old, pg_min_old, pg_max_new, pg_min_new)
    return status
