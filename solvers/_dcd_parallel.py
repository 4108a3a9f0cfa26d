"""Compiled parts of the parallel dual coordinate descent of `dcd` with `threads` > 1.

One sweep visits a random permutation of the active set, as the sequential kernel does
(the same Fisher-Yates shuffle of the same generator), split into P contiguous parts,
P = threads. The sweep runs in rounds of a fixed amount of work (set by the data: the
round boundaries never depend on timing). In a round every part runs the sequential
algorithm (visit, shrink, one-variable Newton step) on its own rows against its own copy
of w (the view: w at the round start plus its own steps); nothing is shared but read-only
data, so the parts need no lock and the result does not depend on the thread count that
runs them. After the round the steps are merged with an exact line search on the dual
(a quadratic): with Delta the parts' steps of alpha and dW = X'(y * Delta) the sum of
their w changes,

    D(a + g Delta) - D(a) = g [w.dW + sum_i (D_ii a_i - 1) Delta_i]
                            + g^2 / 2 [||dW||^2 + sum_i D_ii Delta_i^2],

minimised over g in [0, 1] (g = 1 unless the parts' steps interfere: each part's steps
decrease its own view's dual, so the linear term is negative). a + g Delta stays in the
box (a convex combination of two feasible points), the dual decreases every round and
w = w(a) holds after every merge (up to rounding), so the duality gap of the returned
(a, w) is the same certificate as the sequential solver's. This is the block-parallel
scheme of CoCoA (Jaggi et al. 2014) with the aggregation step chosen by exact line
search instead of fixed, and with LIBLINEAR's shrinking inside each part; it keeps the
property that LIBLINEAR-multicore (Chiang, Lee & Lin 2016) aims at, that the expensive
work (the rows' dot products and updates) runs in parallel, and the sequential share is
the merge: about 2 (P + 1) (n_weights) memory operations a round, itself split over the
threads by feature chunks.

The stop rule is the sequential one (projected-gradient extremes of the sweep, each
part's computed against its view), and with `converged` decided by the duality gap it
claims nothing the gap does not prove.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from solvers import dual_cd
from solvers._kernel_helpers import next_below, row_axpy

# counters[] slots (int64) and bounds[] slots (float64)
ITERATION, ACTIVE_SIZE, IN_SWEEP, ROUNDS = 0, 1, 2, 3
PG_MAX_OLD, PG_MIN_OLD, LAST_VIOLATION, SMALLEST_STEP = 0, 1, 2, 3
_PG_ZERO = 1.0e-12


@njit(cache=True)
def start_sweep(index, counters, rng, part_lo, part_hi, part_end, pos, pg_max, pg_min):
    """Shuffle index[:active_size] (the sequential kernel's Fisher-Yates) and split it
    into len(part_lo) contiguous parts."""
    active_size = counters[ACTIVE_SIZE]
    for t in range(active_size - 1):
        j = t + next_below(rng, active_size - t)
        swap = index[t]
        index[t] = index[j]
        index[j] = swap
    parts = part_lo.shape[0]
    for p in range(parts):
        part_lo[p] = p * active_size // parts
        part_end[p] = (p + 1) * active_size // parts
        part_hi[p] = part_end[p]
        pos[p] = part_lo[p]
        pg_max[p] = -np.inf
        pg_min[p] = np.inf
    counters[IN_SWEEP] = 1


@njit(cache=True, inline="always", error_model="numpy")
def _visit_and_step(rows, labels, alpha, view, bias_scale, bias_curvature, parts, i,
                    pg_max_old, pg_min_old):
    """Visit row i against a part's view (dual_cd.visit) and, unless it shrinks, take
    the step of the part's subproblem, whose bias curvature is `parts` times B^2 (see
    the module docstring). Returns (work, g, shrink, pg, step)."""
    data, indices, _ = rows
    y, _, _, qbar_diag = labels
    start, end, work, g, a_i, u_i = dual_cd.visit(rows, labels, alpha, view, bias_scale, i)
    pg = 0.0
    if a_i == 0.0:
        if g > pg_max_old:
            return work, g, True, pg, 0.0
        elif g < 0.0:
            pg = g
    elif a_i == u_i:
        if g < pg_min_old:
            return work, g, True, pg, 0.0
        elif g > 0.0:
            pg = g
    else:
        pg = g
    step = 0.0
    if abs(pg) > _PG_ZERO and np.isfinite(g):
        a_new = min(max(a_i - g / (qbar_diag[i] + bias_curvature), 0.0), u_i)
        alpha[i] = a_new
        step = a_new - a_i
        scaled = step * y[i]
        row_axpy(scaled, data, indices, start, end, view)
        view[view.shape[0] - 1] += scaled * bias_scale * parts
    return work, g, False, pg, step


@njit(cache=True, parallel=True, error_model="numpy")
def run_round(rows, labels, alpha, views, index, delta, part_hi, pos, pg_max, pg_min,
              lin, quad, work_done, status, settings):
    """One round: each part p visits index[pos[p]:part_hi[p]] against views[p] until it
    has visited settings[3] nonzeros (+1 per row) or its part ends; shrinks within its
    part (a shrunk row moves to the part's end). lin[p], quad[p]: its steps' terms of the
    line search that belong to alpha (sum (D_ii a_i - 1) Delta_i, sum D_ii Delta_i^2);
    delta[i] the step of each visited row. settings = (B, pg_max_old, pg_min_old, budget).
    The per-part arrays are separate arguments (Numba 0.68 loses prange-indexed writes
    into arrays unpacked from a tuple argument)."""
    bias_scale, pg_max_old, pg_min_old, budget = settings
    diag = labels[2]
    parts = pos.shape[0]
    bias_curvature = (parts - 1) * bias_scale * bias_scale
    for p in prange(parts):
        view = views[p]
        s = pos[p]
        hi = part_hi[p]
        work = 0
        linear = 0.0
        quadratic = 0.0
        high = pg_max[p]
        low = pg_min[p]
        code = dual_cd.MAX_ITER
        while s < hi and work < budget:
            i = np.uint64(index[s])
            a_i = alpha[i]
            row_work, g, shrink, pg, step = _visit_and_step(
                rows, labels, alpha, view, bias_scale, bias_curvature, float(parts), i,
                pg_max_old, pg_min_old)
            work += row_work
            if not np.isfinite(g):
                code = dual_cd.NON_FINITE
                break
            if shrink:
                hi -= 1
                index[s] = index[hi]
                index[hi] = np.int64(i)
                continue
            high = max(high, pg)
            low = min(low, pg)
            delta[i] = step
            linear += (diag[i] * a_i - 1.0) * step
            quadratic += diag[i] * step * step
            s += 1
        pos[p] = s
        part_hi[p] = hi
        pg_max[p] = high
        pg_min[p] = low
        lin[p] = linear
        quad[p] = quadratic
        work_done[p] = work
        status[p] = code


@njit(cache=True)
def _change(w, views, j, last):
    """dW_j = sum_p (views[p, j] - w_j), the bias slot's divided by the parts."""
    change = 0.0
    for p in range(views.shape[0]):
        change += views[p, j] - w[j]
    if j == last:
        change /= views.shape[0]
    return change


@njit(cache=True, parallel=True)
def merge_terms(w, views, feature_bounds, chunk_lin, chunk_quad):
    """Per feature chunk: sum_j w_j dW_j and sum_j dW_j^2 (summed in part order)."""
    last = w.shape[0] - 1
    for c in prange(feature_bounds.shape[0] - 1):
        linear = 0.0
        quadratic = 0.0
        for j in range(feature_bounds[c], feature_bounds[c + 1]):
            change = _change(w, views, j, last)
            linear += w[j] * change
            quadratic += change * change
        chunk_lin[c] = linear
        chunk_quad[c] = quadratic


@njit(cache=True, parallel=True)
def apply_merge(w, views, feature_bounds, step):
    """w += step * dW, then every view = w."""
    parts = views.shape[0]
    last = w.shape[0] - 1
    for c in prange(feature_bounds.shape[0] - 1):
        for j in range(feature_bounds[c], feature_bounds[c + 1]):
            change = _change(w, views, j, last)
            value = w[j] + step * change if step != 1.0 else w[j] + change
            w[j] = value
            for p in range(parts):
                views[p, j] = value
@njit(cache=True)
def scale_back(alpha, upper, delta, index, seg, pos, step):
    """a_i -= (1 - step) Delta_i for the rows each part stepped in the round (they lie in
    index[seg[p]:pos[p]]), kept in [0, U_i] against rounding."""
    for p in range(seg.shape[0]):
        for s in range(seg[p], pos[p]):
            i = index[s]
            if delta[i] != 0.0:
                value = alpha[i] - (1.0 - step) * delta[i]
                alpha[i] = min(max(value, 0.0), upper[i])


@njit(cache=True)
def end_sweep(index, scratch, counters, bounds, part_lo, part_hi, part_end, pg_max, pg_min,
              eps, n_rows):
    """After every part reached its end: the parts' active rows first (in part order),
    then their shrunk rows, then the rows shrunk before; the stop rule and the shrinking
    bounds as the sequential kernel. Returns CONVERGED or MAX_ITER (go on)."""
    active_size = counters[ACTIVE_SIZE]
    parts = part_lo.shape[0]
    count = 0
    for p in range(parts):
        for s in range(part_lo[p], part_hi[p]):
            scratch[count] = index[s]
            count += 1
    new_active = count
    for p in range(parts):
        for s in range(part_hi[p], part_end[p]):
            scratch[count] = index[s]
            count += 1
    index[:active_size] = scratch[:active_size]
    high = -np.inf
    low = np.inf
    for p in range(parts):
        high = max(high, pg_max[p])
        low = min(low, pg_min[p])
    counters[IN_SWEEP] = 0
    counters[ITERATION] += 1
    spread = high - low
    bounds[LAST_VIOLATION] = max(spread, abs(high), abs(low))
    if spread <= eps and high <= eps and low >= -eps:
        if new_active == n_rows:
            counters[ACTIVE_SIZE] = new_active
            return dual_cd.CONVERGED
        counters[ACTIVE_SIZE] = n_rows  # one unshrunk pass must confirm convergence
        bounds[PG_MAX_OLD] = np.inf
        bounds[PG_MIN_OLD] = -np.inf
        return dual_cd.MAX_ITER
    counters[ACTIVE_SIZE] = new_active
    bounds[PG_MAX_OLD] = high if high > 0.0 else np.inf
    bounds[PG_MIN_OLD] = low if low < 0.0 else -np.inf
    return dual_cd.MAX_ITER
