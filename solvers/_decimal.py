"""Correctly rounded decimal -> binary64 conversion in Numba (Eisel-Lemire).

`eisel_lemire(w, q)` returns the double nearest to ``w * 10**q`` (ties to even), exactly
what Python's ``float()`` / a correct ``strtod`` gives, for a decimal significand
``0 < w < 2**64`` (19 digits always fit) and any ``q``. The method is the one of
Lemire, "Number parsing at a gigabyte per second" (Software: Practice and Experience 51,
2021), as fast_float implements it: multiply the normalised significand by a 128-bit
truncation of ``5**q`` (two 64x64 -> 128-bit products) and read the rounded mantissa off
the high bits. Mushtak and Lemire ("Fast number parsing without fallback", 2023) prove the
128-bit product always suffices for 19-digit significands; the original paper's guard
(an all-ones low word outside ``-27 <= q <= 55``) is kept anyway, and it and results of
infinite magnitude answer ``ok = False``: the caller then parses the token with
``float()``.

The 64x64 -> 128-bit product and the leading-zero count are LLVM's own (`mul` on i128,
`ctlz`), through Numba intrinsics: one instruction each on x86-64.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

SMALLEST_POWER_OF_TEN = -342  # w * 10**q below this is zero for any 19-digit w
LARGEST_POWER_OF_TEN = 308  # above this, infinity for any w >= 1
_ROUND_TO_EVEN_MIN = -4  # ties are only possible for -4 <= q <= 23 (5**q fits 64 bits)
_ROUND_TO_EVEN_MAX = 23
_SAFE_MIN = -27  # the 128-bit truncation of 5**q is exact for -27 <= q <= 55
_SAFE_MAX = 55


def _powers_of_five() -> np.ndarray:
    """(651, 2) uint64: 5**q for q in [-342, 308], normalised to 128 bits (top bit set),
    truncated for q >= 0 and a reciprocal rounded up for q < 0 (fast_float's table)."""
    rows = []
    for q in range(SMALLEST_POWER_OF_TEN, LARGEST_POWER_OF_TEN + 1):
        if q < 0:
            power5 = 5**-q
            z = power5.bit_length()  # 2**z > 5**-q: never a power of two
            b = z + 127 if q >= _SAFE_MIN else 2 * z + 128
            c = 2**b // power5 + 1
            while c >= 1 << 128:
                c //= 2
        else:
            c = 5**q
            c = c << max(0, 128 - c.bit_length())
            c >>= max(0, c.bit_length() - 128)
        rows.append((c >> 64, c & (2**64 - 1)))
    return np.array(rows, dtype=np.uint64)


_POWERS_OF_FIVE = _powers_of_five().reshape(-1)  # hi, lo, hi, lo, ...
# 2**(e - 1075) for a biased exponent e in [1, 2046] (entry 0 unused): mantissa * it is exact
_POWERS_OF_TWO = np.array([0.0] + [2.0 ** (e - 1075) for e in range(1, 2047)])
_SUBNORMAL_UNIT = 2.0**-1074
_ALL_ONES = np.uint64(2**64 - 1)
_PRECISION_MASK = np.uint64((2**64 - 1) >> 55)  # 52 explicit bits + 3
_U1 = np.uint64(1)


@intrinsic
def _mul_128_intrinsic(typingctx, a, b):
    """(high, low) uint64 words of the 128-bit product of two uint64."""
    if a != types.uint64 or b != types.uint64:
        return None
    signature = types.UniTuple(types.uint64, 2)(types.uint64, types.uint64)

    def codegen(context, builder, sig, args):
        wide = ir.IntType(128)
        product = builder.mul(builder.zext(args[0], wide), builder.zext(args[1], wide))
        high = builder.trunc(builder.lshr(product, ir.Constant(wide, 64)), ir.IntType(64))
        low = builder.trunc(product, ir.IntType(64))
        return context.make_tuple(builder, sig.return_type, [high, low])

    return signature, codegen


@intrinsic
def _leading_zeros_intrinsic(typingctx, a):
    """Count of leading zero bits of a uint64 (64 for 0)."""
    if a != types.uint64:
        return None
    signature = types.uint64(types.uint64)

    def codegen(context, builder, sig, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))

    return signature, codegen


# the intrinsics in compiled code (mypy would read their typing-time signatures)
_mul_128: Any = _mul_128_intrinsic
_leading_zeros: Any = _leading_zeros_intrinsic


@njit(cache=True)
def eisel_lemire(w, q):
    """(value, ok): the double nearest to w * 10**q for a uint64 w > 0; ok False where the
    caller must decide otherwise (the guard above, or an infinite result)."""
    if q < SMALLEST_POWER_OF_TEN:
        return 0.0, True
    if q > LARGEST_POWER_OF_TEN:
        return 0.0, False
    lz = _leading_zeros(w)
    w = w << lz
    index = 2 * (q - SMALLEST_POWER_OF_TEN)
    high, low = _mul_128(w, _POWERS_OF_FIVE[index])
    if (high & _PRECISION_MASK) == _PRECISION_MASK:  # the low word may carry into the high
        second_high, _ = _mul_128(w, _POWERS_OF_FIVE[index + 1])
        low = low + second_high
        if second_high > low:
            high = high + _U1
    if low == _ALL_ONES and (q < _SAFE_MIN or q > _SAFE_MAX):
        return 0.0, False
    upper_bit = np.int64(high >> np.uint64(63))
    shift = np.uint64(upper_bit + 9)  # 64 - 52 explicit bits - 3
    mantissa = high >> shift
    power2 = ((217706 * q) >> 16) + 63 + upper_bit - np.int64(lz) + 1023
    if power2 <= 0:  # subnormal (or zero)
        if 1 - power2 >= 64:
            return 0.0, True
        mantissa = mantissa >> np.uint64(1 - power2)
        mantissa = (mantissa + (mantissa & _U1)) >> _U1
        return np.float64(mantissa) * _SUBNORMAL_UNIT, True
    if (low <= _U1 and q >= _ROUND_TO_EVEN_MIN and q <= _ROUND_TO_EVEN_MAX
            and (mantissa & np.uint64(3)) == _U1 and (mantissa << shift) == high):
        mantissa = mantissa ^ _U1  # exactly halfway: do not round up (to even)
    mantissa = (mantissa + (mantissa & _U1)) >> _U1
    if mantissa >= np.uint64(1 << 53):
        mantissa = np.uint64(1 << 52)
        power2 += 1
    if power2 >= 2047:
        return 0.0, False
    return np.float64(mantissa) * _POWERS_OF_TWO[power2], True
