"""Compiled kernels of the out-of-core solvers (solvers/out_of_core.py): a DCD sweep over
one block's active variables, and the certificate's streaming pass over a block.

The sweep takes the same per-row step as the in-memory `dcd` (solvers/dual_cd.py: `visit`
and `coordinate_step`, inlined), on the block's rows (local row numbers) and the slices of
the per-row arrays of all rows that belong to the block, interleaved with the cached
rows of selective block minimization (their gathered copies). `mask` (uint8, 1 = active) is the
shrinking state of every variable, kept across blocks and passes.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from solvers import dual_cd
from solvers._kernel_helpers import next_below, shuffle_sweep
from solvers._logistic_parallel import row_step
from solvers._tron_kernels import _sigmoid_neg, _softplus_neg

L1, L2, LOGISTIC = 0, 1, 2

# LIBLINEAR skips the update when |projected gradient| <= this (as solvers/dcd.py)
_PG_ZERO = 1.0e-12


@njit(cache=True)
def active_rows(mask, index):
    """index[:k] = the rows of the block whose mask is 1, in order; returns k."""
    k = 0
    for r in range(mask.shape[0]):
        if mask[r] != 0:
            index[k] = r
            k += 1
    return k


@njit(cache=True, error_model="numpy", nogil=True)
def dcd_block_sweep(block, cache, w, mask, index, active_size, rng, settings):
    """One DCD sweep (solvers/dcd.py's inner loop) over index[:active_size], a random
    permutation of it first. The entries below the block's row count n_b are the block's
    rows, those from n_b on the cached rows (entry n_b + j: cached row j), so the two are
    interleaved in one permutation (selective block minimization, solvers/selective.py).
    block = (rows, labels, alpha, margin) of the block, cache = the same of the cached rows
    (their own copies); margin_i = y_i w.z_i is written at every visit (before the row's
    step: what selective.py chooses the cache by, no pass of its own). A block row at a
    bound whose gradient lies beyond the thresholds (pg_max_old, pg_min_old) is shrunk
    and its mask cleared; cached rows are not shrunk.

    settings = (B, pg_max_old, pg_min_old). Returns (status, active_size, pg_max_new,
    pg_min_new, nonzeros visited); status dual_cd.NON_FINITE on a non-finite gradient,
    else dual_cd.MAX_ITER (the sweep ended)."""
    bias_scale, pg_max_old, pg_min_old = settings
    rows, labels, alpha, margin = block
    cache_rows, cache_labels, cache_alpha, cache_margin = cache
    n_block = np.int64(alpha.shape[0])
    for t in range(active_size - 1):
        j = t + next_below(rng, active_size - t)
        swap = index[t]
        index[t] = index[j]
        index[j] = swap
    pg_max_new = -np.inf
    pg_min_new = np.inf
    work = 0
    s = 0
    while s < active_size:
        entry = index[s]
        cached = entry >= n_block
        if cached:
            i = np.uint64(entry - n_block)
            start, end, row_work, g, a_i, u_i = dual_cd.visit(cache_rows, cache_labels,
                                                              cache_alpha, w, bias_scale, i)
            cache_margin[i] = g + 1.0 - a_i * cache_labels[2][i]
        else:
            i = np.uint64(entry)
            start, end, row_work, g, a_i, u_i = dual_cd.visit(rows, labels, alpha, w,
                                                              bias_scale, i)
            margin[i] = g + 1.0 - a_i * labels[2][i]
        work += row_work
        if not np.isfinite(g):
            return dual_cd.NON_FINITE, active_size, pg_max_new, pg_min_new, work
        pg = 0.0
        if a_i == 0.0:
            if g > pg_max_old and not cached:
                active_size -= 1
                index[s] = index[active_size]
                index[active_size] = entry
                mask[i] = 0
                continue
            elif g < 0.0:
                pg = g
        elif a_i == u_i:
            if g < pg_min_old and not cached:
                active_size -= 1
                index[s] = index[active_size]
                index[active_size] = entry
                mask[i] = 0
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
            if cached:
                dual_cd.coordinate_step(cache_rows, cache_labels, cache_alpha, w,
                                        bias_scale, i, start, end, g)
            else:
                dual_cd.coordinate_step(rows, labels, alpha, w, bias_scale, i, start, end,
                                        g)
        s += 1
    return dual_cd.MAX_ITER, active_size, pg_max_new, pg_min_new, work


@njit(cache=True, inline="always")
def row_margin(rows, w, y, bias_term, i):
    """(start, end, m_i) of row i: its bounds (np.uint64) and margin
    m_i = y_i (w.x_i + bias_term), bias_term = w_B B."""
    data, indices, indptr = rows
    start = np.uint64(indptr[i])
    end = np.uint64(indptr[i + 1])
    dot = 0.0
    for k in range(start, end):
        dot += w[np.uint32(indices[k])] * data[k]
    return start, end, y[i] * (dot + bias_term)


@njit(cache=True, nogil=True)
def gather_rows(rows, picks, data_out, indices_out, indptr_out, first):
    """The rows `picks` of `rows`, in that order, written into the CSR arrays *_out from
    their row `first` on (indptr_out[first] set already); returns the next row."""
    data, indices, indptr = rows
    r = first
    for p in picks:
        start = indptr[p]
        at = indptr_out[r]
        length = indptr[p + 1] - start
        for k in range(length):
            data_out[at + k] = data[start + k]
            indices_out[at + k] = indices[start + k]
        indptr_out[r + 1] = at + length
        r += 1
    return r


@njit(cache=True, error_model="numpy", nogil=True)
def certificate_rows(rows, y, cost, w, bias_scale, loss_kind, acc, sums):
    """The certificate's pass over one block, at w (solvers/certificate.py `bounds_at`):
    sums[0] += sum_i C_i loss(m_i), m_i = y_i w.z_i; and the dual point or gradient
    coefficients u_i from the margins, acc += sum_i u_i z_i (z_i: x_i, B last):
      L1: u_i = C_i y_i [m_i < 1], sums[1] += C_i [m_i < 1];
      L2: a_i = 2 C_i max(0, 1 - m_i), u_i = a_i y_i, sums[1] += a_i,
          sums[2] += a_i^2 / C_i;
      LOGISTIC: u_i = C_i y_i sigma(-m_i).
    Also sums[3] += the number of rows with y_i (w.z_i) > 0 (correct signs)."""
    data, indices, indptr = rows
    bias_slot = acc.shape[0] - 1
    bias_term = w[w.shape[0] - 1] * bias_scale
    loss = 0.0
    total = 0.0
    squares = 0.0
    positive = 0.0
    for i in range(indptr.shape[0] - 1):
        start, end, m = row_margin(rows, w, y, bias_term, i)
        if m > 0.0:
            positive += 1.0
        c = cost[i]
        u = 0.0
        if loss_kind == LOGISTIC:
            loss += c * _softplus_neg(m)
            u = c * y[i] * _sigmoid_neg(m)
        else:
            slack = 1.0 - m
            if slack > 0.0:
                if loss_kind == L1:
                    loss += c * slack
                    u = c * y[i]
                    total += c
                else:
                    loss += c * slack * slack
                    a = 2.0 * c * slack
                    u = a * y[i]
                    total += a
                    squares += a * a / c
        if u != 0.0:
            for k in range(start, end):
                acc[np.uint32(indices[k])] += u * data[k]
            acc[bias_slot] += u * bias_scale
    sums[0] += loss
    sums[1] += total
    sums[2] += squares
    sums[3] += positive


@njit(cache=True, nogil=True)
def add_rows(rows, coefficients, bias_scale, w):
    """w += sum_i c_i z_i over the block's rows (z_i: x_i, B last)."""
    data, indices, indptr = rows
    bias_slot = w.shape[0] - 1
    for i in range(indptr.shape[0] - 1):
        c = coefficients[i]
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            w[np.uint32(indices[k])] += c * data[k]
        w[bias_slot] += c * bias_scale


@njit(cache=True)
def entropy_sum(alpha):
    """sum_i a_i log a_i + (C_i - a_i) log(C_i - a_i) for alpha[:, 0] = a, [:, 1] = C - a."""
    total = 0.0
    for i in range(alpha.shape[0]):
        total += alpha[i, 0] * math.log(alpha[i, 0]) + alpha[i, 1] * math.log(alpha[i, 1])
    return total


@njit(cache=True, error_model="numpy", nogil=True)
def logistic_pair_sweep(rows_a, rows_b, firsts, y, cost, norms, alpha, w, index, rng,
                        settings):
    """One sweep of logistic_dcd's step over the rows of two blocks together, in one
    random permutation of both (firsts = (the first row of a, of b, the rows of b used: 0
    for a block alone); y, cost, norms and alpha are of all rows). Returns (largest |g'|
    at the start of a sub-problem, Newton steps; NaN when not finite)."""
    bias_scale, inner_eps = settings
    n_a = rows_a[2].shape[0] - 1
    size = n_a + firsts[2]
    for s in range(size):
        index[s] = s
    shuffle_sweep(index, size, rng)
    largest = 0.0
    steps = 0
    for s in range(size):
        t = index[s]
        if t < n_a:  # a's and b's arrays apart: their types may differ
            top, inner = row_step(rows_a[0], rows_a[1], np.uint64(rows_a[2][t]),
                                       np.uint64(rows_a[2][t + 1]), firsts[0] + t, y, cost,
                                       norms, alpha, w, bias_scale, inner_eps)
        else:
            r = t - n_a
            top, inner = row_step(rows_b[0], rows_b[1], np.uint64(rows_b[2][r]),
                                       np.uint64(rows_b[2][r + 1]), firsts[1] + r, y, cost,
                                       norms, alpha, w, bias_scale, inner_eps)
        if math.isnan(top):
            return math.nan, steps
        largest = max(largest, top)
        steps += inner
    return largest, steps
