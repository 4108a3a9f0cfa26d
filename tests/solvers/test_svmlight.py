"""Tests of the compiled svmlight parser (solvers/svmlight.py)."""

from __future__ import annotations

import bz2
import contextlib
import gzip
import io
import lzma
import math
import pickle
import struct
import time
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solvers.svmlight import (
    ParsedDataset,
    ParseLimits,
    SizeLimitError,
    StreamDecompressor,
    SvmlightError,
    SvmlightParser,
    dump_svmlight,
    load_svmlight,
    open_decompressed,
    parse_stream,
)
from testkit import bundled
from tests.support import SHARED_DATA, data_file

try:
    from tests.solvers.naive_svmlight import naive_parse
except ImportError:  # tests/ is not a package: pytest put this directory on sys.path
    from naive_svmlight import naive_parse  # type: ignore[no-redef]

DATA_DIR = SHARED_DATA


def parse(text: bytes, limits: ParseLimits | None = None, **kwargs) -> ParsedDataset:
    parser = SvmlightParser(limits, **kwargs)
    parser.feed(text)
    return parser.finish()


def arrays(result: ParsedDataset):
    return result.data, result.indices, result.indptr, result.y, result.n_features


def assert_same_arrays(left, right) -> None:
    """Bit-identical (so -0.0 != 0.0) arrays and equal n_features."""
    *left_arrays, left_features = left
    *right_arrays, right_features = right
    assert left_features == right_features
    for a, b in zip(left_arrays, right_arrays, strict=True):
        assert a.dtype == b.dtype
        assert a.shape == b.shape
        assert a.tobytes() == b.tobytes()


# ---- valid input ------------------------------------------------------------------------

VALID = {
    "basic": (b"1 1:0.5 3:2\n-1 2:1\n", [1.0, -1.0], [0, 2, 3], [0, 2, 1], [0.5, 2.0, 1.0]),
    "label forms": (
        b"+1\n-1\n1.0\n-1.0\n0\n2\n1e0\n.5\n3.\n",
        [1.0, -1.0, 1.0, -1.0, 0.0, 2.0, 1.0, 0.5, 3.0],
        [0] * 10,
        [],
        [],
    ),
    "explicit zeros kept": (b"1 1:0 2:0.0 3:-0\n", [1.0], [0, 3], [0, 1, 2], [0.0, 0.0, -0.0]),
    "blank and comment lines": (
        b"\n# header\n   \n1 1:1\n\t\n# c 1:x\n-1 2:2 # trailing\n\n",
        [1.0, -1.0],
        [0, 1, 2],
        [0, 1],
        [1.0, 2.0],
    ),
    "crlf": (b"1 1:1\r\n-1 2:2\r\n", [1.0, -1.0], [0, 1, 2], [0, 1], [1.0, 2.0]),
    "crlf after comment": (b"1 1:1 # c\r\n", [1.0], [0, 1], [0], [1.0]),
    "final cr": (b"1 1:1\r", [1.0], [0, 1], [0], [1.0]),
    "comment glued to value": (b"1 1:1#c\n", [1.0], [0, 1], [0], [1.0]),
    "qid ignored": (b"3 qid:1 1:1\n2 qid:-7 2:2\n", [3.0, 2.0], [0, 1, 2], [0, 1], [1.0, 2.0]),
    "tabs and spaces": (b"1\t1:1 \t 2:2\t\n", [1.0], [0, 2], [0, 1], [1.0, 2.0]),
    "leading whitespace": (b"   1 1:1\n", [1.0], [0, 1], [0], [1.0]),
    "no final newline": (b"1 1:1\n2 2:2", [1.0, 2.0], [0, 1, 2], [0, 1], [1.0, 2.0]),
    "row without features": (b"1\n-1 5:1\n", [1.0, -1.0], [0, 0, 1], [4], [1.0]),
    "leading zeros in index": (b"1 007:1\n", [1.0], [0, 1], [6], [1.0]),
    "exponents": (
        b"1 1:1e3 2:-2.5E-3 3:+4e+2 4:0e99999\n",
        [1.0],
        [0, 4],
        [0, 1, 2, 3],
        [1000.0, -0.0025, 400.0, 0.0],
    ),
}


