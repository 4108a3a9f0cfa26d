"""Compiled parts of `logistic_dcd` with `threads` > 1: LIBLINEAR -s 7's sweep split as
`dcd`'s (solvers/_dcd_parallel.py): each sweep's permutation in P = threads contiguous
parts, run in rounds of fixed work, each part against its own view of w with the bias
curvature P B^2; the parts' steps are merged along their sum with a step g in (0, 1]:
1 when the dual decreases,

    D(a + g Delta) - D(a) = g w.dW + g^2 / 2 ||dW||^2 + sum_i [phi_i(a_i + g Delta_i)
                            - phi_i(a_i)],   phi_i(z) = z log z + (C_i - z) log(C_i - z),

else halved until it does (a + g Delta stays in the open box: a convex combination). So
the dual decreases every round, w = w(a) holds after each merge, and -D(a) stays the
certificate. The pair (a_i, C_i - a_i) is kept as in the sequential kernel; a row's pair
before its step is kept (old) for a round whose step is scaled back.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from solvers._kernel_helpers import row_axpy, row_dot

# LIBLINEAR's inner Newton iteration (solvers/logistic_dual.py, which takes them from here)
MAX_INNER_ITER = 100
ETA = 0.1  # z <- ETA z when a Newton step leaves (0, C)


@njit(cache=True, inline="always")
def _phi(z, rest):
    return z * math.log(z) + rest * math.log(rest)


@njit(cache=True, inline="always")
def sub_problem(a, b, c, alpha_0, alpha_1, inner_eps):
    """LIBLINEAR's one-variable sub-problem of a row (solve_l2r_lr_dual), a = Qbar_ii,
    b = y_i w.x_i: minimise g(z) = z log z + (C - z) log(C - z) + a/2 (z - z_old)^2 +
    sign b (z - z_old) over the variable of the pair (alpha_0, alpha_1 = C - alpha_0)
    whose optimum lies in (0, C/2], by Newton steps from z_old (0.1 z_old when it is past
    C/2). Returns (its slot, the other's, sign, z_old, z, |g'| at the start - NaN when not
    finite, nothing done -, Newton steps)."""
    first, second, sign = 0, 1, 1.0
    if 0.5 * a * (alpha_1 - alpha_0) + b < 0.0:
        first, second, sign = 1, 0, -1.0
    z_old = alpha_1 if first == 1 else alpha_0
    z = z_old
    if c - z < 0.5 * c:
        z = 0.1 * z
    gp = a * (z - z_old) + sign * b + math.log(z / (c - z))
    if not math.isfinite(gp):
        return first, second, sign, z_old, z, math.nan, 0
    g_start = abs(gp)
    inner = 0
    while inner <= MAX_INNER_ITER and abs(gp) >= inner_eps:
        gpp = a + c / (c - z) / z
        trial = z - gp / gpp
        z = z * ETA if trial <= 0.0 else trial
        gp = a * (z - z_old) + sign * b + math.log(z / (c - z))
        inner += 1
    return first, second, sign, z_old, z, g_start, inner


@njit(cache=True, error_model="numpy", nogil=True, inline="always")
def row_step(data, indices, start, end, g, y, cost, norms, alpha, w, bias_scale,
                  inner_eps):
    """LIBLINEAR's step on row g (solvers/logistic_dual.py `_sweep`, the out-of-core
    pair sweep): its sub-problem from b = y_g w.z_g, then a_g and w updated; returns
    (|g'| at the start, Newton steps; NaN, nothing done, when not finite)."""
    bias_slot = w.shape[0] - 1
    b = y[g] * (row_dot(w, data, indices, start, end) + w[bias_slot] * bias_scale)
    c = cost[g]
    first, second, sign, z_old, z, g_start, inner = sub_problem(
        norms[g], b, c, alpha[g, 0], alpha[g, 1], inner_eps)
    if inner > 0 and not math.isnan(g_start):
        alpha[g, first] = z
        alpha[g, second] = c - z
        step = sign * (z - z_old) * y[g]
        row_axpy(step, data, indices, start, end, w)
        w[bias_slot] += step * bias_scale
    return g_start, inner


@njit(cache=True, parallel=True, error_model="numpy")
def run_round(rows, y, cost, row_norms, alpha, old, views, index, part_hi, pos, largest,
              steps, entropy, work_done, settings):
    """One round of each part over index[pos[p]:part_hi[p]] (at most settings[2] nonzeros
    + 1 per row) against views[p]; largest[p] (max |g'| at the start of a sub-problem),
    steps[p] (Newton steps) accumulate over the sweep, entropy[p] is the round's sum of
    phi changes. settings = (B, inner_eps, budget)."""
    data, indices, indptr = rows
    bias_scale, inner_eps, budget = settings
    parts = pos.shape[0]
    extra = (parts - 1) * bias_scale * bias_scale
    for p in prange(parts):
        view = views[p]
        bias_slot = view.shape[0] - 1
        s = pos[p]
        hi = part_hi[p]
        work = 0
        high = largest[p]
        newton = 0
        change = 0.0
        while s < hi and work < budget:
            i = index[s]
            s += 1
            start, end = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
            work += indptr[i + 1] - indptr[i] + 1
            c = cost[i]
            a = row_norms[i] + extra
            b = y[i] * (row_dot(view, data, indices, start, end) + view[bias_slot] * bias_scale)
            first, second, sign, z_old, z, g_start, inner = sub_problem(
                a, b, c, alpha[i, 0], alpha[i, 1], inner_eps)
            if math.isnan(g_start):
                high = math.nan
                break
            high = max(high, g_start)
            newton += inner
            old[i, 0] = alpha[i, 0]
            old[i, 1] = alpha[i, 1]
            if inner > 0:
                before = _phi(alpha[i, 0], alpha[i, 1])
                alpha[i, first] = z
                alpha[i, second] = c - z
                change += _phi(alpha[i, 0], alpha[i, 1]) - before
                step = sign * (z - z_old) * y[i]
                row_axpy(step, data, indices, start, end, view)
                view[bias_slot] += step * bias_scale * parts
        pos[p] = s
        largest[p] = high
        steps[p] += newton
        entropy[p] = change
        work_done[p] = work


@njit(cache=True)
def entropy_at(alpha, old, index, seg, pos, step):
    """sum_i [phi_i(old_i + step Delta_i) - phi_i(old_i)] over the round's rows."""
    total = 0.0
    for p in range(seg.shape[0]):
        for s in range(seg[p], pos[p]):
            i = index[s]
            delta = alpha[i, 0] - old[i, 0]
            if delta != 0.0:
                total += (_phi(old[i, 0] + step * delta, old[i, 1] - step * delta)
                          - _phi(old[i, 0], old[i, 1]))
    return total


@njit(cache=True)
def scale_back(alpha, old, index, seg, pos, step):
    """The round's rows at old + step Delta (the pair kept: the smaller side moved)."""
    for p in range(seg.shape[0]):
        for s in range(seg[p], pos[p]):
            i = index[s]
            delta = alpha[i, 0] - old[i, 0]
            if delta != 0.0:
                alpha[i, 0] = old[i, 0] + step * delta
                alpha[i, 1] = old[i, 1] - step * delta


# The merge of the parts' views (dcd's before its sweeps shared one w)

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
