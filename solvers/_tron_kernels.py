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

from solvers._kernel_helpers import row_axpy, row_dot, row_margin

L2, LOGISTIC = 0, 1

# CG status codes
CG_RUNNING, CG_CONVERGED, CG_BOUNDARY, CG_BREAKDOWN = 0, 1, 2, 3
# cg_scalars[] slots (float64) and cg_counters[] slots (int64)
_ZTR, _CG_TOL, _DELTA, _SMS, _SMD, _DMD, _DD, _Q = 0, 1, 2, 3, 4, 5, 6, 7
N_CG_SCALARS = 8
_CG_ITER, _CG_MAX, _CG_RULE = 0, 1, 2
N_CG_COUNTERS = 3
# CG stop rules (cg_counters[_CG_RULE])
RESIDUAL_RULE, QUADRATIC_RULE = 0, 1


# A reduction of the groups' accumulators runs in parallel only above this many entries
# (each parallel region costs a fork/join: on a busy machine a descheduled thread stalls it).
_PARALLEL_REDUCTION = 1 << 16


@njit(cache=True, inline="always")
def _reduced(chunk_acc, slot, n_groups, j, start):
    """start + sum_g chunk_acc[slot, g, j], in group order."""
    total = start
    for g in range(n_groups):
        total += chunk_acc[slot, g, j]
    return total


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
    bias_term = w[w.shape[0] - 1] * bias_scale
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        total = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            # m_i = y_i (x_i . w + B w_b);  total += C_i loss(m_i)
            m = row_margin(w, rows, i, y[i], bias_term)
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
    bias_term = s[s.shape[0] - 1] * bias_scale
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        total = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            # step_i = y_i x_i.s;  total += C_i (loss(m_i + step_i) - loss(m_i))
            step = row_margin(s, rows, i, y[i], bias_term)
            new_margins[i] = margins[i] + step
            total += cost[i] * _loss_change(margins[i], step, loss_kind)
        chunk_sums[c] = total
    change = 0.0
    for c in range(n_chunks):
        change += chunk_sums[c]
    return change


@njit(cache=True, parallel=True)
def select_active(labels, margins, loss_kind, indptr, bounds, active_rows, active_count,
                  active_nnz):
    """Per chunk c: its rows with (u_i, h_i) != 0, compactly from position bounds[c] on.

    labels = (y, C); active_rows = (active_idx, active_u, active_h); the number of rows of
    chunk c goes to active_count[c] and their nnz (+1 each) to active_nnz[c]. (These two
    are passed on their own: Numba 0.68 loses writes indexed by the prange variable into
    an array unpacked from a tuple argument.)
    """
    y, cost = labels
    active_idx, active_u, active_h = active_rows
    for c in prange(bounds.shape[0] - 1):
        count = bounds[c]
        nnz = 0
        for i in range(bounds[c], bounds[c + 1]):
            u, h = _coefficients(margins[i], y[i], cost[i], loss_kind)
            if u != 0.0 or h != 0.0:
                active_idx[count] = i
                active_u[count] = u
                active_h[count] = h
                count += 1
                nnz += indptr[i + 1] - indptr[i] + 1
        active_count[c] = count - bounds[c]
        active_nnz[c] = nnz


@njit(cache=True, inline="always")
def _accumulate_rows(rows, bias_scale, bounds, active, first_chunk, end_chunk, acc_g, acc_d):
    """acc_g += sum u_i x_i, acc_d += sum h_i x_i^2 over the active rows of the chunks."""
    data, indices, indptr = rows
    active_idx, active_u, active_h, active_count = active
    bias_slot = acc_g.shape[0] - 1
    bias_sq = bias_scale * bias_scale
    for c in range(first_chunk, end_chunk):
        first = bounds[c]
        for q in range(first, first + active_count[c]):
            i = active_idx[q]
            u = active_u[q]
            h = active_h[q]
            # acc_g += u_i x_i;  acc_d += h_i x_i^2
            for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                j = np.uint32(indices[k])
                value = data[k]
                acc_g[j] += u * value
                acc_d[j] += h * value * value
            acc_g[bias_slot] += u * bias_scale
            acc_d[bias_slot] += h * bias_sq


