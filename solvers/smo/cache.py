"""SMO's kernel-column cache: LIBSVM's LRU cache of variable-length float32 columns
(with the regressions' kernel rows, SVR_Q's), a column fetched or computed on a miss, and
the swaps that follow the shrinking."""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.typed import List

from solvers.smo.columns import fill_range
from solvers.smo.layout import CACHE_FREE, EVALS, HITS, MISSES, TWINS, ZERO, leaf


@njit(cache=True, nogil=True)
def new_column_list(n):
    columns = List.empty_list(types.float32[::1])
    empty = np.zeros(0, dtype=np.float32)
    for _ in range(n):
        columns.append(empty)
    return columns


@njit(cache=True, inline="always")
def with_columns(heads, columns):
    """The cache tuple of the kernels: (columns, lengths, lru_prev, lru_next, empty)."""
    return (columns, heads[0], heads[1], heads[2], heads[3])


@njit(cache=True, inline="always")
def _lru_delete(lru_prev, lru_next, h):
    lru_next[lru_prev[h]] = lru_next[h]
    lru_prev[lru_next[h]] = lru_prev[h]


@njit(cache=True, inline="always")
def _lru_insert(lru_prev, lru_next, h):
    """Insert h at the most-recently-used end (before the sentinel)."""
    head = lru_prev.shape[0] - 1
    lru_next[h] = head
    lru_prev[h] = lru_prev[head]
    lru_next[lru_prev[h]] = h
    lru_prev[head] = h


@leaf()
def cached(i, length, col_len, lru_prev, lru_next, counters):
    """True (a hit, as in `compute_column`) when the cache holds Q_{i, 0:length}, else False:
    then `compute_column` computes it. The step loop's hot path: it touches only the cache."""
    if col_len[i] < length or length == 0:
        return False
    _lru_delete(lru_prev, lru_next, i)
    _lru_insert(lru_prev, lru_next, i)
    counters[HITS] += 1
    return True


@njit(cache=True)
def get_column(i, length, rows, kernel, positions, cache, counters, parallel):
    """Q_{i, 0:length} (float32; the array may be longer): cached, extended or computed."""
    y = positions.y
    return compute_column(i, length, miss_source(rows, y, counters), kernel, y, cache,
                          counters, parallel, positions.local)


@njit(cache=True, inline="always")
def miss_source(rows, y, counters):
    """What `compute_column` computes a missing column from: the positional rows and y, or with
    twins (the regressions) the training rows in problem order and +1 (`kernel_row`)."""
    if counters[TWINS] > 0:
        return rows[3]
    return (rows[0], rows[2], y)


@njit(cache=True, inline="always")
def _make_room(more, cache, counters):
    """Evict least recently used entries until `more` floats are free (or none is left)."""
    columns, col_len, lru_prev, lru_next, empty = cache
    head = col_len.shape[0]
    while counters[CACHE_FREE] < more:
        old = lru_next[head]
        if old == head:
            break
        _lru_delete(lru_prev, lru_next, old)
        columns[old] = empty
        counters[CACHE_FREE] += col_len[old]
        col_len[old] = 0


@njit(cache=True)
def compute_column(i, length, source, kernel, y, cache, counters, parallel, local):
    """`get_column` from the arrays it reads (`miss_source`: the step loop's cache misses,
    where each array of the arguments costs a reference per call). With twins (the
    regressions), the entries are read from the kernel row of x_i (`kernel_row`)."""
    columns, col_len, lru_prev, lru_next, _ = cache
    old_len = col_len[i]
    if old_len > 0:
        _lru_delete(lru_prev, lru_next, i)
    more = length - old_len
    if more > 0:
        _make_room(more, cache, counters)
        column = np.empty(length, dtype=np.float32)
        if old_len > 0:
            column[:old_len] = columns[i][:old_len]
        counters[CACHE_FREE] -= more
        col_len[i] = length
        n = counters[TWINS]
        if n > 0:
            # Q_it = y_i y_t K(x_i, x_t) for t in [old_len, length), from x_i's kernel row
            # (variable t is row `twin_row(local[t])`); the row's lookup as `kernel_row`'s
            r = twin_row(local[i], n)
            h = col_len.shape[0] - n + r
            if col_len[h] > 0:
                _lru_delete(lru_prev, lru_next, h)
                _lru_insert(lru_prev, lru_next, h)
                row = columns[h]
            else:
                row = kernel_row(r, n, kernel, cache, counters, parallel, source)
            if parallel.chunks > 1 and more >= parallel.min_pass:
                twin_fill_parallel(row, y, local, y[i], n, old_len, length, column,
                                   parallel.chunks)
            else:
                _twin_fill_seq(row, y, local, y[i], n, old_len, length, column)
        else:
            fill_range(source[0], source[1], kernel, y, i, old_len, length, column,
                       parallel)
            counters[EVALS] += more
        columns[i] = column
        counters[MISSES] += 1
    else:
        column = columns[i]
        counters[HITS] += 1
    _lru_insert(lru_prev, lru_next, i)
    return column


@njit(cache=True, inline="always")
def twin_row(local_t, n):
    """The training row of variable `local_t` (problem order) when rows t and n + t are twins."""
    return local_t - n if local_t >= n else local_t


