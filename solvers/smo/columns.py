"""SMO's kernel columns and their cache: kernel values from dot products, one column
Q_i = y_i y_t K(x_i, x_t) over the active positions (in parallel when large), the rows of X
in position order, and LIBSVM's LRU cache of variable-length float32 columns, with the
swaps that follow the shrinking."""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic
from numba.typed import List

from solvers._kernel_helpers import kernel_from_dot
from solvers.smo.layout import (
    _CACHE_FREE,
    _EVALS,
    _HITS,
    _MISSES,
    _RBF,
    _TWINS,
    _U1,
    _ZERO,
    leaf,
)


@njit(cache=True, nogil=True)
def _kernel_diagonal(sq_norms, kernel, out):
    kind, gamma, coef0, degree = kernel
    for t in range(sq_norms.shape[0]):
        # out[t] = K(x_t, x_t)   (LIBSVM's QD)
        sq = sq_norms[t]
        out[t] = kernel_from_dot(kind, sq, sq, sq, gamma, coef0, degree)


@njit(cache=True, nogil=True)
def _new_column_list(n):
    columns = List.empty_list(types.float32[::1])
    empty = np.zeros(0, dtype=np.float32)
    for _ in range(n):
        columns.append(empty)
    return columns


# ---- kernel columns ------------------------------------------------------------------
#
# A column is computed in two passes over its range of positions: the dot products
# x_t . x_i (gathered from the scattered x_i, or - for dense data - from a dense positional
# copy of the rows, where the short inner loop vectorises), then the kernel values. For
# the rbf kernel the second pass is branch-free and vectorises: exp by Cody-Waite range
# reduction and a degree-13 polynomial (`_rbf_values`; within 2 ulp of libm's exp in
# float64, then rounded to float32 like every cached Q).

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's ln 2 split: n * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_SHIFTER = 6755399441055744.0  # 1.5 * 2^52: z + _SHIFTER rounds z to an integer
_SHIFTER_BITS = 0x4338000000000000  # its bit pattern


DOTS_BLOCK = 512  # positions per block of `_dense_dots` (its sums stay in L1)


# The range loops on a step's path (dense dot products, rbf values, the regressions'
# column fill; selection.py's scans and G update) index with unsigned integers
# (np.uint64): a signed index in [lo, hi) carries Numba's negative-index wraparound on
# every access, which keeps LLVM from vectorising the loop whenever lo is not a constant
# 0 - the chunks of a parallel loop ran 3x slower than one thread on the same range.
# (Views from 0 would do it too, at two atomic reference counts per view.) The bit-set,
# CSC and row-gather dot products and the G_bar flush still index signed.


@njit(cache=True)
def _dense_dots(Xd, i, lo, hi, dots):
    """dots[t] = x_t . x_i for t in [lo, hi) from the dense positional rows, stored feature
    by feature (Xd[k, t]: feature k of the row at position t). Each sum runs over k in
    order, as LIBSVM's dot does, and the loop over t vectorises: in blocks of DOTS_BLOCK
    (the block's sums stay in L1), four features a pass - ((s + a) + b) + c) + d is the
    one-feature-a-pass sum, with a quarter of its loads and stores of s (25-30% faster at
    10-120 features)."""
    d = Xd.shape[0]
    for start in range(lo, hi, DOTS_BLOCK):
        first = np.uint64(start)
        stop = np.uint64(min(start + DOTS_BLOCK, hi))
        for t in range(first, stop):
            dots[t] = 0.0
        k = 0
        while k + 4 <= d:
            x0 = Xd[k, i]
            x1 = Xd[k + 1, i]
            x2 = Xd[k + 2, i]
            x3 = Xd[k + 3, i]
            for t in range(first, stop):
                dots[t] = (((dots[t] + Xd[k, t] * x0) + Xd[k + 1, t] * x1)
                           + Xd[k + 2, t] * x2) + Xd[k + 3, t] * x3
            k += 4
        while k < d:
            x0 = Xd[k, i]
            for t in range(first, stop):
                dots[t] += Xd[k, t] * x0
            k += 1


