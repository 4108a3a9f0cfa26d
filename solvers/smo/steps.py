"""SMO's solver state and its compiled entry points: `_smo_steps` (a bounded number of
steps with LIBSVM's stop rule and unshrinking), `_finish` (unshrink, rho, objective),
the exact dual objective of a progress event, and the warm-up of the parallel loops."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from solvers.backbone import CsrArrays
from solvers.grain import GrainMeter
from solvers.smo.columns import (
    _cached,
    _column,
    _column_parallel,
    _gather_positional_rows,
    _gather_rows_parallel,
    _get_column,
    _kernel_diagonal,
    _kernel_row,
    _new_column_list,
    _positional_sources,
    _source,
    _swap_entries_parallel,
    _twin_fill_parallel,
    _twin_row,
    bits_pay,
    csc_pays,
    rbf_table,
)
from solvers.smo.layout import (
    _ACTIVE,
    _CACHE_FREE,
    _CONVERGED,
    _COUNTER,
    _EVALS,
    _FREE,
    _GMAX,
    _GMAX_IDX,
    _GMAX_NEG,
    _GMAX_NEG_IDX,
    _GMAX_POS,
    _GMAX_VALID,
    _ITER,
    _LOWER,
    _MAX_ITER,
    _N_COUNTERS,
    _NON_FINITE,
    _NU,
    _PAUSED,
    _PENDING,
    _PENDING_CAPACITY,
    _RBF,
    _SHRINK_EVERY,
    _TWINS,
    _UPPER,
    _VIOLATION,
    _ZERO,
)
from solvers.smo.selection import (
    _bar_update,
    _do_shrinking,
    _flush_gradient_bar,
    _gmax,
    _gmax_parallel,
    _gmax_sides_seq,
    _gradient_bar_parallel,
    _later_max,
    _pair_step,
    _reconstruct_gradient,
    _reduce_max,
    _select_pair,
    _select_pair_parallel,
    _select_pair_seq,
    _update_in_parallel,
    _update_parallel,
    _update_seq,
    _update_status,
)

# Parallel loops only above this much work (elements, or rows x (nnz + 8) for kernel
# columns): a parallel region costs microseconds, much more on a loaded machine. Read when
# a solver state is created (tests lower them to exercise the parallel paths).
PARALLEL_MIN_PASS = 5_000
PARALLEL_MIN_KERNEL = 100_000
PARALLEL_MIN_FLUSH = 100_000  # the deferred G_bar updates: one region per ~1000 steps


# Kernel columns from a dense positional copy of the rows when at least this share of the
# entries is nonzero and the copy stays below DENSE_MAX_ENTRIES float64.
DENSE_MIN_DENSITY = 0.5
DENSE_MAX_ENTRIES = 1 << 25


def use_dense_rows(l: int, n_features: int, nnz: int) -> bool:
    entries = l * max(n_features, 1)
    return l > 0 and entries <= DENSE_MAX_ENTRIES and nnz >= DENSE_MIN_DENSITY * entries


def _rows_in_order(X: CsrArrays, sq_norms: np.ndarray, perm: np.ndarray,
                   kernel: tuple[int, float, float, int],
                   source: str | None = None) -> tuple[tuple[Any, ...], str]:
    """The rows perm[0], perm[1], ... of X as the kernel columns read them: (positional CSR
    + scatter buffer, X's own arrays, (dense copy, scratch, CSC, bit sets, rbf table)),
    and the source of their dot products ("dense", "bits", "columns" or "rows"; `source`
    imposes it, else the cheapest the data allow)."""
    l = int(perm.shape[0])
    nnz = int(np.sum(X.indptr[perm + 1] - X.indptr[perm]))
    dense = (use_dense_rows(l, X.n_features, nnz) if source is None
             else source == "dense" and l > 0)
    # dense: feature-major (feature k of the row at position t at [k, t]), see
    # columns._dense_dots; none: no rows
    dense_shape = (max(X.n_features, 1), l) if dense else (0, 0)
    no_columns = (np.empty(0), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64))
    no_bits = (np.empty((0, 1), dtype=np.uint64), np.empty(0, dtype=np.float32))
    rows_arrays: tuple[Any, ...] = (
        (np.empty(nnz), np.empty(nnz, dtype=np.int32), np.empty(l + 1, dtype=np.int64),
         np.empty(l), np.zeros(X.n_features + 1)),
        (X.data, X.indices, X.indptr, sq_norms),
        (np.empty(dense_shape), np.empty(l), np.empty(l), *no_columns, *no_bits))
    _gather_positional_rows(rows_arrays, perm, 1, 0)
    # Sparse data: a kernel column's dot products from bit sets (0/1 features) or a
    # positional CSC when they cost less than the row gather (see columns.py), built
    # from the positional rows here and by the gather after each shrinking.
    column_source = "dense" if dense else "rows"
    extra: tuple[Any, ...] = ()
    positional_data, positional_indices = rows_arrays[0][:2]
    if dense or l == 0:
        pass
    elif (bits_pay(X.n_features, nnz, l, bool(np.all(positional_data == 1.0)))
          if source is None else source == "bits"):
        column_source = "bits"
        table = (rbf_table(kernel[1], X.n_features) if kernel[0] == _RBF
                 else no_bits[1])
        extra = (*no_columns, np.empty((l, (X.n_features + 63) // 64), dtype=np.uint64),
                 table)
    elif (csc_pays(l, nnz, np.bincount(positional_indices, minlength=X.n_features))
          if source is None else source == "columns"):
        column_source = "columns"
        extra = (np.empty(nnz), np.empty(nnz, dtype=np.int32),
                 np.empty(X.n_features + 1, dtype=np.int64), *no_bits)
    if extra:
        rows_arrays = (*rows_arrays[:2], (*rows_arrays[2][:3], *extra))
        _positional_sources(rows_arrays)
    return rows_arrays, column_source


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
        rows_arrays, self.column_source = _rows_in_order(X, sq_norms, perm, kernel)
        self.dense_rows = self.column_source == "dense"
        # the regressions (twins > 0): the kernel rows of their n training rows, from the
        # rows in problem order (the same dot products as the positional rows' source)
        real = perm[:twins] if twins > 0 else perm[:0]
        real_arrays, _ = _rows_in_order(X, sq_norms, real, kernel, self.column_source)
        rows_arrays = (*rows_arrays, (real_arrays[0], real_arrays[2],
                                      np.ones(real.shape[0], dtype=np.int8)))
        diagonal = np.empty(l)
        _kernel_diagonal(rows_arrays[0][3], kernel, diagonal)
        alpha = np.zeros(l)
        status = np.full(l, _LOWER, dtype=np.int8)
        linear = (np.full(l, -1.0) if linear is None
                  else np.ascontiguousarray(linear, dtype=np.float64).copy())
        gradient = linear.copy()  # G = Qa + p at a = 0
        gradient_bar = np.zeros(l)
        self.counters = np.zeros(_N_COUNTERS, dtype=np.int64)
        self.counters[_ACTIVE] = l
        self.counters[_COUNTER] = min(l, _SHRINK_EVERY) + 1
        # LIBSVM's Cache: bytes / sizeof(float) minus the heads, at least two full columns
        floats = int(cache_mb * (1 << 20)) // 4 - l * 8
        self.counters[_CACHE_FREE] = max(floats, 2 * l)
        self.values = np.array([-math.inf, math.inf, -math.inf, -math.inf])
        # cache entries: the l columns, then (twins) the kernel rows; the LRU's sentinel last
        columns = _new_column_list(l + twins)
        lru_prev = np.full(l + twins + 1, l + twins, dtype=np.int64)
        lru_next = np.full(l + twins + 1, l + twins, dtype=np.int64)
        self.positions = (perm, local, y, cost, diagonal, alpha, status, gradient, gradient_bar,
                          linear)
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
        never = np.int64(1 << 62)
        # (per chunk, two slots: the y = +1 side's result at c, the y = -1 side's at
        # chunks + c)
        scratch = (np.int64(max(1, chunks)), np.empty(2 * max(1, chunks)),
                   np.empty(2 * max(1, chunks), dtype=np.int64), np.empty(2 * max(1, chunks)))
        parallel = (*scratch, np.int64(PARALLEL_MIN_PASS), np.int64(PARALLEL_MIN_KERNEL),
                    np.int64(PARALLEL_MIN_FLUSH))
        pending = (np.empty(_PENDING_CAPACITY, dtype=np.int64), np.empty(_PENDING_CAPACITY),
                   np.empty(_PENDING_CAPACITY, dtype=np.int64))
        head = (rows_arrays, kernel, self.positions, self.cache)
        solver = (self.counters, self.values, np.empty((l, 2), dtype=np.int64), pending)
        self.grain = GrainMeter(chunks if fine_grained else 1)
        self.args_of = {True: (*head, (*solver, parallel), columns),
                        False: (*head, (*solver, (*scratch, never, never, never)), columns)}
        self.kernel_args = self.args_of[False]

        self.formulation = "c_svc"  # set by the solver (a warm start checks it)
        self.linear0: np.ndarray | None = None  # the linear term, problem order
        self.r = math.nan  # Solver_NU's r, set by finish
        self.rows = perm.copy()  # the problem's rows of X, in problem order
        self.y = y.copy()
        self.kernel = kernel
        self.counters[_NU] = 1 if nu else 0
        self.counters[_TWINS] = twins
        if alpha0 is not None:  # G and G_bar from the initial alpha (LIBSVM's Solve)
            alpha[:] = np.ascontiguousarray(alpha0, dtype=np.float64)
            _warm_gradient(*self.kernel_args)

    def continues(self, rows: np.ndarray, y: np.ndarray,
                  kernel: tuple[int, float, float, int]) -> bool:
        """True when this state belongs to the same binary problem (rows, labels, kernel):
        its kernel columns and alphas can start a fit at another C."""
        return (self.kernel == kernel and self.rows.shape == rows.shape
                and bool(np.array_equal(self.rows, rows))
                and bool(np.array_equal(self.y, np.asarray(y, dtype=np.int8))))

    def finite(self) -> bool:
        return bool(np.all(np.isfinite(self.positions[5])))

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
        local, cost_now, alpha = self.positions[1], self.positions[3], self.positions[5]
        new = np.ascontiguousarray(cost, dtype=np.float64)[local]
        support = alpha > 0
        if np.any(alpha[support] > new[support]):
            alpha *= float(np.min(new[support] / alpha[support]))
        cost_now[:] = new
        cache_free, nu = self.counters[_CACHE_FREE], self.counters[_NU]
        twins = self.counters[_TWINS]
        self.counters[:] = 0
        self.counters[_CACHE_FREE], self.counters[_NU] = cache_free, nu
        self.counters[_TWINS] = twins
        self.counters[_ACTIVE] = self.l
        self.counters[_COUNTER] = min(self.l, _SHRINK_EVERY) + 1
        self.values[:] = (-math.inf, math.inf, -math.inf, -math.inf)
        _warm_gradient(*self.kernel_args)

    @property
    def iteration(self) -> int:
        return int(self.counters[_ITER])

    def run(self, steps: int) -> int:
        """Up to `steps` SMO steps, with the fine or the sequential loops as the
        GrainMeter measures (solvers/grain.py); returns the kernel's status."""
        return self.grain.call(steps, self._run_part, _PAUSED)

    def _run_part(self, fine: bool, steps: int) -> tuple[int, int, float]:
        """`steps` steps in one mode: (status, steps done, work: steps x active size +
        kernel values computed)."""
        self.kernel_args = self.args_of[fine]
        iterations, evaluations = int(self.counters[_ITER]), int(self.counters[_EVALS])
        active = int(self.counters[_ACTIVE])
        status = int(_smo_steps(*self.kernel_args,
                                (float(self.eps), int(self.max_iter), int(steps))))
        iterations = int(self.counters[_ITER]) - iterations
        return status, iterations, float(iterations * active + int(self.counters[_EVALS])
                                         - evaluations)

    def snapshot(self) -> dict[str, Any]:
        """The progress event: the dual objective (exact, from G and G_bar; O(l))."""
        _flush_pending(*self.kernel_args)
        _, _, _, _, _, alpha, status, gradient, gradient_bar, linear = self.positions
        return {"iteration": self.iteration, "primal": None,
                "dual": float(_objective_from_bar(alpha, status, gradient, gradient_bar,
                                                  linear)),
                "gap": None, "violation": float(self.values[_VIOLATION]),
                "active_size": int(self.counters[_ACTIVE]), "pair": self.pair,
                "kkt_violators": int(_kkt_violators(self.positions[2], self.positions[6],
                                                    gradient, int(self.counters[_ACTIVE]),
                                                    float(self.eps)))}

    def finish(self) -> tuple[np.ndarray, float, float]:
        """Unshrink (reconstruct the gradient), then (alpha in problem order, rho, f(a));
        with Solver_NU also `self.r` (LIBSVM's si->r)."""
        out = np.zeros(4)
        alpha = np.empty(self.l)
        _finish(*self.kernel_args, alpha, out)
        self.r = float(out[3])
        return alpha, float(out[0]), float(out[1])


@njit(cache=True, inline="always")
def _with_columns(heads, columns):
    """The cache tuple of the kernels: (columns, lengths, lru_prev, lru_next, empty)."""
    return (columns, heads[0], heads[1], heads[2], heads[3])


@njit(cache=True, nogil=True, error_model="numpy")
def _smo_steps(rows, kernel, positions, heads, state, columns, settings):
    """Run SMO steps until convergence, max_iter, a non-finite step or the step budget.

    rows = ((data, indices, indptr, ||x||^2 of the rows in position order, a dense scatter
    buffer), (the same four arrays of X: source of the positional rows), (the rows in
    position order as a dense matrix - 0 rows when the data are sparse -, two float64
    scratch columns, ...), (the regressions' rows in problem order)); kernel = (kind,
    gamma, coef0, degree); positions = (perm, local, y, C, K_tt, alpha, status, G, G_bar,
    p), permuted together by shrinking; heads = (lengths, lru_prev, lru_next, empty) and
    columns (the typed list of cached columns) make the cache; state = (counters, values,
    swap buffer, pending G_bar updates, parallel scratch); settings = (eps, max_iter,
    step_budget). Returns a status code; everything else is kept in the arrays.

    Every array is taken out of its tuple once, here: a step calls only functions that
    take the arrays they read (see selection.py), and the whole state goes only to the
    rare paths (a cache miss, shrinking, the unshrink that checks convergence). So a
    column's fetch is spelled out where it is used (`_cached`, then the list's item or
    `_column` on a miss): one function doing both would take the whole state per fetch.
    """
    cache = _with_columns(heads, columns)
    counters, values, swaps, pending, parallel = state
    eps, max_iter, budget = settings
    _, local, y, cost, diagonal, alpha, status, gradient, gradient_bar, _ = positions
    col_len, lru_prev, lru_next, empty = heads
    pending_at, pending_scale, cover = pending
    source = _source(rows, y, counters)  # of the columns a cache miss computes
    chunks, min_pass = parallel[0], parallel[4]
    nu = counters[_NU] == 1
    l = y.shape[0]
    steps = 0
    while True:
        if counters[_ITER] >= max_iter:
            return _MAX_ITER
        if steps >= budget:
            return _PAUSED
        counters[_COUNTER] -= 1
        if counters[_COUNTER] == 0:
            counters[_COUNTER] = min(l, _SHRINK_EVERY)
            _do_shrinking(rows, kernel, positions, cache, counters, eps, swaps, pending, parallel)
            counters[_GMAX_VALID] = 0
        active = counters[_ACTIVE]
        unshrunk = False
        while True:
            # LIBSVM's select_working_set (Solver_NU's: an i on each side) on the active
            # set: the pair (i, j), Q_i, and the violation m - M
            q_i = empty
            i = -1
            j = -1
            if nu:
                if counters[_GMAX_VALID] == 1:  # both sides, from the last step's G update
                    gmaxp, gmaxp_idx = values[_GMAX_POS], counters[_GMAX_IDX]
                    gmaxn, gmaxn_idx = values[_GMAX_NEG], counters[_GMAX_NEG_IDX]
                else:
                    gmaxp, gmaxp_idx, gmaxn, gmaxn_idx = _gmax_sides_seq(y, status, gradient,
                                                                         active)
                q_ip = empty
                q_in = empty
                if gmaxp_idx >= 0:
                    if _cached(gmaxp_idx, active, col_len, lru_prev, lru_next, counters):
                        q_ip = columns[gmaxp_idx]
                    else:
                        q_ip = _column(gmaxp_idx, active, source, kernel, y, cache,
                                       counters, parallel, local)
                if gmaxn_idx >= 0:
                    if _cached(gmaxn_idx, active, col_len, lru_prev, lru_next, counters):
                        q_in = columns[gmaxn_idx]
                    else:
                        q_in = _column(gmaxn_idx, active, source, kernel, y, cache,
                                       counters, parallel, local)
                # each side pairs with its own i (y_i = y_t); a side with no i has Gmax =
                # -inf, so its t never pair (its K_ii and Q_i are never read)
                if chunks > 1 and active >= min_pass:
                    _, j, gmaxp2, gmaxn2 = _select_pair(
                        y, status, gradient, diagonal, gmaxp, diagonal[gmaxp_idx], 1.0, q_ip,
                        gmaxn, diagonal[gmaxn_idx], -1.0, q_in, active, parallel)
                else:
                    _, j, gmaxp2, gmaxn2 = _select_pair_seq(
                        y, status, gradient, diagonal, gmaxp, diagonal[gmaxp_idx], 1.0, q_ip,
                        gmaxn, diagonal[gmaxn_idx], -1.0, q_in, active)
                violation = max(gmaxp + gmaxp2, gmaxn + gmaxn2)
                if j >= 0:
                    if y[j] > 0:
                        i, q_i = gmaxp_idx, q_ip
                    else:
                        i, q_i = gmaxn_idx, q_in
            else:
                if counters[_GMAX_VALID] == 1:  # the pair kept by the last step
                    gmax, i = values[_GMAX], counters[_GMAX_IDX]
                else:
                    gmax, i = _gmax(positions, active, parallel)
                gmax2 = -np.inf
                if i >= 0:
                    if _cached(i, active, col_len, lru_prev, lru_next, counters):
                        q_i = columns[i]
                    else:
                        q_i = _column(i, active, source, kernel, y, cache, counters,
                                      parallel, local)
                    # LIBSVM's choice of j for i: one i for both sides
                    diagonal_i = diagonal[i]
                    y_i = np.float64(y[i])  # as Solver_NU's +-1.0: one compiled variant
                    if chunks > 1 and active >= min_pass:
                        _, j, gmax2_pos, gmax2_neg = _select_pair(
                            y, status, gradient, diagonal, gmax, diagonal_i, y_i, q_i, gmax,
                            diagonal_i, y_i, q_i, active, parallel)
                    else:
                        _, j, gmax2_pos, gmax2_neg = _select_pair_seq(
                            y, status, gradient, diagonal, gmax, diagonal_i, y_i, q_i, gmax,
                            diagonal_i, y_i, q_i, active)
                    gmax2 = max(gmax2_pos, gmax2_neg)
                violation = gmax + gmax2
            values[_VIOLATION] = violation
            if not (violation < eps or j < 0):
                break
            if unshrunk:
                return _CONVERGED
            # converged on the active set: reconstruct the whole gradient and check again
            _reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
            counters[_ACTIVE] = l
            counters[_GMAX_VALID] = 0
            active = l
            unshrunk = True
        if unshrunk:
            counters[_COUNTER] = 1  # shrink at the next step
        counters[_ITER] += 1
        steps += 1
        if _cached(j, active, col_len, lru_prev, lru_next, counters):
            q_j = columns[j]
        else:
            q_j = _column(j, active, source, kernel, y, cache, counters, parallel,
                          local)
        delta_i, delta_j, crossed = _pair_step(i, j, q_i, y, cost, diagonal, alpha, status,
                                               gradient)
        if crossed == 0:
            return _NON_FINITE
        # G[:active] += Q_i d_i + Q_j d_j, and the next step's i (each side's Gmax)
        if chunks > 1 and active >= min_pass:
            best_pos, best_pos_t, best_neg, best_neg_t = _update_in_parallel(
                gradient, q_i, q_j, delta_i, delta_j, y, status, active, parallel)
        else:
            best_pos, best_pos_t, best_neg, best_neg_t = _update_seq(
                gradient, q_i, q_j, delta_i, delta_j, y, status, active)
        gmax_next, gmax_next_t = _later_max(best_pos, best_pos_t, best_neg, best_neg_t)
        values[_GMAX_POS] = best_pos
        values[_GMAX_NEG] = best_neg
        counters[_GMAX_NEG_IDX] = best_neg_t
        counters[_GMAX_VALID] = 1
        values[_GMAX] = gmax_next
        counters[_GMAX_IDX] = best_pos_t if nu else gmax_next_t
        if crossed > 1:
            # G_bar += +-C Q_:i when a_i entered / left its upper bound (likewise j)
            if counters[_PENDING] + 2 > pending_at.shape[0]:
                _flush_gradient_bar(rows, kernel, positions, cache, counters, pending,
                                    parallel)
            if crossed & 2:
                c_i = cost[i]
                _bar_update(i, c_i if status[i] == _UPPER else -c_i, q_i, gradient_bar,
                            active, counters, pending_at, pending_scale, cover)
            if crossed & 4:
                c_j = cost[j]
                _bar_update(j, c_j if status[j] == _UPPER else -c_j, q_j, gradient_bar,
                            active, counters, pending_at, pending_scale, cover)


@njit(cache=True, nogil=True)
def _finish(rows, kernel, positions, heads, state, columns, alpha_out, out):
    """Unshrink, then alpha_out (problem order), out[0] = rho, out[1] = f(a) =
    1/2 sum_t a_t (G_t + p_t) (LIBSVM's obj), out[2] = violation on the full set."""
    cache = _with_columns(heads, columns)
    counters, _, _, pending, parallel = state
    _, local, y, _, _, alpha, status, gradient, _, linear = positions
    l = alpha.shape[0]
    _reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
    counters[_ACTIVE] = l
    counters[_GMAX_VALID] = 0
    if counters[_NU] == 1:
        _rho_nu(y, status, gradient, out)
    else:
        _rho(y, status, gradient, out)
    objective = 0.0
    for t in range(l):
        objective += alpha[t] * (gradient[t] + linear[t])
    out[1] = objective / 2
    for t in range(l):
        alpha_out[local[t]] = alpha[t]


@njit(cache=True, nogil=True)
def _rho(y, status, gradient, out):
    """Solver::calculate_rho into out[0]."""
    l = y.shape[0]
    # rho = mean of y_t G_t over free t, else the middle of [lb, ub]
    upper = np.inf
    lower = -np.inf
    n_free = 0
    free_sum = 0.0
    for t in range(l):
        y_grad = y[t] * gradient[t]
        if status[t] == _UPPER:
            if y[t] < 0:
                upper = min(upper, y_grad)
            else:
                lower = max(lower, y_grad)
        elif status[t] == _LOWER:
            if y[t] > 0:
                upper = min(upper, y_grad)
            else:
                lower = max(lower, y_grad)
        else:
            n_free += 1
            free_sum += y_grad
    out[0] = free_sum / n_free if n_free > 0 else (upper + lower) / 2


@njit(cache=True, nogil=True)
def _rho_nu(y, status, gradient, out):
    """Solver_NU::calculate_rho: out[0] = rho = (r1 - r2) / 2, out[3] = r = (r1 + r2) / 2,
    r1 (r2) from the G of the y = +1 (-1) side as calculate_rho's."""
    ub1 = np.inf
    ub2 = np.inf
    lb1 = -np.inf
    lb2 = -np.inf
    free1 = 0
    free2 = 0
    sum1 = 0.0
    sum2 = 0.0
    for t in range(y.shape[0]):
        if y[t] > 0:
            if status[t] == _UPPER:
                lb1 = max(lb1, gradient[t])
            elif status[t] == _LOWER:
                ub1 = min(ub1, gradient[t])
            else:
                free1 += 1
                sum1 += gradient[t]
        else:
            if status[t] == _UPPER:
                lb2 = max(lb2, gradient[t])
            elif status[t] == _LOWER:
                ub2 = min(ub2, gradient[t])
            else:
                free2 += 1
                sum2 += gradient[t]
    r1 = sum1 / free1 if free1 > 0 else (ub1 + lb1) / 2
    r2 = sum2 / free2 if free2 > 0 else (ub2 + lb2) / 2
    out[0] = (r1 - r2) / 2
    out[3] = (r1 + r2) / 2


@njit(cache=True, nogil=True)
def _warm_gradient(rows, kernel, positions, heads, state, columns):
    """status from a; G = -e + sum_{a_s > 0} a_s Q_:s; G_bar = sum_{a_s = C_s} C_s Q_:s
    (full columns, through the cache)."""
    cache = _with_columns(heads, columns)
    counters, _, _, _, parallel = state
    _, local, y, cost, _, alpha, status, gradient, gradient_bar, linear = positions
    l = alpha.shape[0]
    for t in range(l):
        _update_status(alpha, cost, status, t)
        gradient[t] = linear[t]
        gradient_bar[t] = 0.0
    n = counters[_TWINS]
    if n > 0:
        # the regressions: Q_ts = y_t y_s K(x_t, x_s) and the twins share their rows, so
        # G_t = p_t + y_t sum_r b_r K_{row(t), r} with b_r = sum_{s of row r} y_s a_s (the
        # same for G_bar with C_s): one kernel row per row r with b_r != 0 (none at nu-SVR's
        # start, where a_r = a*_r)
        net = np.zeros(n)
        net_bar = np.zeros(n)
        for s in range(l):
            r = _twin_row(local[s], n)
            if status[s] != _LOWER:
                net[r] += y[s] * alpha[s]
            if status[s] == _UPPER:
                net_bar[r] += y[s] * cost[s]
        total = np.zeros(n)
        total_bar = np.zeros(n)
        for r in range(n):
            if net[r] != 0.0 or net_bar[r] != 0.0:
                row = _kernel_row(r, n, kernel, cache, counters, parallel, rows[3])
                for u in range(n):
                    total[u] += net[r] * row[u]
                    total_bar[u] += net_bar[r] * row[u]
        for t in range(l):
            u = _twin_row(local[t], n)
            gradient[t] += y[t] * total[u]
            gradient_bar[t] = y[t] * total_bar[u]
        return
    for s in range(l):
        if status[s] != _LOWER:
            column = _get_column(s, l, rows, kernel, positions, cache, counters, parallel)
            a_s = alpha[s]
            for t in range(l):
                gradient[t] += a_s * column[t]
            if status[s] == _UPPER:
                c_s = cost[s]
                for t in range(l):
                    gradient_bar[t] += c_s * column[t]


@njit(cache=True, nogil=True)
def _flush_pending(rows, kernel, positions, heads, state, columns):
    cache = _with_columns(heads, columns)
    counters, _, _, pending, parallel = state
    _flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel)