@pytest.mark.parametrize("name", list(VALID))
def test_valid_variants(name: str) -> None:
    text, y, indptr, indices, data = VALID[name]
    result = parse(text)
    assert result.y.tolist() == y
    assert result.indptr.tolist() == indptr
    assert result.indices.tolist() == indices
    assert result.data.tolist() == data
    assert result.data.dtype == np.float64 and result.y.dtype == np.float64
    assert result.indices.dtype == np.int32 and result.indptr.dtype == np.int64
    assert result.bytes_read == len(text)
    assert_same_arrays(arrays(result), naive_parse(text))


def test_explicit_zeros_match_sklearn() -> None:
    from sklearn.datasets import load_svmlight_file

    text = b"1 1:0 3:1.5\n-1 2:0.0\n"
    X, _ = load_svmlight_file(io.BytesIO(text), zero_based=False)
    result = parse(text)
    assert result.data.tolist() == X.data.tolist()
    assert result.indices.tolist() == X.indices.tolist()
    assert X.nnz == 3 == result.nnz


def test_negative_zero_is_kept_bit_exact() -> None:
    result = parse(b"-0 1:-0.0 2:-0e5\n")
    assert math.copysign(1.0, result.y[0]) == -1.0
    assert [math.copysign(1.0, v) for v in result.data] == [-1.0, -1.0]


SMALL_FILE = (
    b"# comment line\n"
    b"+1 qid:3 1:0.5 3:-2e3 7:1.25e-300\r\n"
    b"\n"
    b"-1.0\t2:0.1234567890123456789 4:1e-5   # tail\n"
    b"2 5:0 6:123456789012345678901234567890\n"
    b"   \n"
    b"0 1:.5 2:5. 3:-0\n"
    b"3e0 10:7"
)


def test_chunk_boundaries_at_every_offset() -> None:
    expected = arrays(parse(SMALL_FILE))
    assert_same_arrays(expected, naive_parse(SMALL_FILE))
    for cut in range(len(SMALL_FILE) + 1):
        for block_bytes in (1, 7, 1 << 20):
            parser = SvmlightParser(block_bytes=block_bytes)
            parser.feed(SMALL_FILE[:cut])
            parser.feed(SMALL_FILE[cut:])
            assert_same_arrays(arrays(parser.finish()), expected)


def test_byte_by_byte_feeding() -> None:
    expected = arrays(parse(SMALL_FILE))
    for block_bytes in (1, 16):
        parser = SvmlightParser(block_bytes=block_bytes)
        for i in range(len(SMALL_FILE)):
            parser.feed(SMALL_FILE[i : i + 1])
        assert_same_arrays(arrays(parser.finish()), expected)


def test_sha256_and_bytes_read_are_of_the_text() -> None:
    import hashlib

    result = parse_stream([gzip.compress(SMALL_FILE)])
    assert result.sha256 == hashlib.sha256(SMALL_FILE).hexdigest()
    assert result.bytes_read == len(SMALL_FILE)


def test_many_slow_numbers_and_output_growth() -> None:
    # every value misses the fast path (17 significant digits), more than the initial
    # scratch capacity, on rows longer than the initial data capacity
    rng = np.random.default_rng(0)
    values = rng.standard_normal(150_000)
    lines = []
    for row in range(3):
        part = values[row * 50_000 : (row + 1) * 50_000]
        lines.append(f"{row} " + " ".join(f"{i + 1}:{v!r}" for i, v in enumerate(part.tolist())))
    text = ("\n".join(lines) + "\n").encode()
    result = parse(text, block_bytes=1 << 16)
    assert result.data.tobytes() == values.tobytes()
    assert result.indptr.tolist() == [0, 50_000, 100_000, 150_000]


# ---- invalid input ----------------------------------------------------------------------

