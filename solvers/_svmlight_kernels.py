"""Numba kernels of the svmlight parser (see `solvers.svmlight` for the format and the API).

Everything here takes and returns only NumPy arrays and scalars. The main kernel,
`_parse_block_kernel`, parses a buffer of lines in a single pass over the bytes and stops
at the first error, returning an error code plus the byte span of the offending token; the
Python side turns codes into messages. Numbers are converted exactly (the double nearest
to the decimal, ties to even, as `float()`): Clinger's fast path where the significand is
at most 2**53 and the power of ten at most 22, else Eisel-Lemire (`solvers._decimal`) for
significands of up to 19 digits, and for longer ones where the truncated significand and
the next one up give the same double. The rare rest (an infinite result, a clamped
exponent, a long significand that does not settle) is returned as a byte span, and
`float()` parses it.

The hot loop is one function on purpose: every call that passes `buf` to another jitted
function (even an `inline="always"` one) costs an atomic incref/decref pair, which was
measured at more than half of the run time. Helpers that take `buf` are only called on
rare paths (numbers outside the inline fast path, errors); `eisel_lemire` takes scalars.

All kernels are compiled with `cache=True` and without fastmath: the fast path relies on
IEEE-754 round-to-nearest of a single multiply or divide.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers._decimal import eisel_lemire

# ---- error codes (messages live in solvers/svmlight.py) ------------------------------------
OK = 0
ERR_NUL = 1
ERR_LINE_TOO_LONG = 2
ERR_MISSING_LABEL = 3
ERR_BAD_LABEL = 4
ERR_NONFINITE_LABEL = 5
ERR_BAD_QID = 6
ERR_BAD_PAIR = 7
ERR_EMPTY_INDEX = 8
ERR_INDEX_ZERO = 9
ERR_NEGATIVE_INDEX = 10
ERR_INDEX_TOO_LARGE = 11
ERR_INDEX_NOT_INCREASING = 12
ERR_EMPTY_VALUE = 13
ERR_BAD_VALUE = 14
ERR_NONFINITE_VALUE = 15

# ---- which output array of _parse_block_kernel ran out of room (grow it, call again)
FULL_NONE = 0
FULL_DATA = 1
FULL_ROWS = 2
FULL_SLOW = 3

# ---- results of _scan_decimal ----------------------------------------------------------
SCAN_OK = 0
SCAN_MALFORMED = 1
SCAN_NONFINITE_WORD = 2  # nan / inf / infinity, any case, optional sign

# 10**0 .. 10**22 are exactly representable in binary64 (Clinger's fast path).
_EXACT_POWERS_OF_TEN = np.array([float(10**k) for k in range(23)], dtype=np.float64)
_MAX_FAST_EXPONENT = 22
_MAX_EXACT_MANTISSA = np.uint64(2**53)
# Significant digits kept (19 always fit a uint64); further ones make the value inexact.
_MAX_SIGNIFICANT_DIGITS = 19
_EXPONENT_CAP = 100_000  # |exponent| beyond this is clamped, and float() parses the token

_SPACE = 32
_TAB = 9
_LF = 10
_CR = 13
_HASH = 35
_PLUS = 43
_MINUS = 45
_DOT = 46
_COLON = 58
_ZERO = 48
_NINE = 57


# bytes that end a token: space, tab, LF, CR (a bare CR is rejected later), '#'
_ENDS_TOKEN = np.zeros(256, dtype=np.bool_)
_ENDS_TOKEN[[_SPACE, _TAB, _LF, _CR, _HASH]] = True
# the inline fast path takes at most this many digits (leading zeros included): 19 digits
# always fit a uint64, and the power of ten is then at most 19 <= 22
_MAX_SIMPLE_DIGITS = 19
_U10 = np.uint64(10)


@njit(cache=True)
def _finish_line(buf, pos: int, n: int):
    """From the end of a line's content, return (index of its LF or n, NUL seen?)."""
    has_nul = False
    # comment or CR: everything up to the LF is skipped, but a NUL is still an error
    while pos < n and buf[pos] != _LF:
        if buf[pos] == 0:
            has_nul = True
        pos += 1
    return pos, has_nul