@njit(cache=True, nogil=True)
def _kkt_violators(y, status, gradient, active, eps):
    """How many active variables break the KKT conditions by more than eps / 2 around the
    midpoint b of m = max {-y_t G_t : t in I_up} and M = min {-y_t G_t : t in I_low}: all
    of them at the start (a = 0), none once m - M <= eps. Shrunk variables count as
    satisfied (they are shrunk because they are, with margin)."""
    m = -np.inf
    big_m = np.inf
    for t in range(active):
        v = -y[t] * gradient[t]
        up = status[t] != _UPPER if y[t] > 0 else status[t] != _LOWER
        low = status[t] != _LOWER if y[t] > 0 else status[t] != _UPPER
        if up and v > m:
            m = v
        if low and v < big_m:
            big_m = v
    b = 0.5 * (m + big_m)
    count = 0
    for t in range(active):
        v = -y[t] * gradient[t]
        up = status[t] != _UPPER if y[t] > 0 else status[t] != _LOWER
        low = status[t] != _LOWER if y[t] > 0 else status[t] != _UPPER
        if (up and v > b + 0.5 * eps) or (low and v < b - 0.5 * eps):
            count += 1
    return count


@njit(cache=True, nogil=True)
def _objective_from_bar(alpha, status, gradient, gradient_bar, linear):
    """f(a) = 1/2 a'Qa + p'a with a'Qa = sum_{free} a_t (G_t - p_t) + sum_t a_t G_bar_t
    (free variables are always active, so their G is exact; G_bar is kept on all)."""
    quadratic = 0.0
    total = 0.0
    for t in range(alpha.shape[0]):
        if status[t] == _FREE:
            quadratic += alpha[t] * (gradient[t] - linear[t])
        quadratic += alpha[t] * gradient_bar[t]
        total += alpha[t] * linear[t]
    return 0.5 * quadratic + total