BAD = [
    # (text, line, reason substring)
    (b"1 1:1\n1:1 2:2\n", 2, "missing label"),
    (b"1 1:1\n\n:1\n", 3, "missing label"),
    (b"abc 1:1\n", 1, "invalid label"),
    (b"1 1:1\nnan 1:1\n", 2, "NaN or infinite"),
    (b"-inf 1:1\n", 1, "NaN or infinite"),
    (b"1e999 1:1\n", 1, "NaN or infinite"),
    (b"1 1:nan\n", 1, "NaN or infinite"),
    (b"1 1:1\n1 1:Infinity\n", 2, "NaN or infinite"),
    (b"1 1:-1e400\n", 1, "NaN or infinite"),
    (b"1 0:1\n", 1, "index 0"),
    (b"1 1:1\n1 -3:1\n", 2, "negative index"),
    (b"1 3:1 2:1\n", 1, "not greater than"),
    (b"1 2:1 2:1\n", 1, "duplicate index"),
    (b"1 2:1 " + b"0" * 5000 + b"1:1\n", 1, "not greater than"),
    (b"1 2:1 0002:1\n", 1, "duplicate index"),
    (b"1 1:1\n\n\n1 10000001:1\n", 4, "exceeds max_features"),
    (b"1 2000000000:1\n", 1, "exceeds max_features"),
    (b"1 99999999999999999999999999:1\n", 1, "exceeds max_features"),
    (b"1 1:\n", 1, "empty value"),
    (b"1 1: 2:1\n", 1, "empty value"),
    (b"1 :1\n", 1, "empty index"),
    (b"1 1:abc\n", 1, "invalid value"),
    (b"1 1:1.5x\n", 1, "invalid value"),
    (b"1 1:1:1\n", 1, "invalid value"),
    (b"1 1:0x10\n", 1, "invalid value"),
    (b"1 1:1_000\n", 1, "invalid value"),
    (b"1 1:1e\n", 1, "invalid value"),
    (b"1 abc\n", 1, "invalid feature"),
    (b"1 5\n", 1, "invalid feature"),
    (b"1 1:1 qid:2\n", 1, "invalid feature"),
    (b"1 qid:x 1:1\n", 1, "invalid qid"),
    (b"1 qid: 1:1\n", 1, "invalid qid"),
    (b"1 1:1\n1 1:1\x00\n", 2, "NUL byte"),
    (b"1 1:1 # comment \x00\n", 1, "NUL byte"),
    (b"\x00", 1, "NUL byte"),
    (b"1 1:1\r2:1\n", 1, "carriage return"),
    (b"1 1:1\r\r\n", 1, "carriage return"),
    (b"1\r 1:1\n", 1, "carriage return"),
    (b"1 1:1\x0b\n", 1, "invalid value"),
]


@pytest.mark.parametrize(("text", "line", "reason"), BAD)
def test_bad_input_names_the_line(text: bytes, line: int, reason: str) -> None:
    for block_bytes in (1, 1 << 20):
        with pytest.raises(SvmlightError) as caught:
            parse(text, block_bytes=block_bytes)
        assert caught.value.line == line
        assert reason in caught.value.reason
        assert str(caught.value) == f"line {line}: {caught.value.reason}"
    with pytest.raises(SvmlightError) as naive_caught:
        naive_parse(text)
    assert naive_caught.value.line == line


@pytest.mark.parametrize("text", [b"", b"\n\n", b"# only a comment\n", b"  \t \r\n"])
def test_no_data_rows(text: bytes) -> None:
    with pytest.raises(SvmlightError) as caught:
        parse(text)
    assert caught.value.line is None
    assert caught.value.reason == "no data rows"
    assert str(caught.value) == "no data rows"


def test_error_after_many_good_lines_across_blocks() -> None:
    text = b"1 1:1 2:2\n" * 100_000 + b"1 2:1 1:1\n"
    with pytest.raises(SvmlightError) as caught:
        parse(text, block_bytes=1 << 16)
    assert caught.value.line == 100_001


def test_max_line_bytes() -> None:
    limits = ParseLimits(max_line_bytes=20)
    exactly = b"1 1:1 2:1 3:1 4:1.25"
    assert len(exactly) == 20
    assert parse(b"1 1:1\n" + exactly + b"\n", limits).n_samples == 2
    assert parse(b"1 1:1\n" + exactly, limits).n_samples == 2
    too_long = b"1 1:1\n" + exactly + b"5\n"
    for block_bytes in (1, 4, 1 << 20):
        with pytest.raises(SvmlightError) as caught:
            parse(too_long, limits, block_bytes=block_bytes)
        assert caught.value.line == 2
        assert "max_line_bytes" in caught.value.reason
    # CRLF and comments count too
    with pytest.raises(SvmlightError) as caught:
        parse(b"1 # " + b"c" * 17 + b"\r\n", limits)
    assert caught.value.line == 1


