"""Selective block minimization's cache (Chang & Roth, "Selective block minimization for
faster convergence of limited memory large-scale linear models", KDD 2011), for the
out-of-core dcd (solvers/out_of_core.py).

Block minimization alone couples the blocks only through w: a block's sub-problem is
solved while the others wait, so the variables that still move near the optimum (the
support vectors on the margin) are revisited once a pass, and the dual creeps up (an L1
loss fit on 30,000 rows in 9 blocks gained 0.007 of 15,482 a pass after 100 passes, never
certified). The cache keeps the informative rows in memory across blocks, copies of their
values and indices, at most `capacity` bytes: with every block, the cached rows are swept
too (interleaved with the block's own rows in each sweep), so they are optimised against
every block. After a
block, the cache is chosen again from the rows cached and those of the block: the support
vectors (a_i > 0), those nearest the margin (|1 - y_i w.z_i| smallest) first, until the
capacity is full. A cached row of the block being trained is swept as a cached row only
(masked out of the block's own sweeps), so no variable has two copies at once.
`train_block` is the out-of-core dcd's step on one block: its sweeps, the cache's, the
cache chosen again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from solvers import _out_of_core_kernels as kernels
from solvers import dual_cd

ROW_BYTES = 8 + 8 + 6 * 8  # indptr, id; alpha, y, U, D, Qbar and the margin gathered


class Cache:
    """The cached rows: their global row numbers `ids` and a CSR copy of them (int64
    indptr), at most `capacity` bytes (ROW_BYTES a row besides its values and indices).
    While it is chosen again the old copy and the new one coexist: the plan counts two."""

    def __init__(self, capacity: int, value_dtype: Any) -> None:
        self.capacity = int(capacity)
        self.ids = np.zeros(0, dtype=np.int64)
        self.rows = (np.zeros(0, dtype=value_dtype), np.zeros(0, dtype=np.int32),
                     np.zeros(1, dtype=np.int64))

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def nbytes(self) -> int:
        data, indices, _ = self.rows
        return int(data.nbytes + indices.nbytes) + len(self) * ROW_BYTES

    def local(self, lo: int, hi: int) -> np.ndarray:
        """The block [lo, hi)'s rows that are cached, as the block's row numbers."""
        inside = (self.ids >= lo) & (self.ids < hi)
        return self.ids[inside] - lo

    def gather(self, state: Any) -> tuple[Any, Any, np.ndarray, np.ndarray]:
        """(rows, labels, alpha, margin) of the cached rows for the sweep kernel: their
        CSR copy and copies of their y, U, D, Qbar, a and margin (`scatter` writes a and
        the margins back)."""
        ids, out = self.ids, state.out
        labels = (out.y[ids], state.upper[ids], state.diag[ids], state.qbar[ids])
        return self.rows, labels, state.alpha[ids], state.margin[ids]

    def scatter(self, state: Any, gathered: tuple[Any, Any, np.ndarray, np.ndarray]
                ) -> None:
        state.alpha[self.ids] = gathered[2]
        state.margin[self.ids] = gathered[3]

    def update(self, rows: tuple[np.ndarray, np.ndarray, np.ndarray], lo: int,
               state: Any) -> None:
        """Choose the cache again from its rows and those of the block just trained (rows
        lo, lo + 1, ... of the dataset, `rows` its arrays)."""
        hi = lo + rows[2].shape[0] - 1
        old = np.flatnonzero((self.ids < lo) | (self.ids >= hi))  # the block's own: anew
        ids = np.concatenate([self.ids[old], np.arange(lo, hi, dtype=np.int64)])
        candidates = np.flatnonzero(state.alpha[ids] > 0.0)  # the support vectors
        # the margins of the rows' latest visits (written by the sweeps)
        nearness = np.abs(1.0 - state.margin[ids[candidates]])
        candidates = candidates[np.argsort(nearness, kind="stable")]
        del nearness
        lengths = np.concatenate([np.diff(self.rows[2])[old], np.diff(rows[2])])
        per_value = rows[0].itemsize + 4
        used = np.cumsum(lengths[candidates] * per_value + ROW_BYTES)
        chosen = np.sort(candidates[: int(np.searchsorted(used, self.capacity, "right"))])
        from_old = old[chosen[chosen < old.shape[0]]]
        from_block = chosen[chosen >= old.shape[0]] - old.shape[0]
        nnz = int(lengths[chosen].sum())
        new = (np.empty(nnz, dtype=rows[0].dtype), np.empty(nnz, dtype=np.int32),
               np.zeros(chosen.shape[0] + 1, dtype=np.int64))
        following = kernels.gather_rows(self.rows, from_old, *new, 0)
        kernels.gather_rows(rows, from_block, *new, following)
        self.ids, self.rows = ids[chosen], new


def train_block(run: Any, state: Any, block: Any,
                rows: tuple[np.ndarray, np.ndarray, np.ndarray],
                eps: float, low: float, high: float, confirming: bool, violation: float
                ) -> tuple[int, float, float, str | None]:
    """A block's sub-problem: sweeps of its active rows and the cached rows, interleaved
    in one random permutation (kernels.dcd_block_sweep), until their projected-gradient
    extremes satisfy the stop rule, or their violation falls to run.inner_fraction of the
    first sweep's (Yu, Hsieh, Chang & Lin's loose inner stop), or block_sweeps sweeps;
    then the cache chosen again. (status, the extremes of the first sweep, the monitor's
    stop or None.)

    Interleaved, not one after the other: block minimization over a fixed partition of
    the rows stalls on the regularised bias, a feature every row shares (a block's
    sub-problem cannot move the bias's weight from its rows to another block's: on a
    3,000-row set in 7 blocks, one sweep a block, the gap stayed near 2e-2 for 40 passes
    where one block reached 1e-4, and near 1e-4 without the bias); the cached rows, the
    support vectors of every block, mixed into each block's permutation, do that move
    coordinate by coordinate, as a permutation of all rows does in memory."""
    out = state.out
    lo, hi = block.first_row, block.first_row + block.rows
    labels = (out.y[lo:hi], state.upper[lo:hi], state.diag[lo:hi], state.qbar[lo:hi])
    alpha, mask, margin = state.alpha[lo:hi], state.mask[lo:hi], state.margin[lo:hi]
    cache = state.cache
    if cache is None and run.cache_bytes > 0:
        cache = state.cache = Cache(run.cache_bytes, rows[0].dtype)
    if cache is not None:
        cached = cache.local(lo, hi)
        gathered = cache.gather(state)
    else:
        cached = np.zeros(0, dtype=np.int64)
        gathered = (Cache(0, rows[0].dtype).rows, (np.zeros(0),) * 4, np.zeros(0),
                    np.zeros(0))
    n_cached = gathered[2].shape[0]
    held = mask[cached].copy()
    mask[cached] = 0  # swept as cached rows
    index = np.empty(hi - lo + n_cached, dtype=np.int64)
    active = int(kernels.active_rows(mask, index))
    index[active:active + n_cached] = np.arange(hi - lo, hi - lo + n_cached)
    active += n_cached
    first_top, first_bottom, stop = -math.inf, math.inf, None
    status, target = dual_cd.MAX_ITER, 0.0
    for sweep in range(run.block_sweeps):
        status, active, top, bottom, _ = kernels.dcd_block_sweep(
            (rows, labels, alpha, margin), gathered, out.w, mask, index, active, state.rng,
            (out.bias_scale, low, high))
        if status == dual_cd.NON_FINITE:
            break
        spread = top - bottom
        if sweep == 0:
            first_top, first_bottom = top, bottom
            target = run.inner_fraction * max(spread, abs(top), abs(bottom))
        if spread <= eps and top <= eps and bottom >= -eps:
            break
        if max(spread, abs(top), abs(bottom)) <= target:
            break
        if not confirming:
            low = top if top > 0.0 else math.inf
            high = bottom if bottom < 0.0 else -math.inf
        stop = run.interrupted(state.iteration, block.index, violation, state.active,
                               state.dual)
        if stop is not None:
            break
    if cache is not None:
        cache.scatter(state, gathered)
    mask[cached] = held
    if cache is not None and status != dual_cd.NON_FINITE:
        cache.update(rows, lo, state)
    return status, first_top, first_bottom, stop