@njit(cache=True)
def kernel_row(r, n, kernel, cache, counters, parallel, real_rows):
    """K(x_r, x_s) for the n rows s of a regression, in problem order (float32): LIBSVM's
    SVR_Q caches one such row for both variables of row r, whatever the shrinking. Kept in
    the same LRU cache as the columns, at entry (number of variables) + r."""
    columns, col_len, lru_prev, lru_next, _ = cache
    h = col_len.shape[0] - n + r
    if col_len[h] > 0:
        _lru_delete(lru_prev, lru_next, h)
        row = columns[h]
    else:
        _make_room(n, cache, counters)
        row = np.empty(n, dtype=np.float32)
        positional, dense_rows, ones = real_rows
        fill_range(positional, dense_rows, kernel, ones, r, ZERO, n, row, parallel)
        columns[h] = row
        col_len[h] = n
        counters[CACHE_FREE] -= n
        counters[EVALS] += n
    _lru_insert(lru_prev, lru_next, h)
    return row


@njit(cache=True, inline="always")
def _twin_fill_range(row, y, local, y_i, n, lo, hi, out):
    """out[t] = y_i y_t row[twin row of t] for t in [lo, hi)."""
    for t in range(np.uint64(lo), np.uint64(hi)):
        value = row[twin_row(local[t], n)]
        out[t] = value if y[t] == y_i else -value


@leaf()
def _twin_fill_seq(row, y, local, y_i, n, lo, hi, out):
    _twin_fill_range(row, y, local, y_i, n, lo, hi, out)


@njit(cache=True, parallel=True)
def twin_fill_parallel(row, y, local, y_i, n, start, stop, out, chunks):
    size = stop - start
    for c in prange(chunks):
        _twin_fill_range(row, y, local, y_i, n, start + c * size // chunks,
                         start + (c + 1) * size // chunks, out)


@njit(cache=True)
def swap_positions(positions, cache, i, j):
    """LIBSVM's Solver::swap_index + the cache heads (entries: swap_cached_entries)."""
    p = positions
    for array in (p.perm, p.local):
        array[i], array[j] = array[j], array[i]
    for flags in (p.y, p.status):
        flags[i], flags[j] = flags[j], flags[i]
    for values in (p.cost, p.diagonal, p.alpha, p.gradient, p.gradient_bar, p.linear):
        values[i], values[j] = values[j], values[i]
    columns, col_len, lru_prev, lru_next, _ = cache
    if col_len[i] > 0:
        _lru_delete(lru_prev, lru_next, i)
    if col_len[j] > 0:
        _lru_delete(lru_prev, lru_next, j)
    column = columns[i]
    columns[i] = columns[j]
    columns[j] = column
    col_len[i], col_len[j] = col_len[j], col_len[i]
    if col_len[i] > 0:
        _lru_insert(lru_prev, lru_next, i)
    if col_len[j] > 0:
        _lru_insert(lru_prev, lru_next, j)


@njit(cache=True)
def swap_cached_entries(cache, counters, swaps, n_swaps, parallel):
    """Apply the swaps (i < j) in order to the entries of every cached column; a column that
    covers i but not j is dropped (LIBSVM's Cache::swap_index, batched per column). The
    columns are independent: in parallel when large (one shrinking of a 20,000-variable
    regression swaps thousands of entries in each of thousands of columns)."""
    columns, col_len, lru_prev, lru_next, empty = cache
    if n_swaps == 0:
        return
    head = col_len.shape[0]
    variables = head - counters[TWINS]  # entries beyond: kernel rows (no positions)
    entries = np.empty(variables, dtype=np.int64)
    n = ZERO
    h = lru_next[head]
    while h != head:
        if h < variables:
            entries[n] = h
            n += 1
        h = lru_next[h]
    keep = np.ones(n, dtype=np.uint8)
    chunks = parallel.chunks
    if chunks > 1 and n * n_swaps >= parallel.min_pass:
        swap_entries_parallel(columns, col_len, entries, n, swaps, n_swaps, keep, chunks)
    else:
        _swap_entries_range(columns, col_len, entries, ZERO, n, swaps, n_swaps, keep)
    for e in range(n):
        if keep[e] == 0:
            h = entries[e]
            _lru_delete(lru_prev, lru_next, h)
            columns[h] = empty
            counters[CACHE_FREE] += col_len[h]
            col_len[h] = 0


@njit(cache=True)
def _swap_entries_range(columns, col_len, entries, lo, hi, swaps, n_swaps, keep):
    """`swap_cached_entries` for the columns entries[lo:hi]; keep[e] = 0: drop entry e.
    The swaps come from one shrinking pass, i increasing: a column stops at its length."""
    for e in range(lo, hi):
        h = entries[e]
        length = col_len[h]
        column = columns[h]
        for s in range(n_swaps):
            i = swaps[s, 0]
            if i >= length:
                break
            j = swaps[s, 1]
            if j >= length:
                keep[e] = 0
                break
            column[i], column[j] = column[j], column[i]


@njit(cache=True, parallel=True)
def swap_entries_parallel(columns, col_len, entries, n, swaps, n_swaps, keep, chunks):
    for c in prange(chunks):
        _swap_entries_range(columns, col_len, entries, c * n // chunks,
                            (c + 1) * n // chunks, swaps, n_swaps, keep)
