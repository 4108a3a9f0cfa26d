"""The compiled kernels of `solvers.alm` (the augmented-Lagrangian solver): products with
X and X' over row chunks in parallel, the fused element-wise pass of one ALM iteration, the
proximal step of the Lp loss, the bias terms and the dual point of the certificate."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from solvers._kernel_helpers import reduce_chunks, row_axpy, row_dot

# Row loops: solvers/_kernel_helpers.py; unsigned counters: no negative-index wraparound
# code in inner loops.


@njit(cache=True, parallel=True)
def _x_times(rows, w, bias_scale, shift, bounds, out, chunk_sums):
    """out_i = x_i . w[:d] + B w[d] (row-parallel); chunk_sums[c, 0] = sum (out_i + shift)^2."""
    data, indices, indptr = rows
    bias_term = w[w.shape[0] - 1] * bias_scale
    for c in prange(bounds.shape[0] - 1):
        total = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            value = row_dot(w, data, indices, np.uint64(indptr[i]),
                             np.uint64(indptr[i + 1])) + bias_term
            out[i] = value
            total += (value + shift) * (value + shift)
        chunk_sums[c, 0] = total


@njit(cache=True, parallel=True)
def _xt_times(rows, v, bias_scale, bounds, chunk_acc, out):
    """out = X'v (bias feature in the last slot): per-chunk accumulators, then a reduction
    in chunk order where each thread owns a slice of out."""
    data, indices, indptr = rows
    n_chunks, size = chunk_acc.shape
    bias_slot = size - 1
    for c in prange(n_chunks):
        acc = chunk_acc[c]
        acc[:] = 0.0
        bias_total = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            # acc += v_i x_i
            v_i = v[i]
            if v_i != 0.0:
                row_axpy(v_i, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]),
                          acc)
                bias_total += v_i
        acc[bias_slot] += bias_total * bias_scale
    reduce_chunks(chunk_acc, out)


@njit(cache=True, parallel=True)
def _certificate_products(rows, vectors, bias_scale, bounds, chunk_acc, out):
    """out[0] = sum_{y_i > 0} a_i x_i, out[1] = sum_{y_i < 0} a_i x_i and, when with_coef,
    out[2] = X' coef, in one pass (bias feature last).

    vectors = (a, coef, y, with_coef). chunk_acc has 3 rows per chunk; they are reduced
    in chunk order, each thread owning a column slice of out.
    """
    data, indices, indptr = rows
    alpha, coef, y, with_coef = vectors
    n_chunks = bounds.shape[0] - 1
    size = chunk_acc.shape[1]
    bias_slot = size - 1
    for c in prange(n_chunks):
        acc_pos = chunk_acc[3 * c]
        acc_neg = chunk_acc[3 * c + 1]
        acc_coef = chunk_acc[3 * c + 2]
        acc_pos[:] = 0.0
        acc_neg[:] = 0.0
        acc_coef[:] = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            row_start = np.uint64(indptr[i])
            row_end = np.uint64(indptr[i + 1])
            a_i = alpha[i]
            if a_i != 0.0:
                # acc_pos or acc_neg += a_i x_i
                if y[i] > 0.0:
                    row_axpy(a_i, data, indices, row_start, row_end, acc_pos)
                    acc_pos[bias_slot] += a_i * bias_scale
                else:
                    row_axpy(a_i, data, indices, row_start, row_end, acc_neg)
                    acc_neg[bias_slot] += a_i * bias_scale
            if with_coef and coef[i] != 0.0:
                # acc_coef += coef_i x_i
                row_axpy(coef[i], data, indices, row_start, row_end, acc_coef)
                acc_coef[bias_slot] += coef[i] * bias_scale
    for j in prange(size):
        total_pos = 0.0
        total_neg = 0.0
        total_coef = 0.0
        for c in range(n_chunks):
            total_pos += chunk_acc[3 * c, j]
            total_neg += chunk_acc[3 * c + 1, j]
            total_coef += chunk_acc[3 * c + 2, j]
        out[0, j] = total_pos
        out[1, j] = total_neg
        out[2, j] = total_coef


@njit(cache=True, inline="always")
def _prox_slack(u0, gamma, p):
    """argmin_{u} gamma max(0, u)^p + 1/2 (u - u0)^2 (the e-step in u = y_i e_i)."""
    if u0 <= 0.0:
        return u0
    if p == 1.0:
        # Eq. 12: soft threshold at gamma
        return u0 - gamma if u0 > gamma else 0.0
    if p == 2.0:
        # Eq. 13
        return u0 / (1.0 + 2.0 * gamma)
    # Eq. 11: p gamma u^(p-1) + u = u0 on (0, u0); Newton kept inside a shrinking bracket
    lo = 0.0
    hi = min(u0, (u0 / (p * gamma)) ** (1.0 / (p - 1.0)))
    u = hi
    for _ in range(100):
        power = u ** (p - 1.0)
        value = p * gamma * power + u - u0
        if value > 0.0:
            hi = u
        else:
            lo = u
        slope = 1.0 + p * (p - 1.0) * gamma * (power / u if u > 0.0 else np.inf)
        candidate = u - value / slope
        if not (lo < candidate < hi):
            candidate = 0.5 * (lo + hi)  # bisection
        if abs(candidate - u) <= 1e-15 * u0 or hi - lo <= 1e-15 * u0:
            return candidate
        u = candidate
    return u


@njit(cache=True, parallel=True)
def _alm_elementwise(vectors, settings, bounds, chunk_sums):
    """The O(n) part of an iteration, rows in parallel (each chunk owns its slice).

    vectors = (y, C, xw, xg, lambda, e, r, coef); settings = (s, b, mu_old, mu_new, p) with
    b the bias after the step. Per row:
      xw -= s xg;  f = xw + b;  lambda += mu_old (f - y + e)   (skipped when mu_old = 0);
      slack = 1 - y f;  loss = C slack_+^p;  coef = -C p slack_+^(p-1) y;
      e = y prox(y t), t = y - f - lambda/mu_new;  r = f - y + e + lambda/mu_new.
    chunk_sums[c, :3] = (sum r, sum loss, #slack > 0).
    """
    y, cost, xw, xg, lam, e, r, coef = vectors
    step, b, mu_old, mu_new, p = settings
    for c in prange(bounds.shape[0] - 1):
        sum_r = 0.0
        loss = 0.0
        n_loss = 0
        for i in range(bounds[c], bounds[c + 1]):
            if step != 0.0:
                xw[i] -= step * xg[i]
            f = xw[i] + b
            y_i = y[i]
            if mu_old > 0.0:
                lam[i] += mu_old * (f - y_i + e[i])
            slack = 1.0 - y_i * f
            if slack > 0.0:
                powered = slack if p == 1.0 else slack ** (p - 1.0)
                loss += cost[i] * powered * slack if p != 1.0 else cost[i] * slack
                coef[i] = -cost[i] * p * powered * y_i if p != 1.0 else -cost[i] * y_i
                n_loss += 1
            else:
                coef[i] = 0.0
            # e-step: u = y e minimises gamma u_+^p + 1/2 (u - y t)^2
            t = y_i - f - lam[i] / mu_new
            e_i = y_i * _prox_slack(y_i * t, cost[i] / mu_new, p)
            e[i] = e_i
            r_i = f - y_i + e_i + lam[i] / mu_new
            r[i] = r_i
            sum_r += r_i
        chunk_sums[c, 0] = sum_r
        chunk_sums[c, 1] = loss
        chunk_sums[c, 2] = n_loss


@njit(cache=True, parallel=True)
def _bias_terms_kernel(xw, y, cost, p, b, bounds, chunk_sums, coef):
    """h(b) = sum_i C_i s_i^p, s_i = max(0, 1 - y_i (xw_i + b)), and its derivatives.

    coef_i = d/db C_i s_i^p = -C_i p s_i^(p-1) y_i; chunk_sums[c] = (sum C_i s_i^p,
    sum coef_i, sum C_i p (p-1) s_i^(p-2), sum |coef_i|) over the rows with s_i > 0.
    """
    for c in prange(bounds.shape[0] - 1):
        loss = 0.0
        slope = 0.0
        curvature = 0.0
        scale = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            slack = 1.0 - y[i] * (xw[i] + b)
            if slack > 0.0:
                powered = slack ** (p - 1.0)  # p > 1
                loss += cost[i] * powered * slack
                derivative = cost[i] * p * powered
                coef[i] = -derivative * y[i]
                slope += coef[i]
                scale += derivative
                curvature += derivative * (p - 1.0) / slack
            else:
                coef[i] = 0.0
        chunk_sums[c, 0] = loss
        chunk_sums[c, 1] = slope
        chunk_sums[c, 2] = curvature
        chunk_sums[c, 3] = scale


@njit(cache=True)
def _dual_point(y, cost, lam, p, alpha):
    """a_i = max(0, -y_i lambda_i), and at most C_i for the hinge loss (p = 1)."""
    for i in range(y.shape[0]):
        a = -y[i] * lam[i]
        if a < 0.0:
            a = 0.0
        if p == 1.0 and a > cost[i]:
            a = cost[i]
        alpha[i] = a
