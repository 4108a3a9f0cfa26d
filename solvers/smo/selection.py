"""SMO's steps on the dual variables: LIBSVM's second-order working-set selection, the
two-variable update with the gradient G (fused with the next selection), G_bar (deferred
on the inactive set), shrinking and gradient reconstruction."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from solvers.smo.cache import get_column, swap_cached_entries, swap_positions
from solvers.smo.columns import column_range, scatter
from solvers.smo.layout import (
    ACTIVE,
    EVALS,
    FREE,
    LOWER,
    NU,
    PENDING,
    RECONSTRUCTS,
    SHRINKS,
    TAU,
    UNSHRINK,
    UPPER,
    ZERO,
    leaf,
)
from solvers.smo.rows import gather_positional_rows


@njit(cache=True, inline="always")
def _gmax_sides(y, status, gradient, lo, hi):
    """max { -y_t G_t : t in I_up } over [lo, hi) on each side, with its last argmax (-1
    if none): (for y_t = +1, for y_t = -1). Solver_NU picks i on each side."""
    best_pos = -np.inf
    best_pos_t = np.int64(-1)
    best_neg = -np.inf
    best_neg_t = np.int64(-1)
    # unsigned indices (every range loop here): see columns._dense_dots
    for t in range(np.uint64(lo), np.uint64(hi)):
        if y[t] > 0:
            if status[t] != UPPER and -gradient[t] >= best_pos:
                best_pos = -gradient[t]
                best_pos_t = np.int64(t)
        elif status[t] != LOWER and gradient[t] >= best_neg:
            best_neg = gradient[t]
            best_neg_t = np.int64(t)
    return best_pos, best_pos_t, best_neg, best_neg_t


@njit(cache=True, inline="always")
def later_max(value_a, index_a, value_b, index_b):
    """The larger of two (max, last argmax) pairs, a tie to the later index: what one scan
    with `>=` over both finds."""
    if value_b > value_a or (value_b == value_a and index_b > index_a):
        return value_b, index_b
    return value_a, index_a


@njit(cache=True, inline="always")
def _gmax_range(y, status, gradient, lo, hi):
    """max { -y_t G_t : t in I_up } over [lo, hi) and its last argmax (-1 if none)."""
    best_pos, best_pos_t, best_neg, best_neg_t = _gmax_sides(y, status, gradient, lo, hi)
    return later_max(best_pos, best_pos_t, best_neg, best_neg_t)


@njit(cache=True, inline="always")
def _clip_to_sum(a, b, c_a, total):
    """LIBSVM's clipping of a pair on a + b = total against a's box [0, c_a]: a > c_a
    (possible when total > c_a) moves to c_a, else b < 0 moves to 0; returns (a, b)."""
    if total > c_a:
        if a > c_a:
            return c_a, total - c_a
    elif b < 0:
        return total, 0.0
    return a, b


@njit(cache=True, inline="always")
def _if_smaller(grad_diff, quad, best, best_t, t):
    """(decrease, t) when the decrease -b^2 / a_it of pairing t is <= best, else (best,
    best_t); a_it <= 0 counts as tau."""
    decrease = -(grad_diff * grad_diff) / (quad if quad > 0 else TAU)
    if decrease <= best:
        return decrease, t
    return best, best_t


@njit(cache=True, inline="always")
def _select_pair_range(y, status, gradient, diagonal, gmax_pos, diagonal_pos, y_pos, q_pos,
                       gmax_neg, diagonal_neg, y_neg, q_neg, lo, hi):
    """LIBSVM's second loop over [lo, hi), each side y_t = +1 / -1 with its own i: (Gmax,
    K_ii, y_i, Q_i) for t with y_t = +1, then the same for y_t = -1. Returns (min objective
    decrease, its last argmin or -1, max { y_t G_t : t in I_low, y_t = +1 }, the same for
    y_t = -1). The C-SVC solver passes one i for both sides, Solver_NU one each."""
    gmax2_pos = -np.inf
    gmax2_neg = -np.inf
    best = np.inf
    best_t = -1
    for t in range(np.uint64(lo), np.uint64(hi)):
        if y[t] > 0:
            if status[t] != LOWER:
                grad_diff = gmax_pos + gradient[t]
                if gradient[t] >= gmax2_pos:
                    gmax2_pos = gradient[t]
                if grad_diff > 0:
                    # a_it = K_ii + K_tt - 2 y_i Q_it (y_t = +1)
                    quad = diagonal_pos + diagonal[t] - 2.0 * y_pos * q_pos[t]
                    best, best_t = _if_smaller(grad_diff, quad, best, best_t, np.int64(t))
        elif status[t] != UPPER:
            grad_diff = gmax_neg - gradient[t]
            if -gradient[t] >= gmax2_neg:
                gmax2_neg = -gradient[t]
            if grad_diff > 0:
                # a_it = K_ii + K_tt + 2 y_i Q_it (y_t = -1)
                quad = diagonal_neg + diagonal[t] + 2.0 * y_neg * q_neg[t]
                best, best_t = _if_smaller(grad_diff, quad, best, best_t, np.int64(t))
    return best, best_t, gmax2_pos, gmax2_neg


@njit(cache=True, inline="always")
def _update_range(gradient, q_i, q_j, delta_i, delta_j, y, status, lo, hi):
    """G[t] += Q_it d_i + Q_jt d_j on [lo, hi), then the next step's selection of i:
    returns max { -y_t G_t : t in I_up } and its last argmax on each side (y_t = +1, -1;
    `_gmax_sides`: C-SVC takes the larger, Solver_NU both). Two passes: the update
    vectorises (fused with the scan it did not: 4x slower on pairs of ~800 rows)."""
    for t in range(np.uint64(lo), np.uint64(hi)):
        gradient[t] = gradient[t] + (q_i[t] * delta_i + q_j[t] * delta_j)
    return _gmax_sides(y, status, gradient, lo, hi)


@njit(cache=True, parallel=True)
def gmax_parallel(y, status, gradient, n, chunks, values, indices):
    for c in prange(chunks):
        best, best_t = _gmax_range(y, status, gradient, c * n // chunks, (c + 1) * n // chunks)
        values[c] = best
        indices[c] = best_t


@njit(cache=True, parallel=True)
def select_pair_parallel(y, status, gradient, diagonal, gmax_pos, diagonal_pos, y_pos, q_pos,
                         gmax_neg, diagonal_neg, y_neg, q_neg, n, chunks, values, indices,
                         values2):
    """`_select_pair_range` on [0, n) in chunks: chunk c's (decrease, argmin) in values[c],
    indices[c], its Gmax2 of each side in values2[c], values2[chunks + c]."""
    for c in prange(chunks):
        best, best_t, gmax2_pos, gmax2_neg = _select_pair_range(
            y, status, gradient, diagonal, gmax_pos, diagonal_pos, y_pos, q_pos, gmax_neg,
            diagonal_neg, y_neg, q_neg, c * n // chunks, (c + 1) * n // chunks)
        values[c] = best
        indices[c] = best_t
        values2[c] = gmax2_pos
        values2[chunks + c] = gmax2_neg


@leaf()
def select_pair_seq(y, status, gradient, diagonal, gmax_pos, diagonal_pos, y_pos, q_pos,
                    gmax_neg, diagonal_neg, y_neg, q_neg, n):
    """`_select_pair_range` on [0, n): the step loop's sequential choice."""
    return _select_pair_range(y, status, gradient, diagonal, gmax_pos, diagonal_pos, y_pos,
                              q_pos, gmax_neg, diagonal_neg, y_neg, q_neg, ZERO, n)


