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
C_i (LIBLINEAR has one C per class), our own RNG by default (xorshift64*; with `sweeps`
"sklearn" scikit-learn's LIBLINEAR generator, MT19937 and bounded_rand_int, so that the
permutations are scikit-learn's at its seed: solvers.backbone.rng_of) and no sweep limit
of its own (LIBLINEAR stops at 300 sweeps; here max_iter, default 1000). Shrinking: a
variable at a bound leaves the active set when its gradient G lies beyond the previous
sweep's projected-gradient extremes (G > PGmax_old at a_i = 0, G < PGmin_old at a_i = U_i).

Stop rule (LIBLINEAR >= 2.42): after a sweep, with PGmax / PGmin the largest / smallest
projected gradient over the active set, PGmax - PGmin <= eps and |PGmax| <= eps and
|PGmin| <= eps. (Before 2.42 LIBLINEAR tested the spread PGmax - PGmin alone, which
accepts a sweep whose free variables all share one large gradient.) When it holds and the
active set is the full set, converged; otherwise the active set is reset to all
variables, shrinking is disabled for one full pass, and only when that unshrunk pass also
satisfies the test is the problem converged. A sweep that visits no variable (all shrunk)
also resets the active set (LIBLINEAR would keep sweeping the empty set until max_iter).
"violation" reports max(PGmax - PGmin, |PGmax|, |PGmin|) of the last sweep.
With `sweeps` "sklearn" (hinge.sklearn's estimators) the sweeps are those of the
LIBLINEAR scikit-learn vendors, epoch for epoch at its seed: its generator, its stop rule
(PGmax - PGmin <= eps alone, as LIBLINEAR before 2.42) and its order of the sums in
Qbar_ii (solvers/dual_cd.py); the rows come grouped by class, as its train() orders them
(hinge/sklearn/_liblinear.py).
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
from solvers._kernel_helpers import shuffle_sweep, signed_margins
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor
from solvers.grain import GrainMeter
from solvers.objectives import dual_objective

# and hinge.sklearn's sweeps (sklearn_qbar and the MT19937 permutations)
WARMUP_VARIANTS = (*dual_cd.WARMUP_VARIANTS, {"loss": "l1", "sweeps": "sklearn"})

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
    With `threads` > 1 the asynchronous parallel sweeps of solvers/_dcd_parallel.py
    (threads = 1 is the sequential kernel, bit for bit as before)."""
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

    def run(self, budget: int) -> int:
        settings = (float(self.problem.bias_scale), self.eps, self.max_iter, budget,
                    self.sklearn)
        return int(self.sweeps(*self.kernel_args, settings))

    def progress(self) -> dict[str, Any]:
        return {"violation": float(self.bounds[_LAST_VIOLATION]),
                "active_size": int(self.counters[_ACTIVE_SIZE])}


# Work per part and round: ROUND_FACTOR x n_weights nonzeros, at least MIN_PART_WORK (a
# round is one parallel region; each round costs a few Python-level calls).
ROUND_FACTOR, MIN_PART_WORK = 4, 1 << 18
# Features in more than this share of the rows are "hot": no part writes them in the
# shared w within a round (solvers/_dcd_parallel.py).
HOT_SHARE = 1.0 / 32


class _ParallelDcdState(dual_cd.DualState):
    """The state of the asynchronous parallel sweeps (solvers/_dcd_parallel.py): P =
    threads parts of each sweep on one shared w; the Numba threads set for the fit
    (`used`) run them, or one thread, as the grain meter says. w is rebuilt from alpha
    before every objective (`snapshot`) and at the stop rule. Built inside
    parallel.numba_threads."""

    def __init__(self, problem: LinearProblem, params: dict[str, Any]) -> None:
        super().__init__(problem, params)
        self.parts, self.used = int(params["threads"]), numba.get_num_threads()
        numba.set_num_threads(1)  # sequential until the grain meter measures otherwise
        n, size, parts = problem.X.n_rows, self.w.shape[0], self.parts
        self.counters = np.array([0, n, 0, 0], dtype=np.int64)
        self.bounds = np.array([math.inf, -math.inf, math.nan, 0.0])
        self.index = np.arange(n, dtype=np.int64)
        self.scratch = np.empty(n, dtype=np.int64)
        X = problem.X
        self.hot, self.slot_of = par.hot_features(X.indices, n, X.n_features, HOT_SHARE)
        self.hot_w = np.zeros(self.hot.shape[0])
        self.deltas = np.zeros((parts, self.hot.shape[0]))
        self.view = np.zeros((parts, self.hot.shape[0]))
        self.part_lo, self.part_hi, self.part_end, self.pos = (
            np.zeros(parts, dtype=np.int64) for _ in range(4))
        self.pg_max, self.pg_min = np.zeros(parts), np.zeros(parts)
        self.work_done = np.zeros(parts, dtype=np.int64)
        self.status = np.zeros(parts, dtype=np.int64)
        X = problem.X
        self.chunks = parallel.chunk_bounds(X.indptr, size, max_chunks=max(
            parallel.MAX_CHUNKS, parts))
        self.chunk_acc = np.zeros((self.chunks.shape[0] - 1, size))
        self.part_work = max(ROUND_FACTOR * size, MIN_PART_WORK)
        self.grain = GrainMeter(self.used)
        self.parallel_seconds = 0.0  # in the calls with the parallel loops
        self.rows = (X.data, X.indices, X.indptr)
        self.labels = (problem.y, self.upper, self.diag, self.qbar_diag)
        tol = params.get("tol")
        self.tol = None if tol is None else float(tol)
        self.margins = np.empty(n)
        self.checks = 0  # gap checks after the stop rule held
        self.sweep_eps = self.eps  # the stop rule's eps, halved after each failed check

    def run(self, budget: int) -> int:
        rounds = max(1, budget // (self.part_work * self.parts))
        return self.grain.call(rounds, self._rounds, dual_cd.PAUSED)

    def _rounds(self, fine: bool, rounds: int) -> tuple[int, int, float]:
        """Up to `rounds` rounds on the threads (fine) or one: (status, rounds, work)."""
        numba.set_num_threads(self.used if fine else 1)
        counters, bounds, work = self.counters, self.bounds, 0
        bias_scale = float(self.problem.bias_scale)
        for done in range(rounds):
            if counters[par.IN_SWEEP] == 0:
                if counters[par.ITERATION] >= self.max_iter:
                    return dual_cd.MAX_ITER, done, float(work)
                par.start_sweep(self.index, counters, self.rng, self.part_lo, self.part_hi,
                                self.part_end, self.pos, self.pg_max, self.pg_min)
            started = time.perf_counter()
            par.run_round(self.rows, self.labels, self.alpha, self.w, self.index,
                          self.hot, self.slot_of, self.hot_w, self.deltas, self.view,
                          self.part_hi, self.pos, self.pg_max, self.pg_min,
                          self.work_done, self.status,
                          (bias_scale, float(bounds[par.PG_MAX_OLD]),
                           float(bounds[par.PG_MIN_OLD]), self.part_work))
            self.parallel_seconds += time.perf_counter() - started
            par.fold_hot(self.w, self.hot, self.hot_w, self.deltas)
            work += int(self.work_done.sum())
            counters[par.ROUNDS] += 1
            if np.any(self.status == dual_cd.NON_FINITE):
                return dual_cd.NON_FINITE, done + 1, float(work)
            if np.array_equal(self.pos, self.part_hi):
                status = par.end_sweep(self.index, self.scratch, counters, bounds,
                                       self.part_lo, self.part_hi, self.part_end,
                                       self.pg_max, self.pg_min, self.sweep_eps,
                                       self.problem.X.n_rows)
                if status == dual_cd.CONVERGED and self._certified():
                    return status, done + 1, float(work)
                numba.set_num_threads(self.used if fine else 1)
        return dual_cd.PAUSED, rounds, float(work)

    def _certified(self) -> bool:
        """After the stop rule held: w = w(alpha), and then, when the fit has a `tol`,
        whether the duality gap of (w, alpha) is within it; if not, the sweeps go on with
        the stop rule's eps halved (a failed certificate would otherwise restart at
        eps / 10, which takes far more sweeps than the few the gap needs; halving spaces
        the checks out, each a pass over the data, when tol is far below what eps
        gives)."""
        self.resync()
        if self.tol is None:
            return True
        numba.set_num_threads(self.used)
        problem = self.problem
        signed_margins(self.rows, problem.y, self.w, float(problem.bias_scale), self.chunks,
                       self.margins)
        slack = np.maximum(0.0, 1.0 - self.margins)
        losses = slack * slack if self.loss == "l2" else slack
        primal = 0.5 * float(self.w_view @ self.w_view) + float(problem.cost @ losses)
        dual = dual_objective(problem, self.alpha, self.w_view, self.loss)
        self.checks += 1
        if primal - dual <= self.tol * primal:
            return True
        self.sweep_eps *= 0.5
        return False

    def resync(self) -> None:
        """w = w(alpha) exactly (the module docstring of solvers/_dcd_parallel.py)."""
        previous = numba.get_num_threads()
        numba.set_num_threads(self.used)
        started = time.perf_counter()
        drift = par.w_of_alpha(self.rows, self.problem.y, self.alpha,
                               float(self.problem.bias_scale), self.chunks, self.chunk_acc,
                               self.w)
        self.parallel_seconds += time.perf_counter() - started
        numba.set_num_threads(previous)
        self.bounds[par.DRIFT] = max(float(self.bounds[par.DRIFT]), drift)

    def snapshot(self) -> dict[str, Any]:
        self.resync()
        return super().snapshot()

    def progress(self) -> dict[str, Any]:
        return {"violation": float(self.bounds[par.LAST_VIOLATION]),
                "active_size": int(self.counters[par.ACTIVE_SIZE])}

    def details(self) -> dict[str, Any]:
        return {**super().details(), "threads": self.used, "parts": self.parts,
                "rounds": int(self.counters[par.ROUNDS]),
                "resync_drift": float(self.bounds[par.DRIFT]), "gap_checks": self.checks,
                "final_eps": self.sweep_eps,
                "hot_features": int(self.hot.shape[0]),
                "fine_grained_share": self.grain.share_fine(),
                "parallel_s": self.parallel_seconds}


@njit(cache=True, error_model="numpy")
def _dcd_sweeps(rows, labels, variables, state, settings):
    """Run DCD sweeps until convergence, max_iter, a non-finite gradient or the work budget.

    rows = (data, indices, indptr) of X; labels = (y, U, D, Qbar_ii); variables =
    (alpha, w, index) with w[-1] the bias-feature weight; state = (counters, bounds, rng)
    as described by the _ITERATION... and _PG_... slots; settings = (B, eps, max_iter,
    work_budget, spread_only: scikit-learn's LIBLINEAR's stop rule). Returns a status
    code; all progress is kept in the arrays.
    """
    indptr = rows[2]
    alpha, w, index = variables
    counters, bounds, rng = state
    bias_scale, eps, max_iter, work_budget, spread_only = settings

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
            # index[:active_size] = random permutation of itself (Fisher-Yates; Hinge's
            # generator, or scikit-learn's LIBLINEAR's: shuffle_sweep)
            shuffle_sweep(index, active_size, rng)

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
        if spread <= eps and (spread_only or (pg_max_new <= eps and pg_min_new >= -eps)):
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
