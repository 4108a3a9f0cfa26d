"""The ends of an SMO run: the gradient of an initial alpha (a warm start, LIBSVM's
Solver::Solve), the unshrink with rho and the objective (`finish`), and the measures of a
progress event (the exact objective from G_bar, the KKT violators)."""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers.smo.cache import get_column, kernel_row, twin_row, with_columns
from solvers.smo.layout import ACTIVE, FREE, GMAX_VALID, LOWER, NU, TWINS, UPPER
from solvers.smo.selection import flush_gradient_bar, reconstruct_gradient, update_status


@njit(cache=True, nogil=True)
def finish_run(rows, kernel, positions, heads, state, columns, alpha_out, out):
    """Unshrink, then alpha_out (problem order), out[0] = rho, out[1] = f(a) =
    1/2 sum_t a_t (G_t + p_t) (LIBSVM's obj), out[2] = violation on the full set."""
    cache = with_columns(heads, columns)
    counters, pending, parallel = state.counters, state.pending, state.parallel
    local, y, alpha = positions.local, positions.y, positions.alpha
    status, gradient, linear = positions.status, positions.gradient, positions.linear
    l = alpha.shape[0]
    reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
    counters[ACTIVE] = l
    counters[GMAX_VALID] = 0
    if counters[NU] == 1:
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
        if status[t] == UPPER:
            if y[t] < 0:
                upper = min(upper, y_grad)
            else:
                lower = max(lower, y_grad)
        elif status[t] == LOWER:
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
    r1 = _side_rho(y, status, gradient, True)
    r2 = _side_rho(y, status, gradient, False)
    out[0] = (r1 - r2) / 2
    out[3] = (r1 + r2) / 2


@njit(cache=True, inline="always")
def _side_rho(y, status, gradient, positive):
    """One side's r of Solver_NU::calculate_rho (y_t = +1 when `positive`, else -1): the
    mean of G_t over its free variables, else the middle of [max G_t at the upper bound,
    min G_t at the lower bound]."""
    upper = np.inf
    lower = -np.inf
    n_free = 0
    free_sum = 0.0
    for t in range(y.shape[0]):
        if (y[t] > 0) != positive:
            continue
        if status[t] == UPPER:
            lower = max(lower, gradient[t])
        elif status[t] == LOWER:
            upper = min(upper, gradient[t])
        else:
            n_free += 1
            free_sum += gradient[t]
    return free_sum / n_free if n_free > 0 else (upper + lower) / 2


@njit(cache=True, nogil=True)
def warm_gradient(rows, kernel, positions, heads, state, columns):
    """status from a; G = -e + sum_{a_s > 0} a_s Q_:s; G_bar = sum_{a_s = C_s} C_s Q_:s
    (full columns, through the cache)."""
    cache = with_columns(heads, columns)
    counters, parallel = state.counters, state.parallel
    local, y, cost, alpha = positions.local, positions.y, positions.cost, positions.alpha
    status, gradient = positions.status, positions.gradient
    gradient_bar, linear = positions.gradient_bar, positions.linear
    l = alpha.shape[0]
    for t in range(l):
        update_status(alpha, cost, status, t)
        gradient[t] = linear[t]
        gradient_bar[t] = 0.0
    n = counters[TWINS]
    if n > 0:
        # the regressions: Q_ts = y_t y_s K(x_t, x_s), the columns of twins from one cached
        # kernel row (SVR_Q). Summed as Solver::Solve sums them, variable by variable in
        # position order: at nu-SVR's start (a_t = a_{n+t}) the twins' terms cancel in
        # exact arithmetic but not in its rounding, and G off in its last bits picks other
        # pairs among the tied gradients (another SMO path than LIBSVM's with unequal C_i)
        for s in range(l):
            if status[s] == LOWER:
                continue
            row = kernel_row(twin_row(local[s], n), n, kernel, cache, counters, parallel,
                             rows[3])
            a_s, y_s, c_s, upper = alpha[s], y[s], cost[s], status[s] == UPPER
            for t in range(l):
                value = row[twin_row(local[t], n)]
                q_st = value if y[t] == y_s else -value  # float32, as SVR_Q's get_Q
                gradient[t] += a_s * q_st
                if upper:
                    gradient_bar[t] += c_s * q_st
        return
    for s in range(l):
        if status[s] != LOWER:
            column = get_column(s, l, rows, kernel, positions, cache, counters, parallel)
            a_s = alpha[s]
            for t in range(l):
                gradient[t] += a_s * column[t]
            if status[s] == UPPER:
                c_s = cost[s]
                for t in range(l):
                    gradient_bar[t] += c_s * column[t]


@njit(cache=True, nogil=True)
def flush_pending(rows, kernel, positions, heads, state, columns):
    cache = with_columns(heads, columns)
    flush_gradient_bar(rows, kernel, positions, cache, state.counters, state.pending,
                       state.parallel)


@njit(cache=True, nogil=True)
def kkt_violators(y, status, gradient, active, eps):
    """How many active variables break the KKT conditions by more than eps / 2 around the
    midpoint b of m = max {-y_t G_t : t in I_up} and M = min {-y_t G_t : t in I_low}: all
    of them at the start (a = 0), none once m - M <= eps. Shrunk variables count as
    satisfied (they are shrunk because they are, with margin)."""
    m = -np.inf
    big_m = np.inf
    for t in range(active):
        v = -y[t] * gradient[t]
        up = status[t] != UPPER if y[t] > 0 else status[t] != LOWER
        low = status[t] != LOWER if y[t] > 0 else status[t] != UPPER
        if up and v > m:
            m = v
        if low and v < big_m:
            big_m = v
    b = 0.5 * (m + big_m)
    count = 0
    for t in range(active):
        v = -y[t] * gradient[t]
        up = status[t] != UPPER if y[t] > 0 else status[t] != LOWER
        low = status[t] != LOWER if y[t] > 0 else status[t] != UPPER
        if (up and v > b + 0.5 * eps) or (low and v < b - 0.5 * eps):
            count += 1
    return count


@njit(cache=True, nogil=True)
def objective_from_bar(alpha, status, gradient, gradient_bar, linear):
    """f(a) = 1/2 a'Qa + p'a with a'Qa = sum_{free} a_t (G_t - p_t) + sum_t a_t G_bar_t
    (free variables are always active, so their G is exact; G_bar is kept on all)."""
    quadratic = 0.0
    total = 0.0
    for t in range(alpha.shape[0]):
        if status[t] == FREE:
            quadratic += alpha[t] * (gradient[t] - linear[t])
        quadratic += alpha[t] * gradient_bar[t]
        total += alpha[t] * linear[t]
    return 0.5 * quadratic + total