@njit(cache=True)
def _warm_parallel(rows, kernel, positions, heads, state, columns):
    """Run every parallel variant once (compilation / cache load)."""
    parallel = state[4]
    y, status, gradient, diagonal = positions[2], positions[6], positions[7], positions[4]
    n = y.shape[0]
    column = np.zeros(n, dtype=np.float32)
    data, indices, indptr, sq_norms, dense = rows[0]
    Xd, dots, scale, cdata, cpos, cptr, bits, table = rows[2]
    kind, gamma, coef0, degree = kernel
    chunks, values, best, values2, _, _, _ = parallel
    _column_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale, cdata, cpos,
                     cptr, bits, table, kind, gamma, coef0, degree, y, _ZERO, _ZERO, n, column,
                     chunks)
    _twin_fill_parallel(column, y, positions[1], y[0], n, _ZERO, n, column.copy(), chunks)
    _gmax_parallel(y, status, gradient, n, chunks, values, best)
    _select_pair_parallel(y, status, gradient, diagonal, 1.0, 1.0, 1.0, column, 1.0, 1.0, -1.0,
                          column, n, chunks, values, best, values2)
    _update_parallel(gradient.copy(), column, column, 0.0, 0.0, y, status, n, chunks, values,
                     best)
    _reduce_max(parallel)
    pending_at, pending_scale, cover = state[3]
    pending_at[0] = 0
    pending_scale[0] = 0.0
    cover[0] = 0
    _gradient_bar_parallel(data, indices, indptr, sq_norms, dense.shape[0], Xd, dots, scale,
                           cdata, cpos, cptr, bits, table, kind, gamma, coef0, degree, y,
                           pending_at,
                           pending_scale, cover, np.int64(1), positions[8].copy(), column,
                           chunks)
    _swap_entries_parallel(columns, heads[0], np.zeros(1, dtype=np.int64), _ZERO, state[2],
                           _ZERO, np.ones(1, dtype=np.uint8), chunks)
    real = rows[1]
    _gather_rows_parallel(data.copy(), indices.copy(), indptr, sq_norms.copy(), real[0],
                          real[1], real[2], real[3], Xd.copy(), positions[0], chunks)