@njit(cache=True, inline="always")
def _rbf_values(sq_norms, sq_i, gamma, y, y_i, lo, hi, dots, scale, out):
    """out[t] = y_i y_t exp(-gamma ||x_t - x_i||^2) (float32) from dots[t] = x_t . x_i;
    `dots` and `scale` (float64 scratch) are overwritten on [lo, hi)."""
    first, stop = np.uint64(lo), np.uint64(hi)
    for t in range(first, stop):
        a = -gamma * (sq_i + sq_norms[t] - 2.0 * dots[t])
        a = a if a > -708.0 else -708.0  # exp(-708) rounds to 0 in float32
        a = a if a < 709.0 else 709.0
        z = a * _LOG2E + _SHIFTER
        scale[t] = z  # its low bits: n = round(a / ln 2)
        n = z - _SHIFTER
        r = (a - n * _LN2_HI) - n * _LN2_LO  # |r| <= ln(2) / 2
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        dots[t] = p * r + 1.0  # exp(r)
    bits = scale.view(np.int64)
    for t in range(first, stop):
        bits[t] = (bits[t] - _SHIFTER_BITS + 1023) << 52  # 2^n
    for t in range(first, stop):
        value = dots[t] * scale[t]
        out[t] = np.float32(value if y[t] == y_i else -value)


@njit(cache=True)
def _rbf_values_checked(arguments):
    """exp(arguments) (clamped to [-708, 709]) by `_rbf_values`, in float64 (tests)."""
    n = arguments.shape[0]
    dots = arguments / 2.0  # gamma = 1, ||x_t||^2 = ||x_i||^2 = 0: the argument is 2 dot
    scale = np.empty(n)
    y = np.ones(n, dtype=np.int8)
    out = np.empty(n, dtype=np.float32)
    _rbf_values(np.zeros(n), 0.0, 1.0, y, y[0], 0, n, dots, scale, out)
    return dots * scale