@njit(cache=True)
def _line_problem(buf, line_start: int, n: int, max_line_bytes: int) -> int:
    """Whole-line checks that outrank token errors: length, then NUL bytes."""
    eol, has_nul = _finish_line(buf, line_start, n)
    if eol - line_start > max_line_bytes:
        return ERR_LINE_TOO_LONG
    if has_nul:
        return ERR_NUL
    return OK


@njit(cache=True)
def _find_token_end(buf, pos: int, n: int) -> int:
    """End of the token at pos (for error messages): next separator or line-content end."""
    while pos < n:
        byte = buf[pos]
        if byte == _SPACE or byte == _TAB or byte == _LF or byte == _HASH:  # noqa: SIM109 - Numba
            break
        if byte == _CR and (pos + 1 >= n or buf[pos + 1] == _LF):
            break
        pos += 1
    return pos


@njit(cache=True)
def _span_contains(buf, start: int, stop: int, byte: int) -> bool:
    for i in range(start, stop):  # noqa: SIM110 - no any(generator) in Numba
        if buf[i] == byte:
            return True
    return False


@njit(cache=True)
def _nonfinite_word_length(buf, pos: int, end: int) -> int:
    """Length of "nan", "inf" or "infinity" (any case) at pos, else 0."""
    # lower-casing an ASCII letter sets bit 0x20; non-letters never match anyway
    if pos + 3 <= end:
        a = buf[pos] | 0x20
        b = buf[pos + 1] | 0x20
        c = buf[pos + 2] | 0x20
        if a == 110 and b == 97 and c == 110:  # "nan"
            return 3
        if a == 105 and b == 110 and c == 102:  # "inf"
            if pos + 8 <= end:
                rest = (105, 110, 105, 116, 121)  # "inity"
                matched = True
                for k in range(5):
                    if (buf[pos + 3 + k] | 0x20) != rest[k]:
                        matched = False
                        break
                if matched:
                    return 8
            return 3
    return 0


@njit(cache=True, inline="always")
def _digits(
    buf,
    p: int,
    end: int,
    shift: int,
    mantissa,
    significant_digits: int,
    decimal_exponent: int,
    n_digits: int,
    too_many_digits: bool,
):
    """Take the run of digits at p into the (uint64) mantissa (at most
    _MAX_SIGNIFICANT_DIGITS significant ones; leading zeros are not counted). `shift` is 0
    in the integer part and 1 in the fraction, where a kept digit or a leading zero lowers
    the decimal exponent; a digit dropped from the integer part raises it.
    Returns the updated (p, mantissa, significant_digits, decimal_exponent, n_digits,
    too_many_digits)."""
    while p < end and buf[p] >= _ZERO and buf[p] <= _NINE:
        digit = buf[p] - _ZERO
        n_digits += 1
        if mantissa != 0 or digit != 0:
            if significant_digits < _MAX_SIGNIFICANT_DIGITS:
                mantissa = mantissa * _U10 + np.uint64(digit)
                significant_digits += 1
                decimal_exponent -= shift
            else:
                too_many_digits = True
                decimal_exponent += 1 - shift
        else:
            decimal_exponent -= shift
        p += 1
    return p, mantissa, significant_digits, decimal_exponent, n_digits, too_many_digits