def test_over_long_line_is_refused_before_it_is_complete() -> None:
    # a line that never ends: the carried partial line is refused once over the limit
    parser = SvmlightParser(ParseLimits(max_line_bytes=1000), block_bytes=64)
    parser.feed(b"1 1:1\n")
    with pytest.raises(SvmlightError) as caught:
        for _ in range(1000):
            parser.feed(b"1" * 64)
    assert caught.value.line == 2
    assert parser.bytes_read < 2000


def test_max_classes() -> None:
    limits = ParseLimits(max_classes=3)
    assert parse(b"1\n2\n3\n1\n2\n", limits).class_counts == {1.0: 2, 2.0: 2, 3.0: 1}
    text = b"1\n2\n\n3\n1\n4 1:1\n5\n"
    for block_bytes in (1, 1 << 20):
        with pytest.raises(SvmlightError) as caught:
            parse(text, limits, block_bytes=block_bytes)
        assert caught.value.line == 6
        assert "max_classes" in caught.value.reason


def test_no_class_limit_for_regression_targets() -> None:
    """max_classes None: any number of distinct labels (real-valued targets)."""
    text = b"".join(b"%d.5 1:1\n" % i for i in range(2500))
    parsed = parse(text, ParseLimits(max_classes=None))
    assert np.unique(parsed.y).shape[0] == 2500
    with pytest.raises(SvmlightError, match="max_classes"):
        parse(text, ParseLimits(max_classes=2499))


def test_first_error_in_file_order_wins() -> None:
    # a class overflow (line 3) before a syntax error (line 4) in the same block
    with pytest.raises(SvmlightError) as caught:
        parse(b"1\n2\n3\n1 1:x\n", ParseLimits(max_classes=2))
    assert caught.value.line == 3
    # a slow-path infinity (line 2) before a syntax error (line 3)
    with pytest.raises(SvmlightError) as caught:
        parse(b"1 1:1\n1 1:1e400\n1 1:x\n")
    assert caught.value.line == 2


def _peak_traced_bytes(function) -> int:
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_max_features_does_not_allocate() -> None:
    def huge_index() -> None:
        with pytest.raises(SvmlightError) as caught:
            parse(b"1 2000000000:1\n")
        assert caught.value.line == 1

    baseline = _peak_traced_bytes(lambda: parse(b"1 1:1\n"))
    assert _peak_traced_bytes(huge_index) <= baseline + 2**20
    # a large but allowed index allocates nothing per column either
    assert _peak_traced_bytes(lambda: parse(b"1 9999999:1\n")) <= baseline + 2**20
    result = parse(b"1 9999999:1\n")
    assert result.n_features == 9_999_999
    assert result.to_csr().shape == (1, 9_999_999)


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        ParseLimits(max_features=0)
    with pytest.raises(ValueError):
        ParseLimits(max_features=2**31)


def test_parser_cannot_be_reused() -> None:
    parser = SvmlightParser()
    parser.feed(b"1 1:1\n")
    parser.finish()
    with pytest.raises(RuntimeError):
        parser.feed(b"1 1:1\n")
    failed = SvmlightParser()
    with pytest.raises(SvmlightError):
        failed.feed(b"x\n")
        failed.finish()
    with pytest.raises(RuntimeError):
        failed.finish()


def test_errors_pickle() -> None:
    error = pickle.loads(pickle.dumps(SvmlightError(3, "bad")))
    assert (error.line, error.reason, str(error)) == (3, "bad", "line 3: bad")
    size = pickle.loads(pickle.dumps(SizeLimitError(10)))
    assert size.limit == 10


# ---- exact floats -----------------------------------------------------------------------