@intrinsic
def _popcount(typingctx, word):
    """The number of set bits of an unsigned integer (LLVM's ctpop: one instruction)."""
    if not isinstance(word, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return word(word), codegen


def bits_pay(n_features: int, nnz: int, l: int, all_ones: bool) -> bool:
    """Keep the rows as bit sets when every stored value is 1.0 (0/1 features: a9a, w8a, dna)
    and a row's 64-bit words are fewer than its entries: x_t . x_i is then the number of
    common features, popcount(b_t & b_i) summed over the words - an integer, exactly the
    float64 sum of the row gather."""
    return all_ones and l > 0 and (n_features + 63) // 64 * l < nnz


@njit(cache=True, inline="always")
def _bit_dots(bits, i, lo, hi, dots):
    """dots[t] = x_t . x_i for t in [lo, hi) from the bit sets of 0/1 rows."""
    words = bits.shape[1]
    for t in range(lo, hi):
        count = np.uint64(0)
        for w in range(words):
            count += _popcount(bits[t, w] & bits[i, w])  # type: ignore[call-arg]
        dots[t] = np.float64(count)


@njit(cache=True, inline="always")
def _bit_rbf(bits, sq_norms, table, y, i, lo, hi, out):
    """out[t] = y_i y_t exp(-gamma ||x_t - x_i||^2) for 0/1 rows: ||x_t - x_i||^2 = n_t + n_i
    - 2 popcount(b_t & b_i) is an integer k (n_t = ||x_t||^2, the number of ones), and
    table[k] is the float32 value `_rbf_values` gives for it (`rbf_table`): the same
    values without an exp per entry."""
    words = bits.shape[1]
    n_i = np.int64(sq_norms[i])
    y_i = y[i]
    for t in range(lo, hi):
        count = np.uint64(0)
        for w in range(words):
            count += _popcount(bits[t, w] & bits[i, w])  # type: ignore[call-arg]
        value = table[np.int64(sq_norms[t]) + n_i - 2 * np.int64(count)]
        out[t] = value if y[t] == y_i else -value


@njit(cache=True)
def rbf_table(gamma, n_features):
    """float32(exp(-gamma k)) for k = 0 .. 2 n_features, computed by `_rbf_values` (as
    for a column with x_t . x_i = 0, ||x_i||^2 = 0 and ||x_t||^2 = k: the same float64
    argument -gamma k as for any pair of 0/1 rows at squared distance k)."""
    n = 2 * n_features + 1
    sq = np.arange(n).astype(np.float64)
    y = np.ones(n, dtype=np.int8)
    table = np.empty(n, dtype=np.float32)
    _rbf_values(sq, 0.0, gamma, y, y[0], 0, n, np.zeros(n), np.empty(n), table)
    return table


# A kernel column's dot products come from the positional columns (CSC) when their entries
# times this factor are fewer than the row gather's (and the CSC is kept: `csc_pays`).
CSC_FACTOR = 2


def csc_pays(l: int, nnz: int, feature_counts: np.ndarray) -> bool:
    """Keep the positional CSC when, for an average example x_i, the columns of its features
    hold (times CSC_FACTOR) fewer entries than the rows: sum_f c_f^2 / l against nnz, with
    c_f the entries of feature f (x_i has feature f with probability c_f / l)."""
    counts = feature_counts.astype(np.float64)
    return l > 0 and CSC_FACTOR * float(counts @ counts) < float(nnz) * l


@njit(cache=True, inline="always")
def _csc_dots(data, indices, indptr, cdata, cpos, cptr, i, lo, hi, dots):
    """dots[t] = x_t . x_i for t in [lo, hi) from the positional columns (CSC): the entries
    of the columns of x_i's features, added feature by feature in ascending order - the
    order of the row gather, which adds only zeros besides: the same float64 values."""
    for t in range(lo, hi):
        dots[t] = 0.0
    for k in range(indptr[i], indptr[i + 1]):
        v = data[k]
        f = indices[k]
        a = cptr[f]
        b = cptr[f + 1]
        while a < b:  # the first entry at a position >= lo
            middle = (a + b) >> 1
            if cpos[middle] < lo:
                a = middle + 1
            else:
                b = middle
        end = cptr[f + 1]
        while a < end:
            t = cpos[a]
            if t >= hi:
                break
            dots[t] += cdata[a] * v
            a += 1


@njit(cache=True, inline="always")
def _csc_cheaper(indices, indptr, cptr, i, lo, hi, l):
    """True when the positional columns of x_i's features hold (pro rata over [lo, hi))
    less than a third of the entries the row gather reads there: a scattered add costs
    about twice a gathered one, and the column pass also clears [lo, hi)."""
    if cptr.shape[0] == 0:
        return False
    entries = 0
    for k in range(indptr[i], indptr[i + 1]):
        entries += cptr[indices[k] + 1] - cptr[indices[k]]
    return CSC_FACTOR * entries * (hi - lo) < (indptr[hi] - indptr[lo]) * l


@leaf()
def _column_range(rows, kernel, y, i, lo, hi, out):
    """out[t] = y_i y_t K(x_i, x_t) for positions t in [lo, hi), with x_i scattered in the
    dense buffer. rows = (the positional CSR (row t = the example at position t) + buffer,
    (the dense positional rows (0 rows: sparse data), two float64 scratch columns, the
    positional CSC (empty: not kept), the positional bit sets (0 rows: not kept) and the
    rbf values of 0/1 rows by squared distance (empty: not kept))). The dot products come
    from the first of these that is kept and pays: dense rows, bit sets, CSC, else the row
    gather; all give the same float64 values, and so the same kernel values."""
    data, indices, indptr, sq_norms, dense = rows[0]
    Xd, dots, scale, cdata, cpos, cptr, bits, table = rows[1]
    kind, gamma, coef0, degree = kernel
    sq_i = sq_norms[i]
    y_i = y[i]
    if Xd.shape[0] > 0:
        _dense_dots(Xd, i, lo, hi, dots)
    elif bits.shape[0] > 0:
        if kind == _RBF and table.shape[0] > 0:
            _bit_rbf(bits, sq_norms, table, y, i, lo, hi, out)
            return
        _bit_dots(bits, i, lo, hi, dots)
    elif _csc_cheaper(indices, indptr, cptr, i, lo, hi, sq_norms.shape[0]):
        _csc_dots(data, indices, indptr, cdata, cpos, cptr, i, lo, hi, dots)
    else:
        for t in range(lo, hi):
            r = np.uint64(t)  # unsigned: no negative-index wraparound code
            # dot = x_t . x_i  (gather from the scattered x_i)
            dot = 0.0
            for k in range(np.uint64(indptr[r]), np.uint64(indptr[r + _U1])):
                dot += data[k] * dense[np.uint32(indices[k])]
            dots[t] = dot
    if kind == _RBF:
        _rbf_values(sq_norms, sq_i, gamma, y, y_i, lo, hi, dots, scale, out)
        return
    for t in range(lo, hi):
        value = kernel_from_dot(kind, dots[t], sq_i, sq_norms[t], gamma, coef0, degree)
        out[t] = np.float32(value if y[t] == y_i else -value)


# The parallel loops take plain arrays and scalars: Numba's parfor lowering mishandles
# writes through arrays that arrive inside tuple arguments.


@njit(cache=True, parallel=True)
def _column_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale, cdata, cpos,
                     cptr, bits, table, kind, gamma, coef0, degree, y, i, start, stop, out,
                     chunks):
    n = stop - start
    for c in prange(chunks):
        _column_range(((data, indices, indptr, sq_norms, dense),
                       (Xd, dots, scale, cdata, cpos, cptr, bits, table)),
                      (kind, gamma, coef0, degree), y, i, start + c * n // chunks,
                      start + (c + 1) * n // chunks, out)


@njit(cache=True)
def _fill_column(rows, kernel, positions, i, start, stop, out, parallel):
    """out[start:stop] = Q_{i, start:stop} (float32), in parallel when large."""
    _fill_range(rows[0], rows[2], kernel, positions[2], i, start, stop, out, parallel)


@njit(cache=True)
def _fill_range(positional, dense_rows, kernel, y, i, start, stop, out, parallel):
    """`_fill_column` from the arrays it reads (rows[0], rows[2], y). It only passes its
    tuples on (a function that takes an array out of one takes a reference to it)."""
    chunks = parallel[0]
    if chunks > 1 and _fill_work(positional, dense_rows, start, stop) >= parallel[5]:
        _fill_parallel(positional, dense_rows, kernel, y, i, start, stop, out, chunks)
    else:
        _fill_seq(positional, dense_rows, kernel, y, i, start, stop, out)


@leaf()
def _fill_work(positional, dense_rows, start, stop):
    """The work of a column on [start, stop): rows x (features read per row + 8)."""
    indptr = positional[2]
    d = dense_rows[0].shape[0]
    per_row = d if d > 0 else indptr[-1] // max(indptr.shape[0] - 1, 1)
    return (stop - start) * (8 + per_row)


@leaf()
def _fill_seq(positional, dense_rows, kernel, y, i, start, stop, out):
    """`_fill_range` on one thread: x_i scattered into the dense buffer, the column, the
    buffer cleared."""
    _scatter(positional, i, False)
    _column_range((positional, dense_rows), kernel, y, i, start, stop, out)
    _scatter(positional, i, True)


@njit(cache=True)
def _fill_parallel(positional, dense_rows, kernel, y, i, start, stop, out, chunks):
    """`_fill_seq` with the column computed in chunks on `chunks` threads."""
    data, indices, indptr, sq_norms, dense = positional
    Xd, dots, scale, cdata, cpos, cptr, bits, table = dense_rows
    _scatter(positional, i, False)
    _column_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale, cdata, cpos,
                     cptr, bits, table, kernel[0], kernel[1], kernel[2], kernel[3], y, i,
                     start, stop, out, chunks)
    _scatter(positional, i, True)