@njit(cache=True)
def _scan_decimal(buf, pos: int, end: int):
    """Scan `[+-]? (D+ ('.' D*)? | '.' D+) ([eE] [+-]? D+)?` starting at pos.

    Returns (status, stop, value, exact): `stop` is the first byte after the number;
    `exact` says whether `value` is the correctly rounded double (otherwise the caller
    re-parses the span with float()). The caller checks what follows `stop`.
    """
    p = pos
    negative = False
    if p < end and (buf[p] == _MINUS or buf[p] == _PLUS):
        negative = buf[p] == _MINUS
        p += 1
    after_sign = p
    mantissa = np.uint64(0)
    significant_digits = 0
    decimal_exponent = 0
    n_digits = 0
    too_many_digits = False
    # integer part: mantissa = mantissa * 10 + digit, leading zeros not counted
    p, mantissa, significant_digits, decimal_exponent, n_digits, too_many_digits = _digits(
        buf, p, end, 0, mantissa, significant_digits, decimal_exponent, n_digits, too_many_digits
    )
    # fraction: each kept digit also shifts the decimal exponent down by one
    if p < end and buf[p] == _DOT:
        p += 1
        p, mantissa, significant_digits, decimal_exponent, n_digits, too_many_digits = _digits(
            buf,
            p,
            end,
            1,
            mantissa,
            significant_digits,
            decimal_exponent,
            n_digits,
            too_many_digits,
        )
    if n_digits == 0:
        word = _nonfinite_word_length(buf, p, end)
        if word > 0 and p == after_sign:
            return SCAN_NONFINITE_WORD, p + word, 0.0, False
        return SCAN_MALFORMED, p, 0.0, False
    # exponent: [eE][+-]?D+, clamped (float() handles the real value on the slow path)
    clamped = False
    if p < end and (buf[p] | 0x20) == 101:
        p += 1
        exponent_negative = False
        if p < end and (buf[p] == _MINUS or buf[p] == _PLUS):
            exponent_negative = buf[p] == _MINUS
            p += 1
        exponent = 0
        exponent_digits = 0
        while p < end and buf[p] >= _ZERO and buf[p] <= _NINE:
            exponent_digits += 1
            if exponent < _EXPONENT_CAP:
                exponent = exponent * 10 + (buf[p] - _ZERO)
            else:
                clamped = True
            p += 1
        if exponent_digits == 0:
            return SCAN_MALFORMED, p, 0.0, False
        decimal_exponent += -exponent if exponent_negative else exponent
    if mantissa == 0:
        return SCAN_OK, p, -0.0 if negative else 0.0, True  # 0eN is zero for any N
    if clamped:
        return SCAN_OK, p, 0.0, False
    if too_many_digits:
        # the value lies in [mantissa, mantissa + 1) * 10**decimal_exponent: exact where
        # both ends round to the same double
        value, exact = eisel_lemire(mantissa, decimal_exponent)
        above, exact_above = eisel_lemire(mantissa + np.uint64(1), decimal_exponent)
        exact = exact and exact_above and value == above
    elif (mantissa <= _MAX_EXACT_MANTISSA and decimal_exponent <= _MAX_FAST_EXPONENT
          and decimal_exponent >= -_MAX_FAST_EXPONENT):  # Clinger: one exact operation
        exact = True
        if decimal_exponent >= 0:
            value = np.float64(mantissa) * _EXACT_POWERS_OF_TEN[decimal_exponent]
        else:
            value = np.float64(mantissa) / _EXACT_POWERS_OF_TEN[-decimal_exponent]
    else:
        value, exact = eisel_lemire(mantissa, decimal_exponent)
    return SCAN_OK, p, -value if negative else value, exact


