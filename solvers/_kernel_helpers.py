"""The small compiled helpers that the kernels of several modules inline or call: the
sparse row loops, the xorshift64* generator, scikit-learn's LIBLINEAR generator (MT19937
and its bounded integers) and the kernel values of the kernel SVMs.

One copy each. Numba's on-disk cache checks a compiled function against its own source
file only, so a kernel that inlined an older helper would be loaded after the helper
changed; `solvers/__init__.py` therefore keys the whole cache folder by a hash of every
source of this package, and an edit here compiles every kernel again.

Loop counters and column indices are unsigned (`np.uint64`, `np.uint32`): no
negative-index wraparound code in the innermost loops.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from numba import njit, prange

# Kernel codes (LIBSVM's kernel_type).
LINEAR, POLY, RBF, SIGMOID = 0, 1, 2, 3

_U11, _U12, _U25, _U27, _U32 = (np.uint64(v) for v in (11, 12, 25, 27, 32))
_XORSHIFT_MULTIPLIER = np.uint64(0x2545F4914F6CDD1D)
_U32_LIMIT = 1 << 32
_INV_2_53 = 1.0 / 9007199254740992.0
# MT19937 (std::mt19937, numpy's legacy RandomState): 624 words, the state's last slot is
# the position of the next word; all in uint64 slots holding 32-bit values.
MT_WORDS = 624
_MT_SHIFT = 397
_U1, _U7, _U15, _U18 = (np.uint64(v) for v in (1, 7, 15, 18))
_MASK32 = np.uint64(0xFFFFFFFF)
_UPPER_BIT, _LOWER_BITS = np.uint64(0x80000000), np.uint64(0x7FFFFFFF)
_MATRIX_A = np.uint64(0x9908B0DF)
_TEMPER_B, _TEMPER_C = np.uint64(0x9D2C5680), np.uint64(0xEFC60000)
_TWO_32 = np.uint64(1 << 32)


@njit(cache=True, inline="always")
def row_dot(w, data, indices, start, end):
    """w[indices[start:end]] @ data[start:end] (start, end: np.uint64)."""
    total = 0.0
    for k in range(start, end):
        total += w[np.uint32(indices[k])] * data[k]
    return total


@njit(cache=True, inline="always")
def row_axpy(scale, data, indices, start, end, w):
    """w[indices[start:end]] += scale * data[start:end] (start, end: np.uint64)."""
    for k in range(start, end):
        w[np.uint32(indices[k])] += scale * data[k]


@njit(cache=True, parallel=True)
def signed_margins(rows, y, w, bias_scale, bounds, out):
    """out_i = y_i (x_i . w[:d] + B w[d]), rows in parallel (`bounds`: row chunks of about
    equal nnz, solvers.parallel; each chunk owns its slice of out)."""
    bias_term = w[w.shape[0] - 1] * bias_scale
    for c in prange(bounds.shape[0] - 1):
        for i in range(bounds[c], bounds[c + 1]):
            out[i] = row_margin(w, rows, i, y[i], bias_term)


@njit(cache=True, inline="always")
def row_margin(w, rows, i, y_i, bias_term):
    """y_i (x_i . w[:d] + bias_term) for row i of rows = (data, indices, indptr)."""
    data, indices, indptr = rows
    dot = row_dot(w, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]))
    return y_i * (dot + bias_term)


@njit(cache=True, parallel=True)
def reduce_chunks(chunk_acc, out):
    """out = chunk_acc.sum(axis=0), summed in chunk order; each thread owns a column slice."""
    n_chunks, size = chunk_acc.shape
    for j in prange(size):
        total = 0.0
        for c in range(n_chunks):
            total += chunk_acc[c, j]
        out[j] = total


@njit(cache=True, inline="always")
def next_raw(rng):
    """The next 64-bit output of the xorshift64* generator with state rng[0]."""
    x = rng[0]
    x ^= x >> _U12
    x ^= x << _U25
    x ^= x >> _U27
    rng[0] = x
    return x * _XORSHIFT_MULTIPLIER


@njit(cache=True)
def next_below(rng, bound):
    """A pseudo-random integer in [0, bound) from the xorshift64* state rng[0]."""
    r = next_raw(rng)
    if bound < _U32_LIMIT:
        # Lemire's multiply-shift on the high 32 bits
        return np.int64(((r >> _U32) * np.uint64(bound)) >> _U32)
    return np.int64(r % np.uint64(bound))


@njit(cache=True, inline="always")
def shuffle_prefix(index, size, rng):
    """index[:size] = a random permutation of itself (Fisher-Yates)."""
    for t in range(size - 1):
        j = t + next_below(rng, size - t)
        swap = index[t]
        index[t] = index[j]
        index[j] = swap


@njit(cache=True)
def mt_next(state):
    """The next raw 32-bit output of the MT19937 state (MT_WORDS words, then the position)."""
    position = state[MT_WORDS]
    if position >= MT_WORDS:
        for k in range(MT_WORDS):
            y = (state[k] & _UPPER_BIT) | (state[(k + 1) % MT_WORDS] & _LOWER_BITS)
            value = state[(k + _MT_SHIFT) % MT_WORDS] ^ (y >> _U1)
            if y & _U1:
                value ^= _MATRIX_A
            state[k] = value
        position = np.uint64(0)
    y = state[position]
    state[MT_WORDS] = position + _U1
    y ^= y >> _U11
    y ^= (y << _U7) & _TEMPER_B
    y ^= (y << _U15) & _TEMPER_C
    y ^= y >> _U18
    return y & _MASK32


@njit(cache=True)
def bounded_rand_int(state, bound):
    """scikit-learn's bounded_rand_int(bound) (sklearn/svm/src/newrand/newrand.h: the tweaked
    Lemire method on 32-bit outputs) from the MT19937 state; 0 < bound < 2**32."""
    span = np.uint64(bound)
    m = mt_next(state) * span
    low = m & _MASK32
    if low < span:
        t = (_TWO_32 - span) & _MASK32
        if t >= span:
            t -= span
            if t >= span:
                t %= span
        while low < t:
            m = mt_next(state) * span
            low = m & _MASK32
    return np.int64(m >> _U32)


@njit(cache=True)
def liblinear_shuffle(index, size, state):
    """index[:size] permuted as scikit-learn's LIBLINEAR does at the start of a sweep:
    `for (i = 0; i < size; i++) swap(index[i], index[i + bounded_rand_int(size - i)])` (the
    last draw, of range 1, still consumes an output)."""
    for t in range(size):
        j = t + bounded_rand_int(state, size - t)
        swap = index[t]
        index[t] = index[j]
        index[j] = swap


@njit(cache=True, inline="always")
def shuffle_sweep(index, size, rng):
    """The sweep's permutation of index[:size]: Hinge's own (rng: the one-slot xorshift64*
    state) or scikit-learn's LIBLINEAR's (rng: an MT19937 state, mt_state)."""
    if rng.shape[0] == 1:
        shuffle_prefix(index, size, rng)
    else:
        liblinear_shuffle(index, size, rng)


def mt_state(seed: int) -> np.ndarray:
    """The MT19937 state std::mt19937(seed) starts from (init_genrand of the low 32 bits of
    seed, as numpy's legacy RandomState(seed)), in the layout mt_next reads."""
    legacy = cast(tuple[Any, ...], np.random.RandomState(int(seed) & 0xFFFFFFFF).get_state())
    return np.append(np.asarray(legacy[1]).astype(np.uint64), np.uint64(MT_WORDS))


@njit(cache=True)
def next_unit(rng):
    """A pseudo-random float64 in [0, 1) (the top 53 bits)."""
    return np.float64(next_raw(rng) >> _U11) * _INV_2_53


@njit(cache=True, inline="always")
def powi(base, times):
    """base**times by squaring, exactly as LIBSVM's powi."""
    tmp = base
    ret = 1.0
    t = times
    while t > 0:
        if t % 2 == 1:
            ret *= tmp
        tmp = tmp * tmp
        t //= 2
    return ret


@njit(cache=True, inline="always")
def kernel_from_dot(kind, dot, sq_a, sq_b, gamma, coef0, degree):
    """K(a, b) from a.b and the squared norms (kind: LIBSVM's kernel_type)."""
    if kind == RBF:
        return math.exp(-gamma * (sq_a + sq_b - 2.0 * dot))
    if kind == LINEAR:
        return dot
    if kind == POLY:
        return powi(gamma * dot + coef0, degree)
    return math.tanh(gamma * dot + coef0)