@leaf()
def _scatter(positional, i, clear):
    """Positional row i into the dense buffer (its entries; `clear`: back to zeros): the
    x_i a kernel column's row gather and CSC pass read."""
    data, indices, indptr, _, dense = positional
    for k in range(indptr[i], indptr[i + 1]):
        dense[indices[k]] = 0.0 if clear else data[k]


@njit(cache=True, nogil=True)
def _gather_positional_rows(rows, perm, chunks, min_work):
    """Row t of the positional CSR = row perm[t] of X (sequential memory in the kernel
    columns; rebuilt after shrinking permutes the positions), then the positional copies
    that are kept (`_positional_sources`). The rows are copied on `chunks` threads when
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
        _gather_rows_parallel(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                              x_sq_norms, Xd, perm, chunks)
    else:
        _gather_rows_range(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                           x_sq_norms, Xd, perm, _ZERO, l)
    _positional_sources(rows)


@njit(cache=True, nogil=True)
def _gather_rows_range(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                       x_sq_norms, Xd, perm, lo, hi):
    """`_gather_positional_rows` for the positions [lo, hi), indptr already filled."""
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
def _gather_rows_parallel(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                          x_sq_norms, Xd, perm, chunks):
    l = perm.shape[0]
    for c in prange(chunks):
        _gather_rows_range(data, indices, indptr, sq_norms, x_data, x_indices, x_indptr,
                           x_sq_norms, Xd, perm, c * l // chunks, (c + 1) * l // chunks)


@njit(cache=True, nogil=True)
def _positional_sources(rows):
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


# ---- the column cache (LIBSVM's Cache: LRU list of variable-length columns) -----------


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
def _cached(i, length, col_len, lru_prev, lru_next, counters):
    """True (a hit, as in `_column`) when the cache holds Q_{i, 0:length}, else False:
    then `_column` computes it. The step loop's hot path: it touches only the cache."""
    if col_len[i] < length or length == 0:
        return False
    _lru_delete(lru_prev, lru_next, i)
    _lru_insert(lru_prev, lru_next, i)
    counters[_HITS] += 1
    return True


