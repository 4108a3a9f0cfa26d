"""SMO's rows of X in position order: the positional CSR (gathered again after each
shrinking permutes the positions) and the copies a kernel column's dot products are read
from - a dense copy, bit sets of 0/1 rows, a CSC -, whichever the data make cheapest."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from solvers._kernel_helpers import RBF
from solvers.backbone import CsrArrays
from solvers.smo.columns import bits_pay, csc_pays, rbf_table
from solvers.smo.layout import ZERO

# Kernel columns from a dense positional copy of the rows when at least this share of the
# entries is nonzero and the copy stays below DENSE_MAX_ENTRIES float64.
DENSE_MIN_DENSITY = 0.5
DENSE_MAX_ENTRIES = 1 << 25


def use_dense_rows(l: int, n_features: int, nnz: int) -> bool:
    entries = l * max(n_features, 1)
    return l > 0 and entries <= DENSE_MAX_ENTRIES and nnz >= DENSE_MIN_DENSITY * entries


def rows_in_order(X: CsrArrays, sq_norms: np.ndarray, perm: np.ndarray,
                  kernel: tuple[int, float, float, int],
                  source: str | None = None) -> tuple[tuple[Any, ...], str]:
    """The rows perm[0], perm[1], ... of X as the kernel columns read them: (positional CSR
    + scatter buffer, X's own arrays, (dense copy, scratch, CSC, bit sets, rbf table)),
    and the source of their dot products ("dense", "bits", "columns" or "rows"; `source`
    imposes it, else the cheapest the data allow)."""
    l = int(perm.shape[0])
    nnz = int(np.sum(X.indptr[perm + 1] - X.indptr[perm]))
    dense = (use_dense_rows(l, X.n_features, nnz) if source is None
             else source == "dense" and l > 0)
    # dense: feature-major (feature k of the row at position t at [k, t]), see
    # columns._dense_dots; none: no rows
    dense_shape = (max(X.n_features, 1), l) if dense else (0, 0)
    no_columns = (np.empty(0), np.empty(0, dtype=np.int32), np.empty(0, dtype=np.int64))
    no_bits = (np.empty((0, 1), dtype=np.uint64), np.empty(0, dtype=np.float32))
    rows_arrays: tuple[Any, ...] = (
        (np.empty(nnz), np.empty(nnz, dtype=np.int32), np.empty(l + 1, dtype=np.int64),
         np.empty(l), np.zeros(X.n_features + 1)),
        (X.data, X.indices, X.indptr, sq_norms),
        (np.empty(dense_shape), np.empty(l), np.empty(l), *no_columns, *no_bits))
    gather_positional_rows(rows_arrays, perm, 1, 0)
    # Sparse data: a kernel column's dot products from bit sets (0/1 features) or a
    # positional CSC when they cost less than the row gather (see columns.py), built
    # from the positional rows here and by the gather after each shrinking.
    column_source = "dense" if dense else "rows"
    extra: tuple[Any, ...] = ()
    positional_data, positional_indices = rows_arrays[0][:2]
    if dense or l == 0:
        pass
    elif (bits_pay(X.n_features, nnz, l, bool(np.all(positional_data == 1.0)))
          if source is None else source == "bits"):
        column_source = "bits"
        table = (rbf_table(kernel[1], X.n_features) if kernel[0] == RBF
                 else no_bits[1])
        extra = (*no_columns, np.empty((l, (X.n_features + 63) // 64), dtype=np.uint64),
                 table)
    elif (csc_pays(l, nnz, np.bincount(positional_indices, minlength=X.n_features))
          if source is None else source == "columns"):
        column_source = "columns"
        extra = (np.empty(nnz), np.empty(nnz, dtype=np.int32),
                 np.empty(X.n_features + 1, dtype=np.int64), *no_bits)
    if extra:
        rows_arrays = (*rows_arrays[:2], (*rows_arrays[2][:3], *extra))
        positional_sources(rows_arrays)
    return rows_arrays, column_source


@njit(cache=True, nogil=True)
def gather_positional_rows(rows, perm, chunks, min_work):
    """Row t of the positional CSR = row perm[t] of X (sequential memory in the kernel
    columns; rebuilt after shrinking permutes the positions), then the positional copies
    that are kept (`positional_sources`). The rows are copied on `chunks` threads when
    the copy (non-zeros + rows) is at least `min_work`."""
    data, indices, indptr, sq_norms, _ = rows[0]
    x_data, x_indices, x_indptr, x_sq_norms = rows[1]
    Xd = rows[2][0]
    l = perm.shape[0]
    indptr[0] = 0
    for t in range(l):
        r = perm[t]
        indptr[t + 1] = indptr[t] + x_indptr[r + 1] - x_indptr[r]
    if chunks > 1 and indptr[l] + l >= min_work:
        gather_rows_parallel(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                             x_sq_norms, Xd, perm, chunks)
    else:
        _gather_rows_range(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                           x_sq_norms, Xd, perm, ZERO, l)
    positional_sources(rows)


@njit(cache=True, nogil=True)
def _gather_rows_range(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                       x_sq_norms, Xd, perm, lo, hi):
    """`gather_positional_rows` for the positions [lo, hi), indptr already filled."""
    dense_rows = Xd.shape[0] > 0
    for t in range(lo, hi):
        r = perm[t]
        if dense_rows:
            Xd[:, t] = 0.0
        offset = indptr[t]
        for k in range(x_indptr[r], x_indptr[r + 1]):
            data[offset] = x_data[k]
            indices[offset] = x_indices[k]
            if dense_rows:
                Xd[x_indices[k], t] = x_data[k]
            offset += 1
        sq_norms[t] = x_sq_norms[r]


@njit(cache=True, parallel=True)
def gather_rows_parallel(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                         x_sq_norms, Xd, perm, chunks):
    l = perm.shape[0]
    for c in prange(chunks):
        _gather_rows_range(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                           x_sq_norms, Xd, perm, c * l // chunks, (c + 1) * l // chunks)


@njit(cache=True, nogil=True)
def positional_sources(rows):
    """From the positional CSR: the bit sets of its rows and its CSC (entries of each
    column in position order), each when it is kept (non-empty)."""
    data, indices, indptr, _, _ = rows[0]
    _, _, _, cdata, cpos, cptr, bits, _ = rows[2]
    l = indptr.shape[0] - 1
    if bits.shape[0] > 0:
        bits[:, :] = 0
        for t in range(l):
            for k in range(indptr[t], indptr[t + 1]):
                f = indices[k]
                bits[t, f >> 6] |= np.uint64(1) << np.uint64(f & 63)
    if cptr.shape[0] == 0:
        return
    cptr[:] = 0
    for k in range(indptr[l]):
        cptr[indices[k] + 1] += 1
    for f in range(cptr.shape[0] - 1):
        cptr[f + 1] += cptr[f]
    fill = cptr[:-1].copy()
    for t in range(l):
        for k in range(indptr[t], indptr[t + 1]):
            f = indices[k]
            cdata[fill[f]] = data[k]
            cpos[fill[f]] = t
            fill[f] += 1
