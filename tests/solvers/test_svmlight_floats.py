"""The parser's numbers are the doubles Python's float() gives (correctly rounded), on
random strings: repr() of random doubles (every binade, subnormals included), random
digit strings of 1-20 digits (and some much longer) with random points, signs and
exponents, decimals within a unit of the 17th-20th digit of the halfway point between two
neighbouring doubles (and those halfway points written out in full), and fixed edge cases.

The default run checks a few hundred thousand strings in seconds; the slow one millions.
"""

from __future__ import annotations

import math
import random
from decimal import ROUND_DOWN, ROUND_UP, Context, Decimal

import numpy as np
import pytest

from solvers import _svmlight_kernels as _k
from solvers.svmlight import ParseLimits, SvmlightError, parse_stream
from solvers.svmlight_outputs import _Outputs

EDGES = [
    "5e-324", "4.9406564584124654e-324", "2.4703282292062327e-324",
    "2.4703282292062328e-324", "2.4703282292062327208828439643411068618252990130716e-324",
    "2.2250738585072011e-308", "2.2250738585072012e-308", "2.2250738585072014e-308",
    "2.225073858507201136057409796709131975934819546351645648e-308",
    "1.7976931348623157e308", "1.7976931348623158e308", "1.797693134862315807e308",
    "179769313486231570814527423731704356798070567525844996598917476803157260780028538760"
    "589558632766878171540458953514382464234321326889464182768467546703537516986049910576"
    "551282076245490090389328944075868508455133942304583236903222948165808459020", "1e308",
    "9007199254740991", "9007199254740992", "9007199254740993", "9007199254740994",
    "9007199254740995", "18014398509481985", "18446744073709551615", "18446744073709551616",
    "9999999999999999999", "10000000000000000000", "99999999999999999999", "1e23", "8.5e-1",
    "0.1", "0.12345678901234567", "1.2345678901234567e-05", "+.5", ".5", "5.", "-5.", "+0",
    "-0", "-0.0", "0e999", "0.0e-999", "1e-400", "-1e-400", "000123.4500e-0002", "1E5",
    "1e+05", "1e-05", "7.2057594037927933e16", "9.999999999999999e22", "1e22", "1e-22",
    "4503599627370496.5", "4503599627370497.5", "2.0000000000000002", "0." + "0" * 330 + "1e330",
    "1" + "0" * 400 + "e-400", "0.1" + "0" * 500, "1" + "0" * 40, "1" * 60,
]


def random_repr(rng: np.random.Generator, n: int) -> list[str]:
    """repr() of doubles with uniformly random bits (finite ones): all binades alike."""
    values = rng.integers(0, 2**64, size=n, dtype=np.uint64, endpoint=False).view(np.float64)
    return [repr(v) for v in values[np.isfinite(values)].tolist()]


def random_decimals(rng: random.Random, n: int) -> list[str]:
    """Random digit strings: 1-20 digits (1 in 20 up to 60), a point anywhere or none, a
    sign or none, an exponent or none (upper-case E, leading zeros, explicit +)."""
    tokens = []
    for _ in range(n):
        count = rng.randint(1, 20) if rng.random() < 0.95 else rng.randint(21, 60)
        digits = "".join(rng.choices("0123456789", k=count))
        point = rng.randint(-1, count)
        if point >= 0:
            digits = digits[:point] + "." + digits[point:]
        sign = rng.choice(("", "", "-", "+"))
        exponent = ""
        if rng.random() < 0.6:
            power = rng.randint(-345, 310) if rng.random() < 0.5 else rng.randint(-30, 30)
            exponent = (rng.choice("eE") + ("-" if power < 0 else rng.choice(("", "+")))
                        + rng.choice(("", "0", "00")) + str(abs(power)))
        tokens.append(sign + digits + exponent)
    return tokens


_EXACT = Context(prec=1200)


