"""Compiled kernels of the trust-region Newton solver (`solvers/tron.py`).

They take arrays and scalars only. Vectors of weights have `n_features + 1` slots: the last
one is the weight of the bias feature of value B (`bias_scale`); with B = 0 it receives no
contribution and stays 0, so the kernels need no branch for "no bias".

Rows are processed in chunks of about equal nnz (`bounds`, from `solvers.parallel`), one
`prange` task per chunk: each chunk owns its slice of the per-row arrays and its own
accumulator row for the X'v products; the accumulators are summed afterwards in chunk
order. The chunks depend on the data only, so every result is bit-identical for any
number of threads.

Losses (`loss_kind`): L2 = squared hinge C_i max(0, 1 - m_i)^2, LOGISTIC = C_i log(1 +
exp(-m_i)), with the margin m_i = y_i w.x_i. Per row, the gradient coefficient u_i and the
Hessian weight h_i are (grad = w + X'u, H = I + X' diag(h) X):
    L2:       u_i = 2 C_i y_i (m_i - 1), h_i = 2 C_i   for m_i < 1 (the active set), else 0;
    LOGISTIC: u_i = -C_i y_i sigma(-m_i), h_i = C_i sigma(m_i) sigma(-m_i).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

L2, LOGISTIC = 0, 1

# CG status codes
CG_RUNNING, CG_CONVERGED, CG_BOUNDARY, CG_BREAKDOWN = 0, 1, 2, 3
# cg_scalars[] slots (float64) and cg_counters[] slots (int64)
_ZTR, _CG_TOL, _DELTA = 0, 1, 2
_CG_ITER, _CG_MAX = 0, 1


# Row loops (a copy per module: see the note in solvers/objectives.py about Numba's cache).


@njit(cache=True, inline="always")
def _row_dot(w, data, indices, start, end):
    """w[indices[start:end]] @ data[start:end] (start, end: np.uint64)."""
    total = 0.0
    for k in range(start, end):
        total += w[np.uint32(indices[k])] * data[k]
    return total


@njit(cache=True, inline="always")
def _row_axpy(scale, data, indices, start, end, w):
    """w[indices[start:end]] += scale * data[start:end] (start, end: np.uint64)."""
    for k in range(start, end):
        w[np.uint32(indices[k])] += scale * data[k]


@njit(cache=True, inline="always")
def _softplus_neg(m):
    """log(1 + exp(-m)) without overflow."""
    if m >= 0.0:
        return math.log1p(math.exp(-m))
    return -m + math.log1p(math.exp(m))


@njit(cache=True, inline="always")
def _sigmoid_neg(m):
    """sigma(-m) = 1 / (1 + exp(m)) without overflow."""
    if m >= 0.0:
        e = math.exp(-m)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(m))


@njit(cache=True, inline="always")
def _loss(m, loss_kind):
    """loss(m_i) / C_i."""
    if loss_kind == L2:
        slack = 1.0 - m
        return slack * slack if slack > 0.0 else 0.0
    return _softplus_neg(m)


@njit(cache=True, inline="always")
def _loss_change(m_old, step, loss_kind):
    """loss(m_old + step) - loss(m_old), without the cancellation of the plain difference."""
    m_new = m_old + step
    if loss_kind == L2:
        old = 1.0 - m_old
        new = 1.0 - m_new
        if old > 0.0 and new > 0.0:
            # new^2 - old^2 = (new - old)(new + old), new - old = -step
            return -step * (new + old)
        return (new * new if new > 0.0 else 0.0) - (old * old if old > 0.0 else 0.0)
    if abs(step) < 1.0:
        # log((1 + e^-(m+step)) / (1 + e^-m)) = log1p(sigma(-m) expm1(-step))
        return math.log1p(_sigmoid_neg(m_old) * math.expm1(-step))
    return _softplus_neg(m_new) - _softplus_neg(m_old)


@njit(cache=True, inline="always")
def _coefficients(m, y_i, c_i, loss_kind):
    """(u_i, h_i): gradient coefficient and Hessian weight of row i at margin m."""
    if loss_kind == L2:
        if m < 1.0:
            return 2.0 * c_i * y_i * (m - 1.0), 2.0 * c_i
        return 0.0, 0.0
    # sigma(-m) and sigma(m) sigma(-m) = e / (1 + e)^2, e = exp(-|m|)
    e = math.exp(-abs(m))
    p = 1.0 / (1.0 + e)
    sig_neg = e * p if m >= 0.0 else p
    return -c_i * y_i * sig_neg, c_i * e * p * p


@njit(cache=True, parallel=True)
def margins_and_loss(rows, y, cost, w, bias_scale, loss_kind, bounds, margins, chunk_sums):
    """margins_i = y_i (x_i.w[:d] + B w[d]); returns f(w) = 1/2 ||w||^2 + sum_i C_i
    loss(margins_i).

    Exact (one pass over X); chunk_sums[c] holds the chunk's loss sum.
    """
    data, indices, indptr = rows
    bias_term = w[w.shape[0] - 1] * bias_scale
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        total = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            # m_i = y_i (x_i . w + B w_b);  total += C_i loss(m_i)
            dot = _row_dot(w, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]))
            m = y[i] * (dot + bias_term)
            margins[i] = m
            total += cost[i] * _loss(m, loss_kind)
        chunk_sums[c] = total
    value = 0.0
    for j in range(w.shape[0]):
        value += w[j] * w[j]
    value *= 0.5
    for c in range(n_chunks):
        value += chunk_sums[c]
    return value


@njit(cache=True, parallel=True)
def trial_margins(rows, y, cost, s, bias_scale, loss_kind, bounds, margins, new_margins,
                  chunk_sums):
    """new_margins_i = margins_i + y_i (x_i.s[:d] + B s[d]) (the margins of w + s).

    Returns sum_i C_i (loss(new_margins_i) - loss(margins_i)), each term computed from the
    margin change itself (no cancellation between two large loss sums).
    """
    data, indices, indptr = rows
    bias_term = s[s.shape[0] - 1] * bias_scale
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        total = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            # step_i = y_i x_i.s;  total += C_i (loss(m_i + step_i) - loss(m_i))
            dot = _row_dot(s, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]))
            step = y[i] * (dot + bias_term)
            new_margins[i] = margins[i] + step
            total += cost[i] * _loss_change(margins[i], step, loss_kind)
        chunk_sums[c] = total
    change = 0.0
    for c in range(n_chunks):
        change += chunk_sums[c]
    return change


@njit(cache=True, parallel=True)
def gradient_pass(rows, labels, margins, bias_scale, loss_kind, bounds, active_rows,
                  active_count, chunk_acc):
    """Per chunk c: the active rows and their Hessian weights, and the accumulators.

    rows = (data, indices, indptr); labels = (y, C); active_rows = (active_idx, active_h):
    chunk c stores its rows with h_i > 0 compactly from active_idx[bounds[c]] on, and their
    number in active_count[c] (passed on its own: Numba 0.68 loses writes indexed by the
    prange variable into an array unpacked from a tuple argument). chunk_acc[0, c] =
    sum_i u_i x_i (the loss part of the gradient), chunk_acc[1, c] = sum_i h_i x_i^2 (the
    loss part of diag(H)), bias feature in the last slot.
    """
    data, indices, indptr = rows
    y, cost = labels
    active_idx, active_h = active_rows
    bias_slot = chunk_acc.shape[2] - 1
    bias_sq = bias_scale * bias_scale
    for c in prange(bounds.shape[0] - 1):
        acc_g = chunk_acc[0, c]
        acc_d = chunk_acc[1, c]
        acc_g[:] = 0.0
        acc_d[:] = 0.0
        count = bounds[c]
        for i in range(bounds[c], bounds[c + 1]):
            u, h = _coefficients(margins[i], y[i], cost[i], loss_kind)
            if u != 0.0 or h != 0.0:
                start = np.uint64(indptr[i])
                end = np.uint64(indptr[i + 1])
                # acc_g += u_i x_i;  acc_d += h_i x_i^2
                for k in range(start, end):
                    j = np.uint32(indices[k])
                    value = data[k]
                    acc_g[j] += u * value
                    acc_d[j] += h * value * value
                acc_g[bias_slot] += u * bias_scale
                acc_d[bias_slot] += h * bias_sq
            if h > 0.0:
                active_idx[count] = i
                active_h[count] = h
                count += 1
        active_count[c] = count - bounds[c]


@njit(cache=True, parallel=True)
def reduce_gradient(chunk_acc, w, alpha_pcg, grad, precond):
    """grad = w + sum_c chunk_acc[0, c]; precond = (1 - a) + a (1 + sum_c chunk_acc[1, c]).

    Summed in chunk order; each thread owns a slice of the columns. Returns ||grad||.
    """
    n_chunks = chunk_acc.shape[1]
    for j in prange(chunk_acc.shape[2]):
        g = 0.0
        diag = 0.0
        for c in range(n_chunks):
            g += chunk_acc[0, c, j]
            diag += chunk_acc[1, c, j]
        grad[j] = w[j] + g
        precond[j] = (1.0 - alpha_pcg) + alpha_pcg * (1.0 + diag)
    total = 0.0
    for j in range(grad.shape[0]):
        total += grad[j] * grad[j]
    return math.sqrt(total)


@njit(cache=True, parallel=True)
def hessian_vector(rows, bias_scale, bounds, active, chunk_acc, v, out):
    """out = v + X_A' diag(h_A) X_A v over the active rows A (H v of the current w)."""
    data, indices, indptr = rows
    active_idx, active_h, active_count = active
    bias_slot = v.shape[0] - 1
    bias_v = v[bias_slot] * bias_scale
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        acc = chunk_acc[0, c]
        acc[:] = 0.0
        first = bounds[c]
        for q in range(first, first + active_count[c]):
            i = active_idx[q]
            start = np.uint64(indptr[i])
            end = np.uint64(indptr[i + 1])
            # acc += h_i (x_i . v) x_i
            coef = active_h[q] * (_row_dot(v, data, indices, start, end) + bias_v)
            _row_axpy(coef, data, indices, start, end, acc)
            acc[bias_slot] += coef * bias_scale
    for j in prange(v.shape[0]):
        total = v[j]
        for c in range(n_chunks):
            total += chunk_acc[0, c, j]
        out[j] = total