TRICKY_NUMBERS = [
    "0.1",
    "0.2",
    "0.3",
    "1e23",
    "8.98846567431158e307",
    "1.7976931348623157e308",
    "2.2250738585072014e-308",
    "2.2250738585072011e-308",
    "4.9e-324",
    "5e-324",
    "1e-400",
    "9007199254740993",
    "9007199254740992",
    "9007199254740991",
    "123456789012345678",
    "0.000000000000000000000000000001",
    "100000000000000000000000",
    "1e22",
    "1e-22",
    "123456789012345",
    "1234567890123456",
    "0.1234567890123456789",
    "-0.0",
    "+0",
    "3.",
    ".5",
    "000000000000000000000001.5",
    "1.00000000000000000000000000000000000001",
    "7.2057594037927933e16",
    "2.5e-1",
    "1E5",
    "1e+05",
    "9.999999999999999e22",
]


def test_tricky_numbers_are_bit_identical_to_float() -> None:
    text = "1 " + " ".join(f"{i + 1}:{s}" for i, s in enumerate(TRICKY_NUMBERS)) + "\n"
    text += "".join(f"{s} 1:1\n" for s in TRICKY_NUMBERS)
    result = parse(text.encode())
    expected = np.array([float(s) for s in TRICKY_NUMBERS])
    assert result.data[: len(TRICKY_NUMBERS)].tobytes() == expected.tobytes()
    assert result.y[1:].tobytes() == expected.tobytes()


decimal_numbers = st.builds(
    lambda sign, whole, fraction, exponent: f"{sign}{whole}{fraction}{exponent}",
    st.sampled_from(["", "-", "+"]),
    st.from_regex(r"[0-9]{1,25}", fullmatch=True),
    st.one_of(st.just(""), st.from_regex(r"\.[0-9]{0,25}", fullmatch=True)),
    st.one_of(st.just(""), st.from_regex(r"[eE][+-]?[0-9]{1,3}", fullmatch=True)),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(decimal_numbers, st.floats(allow_nan=False).map(repr)), min_size=1))
def test_random_numbers_are_bit_identical_to_float(tokens: list[str]) -> None:
    finite = [t for t in tokens if math.isfinite(float(t))]
    if not finite:
        return
    text = "0 " + " ".join(f"{i + 1}:{t}" for i, t in enumerate(finite)) + "\n"
    result = parse(text.encode())
    assert result.data.tobytes() == np.array([float(t) for t in finite]).tobytes()


# ---- compression ------------------------------------------------------------------------

COMPRESSORS = {
    "gzip": gzip.compress,
    "bz2": bz2.compress,
    "xz": lzma.compress,
}


@pytest.mark.parametrize("kind", list(COMPRESSORS))
def test_compressed_detected_by_magic_not_name(kind: str, tmp_path: Path) -> None:
    misleading = tmp_path / "dataset.txt"  # compressed content, plain-text name
    misleading.write_bytes(COMPRESSORS[kind](SMALL_FILE))
    expected = arrays(parse(SMALL_FILE))
    assert_same_arrays(arrays(load_svmlight(misleading)), expected)
    # and chunked through parse_stream, 3 bytes at a time
    blob = misleading.read_bytes()
    pieces = [blob[i : i + 3] for i in range(0, len(blob), 3)]
    assert_same_arrays(arrays(parse_stream(pieces)), expected)
    decompressor = StreamDecompressor()
    out = b"".join(b"".join(decompressor.feed(p)) for p in pieces) + b"".join(decompressor.finish())
    assert out == SMALL_FILE
    assert decompressor.format == kind


def test_plain_text_named_like_an_archive(tmp_path: Path) -> None:
    path = tmp_path / "data.svm.gz"
    path.write_bytes(SMALL_FILE)
    assert_same_arrays(arrays(load_svmlight(path)), arrays(parse(SMALL_FILE)))


@pytest.mark.parametrize("kind", list(COMPRESSORS))
def test_concatenated_members(kind: str) -> None:
    compress = COMPRESSORS[kind]
    blob = compress(b"1 1:1\n") + compress(b"2 2:2\n")
    result = parse_stream([blob])
    assert result.y.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("kind", list(COMPRESSORS))