def near_halfway(rng: np.random.Generator, n: int) -> list[str]:
    """For random doubles x (normal and subnormal): the exact midpoint between x and the
    next double up, written out in full, and cut to 17-20 significant digits rounded
    down and up (within a unit of the last digit on either side of the tie)."""
    bits = rng.integers(1, 0x7FEFFFFFFFFFFFFF, size=n, dtype=np.int64)
    subnormal = rng.random(n) < 0.1
    bits[subnormal] = rng.integers(1, 2**52, size=int(subnormal.sum()), dtype=np.int64)
    tokens = []
    for low in bits.view(np.float64).tolist():
        high = math.nextafter(low, math.inf)
        middle = _EXACT.divide(_EXACT.add(Decimal(low), Decimal(high)), 2)  # exact
        tokens.append(format(middle, "e"))
        for digits in (17, 18, 19, 20):
            for rounding in (ROUND_DOWN, ROUND_UP):
                cut = Context(prec=digits, rounding=rounding).plus(middle)
                tokens.append(format(cut, "e"))
    return tokens


def assert_parsed_like_float(tokens: list[str], per_row: int = 64) -> None:
    """Every finite token, as a value and (one in per_row) as a label, is float(token)."""
    finite = [t for t in tokens if math.isfinite(float(t))]
    labels, lines = [], []
    for start in range(0, len(finite), per_row):
        row = finite[start:start + per_row]
        labels.append(row[0])
        lines.append(row[0] + " " + " ".join(f"{i + 1}:{t}" for i, t in enumerate(row)))
    text = ("\n".join(lines) + "\n").encode()
    parsed = parse_stream([text], ParseLimits(max_classes=None))
    expected = np.array([float(t) for t in finite])
    if parsed.data.tobytes() != expected.tobytes():
        wrong = np.flatnonzero(parsed.data.view(np.uint64) != expected.view(np.uint64))
        shown = [(finite[i], parsed.data[i], expected[i]) for i in wrong[:5].tolist()]
        raise AssertionError(f"{wrong.size} of {len(finite)} values differ, e.g. {shown}")
    assert parsed.y.tobytes() == np.array([float(t) for t in labels]).tobytes()


def test_edge_cases_are_bit_identical_to_float() -> None:
    assert_parsed_like_float(EDGES * 3, per_row=7)


def test_random_strings_are_bit_identical_to_float() -> None:
    rng = np.random.default_rng(43)
    assert_parsed_like_float(random_repr(rng, 150_000))
    assert_parsed_like_float(random_decimals(random.Random(43), 100_000))
    assert_parsed_like_float(near_halfway(rng, 1_500))


@pytest.mark.slow
def test_millions_of_random_strings_are_bit_identical_to_float() -> None:
    rng = np.random.default_rng(4343)
    for seed in range(4):
        assert_parsed_like_float(random_repr(rng, 1_000_000))
        assert_parsed_like_float(random_decimals(random.Random(seed), 1_000_000))
    assert_parsed_like_float(near_halfway(rng, 50_000))


@pytest.mark.parametrize("token", ["1.7976931348623159e308", "1e309", "-2e308",
                                   "1" + "0" * 309, "179769313486231580793728971405303415080"
                                   "9e269", "1e100000000"])
def test_values_past_the_largest_double_are_refused(token: str) -> None:
    with pytest.raises(SvmlightError, match="NaN or infinite"):
        parse_stream([f"1 1:{token}\n".encode()])
    with pytest.raises(SvmlightError, match="NaN or infinite"):
        parse_stream([f"{token} 1:1\n".encode()])


def slow_path_count(text: bytes) -> int:
    """How many numbers of `text` the kernel leaves to float()."""
    out = _Outputs()
    result = _k._parse_block_kernel(
        np.frombuffer(text, dtype=np.uint8), 0, 1, 10_000_000, 1 << 24, out.data,
        out.indices, 0, out.indptr, out.y, 0, out.row_lines, out.slow)
    assert result[0] == _k.OK and result[11] == _k.FULL_NONE
    return int(result[7])


def test_repr_values_are_converted_in_the_kernel() -> None:
    # 16-17 significant digits, exponents, 21+ digit strings that settle: no float() call
    values = np.random.default_rng(7).standard_normal(500) * 10.0 ** np.arange(-250, 250)
    pairs = " ".join(f"{i + 1}:{v!r}" for i, v in enumerate(values.tolist()))
    line = "0.30000000000000004 " + pairs
    assert slow_path_count((line + " 501:1.00000000000000000000000001\n").encode()) == 0
    # what float() still parses: a halfway case written out in full, a huge exponent
    assert slow_path_count(b"1 1:9007199254740993.0000000000000000000000000000 2:1e-99999999"
                           b"\n") == 2
