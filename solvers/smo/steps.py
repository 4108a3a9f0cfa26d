"""SMO's solver state and its compiled step loop: `SmoState` (the arrays of one binary
problem, its runs of steps, progress events and the end of a fit), `_smo_steps` (a
bounded number of steps with LIBSVM's stop rule and unshrinking) and the warm-up of the
parallel loops. The start and the end of a run (gradient of an initial alpha, unshrink,
rho, objective) are in solution.py."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from solvers.backbone import CsrArrays
from solvers.grain import GrainMeter
from solvers.smo.cache import (
    cached,
    compute_column,
    miss_source,
    new_column_list,
    swap_entries_parallel,
    twin_fill_parallel,
    with_columns,
)
from solvers.smo.columns import column_parallel, kernel_diagonal
from solvers.smo.layout import (
    ACTIVE,
    CACHE_FREE,
    CONVERGED,
    COUNTER,
    EVALS,
    GMAX,
    GMAX_IDX,
    GMAX_NEG,
    GMAX_NEG_IDX,
    GMAX_POS,
    GMAX_VALID,
    ITER,
    LOWER,
    MAX_ITER,
    N_COUNTERS,
    NON_FINITE,
    NU,
    PAUSED,
    PENDING,
    PENDING_CAPACITY,
    SHRINK_EVERY,
    TWINS,
    UPPER,
    VIOLATION,
    ZERO,
    Pending,
    Positions,
    StepState,
    parallel_modes,
)
from solvers.smo.rows import gather_rows_parallel, rows_in_order
from solvers.smo.selection import (
    bar_update,
    do_shrinking,
    flush_gradient_bar,
    gmax_active,
    gmax_parallel,
    gmax_sides_seq,
    gradient_bar_parallel,
    later_max,
    pair_step,
    reconstruct_gradient,
    reduce_max,
    select_pair,
    select_pair_parallel,
    select_pair_seq,
    update_in_parallel,
    update_parallel,
    update_seq,
)
from solvers.smo.solution import (
    finish_run,
    flush_pending,
    kkt_violators,
    objective_from_bar,
    warm_gradient,
)

# Parallel loops only above this much work (elements, or rows x (nnz + 8) for kernel
# columns): a parallel region costs microseconds, much more on a loaded machine. Read when
# a solver state is created (tests lower them to exercise the parallel paths).
PARALLEL_MIN_PASS = 5_000
PARALLEL_MIN_KERNEL = 100_000
PARALLEL_MIN_FLUSH = 100_000  # the deferred G_bar updates: one region per ~1000 steps


class SmoState:
    """The arrays the compiled kernels work on.

    Positions 0..l-1 are permuted by shrinking (LIBSVM's swap_index): the active set is
    positions [0, active_size). `perm[t]` is the row of X at position t, `local[t]` its
    index in the binary problem.
    """

    def __init__(self, X: CsrArrays, sq_norms: np.ndarray, rows: np.ndarray, y: np.ndarray,
                 cost: np.ndarray, kernel: tuple[int, float, float, int], cache_mb: float,
                 chunks: int, fine_grained: bool = True, linear: np.ndarray | None = None,
                 alpha0: np.ndarray | None = None, nu: bool = False,
                 twins: int = 0) -> None:
        """`linear`: the linear term p of f(a) = 1/2 a'Qa + p'a (default -e, C-SVC);
        `alpha0`: a feasible initial alpha (default 0; nu-SVC, one-class and nu-SVR
        start from LIBSVM's); `nu`: Solver_NU's selection, shrinking and rho. `rows` may
        repeat a row of X (epsilon-SVR and nu-SVR: rows t and t + n are x_t with y = +1
        and -1); `twins` = n then: the kernel columns of both come from one cached kernel
        row of x_t (LIBSVM's SVR_Q)."""
        l = int(rows.shape[0])
        self.l = l
        self.eps, self.max_iter = 0.0, 0  # the stop rule of `run`: set by the driver
        self.pair: list[float | None] = []  # the classes of the problem, for progress
        perm = np.ascontiguousarray(rows, dtype=np.int64).copy()
        local = np.arange(l, dtype=np.int64)
        y = np.ascontiguousarray(y, dtype=np.int8).copy()
        cost = np.ascontiguousarray(cost, dtype=np.float64).copy()
        rows_arrays, self.column_source = rows_in_order(X, sq_norms, perm, kernel)
        self.dense_rows = self.column_source == "dense"
        # the regressions (twins > 0): the kernel rows of their n training rows, from the
        # rows in problem order (the same dot products as the positional rows' source)
        real = perm[:twins] if twins > 0 else perm[:0]
        real_arrays, _ = rows_in_order(X, sq_norms, real, kernel, self.column_source)
        rows_arrays = (*rows_arrays, (real_arrays[0], real_arrays[2],
                                      np.ones(real.shape[0], dtype=np.int8)))
        diagonal = np.empty(l)
        kernel_diagonal(rows_arrays[0][3], kernel, diagonal)
        alpha = np.zeros(l)
        status = np.full(l, LOWER, dtype=np.int8)
        linear = (np.full(l, -1.0) if linear is None
                  else np.ascontiguousarray(linear, dtype=np.float64).copy())
        gradient = linear.copy()  # G = Qa + p at a = 0
        gradient_bar = np.zeros(l)
        self.counters = np.zeros(N_COUNTERS, dtype=np.int64)
        self.counters[ACTIVE] = l
        self.counters[COUNTER] = min(l, SHRINK_EVERY) + 1
        # LIBSVM's Cache: bytes / sizeof(float) minus the heads, at least two full columns
        floats = int(cache_mb * (1 << 20)) // 4 - l * 8
        self.counters[CACHE_FREE] = max(floats, 2 * l)
        self.values = np.array([-math.inf, math.inf, -math.inf, -math.inf])
        # cache entries: the l columns, then (twins) the kernel rows; the LRU's sentinel last
        columns = new_column_list(l + twins)
        lru_prev = np.full(l + twins + 1, l + twins, dtype=np.int64)
        lru_next = np.full(l + twins + 1, l + twins, dtype=np.int64)
        self.positions = Positions(perm, local, y, cost, diagonal, alpha, status, gradient,
                                   gradient_bar, linear)
        # The typed list of cached columns is a top-level argument of the compiled entry
        # points: inside a tuple it makes Numba's dispatch type the tuple in Python (~50 us
        # per call against ~1 us).
        self.cache = (np.zeros(l + twins, dtype=np.int64), lru_prev, lru_next,
                      np.zeros(0, dtype=np.float32))
        # (chunks, per-chunk scratch x 3, minimum work of a parallel loop: passes over the
        # active set and kernel columns (once per step), the deferred G_bar pass)
        # Two variants of the tuple, the same scratch: "fine" (every loop in parallel when
        # large) and "sequential" (none: the work of one thread); the GrainMeter picks one
        # per part of a call (solvers/grain.py), so the layout follows what the fit measures.
        # (per chunk, two slots: the y = +1 side's result at c, the y = -1 side's at
        # chunks + c)
        modes = parallel_modes(chunks, PARALLEL_MIN_PASS, PARALLEL_MIN_KERNEL,
                               PARALLEL_MIN_FLUSH)
        pending = Pending(np.empty(PENDING_CAPACITY, dtype=np.int64), np.empty(PENDING_CAPACITY),
                          np.empty(PENDING_CAPACITY, dtype=np.int64))
        head = (rows_arrays, kernel, self.positions, self.cache)
        solver = (self.counters, self.values, np.empty((l, 2), dtype=np.int64), pending)
        self.grain = GrainMeter(chunks if fine_grained else 1)
        self.args_of = {fine: (*head, StepState(*solver, modes[fine]), columns)
                        for fine in (True, False)}
        self.kernel_args = self.args_of[False]

        self.formulation = "c_svc"  # set by the solver (a warm start checks it)
        self.linear0: np.ndarray | None = None  # the linear term, problem order
        self.r = math.nan  # Solver_NU's r, set by finish
        self.rows = perm.copy()  # the problem's rows of X, in problem order
        self.y = y.copy()
        self.kernel = kernel
        self.counters[NU] = 1 if nu else 0
        self.counters[TWINS] = twins
        if alpha0 is not None:  # G and G_bar from the initial alpha (LIBSVM's Solve)
            alpha[:] = np.ascontiguousarray(alpha0, dtype=np.float64)
            warm_gradient(*self.kernel_args)

    def continues(self, rows: np.ndarray, y: np.ndarray,
                  kernel: tuple[int, float, float, int]) -> bool:
        """True when this state belongs to the same binary problem (rows, labels, kernel):
        its kernel columns and alphas can start a fit at another C."""
        return (self.kernel == kernel and self.rows.shape == rows.shape
                and bool(np.array_equal(self.rows, rows))
                and bool(np.array_equal(self.y, np.asarray(y, dtype=np.int8))))

    def finite(self) -> bool:
        return bool(np.all(np.isfinite(self.positions.alpha)))

    def restart(self, cost: np.ndarray) -> None:
        """Start again from this state's alphas (its last solution) under new costs C_i
        (problem order), keeping the positions, the rows and the kernel-column cache.

        The alphas stay feasible: y'a is unchanged, and 0 <= a_i <= C_i holds when no cost
        decreased (along increasing C); otherwise they are scaled by the largest factor
        <= 1 that fits them in the new box (a multiple keeps y'a = 0). The status of every
        variable follows from a, and G = Qa - e and G_bar = sum_{a_j = C_j} C_j Q_:j are
        rebuilt from the kernel columns of the support vectors (LIBSVM's Solver::Solve
        with an initial alpha); the columns come from the cache when the last fit left
        them there. Counters start again (iterations, shrinking, statistics)."""
        local, cost_now, alpha = self.positions.local, self.positions.cost, self.positions.alpha
        new = np.ascontiguousarray(cost, dtype=np.float64)[local]
        support = alpha > 0
        if np.any(alpha[support] > new[support]):
            alpha *= float(np.min(new[support] / alpha[support]))
        cost_now[:] = new
        cache_free, nu = self.counters[CACHE_FREE], self.counters[NU]
        twins = self.counters[TWINS]
        self.counters[:] = 0
        self.counters[CACHE_FREE], self.counters[NU] = cache_free, nu
        self.counters[TWINS] = twins
        self.counters[ACTIVE] = self.l
        self.counters[COUNTER] = min(self.l, SHRINK_EVERY) + 1
        self.values[:] = (-math.inf, math.inf, -math.inf, -math.inf)
        warm_gradient(*self.kernel_args)

    @property
    def iteration(self) -> int:
        return int(self.counters[ITER])

    def run(self, steps: int) -> int:
        """Up to `steps` SMO steps, with the fine or the sequential loops as the
        GrainMeter measures (solvers/grain.py); returns the kernel's status."""
        return self.grain.call(steps, self._run_part, PAUSED)

    def _run_part(self, fine: bool, steps: int) -> tuple[int, int, float]:
        """`steps` steps in one mode: (status, steps done, work: steps x active size +
        kernel values computed)."""
        self.kernel_args = self.args_of[fine]
        iterations, evaluations = int(self.counters[ITER]), int(self.counters[EVALS])
        active = int(self.counters[ACTIVE])
        status = int(_smo_steps(*self.kernel_args,
                                (float(self.eps), int(self.max_iter), int(steps))))
        iterations = int(self.counters[ITER]) - iterations
        return status, iterations, float(iterations * active + int(self.counters[EVALS])
                                         - evaluations)

    def snapshot(self) -> dict[str, Any]:
        """The progress event: the dual objective (exact, from G and G_bar; O(l))."""
        flush_pending(*self.kernel_args)
        p = self.positions
        return {"iteration": self.iteration, "primal": None,
                "dual": float(objective_from_bar(p.alpha, p.status, p.gradient,
                                                 p.gradient_bar, p.linear)),
                "gap": None, "violation": float(self.values[VIOLATION]),
                "active_size": int(self.counters[ACTIVE]), "pair": self.pair,
                "kkt_violators": int(kkt_violators(p.y, p.status, p.gradient,
                                                   int(self.counters[ACTIVE]),
                                                   float(self.eps)))}

    def finish(self) -> tuple[np.ndarray, float, float]:
        """Unshrink (reconstruct the gradient), then (alpha in problem order, rho, f(a));
        with Solver_NU also `self.r` (LIBSVM's si->r)."""
        out = np.zeros(4)
        alpha = np.empty(self.l)
        finish_run(*self.kernel_args, alpha, out)
        self.r = float(out[3])
        return alpha, float(out[0]), float(out[1])


@njit(cache=True, nogil=True, error_model="numpy")
def _smo_steps(rows, kernel, positions, heads, state, columns, settings):
    """Run SMO steps until convergence, max_iter, a non-finite step or the step budget.

    rows = ((data, indices, indptr, ||x||^2 of the rows in position order, a dense scatter
    buffer), (the same four arrays of X: source of the positional rows), (the rows in
    position order as a dense matrix - 0 rows when the data are sparse -, two float64
    scratch columns, ...), (the regressions' rows in problem order)); kernel = (kind,
    gamma, coef0, degree); positions (layout.Positions: perm, local, y, C, K_tt, alpha,
    status, G, G_bar, p), permuted together by shrinking; heads = (lengths, lru_prev,
    lru_next, empty) and columns (the typed list of cached columns) make the cache; state
    (layout.StepState: counters, values, swap buffer, pending G_bar updates, parallel
    scratch); settings = (eps, max_iter, step_budget). Returns a status code; everything
    else is kept in the arrays.

    Every array is taken out of its tuple once, here: a step calls only functions that
    take the arrays they read (see selection.py), and the whole state goes only to the
    rare paths (a cache miss, shrinking, the unshrink that checks convergence). So a
    column's fetch is spelled out where it is used (`cached`, then the list's item or
    `compute_column` on a miss): one function doing both would take the whole state per
    fetch.
    """
    cache = with_columns(heads, columns)
    counters, values, swaps, pending, parallel = state
    eps, max_iter, budget = settings
    local, y, cost, diagonal = positions.local, positions.y, positions.cost, positions.diagonal
    alpha, status, gradient = positions.alpha, positions.status, positions.gradient
    gradient_bar = positions.gradient_bar
    col_len, lru_prev, lru_next, empty = heads
    pending_at, pending_scale, cover = pending
    source = miss_source(rows, y, counters)  # of the columns a cache miss computes
    chunks, min_pass = parallel.chunks, parallel.min_pass
    nu = counters[NU] == 1
    l = y.shape[0]
    steps = 0
    while True:
        if counters[ITER] >= max_iter:
            return MAX_ITER
        if steps >= budget:
            return PAUSED
        counters[COUNTER] -= 1
        if counters[COUNTER] == 0:
            counters[COUNTER] = min(l, SHRINK_EVERY)
            do_shrinking(rows, kernel, positions, cache, counters, eps, swaps, pending, parallel)
            counters[GMAX_VALID] = 0
        active = counters[ACTIVE]
        unshrunk = False
        while True:
            # LIBSVM's select_working_set (Solver_NU's: an i on each side) on the active
            # set: the pair (i, j), Q_i, and the violation m - M
            q_i = empty
            i = -1
            j = -1
            if nu:
                if counters[GMAX_VALID] == 1:  # both sides, from the last step's G update
                    gmaxp, gmaxp_idx = values[GMAX_POS], counters[GMAX_IDX]
                    gmaxn, gmaxn_idx = values[GMAX_NEG], counters[GMAX_NEG_IDX]
                else:
                    gmaxp, gmaxp_idx, gmaxn, gmaxn_idx = gmax_sides_seq(y, status, gradient,
                                                                        active)
                q_ip = empty
                q_in = empty
                if gmaxp_idx >= 0:
                    q_ip = (columns[gmaxp_idx]
                            if cached(gmaxp_idx, active, col_len, lru_prev, lru_next, counters)
                            else compute_column(gmaxp_idx, active, source, kernel, y, cache,
                                                counters, parallel, local))
                if gmaxn_idx >= 0:
                    q_in = (columns[gmaxn_idx]
                            if cached(gmaxn_idx, active, col_len, lru_prev, lru_next, counters)
                            else compute_column(gmaxn_idx, active, source, kernel, y, cache,
                                                counters, parallel, local))
                # each side pairs with its own i (y_i = y_t); a side with no i has Gmax =
                # -inf, so its t never pair (its K_ii and Q_i are never read)
                if chunks > 1 and active >= min_pass:
                    _, j, gmaxp2, gmaxn2 = select_pair(
                        y, status, gradient, diagonal, gmaxp, diagonal[gmaxp_idx], 1.0, q_ip,
                        gmaxn, diagonal[gmaxn_idx], -1.0, q_in, active, parallel)
                else:
                    _, j, gmaxp2, gmaxn2 = select_pair_seq(
                        y, status, gradient, diagonal, gmaxp, diagonal[gmaxp_idx], 1.0, q_ip,
                        gmaxn, diagonal[gmaxn_idx], -1.0, q_in, active)
                violation = max(gmaxp + gmaxp2, gmaxn + gmaxn2)
                if j >= 0:
                    if y[j] > 0:
                        i, q_i = gmaxp_idx, q_ip
                    else:
                        i, q_i = gmaxn_idx, q_in
            else:
                if counters[GMAX_VALID] == 1:  # the pair kept by the last step
                    gmax, i = values[GMAX], counters[GMAX_IDX]
                else:
                    gmax, i = gmax_active(positions, active, parallel)
                gmax2 = -np.inf
                if i >= 0:
                    q_i = (columns[i] if cached(i, active, col_len, lru_prev, lru_next, counters)
                           else compute_column(i, active, source, kernel, y, cache, counters,
                                               parallel, local))
                    # LIBSVM's choice of j for i: one i for both sides
                    diagonal_i = diagonal[i]
                    y_i = np.float64(y[i])  # as Solver_NU's +-1.0: one compiled variant
                    if chunks > 1 and active >= min_pass:
                        _, j, gmax2_pos, gmax2_neg = select_pair(
                            y, status, gradient, diagonal, gmax, diagonal_i, y_i, q_i, gmax,
                            diagonal_i, y_i, q_i, active, parallel)
                    else:
                        _, j, gmax2_pos, gmax2_neg = select_pair_seq(
                            y, status, gradient, diagonal, gmax, diagonal_i, y_i, q_i, gmax,
                            diagonal_i, y_i, q_i, active)
                    gmax2 = max(gmax2_pos, gmax2_neg)
                violation = gmax + gmax2
            values[VIOLATION] = violation
            if not (violation < eps or j < 0):
                break
            if unshrunk:
                return CONVERGED
            # converged on the active set: reconstruct the whole gradient and check again
            reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
            counters[ACTIVE] = l
            counters[GMAX_VALID] = 0
            active = l
            unshrunk = True
        if unshrunk:
            counters[COUNTER] = 1  # shrink at the next step
        counters[ITER] += 1
        steps += 1
        q_j = (columns[j] if cached(j, active, col_len, lru_prev, lru_next, counters)
               else compute_column(j, active, source, kernel, y, cache, counters, parallel,
                                   local))
        delta_i, delta_j, crossed = pair_step(i, j, q_i, y, cost, diagonal, alpha, status,
                                              gradient)
        if crossed == 0:
            return NON_FINITE
        # G[:active] += Q_i d_i + Q_j d_j, and the next step's i (each side's Gmax)
        if chunks > 1 and active >= min_pass:
            best_pos, best_pos_t, best_neg, best_neg_t = update_in_parallel(
                gradient, q_i, q_j, delta_i, delta_j, y, status, active, parallel)
        else:
            best_pos, best_pos_t, best_neg, best_neg_t = update_seq(
                gradient, q_i, q_j, delta_i, delta_j, y, status, active)
        gmax_next, gmax_next_t = later_max(best_pos, best_pos_t, best_neg, best_neg_t)
        values[GMAX_POS] = best_pos
        values[GMAX_NEG] = best_neg
        counters[GMAX_NEG_IDX] = best_neg_t
        counters[GMAX_VALID] = 1
        values[GMAX] = gmax_next
        counters[GMAX_IDX] = best_pos_t if nu else gmax_next_t
        if crossed > 1:
            # G_bar += +-C Q_:i when a_i entered / left its upper bound (likewise j)
            if counters[PENDING] + 2 > pending_at.shape[0]:
                flush_gradient_bar(rows, kernel, positions, cache, counters, pending,
                                   parallel)
            if crossed & 2:
                c_i = cost[i]
                bar_update(i, c_i if status[i] == UPPER else -c_i, q_i, gradient_bar,
                           active, counters, pending_at, pending_scale, cover)
            if crossed & 4:
                c_j = cost[j]
                bar_update(j, c_j if status[j] == UPPER else -c_j, q_j, gradient_bar,
                           active, counters, pending_at, pending_scale, cover)


@njit(cache=True)
def warm_parallel(rows, kernel, positions, heads, state, columns):
    """Run every parallel variant once (compilation / cache load)."""
    parallel = state.parallel
    y, status, gradient = positions.y, positions.status, positions.gradient
    diagonal = positions.diagonal
    n = y.shape[0]
    column = np.zeros(n, dtype=np.float32)
    data, indices, indptr, sq_norms, dense = rows[0]
    Xd, dots, scale, cdata, cpos, cptr, bits, table = rows[2]
    kind, gamma, coef0, degree = kernel
    chunks, values, best, values2 = (parallel.chunks, parallel.values, parallel.indices,
                                     parallel.values2)
    column_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale, cdata, cpos,
                    cptr, bits, table, kind, gamma, coef0, degree, y, ZERO, ZERO, n, column,
                    chunks)
    twin_fill_parallel(column, y, positions.local, y[0], n, ZERO, n, column.copy(), chunks)
    gmax_parallel(y, status, gradient, n, chunks, values, best)
    select_pair_parallel(y, status, gradient, diagonal, 1.0, 1.0, 1.0, column, 1.0, 1.0, -1.0,
                         column, n, chunks, values, best, values2)
    update_parallel(gradient.copy(), column, column, 0.0, 0.0, y, status, n, chunks, values,
                    best)
    reduce_max(parallel)
    pending_at, pending_scale, cover = state.pending
    pending_at[0] = 0
    pending_scale[0] = 0.0
    cover[0] = 0
    gradient_bar_parallel(data, indices, indptr, sq_norms, dense.shape[0], Xd, dots, scale,
                          cdata, cpos, cptr, bits, table, kind, gamma, coef0, degree, y,
                          pending_at, pending_scale, cover, np.int64(1),
                          positions.gradient_bar.copy(), column, chunks)
    swap_entries_parallel(columns, heads[0], np.zeros(1, dtype=np.int64), ZERO, state.swaps,
                          ZERO, np.ones(1, dtype=np.uint8), chunks)
    real = rows[1]
    gather_rows_parallel(data.copy(), indices.copy(), indptr, sq_norms.copy(), real[0],
                         real[1], real[2], real[3], Xd.copy(), positions.perm, chunks)