def test_truncated_stream(kind: str) -> None:
    blob = COMPRESSORS[kind](SMALL_FILE * 50)
    for keep in (len(blob) // 2, len(blob) - 1, 7):
        with pytest.raises(SvmlightError) as caught:
            parse_stream([blob[:keep]])
        assert caught.value.line is None
        assert f"truncated or corrupt {kind} stream" in caught.value.reason


@pytest.mark.parametrize("kind", list(COMPRESSORS))
def test_corrupt_stream(kind: str) -> None:
    blob = bytearray(COMPRESSORS[kind](SMALL_FILE * 50))
    for i in range(12, len(blob) - 12, 5):
        blob[i] ^= 0x55
    with pytest.raises(SvmlightError) as caught:
        parse_stream([bytes(blob)])
    assert caught.value.line is None  # the decoder (or a CRC) fails before any text does


def test_trailing_garbage_after_gzip() -> None:
    with pytest.raises(SvmlightError) as caught:
        parse_stream([gzip.compress(b"1 1:1\n") + b"garbage"])
    assert "trailing garbage" in caught.value.reason
    # NUL padding is tolerated
    assert parse_stream([gzip.compress(b"1 1:1\n") + b"\0" * 8]).y.tolist() == [1.0]


def test_plain_max_bytes() -> None:
    text = b"1 1:1\n" * 100
    assert parse_stream([text], ParseLimits(max_bytes=len(text))).n_samples == 100
    with pytest.raises(SizeLimitError) as caught:
        parse_stream([text[:300], text[300:]], ParseLimits(max_bytes=len(text) - 1))
    assert caught.value.limit == len(text) - 1
    parser = SvmlightParser(ParseLimits(max_bytes=10))
    with pytest.raises(SizeLimitError):
        parser.feed(b"1 1:1\n1 1:1\n")


@pytest.mark.parametrize("kind", ["plain", *COMPRESSORS])
def test_size_limit_stops_reading(kind: str) -> None:
    values = np.random.default_rng(1).random(20_000).tolist()
    text = "".join(f"1 1:{v!r}\n" for v in values).encode()  # 480 kB, hard to compress
    fast = {
        "gzip": lambda t: gzip.compress(t, 1),
        "bz2": lambda t: bz2.compress(t, 1),
        "xz": lambda t: lzma.compress(t, preset=0),
    }  # bz2 -1: 100 kB blocks
    blob = text if kind == "plain" else fast[kind](text)
    consumed = []

    def chunks():
        for i in range(0, len(blob), 1000):
            consumed.append(i)
            yield blob[i : i + 1000]

    with pytest.raises(SizeLimitError):
        parse_stream(chunks(), ParseLimits(max_bytes=len(text) // 10))
    assert len(consumed) < len(range(0, len(blob), 1000))


def _gzip_bomb(expanded_gib: int = 1) -> bytes:
    """~1 MB of gzip (concatenated members of blank lines) that expands to > 1 GiB."""
    member = gzip.compress(b"\n" * (16 * 2**20), 9)
    return member * (64 * expanded_gib)


def _bz2_bomb() -> bytes:
    stream = bz2.compress(b"\n" * 2**20, 9)
    return stream * 1100


@pytest.mark.parametrize("make_bomb", [_gzip_bomb, _bz2_bomb], ids=["gzip", "bz2"])
def test_decompression_bomb_is_refused_fast_with_bounded_memory(make_bomb) -> None:
    bomb = make_bomb()
    assert len(bomb) < 1_100_000
    cap = 8 * 2**20
    chunks = [bomb[i : i + 65536] for i in range(0, len(bomb), 65536)]
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(SizeLimitError) as caught:
            parse_stream(iter(chunks), ParseLimits(max_bytes=cap))
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.limit == cap
    assert elapsed < 3.0
    assert peak < 48 * 2**20


def test_single_stream_bomb_expands_one_step_at_a_time() -> None:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = b"\n" * 2**20
    blob = b"".join(compressor.compress(zeros) for _ in range(48)) + compressor.flush()
    assert len(blob) < 60_000  # 48 MiB behind < 60 kB
    decompressor = StreamDecompressor(max_output_bytes=4 * 2**20, step_bytes=2**18)
    pieces = []
    with pytest.raises(SizeLimitError):
        for piece in decompressor.iter_feed(blob):  # one feed with the whole bomb
            assert len(piece) <= 2**18
            pieces.append(len(piece))
    assert sum(pieces) <= 4 * 2**20
    # without a cap the output is still produced in bounded steps
    sizes = [len(p) for p in open_decompressed([blob], step_bytes=2**20)]
    assert max(sizes) <= 2**20 and sum(sizes) == 48 * 2**20


def test_xz_that_needs_too_much_memory_is_refused() -> None:
    # a valid xz stream whose block header asks for a 4 GiB LZMA2 dictionary
    blob = bytearray(lzma.compress(b"1 1:1\n"))
    assert blob[12] == 0x02 and blob[14:16] == b"\x21\x01"  # 12-byte header, LZMA2
    blob[16] = 40  # dictionary size code for 4 GiB - 1
    blob[20:24] = struct.pack("<I", zlib.crc32(bytes(blob[12:20])))
    assert lzma.decompress(bytes(blob)) == b"1 1:1\n"  # valid without a memory limit
    with pytest.raises(SvmlightError) as caught:
        parse_stream([bytes(blob)])
    assert caught.value.line is None
    assert "memory" in caught.value.reason


def test_gzip_header_is_not_confused_with_text() -> None:
    # a text starting with the two gzip magic bytes is treated as gzip and refused
    with pytest.raises(SvmlightError) as caught:
        parse_stream([b"\x1f\x8b" + b"1 1:1\n"])
    assert "gzip" in caught.value.reason


# ---- real data ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sklearn_loader():
    from sklearn.datasets import load_svmlight_file

    return load_svmlight_file


def check_file_matches_sklearn_and_naive(path: Path, sklearn_loader) -> None:
    text = lzma.decompress(path.read_bytes())
    result = load_svmlight(path)
    X, y = sklearn_loader(io.BytesIO(text), zero_based=False)
    assert result.data.tobytes() == X.data.astype(np.float64).tobytes()
    assert np.array_equal(result.indices, X.indices)
    assert np.array_equal(result.indptr, X.indptr)
    assert result.y.tobytes() == y.tobytes()
    assert result.n_features == X.shape[1]
    assert result.bytes_read == len(text)
    csr = result.to_csr()
    assert csr.shape == X.shape and (csr != X).nnz == 0
    assert_same_arrays(arrays(result), naive_parse(text))


@pytest.mark.parametrize("name", bundled.NAMES)
def test_bundled_files_match_sklearn_and_naive(name: str, sklearn_loader,
                                               tmp_path: Path) -> None:
    check_file_matches_sklearn_and_naive(bundled.write_xz(name, tmp_path), sklearn_loader)


@pytest.mark.parity
@pytest.mark.parametrize("name", ["heart_scale", "a9a", "w8a", "ijcnn1"])
def test_shared_files_match_sklearn_and_naive(name: str, sklearn_loader) -> None:
    check_file_matches_sklearn_and_naive(data_file(f"{name}.xz"), sklearn_loader)


def test_facts_of_a_bundled_file(tmp_path: Path) -> None:
    import hashlib

    X, y = bundled.load("onehot")
    result = load_svmlight(bundled.write_xz("onehot", tmp_path))
    d = int(X.indices.max()) + 1  # the file knows the columns it uses
    assert (result.n_samples, result.n_features, result.nnz) == (X.shape[0], d, X.nnz)
    labels, counts = np.unique(y, return_counts=True)
    assert result.class_counts == dict(zip(labels.tolist(), counts.tolist(), strict=True))
    assert result.labels.tolist() == labels.tolist()
    assert result.sha256 == hashlib.sha256(bundled.svmlight_bytes("onehot")).hexdigest()
    assert result.to_csr(d + 1).shape == (X.shape[0], d + 1)
    with pytest.raises(ValueError):
        result.to_csr(d - 1)


@pytest.mark.parity
def test_manifest_facts() -> None:
    path = data_file("a9a.t.xz")
    result = load_svmlight(path)
    assert result.n_samples == 16_281 and result.n_features == 122 and result.nnz == 225_731
    assert result.class_counts == {-1.0: 12_435, 1.0: 3_846}
    assert result.labels.tolist() == [-1.0, 1.0]
    assert result.sha256.startswith("1f448a153f032039")
    assert result.to_csr(123).shape == (16_281, 123)
    with pytest.raises(ValueError):
        result.to_csr(100)


# ---- dump and round trip ----------------------------------------------------------------


@st.composite
def sparse_problems(draw):
    n_rows = draw(st.integers(1, 8))
    n_cols = draw(st.integers(1, 12))
    finite = st.floats(allow_nan=False, allow_infinity=False)
    rows, cols, values = [], [], []
    for row in range(n_rows):
        chosen = draw(st.sets(st.integers(0, n_cols - 1), max_size=n_cols))
        for col in sorted(chosen):
            rows.append(row)
            cols.append(col)
            values.append(draw(finite))
    labels = draw(
        st.lists(st.one_of(finite, st.integers(-3, 3).map(float)), min_size=n_rows, max_size=n_rows)
    )
    matrix = scipy.sparse.csr_matrix(
        (np.array(values, dtype=np.float64), (rows, cols)), shape=(n_rows, n_cols)
    )
    return matrix, np.array(labels, dtype=np.float64)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sparse_problems())
def test_dump_then_parse_round_trips(problem) -> None:
    matrix, labels = problem
    buffer = io.BytesIO()
    dump_svmlight(matrix, labels, buffer)
    result = parse(buffer.getvalue())
    assert result.y.tobytes() == labels.tobytes()
    assert result.data.tobytes() == matrix.data.tobytes()  # stored zeros included
    assert np.array_equal(result.indices, matrix.indices)
    assert np.array_equal(result.indptr, matrix.indptr)
    assert result.to_csr(matrix.shape[1]).shape == matrix.shape


def test_dump_to_path_and_text_file(tmp_path: Path) -> None:
    matrix = scipy.sparse.csr_matrix(np.array([[0.0, 1.5], [0.1, 0.0]]))
    labels = np.array([1.0, -1.0])
    path = tmp_path / "out.svm"
    dump_svmlight(matrix, labels, path)
    assert path.read_bytes() == b"1.0 2:1.5\n-1.0 1:0.1\n"
    text = io.StringIO()
    dump_svmlight(matrix, labels, text)
    assert text.getvalue() == "1.0 2:1.5\n-1.0 1:0.1\n"
    with pytest.raises(ValueError):
        dump_svmlight(matrix, np.array([np.nan, 1.0]), io.BytesIO())


# ---- arbitrary bytes ------------------------------------------------------------------------

svmlight_alphabet = st.sampled_from(
    [
        b"1",
        b"0",
        b"2",
        b"9",
        b" ",
        b"\t",
        b":",
        b"\n",
        b"\r",
        b".",
        b"-",
        b"+",
        b"e",
        b"#",
        b"qid:",
        b"nan",
        b"inf",
        b"\x00",
        b"x",
        b"1:1",
        b" 3:0.5",
        b"\n1 ",
        b"1e999",
    ]
)
svmlight_like = st.lists(svmlight_alphabet, max_size=60).map(b"".join)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=200), svmlight_like), st.integers(1, 64))
def test_arbitrary_bytes_parse_or_raise_svmlight_error(text: bytes, block_bytes: int) -> None:
    limits = ParseLimits(max_features=50, max_line_bytes=40, max_classes=3)
    try:
        expected = naive_parse(text, limits)
    except SvmlightError as naive_error:
        with pytest.raises(SvmlightError) as caught:
            parse(text, limits, block_bytes=block_bytes)
        assert caught.value.line == naive_error.line
    else:
        assert_same_arrays(arrays(parse(text, limits, block_bytes=block_bytes)), expected)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_streams_raise_only_documented_errors(blob: bytes) -> None:
    candidates = [blob, b"\x1f\x8b" + blob, b"BZh9" + blob, b"\xfd7zXZ\x00" + blob]
    for candidate in candidates:
        with contextlib.suppress(SvmlightError, SizeLimitError):
            parse_stream([candidate[:5], candidate[5:]], ParseLimits(max_bytes=10_000))