@njit(cache=True, nogil=True)
def _parse_block_kernel(
    buf,
    start: int,
    first_line: int,
    max_features: int,
    max_line_bytes: int,
    data,
    indices,
    nnz_start: int,
    indptr,
    labels,
    row_start: int,
    row_lines,
    slow,
):
    """Parse the lines of `buf[start:]` (uint8; the last line may lack its newline).

    Appends to caller-owned output arrays: entries go to `data`/`indices` from
    `nnz_start`; row r of this call goes to `labels[row_start + r]` and
    `indptr[row_start + r + 1]` (its end), with its line number in `row_lines[r]`.
    `slow[i] = (start, stop, target, line)` is a number left for float(): target >= 0 is
    data[target], target < 0 is labels[-target - 1].

    Returns (error, error_line, error_start, error_stop, error_aux,
             nnz_end, n_rows, n_slow, max_index, last_line, stop, full).
    `stop` is where parsing ended: len(buf); the bad line's start on error; or, when an
    array is full (`full` = FULL_DATA / FULL_ROWS / FULL_SLOW), the start of the line that
    did not fit: grow that array and call again from `stop`. Outputs cover only the
    complete rows before `stop`.
    """
    n = buf.shape[0]
    n_slow = 0
    nnz = nnz_start
    n_rows = 0
    max_index = 0
    error = OK
    error_start = 0
    error_stop = 0
    error_aux = 0
    full = FULL_NONE
    line = first_line - 1
    slow_at_line_start = 0
    line_start = start
    pos = start
    while pos < n:
        line_start = pos
        if row_start + n_rows == labels.shape[0] or n_rows == row_lines.shape[0]:
            full = FULL_ROWS
            break
        line += 1
        slow_at_line_start = n_slow
        k = nnz  # next data slot of this line
        previous_index = 0
        token_number = 0  # 0: label, 1: qid or first pair, ...
        p = pos
        # one token per iteration: the label, then an optional qid:<int>, then index:value
        while True:
            while p < n and (buf[p] == _SPACE or buf[p] == _TAB):
                p += 1
            # end of the line's content: end of input, LF, '#', or the CR of a CRLF
            if p >= n:
                break
            byte = buf[p]
            crlf = byte == _CR and (p + 1 >= n or buf[p + 1] == _LF)
            if byte == _LF or byte == _HASH or crlf:  # noqa: SIM109 - plain compares for Numba
                break
            token_start = p
            index = 0
            if token_number > 0:
                if (
                    token_number == 1
                    and byte == 113  # "qid:"
                    and p + 4 <= n
                    and buf[p + 1] == 105
                    and buf[p + 2] == 100
                    and buf[p + 3] == _COLON
                ):
                    p += 4
                    if p < n and (buf[p] == _MINUS or buf[p] == _PLUS):
                        p += 1
                    digits_start = p
                    while p < n and buf[p] >= _ZERO and buf[p] <= _NINE:
                        p += 1
                    if p == digits_start or (p < n and not _ENDS_TOKEN[buf[p]]):
                        error = ERR_BAD_QID
                        error_start = token_start
                        error_stop = _find_token_end(buf, token_start, n)
                        break
                    token_number += 1
                    continue
                if byte < _ZERO or byte > _NINE:
                    if byte == _COLON:
                        error = ERR_EMPTY_INDEX
                    elif (
                        byte == _MINUS and p + 1 < n and buf[p + 1] >= _ZERO and buf[p + 1] <= _NINE
                    ):
                        error = ERR_NEGATIVE_INDEX
                    else:
                        error = ERR_BAD_PAIR
                    error_start = token_start
                    error_stop = _find_token_end(buf, token_start, n)
                    break
                # index = index * 10 + digit, no longer growing once past max_features
                while p < n and buf[p] >= _ZERO and buf[p] <= _NINE:
                    if index <= max_features:
                        index = index * 10 + (buf[p] - _ZERO)
                    p += 1
                if p >= n or buf[p] != _COLON:
                    error = ERR_BAD_PAIR
                elif index == 0:
                    error = ERR_INDEX_ZERO
                elif index > max_features:
                    error = ERR_INDEX_TOO_LARGE
                elif index <= previous_index:
                    error = ERR_INDEX_NOT_INCREASING
                    error_aux = previous_index
                if error != OK:
                    error_start = token_start
                    error_stop = _find_token_end(buf, token_start, n)
                    break
                p += 1  # ':'
                if p >= n or _ENDS_TOKEN[buf[p]]:
                    error = ERR_EMPTY_VALUE
                    error_start = token_start
                    error_stop = p
                    break

            # ---- the number (label or value). Fast path: [+-]?D*(.D*)? with 1..19 digits
            # (a uint64): Clinger's division where mantissa <= 2**53 (10**fraction_digits
            # is exact), else Eisel-Lemire on scalars only (no array passed: no refcount).
            number_start = p
            negative = False
            if buf[p] == _MINUS or buf[p] == _PLUS:
                negative = buf[p] == _MINUS
                p += 1
            mantissa = np.uint64(0)
            n_digits = 0
            fraction_digits = 0
            # mantissa = mantissa * 10 + digit over the integer part (wrapping past 19
            # digits, where it is not used) ...
            while p < n and buf[p] >= _ZERO and buf[p] <= _NINE:
                mantissa = mantissa * _U10 + np.uint64(buf[p] - _ZERO)
                n_digits += 1
                p += 1
            if p < n and buf[p] == _DOT:
                p += 1
                # ... and over the fraction, counting its digits
                while p < n and buf[p] >= _ZERO and buf[p] <= _NINE:
                    mantissa = mantissa * _U10 + np.uint64(buf[p] - _ZERO)
                    n_digits += 1
                    fraction_digits += 1
                    p += 1
            # ... then an exponent [eE][+-]?D+ of at most 5 digits (else _scan_decimal)
            power = -fraction_digits
            if p < n and (buf[p] | 0x20) == 101 and n_digits > 0:
                e = p + 1
                exponent_negative = False
                if e < n and (buf[e] == _MINUS or buf[e] == _PLUS):
                    exponent_negative = buf[e] == _MINUS
                    e += 1
                exponent = 0
                exponent_start = e
                while e < n and e - exponent_start < 5 and buf[e] >= _ZERO and buf[e] <= _NINE:
                    exponent = exponent * 10 + (buf[e] - _ZERO)
                    e += 1
                if e > exponent_start and (e >= n or _ENDS_TOKEN[buf[e]]):
                    p = e
                    power += -exponent if exponent_negative else exponent
            exact = True
            if 0 < n_digits <= _MAX_SIMPLE_DIGITS and (p >= n or _ENDS_TOKEN[buf[p]]):
                if mantissa <= _MAX_EXACT_MANTISSA and -_MAX_FAST_EXPONENT <= power <= 0:
                    value = np.float64(mantissa) / _EXACT_POWERS_OF_TEN[-power]
                elif mantissa <= _MAX_EXACT_MANTISSA and 0 < power <= _MAX_FAST_EXPONENT:
                    value = np.float64(mantissa) * _EXACT_POWERS_OF_TEN[power]
                elif mantissa == 0:
                    value = 0.0
                else:
                    value, exact = eisel_lemire(mantissa, power)
                if negative:
                    value = -value
            else:
                status, p, value, exact = _scan_decimal(buf, number_start, n)
                if status != SCAN_OK or (p < n and not _ENDS_TOKEN[buf[p]]):
                    token_stop = _find_token_end(buf, token_start, n)
                    error_start = token_start
                    error_stop = token_stop
                    is_word = status == SCAN_NONFINITE_WORD and p == token_stop
                    if token_number > 0:
                        error = ERR_NONFINITE_VALUE if is_word else ERR_BAD_VALUE
                    elif _span_contains(buf, token_start, token_stop, _COLON):
                        error = ERR_MISSING_LABEL
                    else:
                        error = ERR_NONFINITE_LABEL if is_word else ERR_BAD_LABEL
                    break
            if not exact:
                if n_slow == slow.shape[0]:
                    full = FULL_SLOW
                    break
                slow[n_slow, 0] = number_start
                slow[n_slow, 1] = p
                slow[n_slow, 2] = k if token_number > 0 else -(row_start + n_rows + 1)
                slow[n_slow, 3] = line
                n_slow += 1
            if token_number > 0:
                if k == data.shape[0]:
                    full = FULL_DATA
                    break
                data[k] = value
                indices[k] = index - 1
                k += 1
                previous_index = index
            else:
                labels[row_start + n_rows] = value
            token_number += 1
        if error != OK or full != FULL_NONE:
            break

        # ---- rest of the line (comment or CR) up to its LF; whole-line checks
        has_nul = False
        while p < n and buf[p] != _LF:
            if buf[p] == 0:
                has_nul = True
            p += 1
        pos = p + 1
        if p - line_start > max_line_bytes:
            error = ERR_LINE_TOO_LONG
        elif has_nul:
            error = ERR_NUL
        if error != OK:
            error_start = line_start
            error_stop = line_start
            break
        if token_number == 0:
            continue  # blank or comment-only line
        # commit the row
        nnz = k
        if previous_index > max_index:
            max_index = previous_index
        indptr[row_start + n_rows + 1] = nnz
        row_lines[n_rows] = line
        n_rows += 1

    error_line = 0
    stop_at = n
    if error != OK or full != FULL_NONE:
        stop_at = line_start
        if full == FULL_ROWS:
            pass  # stopped before starting the line
        else:
            # drop the unfinished line: its slow numbers and (if it did not fit) its number
            n_slow = slow_at_line_start
            if error != OK:
                error_line = line
                # a line that is too long or holds a NUL reports that, whatever else is wrong
                problem = _line_problem(buf, line_start, n, max_line_bytes)
                if problem != OK:
                    error = problem
                    error_start = line_start
                    error_stop = line_start
            else:
                line -= 1
    return (
        error,
        error_line,
        error_start,
        error_stop,
        error_aux,
        nnz,
        n_rows,
        n_slow,
        max_index,
        line,
        stop_at,
        full,
    )
