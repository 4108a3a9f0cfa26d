"""Compiled parts of the parallel dual coordinate descent of `dcd` with `threads` > 1:
asynchronous sweeps on one shared w (PASSCoDe: Hsieh, Yu & Dhillon, "PASSCoDe: Parallel
ASynchronous Stochastic dual Co-ordinate Descent", ICML 2015), kept certifiable.

One sweep visits a random permutation of the active set, as the sequential kernel does
(the same Fisher-Yates shuffle of the same generator), split into P contiguous parts,
P = threads. The sweep runs in rounds of a fixed amount of work; in a round every part
runs the sequential algorithm (visit, shrink, one-variable Newton step with the
sequential curvature Qbar_ii) on its own rows against the one shared w, which all parts
read and update without locks (PASSCoDe-Wild). Two things keep the result honest:

- the hot features (in more than dcd.HOT_SHARE of the rows) and the bias feature, which
  nearly every row updates, are never written in w inside a round: each part adds its
  changes to a row of deltas of its own (one writer each, no lost update) and reads the
  other parts' deltas every REFRESH rows into a view of its own; the deltas are folded
  into w after the round (`fold_hot`). The other features are rare enough that two
  threads seldom add to one at the same instant;
- such a lost update is still possible (measured on a 50,000-row text set: none in some
  fits, a largest difference of 0.02 in others), so w is rebuilt from alpha (`w_of_alpha`,
  a deterministic parallel pass X'(y a) in row chunks summed in chunk order) before every
  objective, certificate or returned model, and the stop rule is confirmed by the
  duality gap of (w(a), a) against the fit's tol before the sweeps stop: the gap is
  always that of (w(a), a), whatever the threads did. The largest difference between
  the running w and w(a) is reported (details["resync_drift"]).

The parts' steps interleave by timing, so two fits on several threads are not
bit-identical (one thread running the parts one after another is): their objectives
agree within the certified gaps. The stop rule is the sequential one (projected-gradient
extremes over the sweep, from the parts' extremes), confirmed by the certificate as
every dcd fit's (solvers/continuation.py).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from solvers import dual_cd
from solvers._kernel_helpers import row_axpy, shuffle_sweep

# counters[] slots (int64) and bounds[] slots (float64)
ITERATION, ACTIVE_SIZE, IN_SWEEP, ROUNDS = 0, 1, 2, 3
PG_MAX_OLD, PG_MIN_OLD, LAST_VIOLATION, DRIFT = 0, 1, 2, 3
_PG_ZERO = 1.0e-12


@njit(cache=True)
def start_sweep(index, counters, rng, part_lo, part_hi, part_end, pos, pg_max, pg_min):
    """Shuffle index[:active_size] (the sequential kernel's Fisher-Yates) and split it
    into len(part_lo) contiguous parts."""
    active_size = counters[ACTIVE_SIZE]
    shuffle_sweep(index, active_size, rng)
    parts = part_lo.shape[0]
    for p in range(parts):
        part_lo[p] = p * active_size // parts
        part_end[p] = (p + 1) * active_size // parts
        part_hi[p] = part_end[p]
        pos[p] = part_lo[p]
        pg_max[p] = -np.inf
        pg_min[p] = np.inf
    counters[IN_SWEEP] = 1


REFRESH = 32  # rows between two reads of the other parts' hot deltas


@njit(cache=True, inline="always")
def _refresh(w, hot, hot_w, deltas, view, p):
    """view[p] = the hot weights at the round start + every part's deltas."""
    parts = deltas.shape[0]
    for k in range(hot.shape[0]):
        value = hot_w[k]
        for q in range(parts):
            value += deltas[q, k]
        view[p, k] = value


@njit(cache=True, inline="always", error_model="numpy")
def _visit_and_step(rows, labels, alpha, w, slot_of, view, deltas, p, bias_scale, i,
                    pg_max_old, pg_min_old):
    """Visit row i (hot weights from the part's view, the others from the shared w; the
    bias feature is the last hot slot) and, unless it shrinks, take the sequential
    one-variable step: the cold weights updated in w, the hot ones in the part's view and
    deltas. Returns (work, g, shrink, pg)."""
    data, indices, indptr = rows
    y, upper, diag, qbar_diag = labels
    bias_slot = view.shape[1] - 1
    row_start = indptr[i]
    row_end = indptr[i + np.uint64(1)]
    a_i = alpha[i]
    u_i = upper[i]
    dot = view[p, bias_slot] * bias_scale
    for k in range(np.uint64(row_start), np.uint64(row_end)):
        j = np.uint32(indices[k])
        h = slot_of[j]
        dot += (w[j] if h < 0 else view[p, h]) * data[k]
    g = y[i] * dot - 1.0 + a_i * diag[i]
    work = row_end - row_start + 1
    pg = 0.0
    if a_i == 0.0:
        if g > pg_max_old:
            return work, g, True, pg
        elif g < 0.0:
            pg = g
    elif a_i == u_i:
        if g < pg_min_old:
            return work, g, True, pg
        elif g > 0.0:
            pg = g
    else:
        pg = g
    if abs(pg) > _PG_ZERO and np.isfinite(g):
        a_new = min(max(a_i - g / qbar_diag[i], 0.0), u_i)
        alpha[i] = a_new
        scaled = (a_new - a_i) * y[i]
        for k in range(np.uint64(row_start), np.uint64(row_end)):
            j = np.uint32(indices[k])
            h = slot_of[j]
            change = scaled * data[k]
            if h < 0:
                w[j] += change
            else:
                view[p, h] += change
                deltas[p, h] += change
        view[p, bias_slot] += scaled * bias_scale
        deltas[p, bias_slot] += scaled * bias_scale
    return work, g, False, pg


@njit(cache=True, parallel=True, error_model="numpy")
def run_round(rows, labels, alpha, w, index, hot, slot_of, hot_w, deltas, view, part_hi,
              pos, pg_max, pg_min, work_done, status, settings):
    """One round: each part p visits index[pos[p]:part_hi[p]] against the shared w until
    it has visited settings[3] nonzeros (+1 per row) or its part ends; shrinks within its
    part (a shrunk row moves to the part's end). The hot features `hot` (slot_of[j] their
    slot, -1 for the others; the bias feature the last slot) are never written in w
    within a round: part p adds its changes to deltas[p] and reads the other parts'
    every REFRESH rows into view[p] (`fold_hot` adds them to w after the round).
    settings = (B, pg_max_old, pg_min_old, budget). The per-part arrays are separate
    arguments (Numba 0.68 loses prange-indexed writes into arrays unpacked from a tuple
    argument)."""
    bias_scale, pg_max_old, pg_min_old, budget = settings
    parts = pos.shape[0]
    for k in range(hot.shape[0]):
        hot_w[k] = w[hot[k]]
    for p in prange(parts):
        s = pos[p]
        hi = part_hi[p]
        work = 0
        high = pg_max[p]
        low = pg_min[p]
        code = dual_cd.MAX_ITER
        _refresh(w, hot, hot_w, deltas, view, p)
        since = 0
        while s < hi and work < budget:
            i = np.uint64(index[s])
            row_work, g, shrink, pg = _visit_and_step(
                rows, labels, alpha, w, slot_of, view, deltas, p, bias_scale, i,
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
            s += 1
            since += 1
            if since == REFRESH:
                since = 0
                _refresh(w, hot, hot_w, deltas, view, p)
        pos[p] = s
        part_hi[p] = hi
        pg_max[p] = high
        pg_min[p] = low
        work_done[p] = work
        status[p] = code


@njit(cache=True)
def fold_hot(w, hot, hot_w, deltas):
    """w's hot weights = their round-start values + the parts' deltas (in part order);
    the deltas back to 0."""
    for k in range(hot.shape[0]):
        value = hot_w[k]
        for q in range(deltas.shape[0]):
            value += deltas[q, k]
            deltas[q, k] = 0.0
        w[hot[k]] = value


def hot_features(indices, n_rows: int, n_features: int, share: float) -> tuple:
    """(hot, slot_of): the features in more than `share` of the rows, the bias feature
    (index n_features) always last, and each feature's slot (-1: not hot)."""
    counts = np.bincount(indices, minlength=n_features)
    hot = np.flatnonzero(counts > share * n_rows).astype(np.int64)
    hot = np.append(hot, n_features)
    slot_of = np.full(n_features + 1, -1, dtype=np.int32)
    slot_of[hot] = np.arange(hot.shape[0], dtype=np.int32)
    return hot, slot_of


@njit(cache=True, parallel=True)
def w_of_alpha(rows, y, alpha, bias_scale, bounds, chunk_acc, w):
    """w = X'(y * a) with the bias weight B sum_i y_i a_i last (when B > 0): row chunks
    `bounds` (solvers.parallel.chunk_bounds), each into its row of chunk_acc, summed in
    chunk order; returns max |w_before - w| (the drift of the running w)."""
    data, indices, indptr = rows
    chunks = bounds.shape[0] - 1
    last = w.shape[0] - 1
    for c in prange(chunks):
        acc = chunk_acc[c]
        acc[:] = 0.0
        for i in range(bounds[c], bounds[c + 1]):
            coefficient = y[i] * alpha[i]
            if coefficient != 0.0:
                row_axpy(coefficient, data, indices, np.uint64(indptr[i]),
                         np.uint64(indptr[i + 1]), acc)
                acc[last] += coefficient * bias_scale
    drift = 0.0
    for j in range(w.shape[0]):
        total = 0.0
        for c in range(chunks):
            total += chunk_acc[c, j]
        drift = max(drift, abs(total - w[j]))
        w[j] = total
    return drift


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