@njit(cache=True)
def _get_column(i, length, rows, kernel, positions, cache, counters, parallel):
    """Q_{i, 0:length} (float32; the array may be longer): cached, extended or computed."""
    y = positions[2]
    return _column(i, length, _source(rows, y, counters), kernel, y, cache, counters,
                   parallel, positions[1])


@njit(cache=True, inline="always")
def _source(rows, y, counters):
    """What `_column` computes a missing column from: the positional rows and y, or with
    twins (the regressions) the training rows in problem order and +1 (`_kernel_row`)."""
    if counters[_TWINS] > 0:
        return rows[3]
    return (rows[0], rows[2], y)


@njit(cache=True, inline="always")
def _make_room(more, cache, counters):
    """Evict least recently used entries until `more` floats are free (or none is left)."""
    columns, col_len, lru_prev, lru_next, empty = cache
    head = col_len.shape[0]
    while counters[_CACHE_FREE] < more:
        old = lru_next[head]
        if old == head:
            break
        _lru_delete(lru_prev, lru_next, old)
        columns[old] = empty
        counters[_CACHE_FREE] += col_len[old]
        col_len[old] = 0


@njit(cache=True)
def _column(i, length, source, kernel, y, cache, counters, parallel, local):
    """`_get_column` from the arrays it reads (`_source`: the step loop's cache misses,
    where each array of the arguments costs a reference per call). With twins (the
    regressions), the entries are read from the kernel row of x_i (`_kernel_row`)."""
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
        counters[_CACHE_FREE] -= more
        col_len[i] = length
        n = counters[_TWINS]
        if n > 0:
            # Q_it = y_i y_t K(x_i, x_t) for t in [old_len, length), from x_i's kernel row
            # (variable t is row `_twin_row(local[t])`); the row's lookup as `_kernel_row`'s
            r = _twin_row(local[i], n)
            h = col_len.shape[0] - n + r
            if col_len[h] > 0:
                _lru_delete(lru_prev, lru_next, h)
                _lru_insert(lru_prev, lru_next, h)
                row = columns[h]
            else:
                row = _kernel_row(r, n, kernel, cache, counters, parallel, source)
            if parallel[0] > 1 and more >= parallel[4]:
                _twin_fill_parallel(row, y, local, y[i], n, old_len, length, column,
                                    parallel[0])
            else:
                _twin_fill_seq(row, y, local, y[i], n, old_len, length, column)
        else:
            _fill_range(source[0], source[1], kernel, y, i, old_len, length, column,
                        parallel)
            counters[_EVALS] += more
        columns[i] = column
        counters[_MISSES] += 1
    else:
        column = columns[i]
        counters[_HITS] += 1
    _lru_insert(lru_prev, lru_next, i)
    return column