@njit(cache=True)
def select_pair(y, status, gradient, diagonal, gmax_pos, diagonal_pos, y_pos, q_pos,
                gmax_neg, diagonal_neg, y_neg, q_neg, n, parallel):
    """`_select_pair_range` on [0, n) in parallel: the same answer (the chunks reduced in
    order, ties to the later one, as one scan finds them)."""
    chunks, decreases, indices, gmax2s = (parallel.chunks, parallel.values, parallel.indices,
                                          parallel.values2)
    select_pair_parallel(y, status, gradient, diagonal, gmax_pos, diagonal_pos, y_pos, q_pos,
                         gmax_neg, diagonal_neg, y_neg, q_neg, n, chunks, decreases, indices,
                         gmax2s)
    best = np.inf
    j = -1
    gmax2_pos = -np.inf
    gmax2_neg = -np.inf
    for c in range(chunks):
        gmax2_pos = max(gmax2_pos, gmax2s[c])
        gmax2_neg = max(gmax2_neg, gmax2s[chunks + c])
        if indices[c] >= 0 and decreases[c] <= best:
            best = decreases[c]
            j = indices[c]
    return best, j, gmax2_pos, gmax2_neg


@njit(cache=True, parallel=True)
def update_parallel(gradient, q_i, q_j, delta_i, delta_j, y, status, n, chunks, values,
                    indices):
    """`_update_range` on [0, n) in chunks: chunk c's max and last argmax of each side in
    values[c], indices[c] (y_t = +1) and values[chunks + c], indices[chunks + c]."""
    for c in prange(chunks):
        pos, pos_t, neg, neg_t = _update_range(gradient, q_i, q_j, delta_i, delta_j, y,
                                               status, c * n // chunks, (c + 1) * n // chunks)
        values[c] = pos
        indices[c] = pos_t
        values[chunks + c] = neg
        indices[chunks + c] = neg_t


@njit(cache=True)
def reduce_max(parallel, first=0):
    """Chunk results values[first + c], indices[first + c] in order, ties to the later chunk:
    the sequential scan's answer."""
    chunks, values, indices = parallel.chunks, parallel.values, parallel.indices
    best = -np.inf
    best_t = -1
    for c in range(first, first + chunks):
        if indices[c] >= 0 and values[c] >= best:
            best = values[c]
            best_t = indices[c]
    return best, best_t


@njit(cache=True)
def gmax_active(positions, n, parallel):
    y, status, gradient = positions.y, positions.status, positions.gradient
    if parallel.chunks > 1 and n >= parallel.min_pass:
        gmax_parallel(y, status, gradient, n, parallel.chunks, parallel.values,
                      parallel.indices)
        return reduce_max(parallel)
    return _gmax_range(y, status, gradient, 0, n)


# The step loop (steps._smo_steps) holds every array, taken out of its tuple once. What it
# calls once per step takes the few arrays it reads and does nothing else that counts
# references (no parallel region, no tuple of arrays): a compiled function that uses an
# array argument takes a reference to it (an atomic increment and decrement per call),
# unless LLVM's reference-count pruning sees no other reference operation in between -
# which only a leaf like these gives it. The parallel variants and the rare paths (a
# cache miss, a flush, shrinking) get the whole state.


@leaf()
def gmax_sides_seq(y, status, gradient, n):
    """`_gmax_sides` on [0, n)."""
    return _gmax_sides(y, status, gradient, ZERO, n)


@njit(cache=True, inline="always")
def update_status(alpha, cost, status, t):
    if alpha[t] >= cost[t]:
        status[t] = UPPER
    elif alpha[t] <= 0.0:
        status[t] = LOWER
    else:
        status[t] = FREE


@leaf(error_model="numpy")
def pair_step(i, j, q_i, y, cost, diagonal, alpha, status, gradient):
    """LIBSVM's two-variable update of a_i, a_j (q_i = Q_{i, :active}) and their status:
    (delta_i, delta_j, crossed), crossed = 0 if the step is not finite (nothing changed),
    else 1 + 2 (a_i entered or left its upper bound) + 4 (a_j did): G_bar changes then."""
    c_i = cost[i]
    c_j = cost[j]
    old_i = alpha[i]
    old_j = alpha[j]
    a_i = old_i
    a_j = old_j
    if y[i] != y[j]:
        # minimise along a_i - a_j = const:  delta = (-G_i - G_j) / (K_ii + K_jj + 2 Q_ij)
        quad = diagonal[i] + diagonal[j] + 2.0 * q_i[j]
        if quad <= 0:
            quad = TAU
        delta = (-gradient[i] - gradient[j]) / quad
        diff = a_i - a_j
        a_i += delta
        a_j += delta
        if diff > 0:
            if a_j < 0:
                a_j = 0.0
                a_i = diff
        elif a_i < 0:
            a_i = 0.0
            a_j = -diff
        if diff > c_i - c_j:
            if a_i > c_i:
                a_i = c_i
                a_j = c_i - diff
        elif a_j > c_j:
            a_j = c_j
            a_i = c_j + diff
    else:
        # minimise along a_i + a_j = const:  delta = (G_i - G_j) / (K_ii + K_jj - 2 Q_ij)
        quad = diagonal[i] + diagonal[j] - 2.0 * q_i[j]
        if quad <= 0:
            quad = TAU
        delta = (gradient[i] - gradient[j]) / quad
        total = a_i + a_j
        a_i -= delta
        a_j += delta
        a_i, a_j = _clip_to_sum(a_i, a_j, c_i, total)
        a_j, a_i = _clip_to_sum(a_j, a_i, c_j, total)
    delta_i = a_i - old_i
    delta_j = a_j - old_j
    if not (np.isfinite(delta_i) and np.isfinite(delta_j)):
        return delta_i, delta_j, 0
    alpha[i] = a_i
    alpha[j] = a_j
    was_upper_i = status[i] == UPPER
    was_upper_j = status[j] == UPPER
    update_status(alpha, cost, status, i)
    update_status(alpha, cost, status, j)
    crossed = 1
    if was_upper_i != (status[i] == UPPER):
        crossed += 2
    if was_upper_j != (status[j] == UPPER):
        crossed += 4
    return delta_i, delta_j, crossed


@leaf()
def update_seq(gradient, q_i, q_j, delta_i, delta_j, y, status, n):
    """`_update_range` on [0, n): G += Q_i d_i + Q_j d_j, and each side's next Gmax."""
    return _update_range(gradient, q_i, q_j, delta_i, delta_j, y, status, ZERO, n)


@njit(cache=True)
def update_in_parallel(gradient, q_i, q_j, delta_i, delta_j, y, status, n, parallel):
    """`update_seq` in chunks on the fit's threads: the same values and maxima."""
    chunks = parallel.chunks
    update_parallel(gradient, q_i, q_j, delta_i, delta_j, y, status, n, chunks, parallel.values,
                    parallel.indices)
    best_pos, best_pos_t = reduce_max(parallel)
    best_neg, best_neg_t = reduce_max(parallel, chunks)
    return best_pos, best_pos_t, best_neg, best_neg_t


@leaf()
def bar_update(i, scale, q_i, gradient_bar, active, counters, pending_at, pending_scale,
               cover):
    """G_bar += s Q_:i when a_i entered (s = C_i) or left (s = -C_i) its upper bound: now
    on the active set (Q_i is at hand), deferred on the inactive one (one pass at the next
    flush; the caller makes room)."""
    for t in range(active):
        gradient_bar[t] += scale * q_i[t]
    if active == gradient_bar.shape[0]:
        return
    n = counters[PENDING]
    pending_at[n] = i
    pending_scale[n] = scale
    cover[n] = active
    counters[PENDING] = n + 1


@njit(cache=True)
def _gradient_bar_range(rows, kernel, y, pending_at, pending_scale, cover, n_pending,
                        gradient_bar, column, lo, hi):
    """G_bar[t] += s_p Q_{i_p, t} for t in [max(lo, cover[p]), hi), p = 0, 1, ... in order
    (fresh kernel values computed as every kernel column, float32; `column` is scratch)."""
    for p in range(n_pending):
        i = pending_at[p]
        start = max(lo, cover[p])
        if start >= hi:
            continue
        scatter(rows[0], i, False)
        column_range(rows, kernel, y, i, start, hi, column)
        scale = pending_scale[p]
        for t in range(start, hi):
            gradient_bar[t] += scale * column[t]
        scatter(rows[0], i, True)


@njit(cache=True, parallel=True)
def gradient_bar_parallel(data, indices, indptr, sq_norms, n_features, Xd, dots, scale,
                          cdata, cpos, cptr, bits, table, kind, gamma, coef0, degree, y,
                          pending_at, pending_scale, cover, n_pending, gradient_bar, column,
                          blocks):
    n = gradient_bar.shape[0]
    for b in prange(blocks):
        dense = np.zeros(n_features)  # each block scatters into its own buffer
        _gradient_bar_range(((data, indices, indptr, sq_norms, dense),
                             (Xd, dots, scale, cdata, cpos, cptr, bits, table)),
                            (kind, gamma, coef0, degree), y, pending_at, pending_scale, cover,
                            n_pending, gradient_bar, column, b * n // blocks,
                            (b + 1) * n // blocks)


@njit(cache=True)
def flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel):
    """Apply the deferred G_bar updates of the inactive variables (s_p Q_{i_p, t} for
    t >= the active size at update p), in their order, in parallel when large. Every G_bar_t
    receives its updates in time order, as with LIBSVM's immediate full-column update."""
    n_pending = counters[PENDING]
    if n_pending == 0:
        return
    counters[PENDING] = 0
    pending_at, pending_scale, cover = pending
    y, gradient_bar = positions.y, positions.gradient_bar
    l = gradient_bar.shape[0]
    fresh = 0
    for p in range(n_pending):
        fresh += l - cover[p]
    counters[EVALS] += fresh
    positional = rows[0]
    data, indices, indptr, sq_norms, dense = positional
    Xd, dots, scale, cdata, cpos, cptr, bits, table = rows[2]
    column = np.empty(l, dtype=np.float32)
    chunks = parallel.chunks
    work = fresh * (8 + (indptr[-1] // max(indptr.shape[0] - 1, 1)))
    if chunks > 1 and work >= parallel.min_flush:
        gradient_bar_parallel(data, indices, indptr, sq_norms, dense.shape[0], Xd, dots,
                              scale, cdata, cpos, cptr, bits, table, kernel[0], kernel[1],
                              kernel[2], kernel[3], y, pending_at, pending_scale, cover,
                              n_pending, gradient_bar, column, chunks)
    else:
        _gradient_bar_range((positional, rows[2]), kernel, y, pending_at, pending_scale,
                            cover, n_pending, gradient_bar, column, ZERO, l)


@njit(cache=True)
def reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel):
    """G of the inactive variables from G_bar and the free variables (LIBSVM)."""
    alpha, status, gradient = positions.alpha, positions.status, positions.gradient
    gradient_bar, linear = positions.gradient_bar, positions.linear
    active = counters[ACTIVE]
    l = alpha.shape[0]
    if active == l:
        return
    flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel)
    counters[RECONSTRUCTS] += 1
    for t in range(active, l):
        gradient[t] = gradient_bar[t] + linear[t]
    n_free = 0
    for t in range(active):
        if status[t] == FREE:
            n_free += 1
    if n_free * l > 2 * active * (l - active):
        for i in range(active, l):
            # G_i += sum_{free t} a_t Q_it
            column = get_column(i, active, rows, kernel, positions, cache, counters, parallel)
            total = gradient[i]
            for t in range(active):
                if status[t] == FREE:
                    total += alpha[t] * column[t]
            gradient[i] = total
    else:
        for i in range(active):
            if status[i] == FREE:
                # G[active:] += a_i Q_i,active:
                column = get_column(i, l, rows, kernel, positions, cache, counters, parallel)
                a_i = alpha[i]
                for t in range(active, l):
                    gradient[t] += a_i * column[t]


@njit(cache=True, inline="always")
def _shrink_bounds(y, status, gradient, active):
    """C-SVC's bounds, max { -y_t G_t : t in I_up } and max { y_t G_t : t in I_low }, in
    the four slots of `_shrink_bounds_nu` (both sides share them)."""
    gmax1 = -np.inf  # max { -y_t G_t : t in I_up }
    gmax2 = -np.inf  # max { y_t G_t : t in I_low }
    for t in range(active):
        if y[t] > 0:
            if status[t] != UPPER and -gradient[t] >= gmax1:
                gmax1 = -gradient[t]
            if status[t] != LOWER and gradient[t] >= gmax2:
                gmax2 = gradient[t]
        else:
            if status[t] != UPPER and -gradient[t] >= gmax2:
                gmax2 = -gradient[t]
            if status[t] != LOWER and gradient[t] >= gmax1:
                gmax1 = gradient[t]
    return gmax1, gmax2, gmax1, gmax2


@njit(cache=True)
def do_shrinking(rows, kernel, positions, cache, counters, eps, swaps, pending, parallel):
    """LIBSVM's do_shrinking (Solver_NU's: the bounds of each side separately), with its
    one-time unshrink when m - M <= 10 eps."""
    flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel)
    y, status, gradient = positions.y, positions.status, positions.gradient
    l = y.shape[0]
    counters[SHRINKS] += 1
    active = counters[ACTIVE]
    if counters[NU] == 1:
        gmax1, gmax2, gmax3, gmax4 = _shrink_bounds_nu(y, status, gradient, active)
    else:
        gmax1, gmax2, gmax3, gmax4 = _shrink_bounds(y, status, gradient, active)
    if counters[UNSHRINK] == 0 and max(gmax1 + gmax2, gmax3 + gmax4) <= eps * 10:
        counters[UNSHRINK] = 1
        reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
        active = l
        counters[ACTIVE] = l
    n_swaps = 0
    t = ZERO
    while t < active:
        if _be_shrunk(t, gmax1, gmax2, gmax3, gmax4, y, status, gradient):
            active -= 1
            while active > t:
                if not _be_shrunk(active, gmax1, gmax2, gmax3, gmax4, y, status, gradient):
                    swap_positions(positions, cache, t, active)
                    swaps[n_swaps, 0] = t
                    swaps[n_swaps, 1] = active
                    n_swaps += 1
                    break
                active -= 1
        t += 1
    counters[ACTIVE] = active
    swap_cached_entries(cache, counters, swaps, n_swaps, parallel)
    if n_swaps > 0:
        gather_positional_rows(rows, positions.perm, parallel.chunks, parallel.min_kernel)