@njit(cache=True)
def cg_start(grad, precond, eps_cg, vectors, cg_scalars, cg_counters):
    """Start the preconditioned CG of tron.cpp's trpcg: s = 0, r = -g, z = M^-1 r, d = z.

    vectors = (s, r, z, d, Hd); cg_scalars = (z'r, CG tolerance, delta); cg_counters =
    (CG iterations, CG iteration cap). Stop rule: sqrt(z'r) <= eps_cg sqrt(z0'r0).
    """
    s, r, z, d, _ = vectors
    ztr = 0.0
    for j in range(grad.shape[0]):
        # s = 0; r = -g; z = r / M; d = z
        s[j] = 0.0
        r[j] = -grad[j]
        z[j] = r[j] / precond[j]
        d[j] = z[j]
        ztr += z[j] * r[j]
    cg_scalars[_ZTR] = ztr
    cg_scalars[_CG_TOL] = eps_cg * math.sqrt(ztr)
    cg_counters[_CG_ITER] = 0


@njit(cache=True)
def cg_steps(rows, bias_scale, bounds, active, chunk_acc, precond, vectors, cg_scalars,
             cg_counters, max_steps):
    """Up to max_steps CG iterations on H s = -g inside ||s||_M <= delta; returns a status.

    CG_CONVERGED: sqrt(z'r) <= tolerance; CG_BOUNDARY: the step was cut at the trust-region
    boundary (tron.cpp's positive root of ||s + tau d||_M = delta); CG_BREAKDOWN: d'Hd <= 0
    (cannot happen with H >= I unless d = 0) or the iteration cap; CG_RUNNING: budget
    used up, call again.
    """
    s, r, z, d, hd = vectors
    n = s.shape[0]
    delta = cg_scalars[_DELTA]
    for _ in range(max_steps):
        ztr = cg_scalars[_ZTR]
        if math.sqrt(ztr) <= cg_scalars[_CG_TOL]:
            return CG_CONVERGED
        if cg_counters[_CG_ITER] >= cg_counters[_CG_MAX]:
            return CG_BREAKDOWN
        cg_counters[_CG_ITER] += 1
        hessian_vector(rows, bias_scale, bounds, active, chunk_acc, d, hd)
        dhd = 0.0
        for j in range(n):
            dhd += d[j] * hd[j]
        if not dhd > 0.0:
            return CG_BREAKDOWN
        alpha = ztr / dhd
        # s_try = s + alpha d;  ||s_try||_M^2
        sms = 0.0
        for j in range(n):
            value = s[j] + alpha * d[j]
            sms += value * precond[j] * value
        if math.sqrt(sms) > delta:
            # s + tau d on the boundary ||s + tau d||_M = delta, tau >= 0
            std = 0.0
            sts = 0.0
            dtd = 0.0
            for j in range(n):
                std += s[j] * precond[j] * d[j]
                sts += s[j] * precond[j] * s[j]
                dtd += d[j] * precond[j] * d[j]
            dsq = delta * delta
            rad = math.sqrt(std * std + dtd * (dsq - sts))
            tau = (dsq - sts) / (std + rad) if std >= 0.0 else (rad - std) / dtd
            for j in range(n):
                # s += tau d;  r -= tau Hd
                s[j] += tau * d[j]
                r[j] -= tau * hd[j]
            return CG_BOUNDARY
        znew_r = 0.0
        for j in range(n):
            # s += alpha d;  r -= alpha Hd;  z = r / M
            s[j] += alpha * d[j]
            r[j] -= alpha * hd[j]
            z[j] = r[j] / precond[j]
            znew_r += z[j] * r[j]
        beta = znew_r / ztr
        for j in range(n):
            # d = z + beta d
            d[j] = z[j] + beta * d[j]
        cg_scalars[_ZTR] = znew_r
    return CG_RUNNING


@njit(cache=True)
def step_quantities(w, grad, precond, s, r):
    """(g's, s'r, ||s||_M, w's, s's, w + s == w) of a CG step s with residual r.

    prered = -(g's - s'r) / 2; f(w + s) - f(w) = w's + s's / 2 + the loss change.
    """
    gs = 0.0
    sr = 0.0
    sms = 0.0
    ws = 0.0
    ss = 0.0
    unchanged = True
    for j in range(s.shape[0]):
        gs += grad[j] * s[j]
        sr += s[j] * r[j]
        sms += s[j] * precond[j] * s[j]
        ws += w[j] * s[j]
        ss += s[j] * s[j]
        if w[j] + s[j] != w[j]:
            unchanged = False
    return gs, sr, math.sqrt(sms), ws, ss, unchanged


@njit(cache=True)
def m_norm(v, precond):
    """||v||_M = sqrt(v'Mv)."""
    total = 0.0
    for j in range(v.shape[0]):
        total += v[j] * precond[j] * v[j]
    return math.sqrt(total)


@njit(cache=True)
def add_step(w, s):
    """w += s."""
    for j in range(w.shape[0]):
        w[j] += s[j]