@njit(cache=True, inline="always")
def _twin_row(local_t, n):
    """The training row of variable `local_t` (problem order) when rows t and n + t are twins."""
    return local_t - n if local_t >= n else local_t


@njit(cache=True)
def _kernel_row(r, n, kernel, cache, counters, parallel, real_rows):
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
        _fill_range(positional, dense_rows, kernel, ones, r, _ZERO, n, row, parallel)
        columns[h] = row
        col_len[h] = n
        counters[_CACHE_FREE] -= n
        counters[_EVALS] += n
    _lru_insert(lru_prev, lru_next, h)
    return row


@njit(cache=True, inline="always")
def _twin_fill_range(row, y, local, y_i, n, lo, hi, out):
    """out[t] = y_i y_t row[twin row of t] for t in [lo, hi)."""
    for t in range(np.uint64(lo), np.uint64(hi)):
        value = row[_twin_row(local[t], n)]
        out[t] = value if y[t] == y_i else -value


@leaf()
def _twin_fill_seq(row, y, local, y_i, n, lo, hi, out):
    _twin_fill_range(row, y, local, y_i, n, lo, hi, out)


@njit(cache=True, parallel=True)
def _twin_fill_parallel(row, y, local, y_i, n, start, stop, out, chunks):
    size = stop - start
    for c in prange(chunks):
        _twin_fill_range(row, y, local, y_i, n, start + c * size // chunks,
                         start + (c + 1) * size // chunks, out)


@njit(cache=True)
def _swap_positions(positions, cache, i, j):
    """LIBSVM's Solver::swap_index + the cache heads (entries: _swap_cached_entries)."""
    for array in positions[:2]:  # perm, local
        array[i], array[j] = array[j], array[i]
    y = positions[2]
    y[i], y[j] = y[j], y[i]
    for array in positions[3:6]:  # cost, diagonal, alpha
        array[i], array[j] = array[j], array[i]
    status = positions[6]
    status[i], status[j] = status[j], status[i]
    for array in positions[7:]:  # G, G_bar, p (the linear term)
        array[i], array[j] = array[j], array[i]
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
def _swap_cached_entries(cache, counters, swaps, n_swaps, parallel):
    """Apply the swaps (i < j) in order to the entries of every cached column; a column that
    covers i but not j is dropped (LIBSVM's Cache::swap_index, batched per column). The
    columns are independent: in parallel when large (one shrinking of a 20,000-variable
    regression swaps thousands of entries in each of thousands of columns)."""
    columns, col_len, lru_prev, lru_next, empty = cache
    if n_swaps == 0:
        return
    head = col_len.shape[0]
    variables = head - counters[_TWINS]  # entries beyond: kernel rows (no positions)
    entries = np.empty(variables, dtype=np.int64)
    n = _ZERO
    h = lru_next[head]
    while h != head:
        if h < variables:
            entries[n] = h
            n += 1
        h = lru_next[h]
    keep = np.ones(n, dtype=np.uint8)
    chunks = parallel[0]
    if chunks > 1 and n * n_swaps >= parallel[4]:
        _swap_entries_parallel(columns, col_len, entries, n, swaps, n_swaps, keep, chunks)
    else:
        _swap_entries_range(columns, col_len, entries, _ZERO, n, swaps, n_swaps, keep)
    for e in range(n):
        if keep[e] == 0:
            h = entries[e]
            _lru_delete(lru_prev, lru_next, h)
            columns[h] = empty
            counters[_CACHE_FREE] += col_len[h]
            col_len[h] = 0


@njit(cache=True)
def _swap_entries_range(columns, col_len, entries, lo, hi, swaps, n_swaps, keep):
    """`_swap_cached_entries` for the columns entries[lo:hi]; keep[e] = 0: drop entry e.
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
def _swap_entries_parallel(columns, col_len, entries, n, swaps, n_swaps, keep, chunks):
    for c in prange(chunks):
        _swap_entries_range(columns, col_len, entries, c * n // chunks,
                            (c + 1) * n // chunks, swaps, n_swaps, keep)