@njit(cache=True, parallel=True)
def gradient_and_preconditioner(rows, bias_scale, bounds, active, n_groups, chunk_acc, w,
                                alpha_pcg, grad, precond):
    """grad = w + X_A'u_A and M = (1 - a) I + a diag(H), diag(H) = 1 + X_A'^2 h_A.

    active = (active_idx, active_u, active_h, active_count) from `select_active`; rows in
    n_groups groups of consecutive chunks as in `hessian_vector` (one pair of accumulators
    per group, summed in group order; n_groups = 1: straight into grad and precond).
    Returns ||grad||.
    """
    n_chunks = bounds.shape[0] - 1
    size = w.shape[0]
    if n_groups == 1:
        for j in range(size):
            grad[j] = w[j]
            precond[j] = 0.0
        _accumulate_rows(rows, bias_scale, bounds, active, 0, n_chunks, grad, precond)
    else:
        for g in prange(n_groups):
            acc_g = chunk_acc[0, g]
            acc_d = chunk_acc[1, g]
            acc_g[:] = 0.0
            acc_d[:] = 0.0
            _accumulate_rows(rows, bias_scale, bounds, active, g * n_chunks // n_groups,
                             (g + 1) * n_chunks // n_groups, acc_g, acc_d)
        if size * n_groups >= _PARALLEL_REDUCTION:
            for j in prange(size):
                grad[j] = _reduced(chunk_acc, 0, n_groups, j, w[j])
                precond[j] = _reduced(chunk_acc, 1, n_groups, j, 0.0)
        else:
            for j in range(size):
                grad[j] = _reduced(chunk_acc, 0, n_groups, j, w[j])
                precond[j] = _reduced(chunk_acc, 1, n_groups, j, 0.0)
    norm = 0.0
    for j in range(size):
        # M_j = (1 - a) + a (1 + diag_j);  ||grad||^2
        precond[j] = (1.0 - alpha_pcg) + alpha_pcg * (1.0 + precond[j])
        norm += grad[j] * grad[j]
    return math.sqrt(norm)


@njit(cache=True, inline="always")
def _hessian_rows(rows, bias_scale, bounds, active, first_chunk, end_chunk, v, acc):
    """acc += sum h_i (x_i.v) x_i over the active rows of the chunks; returns
    sum h_i (x_i.v)^2 over them."""
    data, indices, indptr = rows
    active_idx, _, active_h, active_count = active
    bias_slot = v.shape[0] - 1
    bias_v = v[bias_slot] * bias_scale
    total = 0.0
    for c in range(first_chunk, end_chunk):
        first = bounds[c]
        for q in range(first, first + active_count[c]):
            i = active_idx[q]
            start = np.uint64(indptr[i])
            end = np.uint64(indptr[i + 1])
            # t = x_i . v;  acc += h_i t x_i;  total += h_i t^2
            t = row_dot(v, data, indices, start, end) + bias_v
            coef = active_h[q] * t
            row_axpy(coef, data, indices, start, end, acc)
            acc[bias_slot] += coef * bias_scale
            total += coef * t
    return total


@njit(cache=True, parallel=True)
def hessian_vector(rows, bias_scale, bounds, active, n_groups, chunk_acc, group_sums, v,
                   out):
    """out = v + X_A' diag(h_A) X_A v over the active rows A (H v of the current w);
    returns sum_A h_i (x_i.v)^2 (so that v'Hv = v'v + that, without a pass over out).

    The chunks' active rows are processed in n_groups groups of consecutive chunks, one
    accumulator each (n_groups = 1: straight into out, no reduction). n_groups is chosen
    from the active nnz (`hessian_groups`), so it does not depend on the thread count.
    """
    n_chunks = bounds.shape[0] - 1
    if n_groups == 1:
        for j in range(v.shape[0]):
            out[j] = v[j]
        return _hessian_rows(rows, bias_scale, bounds, active, 0, n_chunks, v, out)
    for g in prange(n_groups):
        acc = chunk_acc[0, g]
        acc[:] = 0.0
        group_sums[g] = _hessian_rows(rows, bias_scale, bounds, active,
                                      g * n_chunks // n_groups,
                                      (g + 1) * n_chunks // n_groups, v, acc)
    if v.shape[0] * n_groups >= _PARALLEL_REDUCTION:
        for j in prange(v.shape[0]):
            out[j] = _reduced(chunk_acc, 0, n_groups, j, v[j])
    else:
        for j in range(v.shape[0]):
            out[j] = _reduced(chunk_acc, 0, n_groups, j, v[j])
    quadratic = 0.0
    for g in range(n_groups):
        quadratic += group_sums[g]
    return quadratic


def hessian_groups(active_nnz: int, n_weights: int, n_chunks: int) -> int:
    """Accumulator groups of the X_A' products: at most one per chunk, and few enough that
    zeroing and reducing them (n_groups * n_weights) costs at most half the row work
    (active_nnz)."""
    return int(min(max(active_nnz // (2 * n_weights), 1), n_chunks))


@njit(cache=True)
def cg_start(grad, precond, eps_cg, delta, vectors, cg_scalars, cg_counters):
    """Start the preconditioned CG of tron.cpp's trpcg: s = 0, r = -g, z = M^-1 r, d = z,
    trust-region radius delta (in the M-norm).

    vectors = (s, r, z, d, Hd, M^-1) (M^-1 is filled here); cg_scalars = (z'r, CG
    tolerance, delta, s'Ms, s'Md, d'Md, d'd, Q); cg_counters = (CG iterations, CG iteration
    cap, stop rule). Stop rules: RESIDUAL_RULE (tron.cpp) sqrt(z'r) <= eps_cg sqrt(z0'r0);
    QUADRATIC_RULE (newton.cpp, Nash & Sofer) i (Q_i - Q_{i-1}) >= cgtol Q_i with the
    model value Q_i = g's_i + s_i'Hs_i / 2 and cgtol = min(eps_cg, sqrt(||g||_{M^-1})).
    """
    s, r, z, d, _, inverse = vectors
    ztr = 0.0
    dmd = 0.0
    dd = 0.0
    for j in range(grad.shape[0]):
        # s = 0; r = -g; z = r / M; d = z
        inverse[j] = 1.0 / precond[j]
        s[j] = 0.0
        r[j] = -grad[j]
        z[j] = r[j] * inverse[j]
        d[j] = z[j]
        ztr += z[j] * r[j]
        dmd += d[j] * precond[j] * d[j]
        dd += d[j] * d[j]
    cg_scalars[_ZTR] = ztr
    if cg_counters[_CG_RULE] == QUADRATIC_RULE:
        cg_scalars[_CG_TOL] = min(eps_cg, math.sqrt(math.sqrt(ztr)))
    else:
        cg_scalars[_CG_TOL] = eps_cg * math.sqrt(ztr)
    cg_scalars[_Q] = 0.0
    cg_scalars[_DELTA] = delta
    cg_scalars[_SMS] = 0.0
    cg_scalars[_SMD] = 0.0
    cg_scalars[_DMD] = dmd
    cg_scalars[_DD] = dd
    cg_counters[_CG_ITER] = 0


@njit(cache=True, inline="always")
def _residual_update(j, alpha, s, r, z, d, hd, inverse):
    """s_j += alpha d_j; r_j -= alpha Hd_j; z_j = r_j / M_j; returns z_j r_j."""
    s[j] += alpha * d[j]
    r[j] -= alpha * hd[j]
    z[j] = r[j] * inverse[j]
    return z[j] * r[j]


@njit(cache=True, inline="always")
def _direction_update(j, beta, s, z, d, precond):
    """d_j = z_j + beta d_j; returns (s_j M_j d_j, d_j M_j d_j, d_j^2)."""
    d[j] = z[j] + beta * d[j]
    md = precond[j] * d[j]
    return s[j] * md, d[j] * md, d[j] * d[j]


@njit(cache=True)
def cg_steps(rows, bias_scale, bounds, active, n_groups, chunk_acc, group_sums, precond,
             vectors, cg_scalars, cg_counters, max_steps):
    """Up to max_steps CG iterations on H s = -g inside ||s||_M <= delta; returns a status.

    CG_CONVERGED: the stop rule of cg_counters[_CG_RULE] holds (see `cg_start`);
    CG_BOUNDARY: the step was cut at the trust-region boundary (tron.cpp's positive root
    tau of ||s + tau d||_M = delta); CG_BREAKDOWN:
    d'Hd <= 0 (cannot happen with H >= I unless d = 0) or the iteration cap; CG_RUNNING:
    budget used up, call again. Two passes over the weights per step besides H d: the
    M-products s'Ms, s'Md, d'Md and d'd are accumulated in the update loops (s'Ms by
    ||s + a d||^2_M = s'Ms + 2a s'Md + a^2 d'Md), d'Hd = d'd + sum_A h_i (x_i.d)^2; the
    sums run in four interleaved partial sums (no single long dependency chain).
    """
    s, r, z, d, hd, inverse = vectors
    n = s.shape[0]
    n4 = n - n % 4
    delta = cg_scalars[_DELTA]
    quadratic_rule = cg_counters[_CG_RULE] == QUADRATIC_RULE
    for _ in range(max_steps):
        ztr = cg_scalars[_ZTR]
        if not quadratic_rule and math.sqrt(ztr) <= cg_scalars[_CG_TOL]:
            return CG_CONVERGED
        if cg_counters[_CG_ITER] >= cg_counters[_CG_MAX]:
            return CG_BREAKDOWN
        cg_counters[_CG_ITER] += 1
        dhd = cg_scalars[_DD] + hessian_vector(rows, bias_scale, bounds, active, n_groups,
                                               chunk_acc, group_sums, d, hd)
        if not dhd > 0.0:
            return CG_BREAKDOWN
        alpha = ztr / dhd
        sms = cg_scalars[_SMS]
        smd = cg_scalars[_SMD]
        dmd = cg_scalars[_DMD]
        sms_next = sms + alpha * (2.0 * smd + alpha * dmd)  # ||s + alpha d||_M^2
        if math.sqrt(sms_next) > delta:
            # s + tau d on the boundary ||s + tau d||_M = delta, tau >= 0
            dsq = delta * delta
            rad = math.sqrt(smd * smd + dmd * (dsq - sms))
            tau = (dsq - sms) / (smd + rad) if smd >= 0.0 else (rad - smd) / dmd
            for j in range(n):
                # s += tau d;  r -= tau Hd
                s[j] += tau * d[j]
                r[j] -= tau * hd[j]
            return CG_BOUNDARY
        # s += alpha d;  r -= alpha Hd;  z = r / M;  z'r
        p0 = p1 = p2 = p3 = 0.0
        for j in range(0, n4, 4):
            p0 += _residual_update(j, alpha, s, r, z, d, hd, inverse)
            p1 += _residual_update(j + 1, alpha, s, r, z, d, hd, inverse)
            p2 += _residual_update(j + 2, alpha, s, r, z, d, hd, inverse)
            p3 += _residual_update(j + 3, alpha, s, r, z, d, hd, inverse)
        for j in range(n4, n):
            p0 += _residual_update(j, alpha, s, r, z, d, hd, inverse)
        znew_r = (p0 + p1) + (p2 + p3)
        if quadratic_rule:
            # Q(s + alpha d) - Q(s) = -alpha d'r + alpha^2 d'Hd / 2 = -alpha z'r / 2 (d'r =
            # z'r in CG); newton.cpp: stop when i (Q_i - Q_{i-1}) >= cgtol Q_i
            q_diff = -0.5 * alpha * ztr
            q_new = cg_scalars[_Q] + q_diff
            cg_scalars[_Q] = q_new
            if cg_counters[_CG_ITER] * q_diff >= cg_scalars[_CG_TOL] * q_new:
                cg_scalars[_ZTR] = znew_r
                cg_scalars[_SMS] = sms_next
                return CG_CONVERGED
        beta = znew_r / ztr
        # d = z + beta d;  s'Md, d'Md, d'd
        a0 = a1 = b0 = b1 = c0 = c1 = 0.0
        for j in range(0, n4, 2):
            smd_j, dmd_j, dd_j = _direction_update(j, beta, s, z, d, precond)
            a0 += smd_j
            b0 += dmd_j
            c0 += dd_j
            smd_j, dmd_j, dd_j = _direction_update(j + 1, beta, s, z, d, precond)
            a1 += smd_j
            b1 += dmd_j
            c1 += dd_j
        for j in range(n4, n):
            smd_j, dmd_j, dd_j = _direction_update(j, beta, s, z, d, precond)
            a0 += smd_j
            b0 += dmd_j
            c0 += dd_j
        cg_scalars[_ZTR] = znew_r
        cg_scalars[_SMS] = sms_next
        cg_scalars[_SMD] = a0 + a1
        cg_scalars[_DMD] = b0 + b1
        cg_scalars[_DD] = c0 + c1
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


# Line search (newton.cpp's linesearch_and_update, with the margins of the direction kept)


@njit(cache=True, parallel=True)
def line_loss_change(cost, margins, steps, alpha, loss_kind, bounds, chunk_sums):
    """sum_i C_i (loss(m_i + alpha steps_i) - loss(m_i)), each term from the margin change
    itself (as `trial_margins`), summed per chunk in chunk order."""
    n_chunks = bounds.shape[0] - 1
    for c in prange(n_chunks):
        total = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            total += cost[i] * _loss_change(margins[i], alpha * steps[i], loss_kind)
        chunk_sums[c] = total
    change = 0.0
    for c in range(n_chunks):
        change += chunk_sums[c]
    return change


@njit(cache=True)
def take_step(w, s, margins, steps, alpha):
    """w += alpha s; margins += alpha steps. Returns whether w changed in float64."""
    changed = False
    for j in range(w.shape[0]):
        new = w[j] + alpha * s[j]
        if new != w[j]:
            changed = True
        w[j] = new
    for i in range(margins.shape[0]):
        margins[i] += alpha * steps[i]
    return changed