# ---- Solver_NU (nu-SVC, nu-SVR): two equality constraints, y'a = const and e'a = const,
# so a pair is always taken within one side (y_i = y_j) -------------------------------


@njit(cache=True, inline="always")
def _be_shrunk(t, gmax1, gmax2, gmax3, gmax4, y, status, gradient):
    """Whether t leaves the active set (LIBSVM's be_shrunk); the bounds as in
    `_shrink_bounds_nu`. The C-SVC rule is this one with gmax3 = gmax1, gmax4 = gmax2."""
    if status[t] == UPPER:
        if y[t] > 0:
            return -gradient[t] > gmax1
        return -gradient[t] > gmax4
    if status[t] == LOWER:
        if y[t] > 0:
            return gradient[t] > gmax2
        return gradient[t] > gmax3
    return False


@njit(cache=True, inline="always")
def _shrink_bounds_nu(y, status, gradient, active):
    """Solver_NU's bounds, each side separately."""
    gmax1 = -np.inf  # max { -y_t G_t : y_t = +1, t in I_up }
    gmax2 = -np.inf  # max { y_t G_t : y_t = +1, t in I_low }
    gmax3 = -np.inf  # max { -y_t G_t : y_t = -1, t in I_up }
    gmax4 = -np.inf  # max { y_t G_t : y_t = -1, t in I_low }
    for t in range(active):
        if status[t] != UPPER:
            if y[t] > 0:
                if -gradient[t] > gmax1:
                    gmax1 = -gradient[t]
            elif -gradient[t] > gmax4:
                gmax4 = -gradient[t]
        if status[t] != LOWER:
            if y[t] > 0:
                if gradient[t] > gmax2:
                    gmax2 = gradient[t]
            elif gradient[t] > gmax3:
                gmax3 = gradient[t]
    return gmax1, gmax2, gmax3, gmax4
