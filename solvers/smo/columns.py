"""SMO's kernel columns: kernel values from dot products and one column
Q_i = y_i y_t K(x_i, x_t) over a range of positions (in parallel when large). The dot
products come from the rows in position order (rows.py); the columns are cached by
cache.py."""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

from solvers._kernel_helpers import RBF, kernel_from_dot
from solvers.smo.layout import U1, leaf


@njit(cache=True, nogil=True)
def kernel_diagonal(sq_norms, kernel, out):
    kind, gamma, coef0, degree = kernel
    for t in range(sq_norms.shape[0]):
        # out[t] = K(x_t, x_t)   (LIBSVM's QD)
        sq = sq_norms[t]
        out[t] = kernel_from_dot(kind, sq, sq, sq, gamma, coef0, degree)


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
    words = np.uint64(bits.shape[1])
    row_i = np.uint64(i)
    for t in range(np.uint64(lo), np.uint64(hi)):
        count = np.uint64(0)
        for w in range(words):
            count += _popcount(bits[t, w] & bits[row_i, w])  # type: ignore[call-arg]
        dots[t] = np.float64(count)


@njit(cache=True, inline="always")
def _bit_rbf(bits, sq_norms, table, y, i, lo, hi, out):
    """out[t] = y_i y_t exp(-gamma ||x_t - x_i||^2) for 0/1 rows: ||x_t - x_i||^2 = n_t + n_i
    - 2 popcount(b_t & b_i) is an integer k (n_t = ||x_t||^2, the number of ones), and
    table[k] is the float32 value `_rbf_values` gives for it (`rbf_table`): the same
    values without an exp per entry."""
    words = np.uint64(bits.shape[1])
    n_i = np.int64(sq_norms[i])
    y_i = y[i]
    row_i = np.uint64(i)
    for t in range(np.uint64(lo), np.uint64(hi)):
        count = np.uint64(0)
        for w in range(words):
            count += _popcount(bits[t, w] & bits[row_i, w])  # type: ignore[call-arg]
        value = table[np.uint64(np.int64(sq_norms[t]) + n_i - 2 * np.int64(count))]
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
def column_range(rows, kernel, y, i, lo, hi, out):
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
        if kind == RBF and table.shape[0] > 0:
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
            for k in range(np.uint64(indptr[r]), np.uint64(indptr[r + U1])):
                dot += data[k] * dense[np.uint32(indices[k])]
            dots[t] = dot
    if kind == RBF:
        _rbf_values(sq_norms, sq_i, gamma, y, y_i, lo, hi, dots, scale, out)
        return
    for t in range(lo, hi):
        value = kernel_from_dot(kind, dots[t], sq_i, sq_norms[t], gamma, coef0, degree)
        out[t] = np.float32(value if y[t] == y_i else -value)


# The parallel loops take plain arrays and scalars: Numba's parfor lowering mishandles
# writes through arrays that arrive inside tuple arguments.


@njit(cache=True, parallel=True)
def column_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale, cdata, cpos,
                    cptr, bits, table, kind, gamma, coef0, degree, y, i, start, stop, out,
                    chunks):
    n = stop - start
    for c in prange(chunks):
        column_range(((data, indices, indptr, sq_norms, dense),
                      (Xd, dots, scale, cdata, cpos, cptr, bits, table)),
                     (kind, gamma, coef0, degree), y, i, start + c * n // chunks,
                     start + (c + 1) * n // chunks, out)


@njit(cache=True)
def _fill_column(rows, kernel, positions, i, start, stop, out, parallel):
    """out[start:stop] = Q_{i, start:stop} (float32), in parallel when large."""
    fill_range(rows[0], rows[2], kernel, positions.y, i, start, stop, out, parallel)


@njit(cache=True)
def fill_range(positional, dense_rows, kernel, y, i, start, stop, out, parallel):
    """`_fill_column` from the arrays it reads (rows[0], rows[2], y). It only passes its
    tuples on (a function that takes an array out of one takes a reference to it)."""
    chunks = parallel.chunks
    if chunks > 1 and _fill_work(positional, dense_rows, start, stop) >= parallel.min_kernel:
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
    """`fill_range` on one thread: x_i scattered into the dense buffer, the column, the
    buffer cleared."""
    scatter(positional, i, False)
    column_range((positional, dense_rows), kernel, y, i, start, stop, out)
    scatter(positional, i, True)


@njit(cache=True)
def _fill_parallel(positional, dense_rows, kernel, y, i, start, stop, out, chunks):
    """`_fill_seq` with the column computed in chunks on `chunks` threads."""
    data, indices, indptr, sq_norms, dense = positional
    Xd, dots, scale, cdata, cpos, cptr, bits, table = dense_rows
    scatter(positional, i, False)
    column_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale, cdata, cpos,
                    cptr, bits, table, kernel[0], kernel[1], kernel[2], kernel[3], y, i,
                    start, stop, out, chunks)
    scatter(positional, i, True)


@leaf()
def scatter(positional, i, clear):
    """Positional row i into the dense buffer (its entries; `clear`: back to zeros): the
    x_i a kernel column's row gather and CSC pass read."""
    data, indices, indptr, _, dense = positional
    for k in range(indptr[i], indptr[i + 1]):
        dense[indices[k]] = 0.0 if clear else data[k]
