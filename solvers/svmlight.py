"""Streaming, compiled parser for svmlight / LIBSVM text, safe on untrusted input.

Format (one sample per line)::

    <label> [qid:<int>] <index>:<value> <index>:<value> ... [# comment]

* ``label``: a finite decimal float (``+1``, ``-1``, ``1.0``, ``2``, ``1e0``). A line that
  starts with ``index:value`` has no label and is an error.
* ``index``: decimal digits (leading zeros allowed), 1-based, strictly increasing within a
  line; stored 0-based (``file index - 1``) in ``ParsedDataset.indices``.
  ``n_features`` is the largest index seen.
* ``value``: a finite decimal float. Explicit zeros are kept as stored entries, exactly
  like ``sklearn.datasets.load_svmlight_file`` (same nnz); ``-0`` stays ``-0.0``.
* ``qid:<int>`` is accepted only directly after the label, and ignored.
* Separators are spaces and tabs. Lines end with LF or CRLF (a final CR at end of input
  is accepted too); a carriage return anywhere else is an error. ``#`` ends the line's
  content wherever it appears (``1:2#c`` is ``1:2``). Blank and comment-only lines are
  skipped but count in line numbers.
* Numbers follow ``[+-]?(D+(.D*)?|.D+)([eE][+-]?D+)?``; ``nan``/``inf``, hex floats and
  underscores are rejected. Values are bit-identical to Python's ``float()``: the Numba
  kernel uses Clinger's exact fast path (mantissa <= 2**53, |power of ten| <= 22); other
  tokens (long mantissas, big exponents) are handed to ``float()`` by byte span.

Errors: a malformed line raises `SvmlightError` with its 1-based line number and a short
reason: missing label, invalid label/value/feature/qid, NaN or infinity, index 0,
negative / non-increasing / duplicate index, index above ``max_features``, empty ``1:``
or ``:1``, NUL byte (anywhere, comments included), line over ``max_line_bytes``, more
than ``max_classes`` labels. The first bad line in file order is reported; on that line
"too long" outranks "NUL byte", which outranks token errors. No data rows at all gives
``SvmlightError(None, "no data rows")``; damaged compressed input gives
``SvmlightError(None, "truncated or corrupt <format> stream")``.

Limits (`ParseLimits`): ``max_features`` is checked while the index digits are read, so
``1 2000000000:1`` is an error before anything is sized by it (nothing ever is: the
output is CSR); ``max_line_bytes`` also bounds the carried incomplete line, refused as
soon as it is over; ``max_classes`` bounds distinct labels; ``max_bytes`` caps the
decompressed (== plain) bytes, raising `SizeLimitError` as soon as it is exceeded.

Compression: gzip, bz2 and xz are recognised by magic bytes (never by file name) and
decoded incrementally by `StreamDecompressor`, at most ``step_bytes`` of output per step,
so a decompression bomb costs one step of memory before ``max_bytes`` stops it.
Concatenated members are accepted; xz streams needing over 128 MiB to decode are refused.

Streaming and memory: `SvmlightParser.feed` takes chunks of any size. Complete lines are
parsed per block of about ``block_bytes`` (1 MiB) straight from the fed bytes; only the
incomplete last line is carried (and copied) to the next chunk, so the raw text is never
held whole. The kernel appends to the output arrays, which grow by doubling (realloc in
place) and are trimmed in `SvmlightParser.finish`.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import lzma
import math
import os
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse

from solvers import _svmlight_kernels as _k

__all__ = [
    "ParseLimits",
    "ParsedDataset",
    "SizeLimitError",
    "StreamDecompressor",
    "SvmlightError",
    "SvmlightParser",
    "dump_svmlight",
    "load_svmlight",
    "open_decompressed",
    "parse_stream",
]

_INT32_MAX = 2**31 - 1
_READ_BYTES = 1 << 20
_SNIPPET_CHARS = 40
_THREADED_HASH_BYTES = 1 << 18


class SvmlightError(ValueError):
    """Malformed svmlight input. `line` is 1-based (None for file-level problems)."""

    def __init__(self, line: int | None, reason: str) -> None:
        self.line = line
        self.reason = reason
        super().__init__(reason if line is None else f"line {line}: {reason}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.line, self.reason))


class SizeLimitError(ValueError):
    """The (decompressed) input is larger than `limit` bytes."""

    def __init__(self, limit: int, message: str | None = None) -> None:
        self.limit = limit
        super().__init__(message or f"input exceeds the limit of {limit} bytes (decompressed)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.limit, str(self)))


@dataclass
class ParseLimits:
    max_features: int = 10_000_000
    max_line_bytes: int = 16 * 2**20
    max_classes: int = 1000
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.max_features <= _INT32_MAX:
            raise ValueError(f"max_features must be in [1, {_INT32_MAX}]")
        if self.max_line_bytes < 1:
            raise ValueError("max_line_bytes must be >= 1")
        if self.max_classes < 1:
            raise ValueError("max_classes must be >= 1")
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError("max_bytes must be >= 0 or None")


@dataclass
class ParsedDataset:
    data: np.ndarray  # float64, stored values (explicit zeros kept)
    indices: np.ndarray  # int32, 0-based column indices
    indptr: np.ndarray  # int64, len(y) + 1
    y: np.ndarray  # float64 labels
    n_features: int  # largest 1-based index seen (column count)
    sha256: str  # of the decompressed text
    bytes_read: int  # decompressed bytes

    @property
    def n_samples(self) -> int:
        return int(self.y.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0])

    @property
    def labels(self) -> np.ndarray:
        """Sorted distinct label values."""
        return np.unique(self.y)

    @property
    def class_counts(self) -> dict[float, int]:
        values, counts = np.unique(self.y, return_counts=True)
        return {float(v): int(c) for v, c in zip(values, counts, strict=True)}

    def to_csr(self, n_features: int | None = None) -> scipy.sparse.csr_matrix:
        """CSR matrix of shape (n_samples, n_features or self.n_features)."""
        width = self.n_features if n_features is None else int(n_features)
        if width < self.n_features:
            raise ValueError(
                f"n_features={width} is smaller than the largest index in the data "
                f"({self.n_features})"
            )
        return scipy.sparse.csr_matrix(
            (self.data, self.indices, self.indptr), shape=(self.n_samples, width)
        )


# ---- error messages ---------------------------------------------------------------------


def _snippet(raw: bytes) -> str:
    text = raw[:_SNIPPET_CHARS].decode("ascii", "backslashreplace")
    return repr(text + ("..." if len(raw) > _SNIPPET_CHARS else ""))


def _kernel_reason(code: int, token: bytes, aux: int, limits: ParseLimits) -> str:
    shown = _snippet(token)
    if code == _k.ERR_NUL:
        return "NUL byte in input"
    if code == _k.ERR_LINE_TOO_LONG:
        return f"line longer than max_line_bytes ({limits.max_line_bytes} bytes)"
    if b"\r" in token:
        return "carriage return not followed by a line feed (use LF or CRLF line endings)"
    if code == _k.ERR_MISSING_LABEL:
        return f"missing label (line starts with {shown})"
    if code == _k.ERR_BAD_LABEL:
        return f"invalid label {shown} (expected a number)"
    if code == _k.ERR_NONFINITE_LABEL:
        return f"label {shown} is NaN or infinite"
    if code == _k.ERR_BAD_QID:
        return f"invalid qid {shown} (expected qid:<integer>)"
    if code == _k.ERR_BAD_PAIR:
        return f"invalid feature {shown} (expected <index>:<value>)"
    if code == _k.ERR_EMPTY_INDEX:
        return f"empty index in {shown}"
    if code == _k.ERR_INDEX_ZERO:
        return f"index 0 in {shown} (indices are 1-based)"
    if code == _k.ERR_NEGATIVE_INDEX:
        return f"negative index in {shown}"
    if code == _k.ERR_INDEX_TOO_LARGE:
        return f"index in {shown} exceeds max_features ({limits.max_features})"
    if code == _k.ERR_INDEX_NOT_INCREASING:
        # <= max_features once leading zeros are gone (int() refuses > 4300 digits)
        index = int(token.split(b":", 1)[0].lstrip(b"0") or b"0")
        if index == aux:
            return f"duplicate index {index} in {shown}"
        return (
            f"index {index} in {shown} is not greater than the previous index {aux} "
            "(indices must be strictly increasing)"
        )
    if code == _k.ERR_EMPTY_VALUE:
        return f"empty value in {shown}"
    if code == _k.ERR_BAD_VALUE:
        return f"invalid value in {shown} (expected a number)"
    if code == _k.ERR_NONFINITE_VALUE:
        return f"value in {shown} is NaN or infinite"
    return f"unparseable input {shown}"  # pragma: no cover - all codes handled above


# ---- parser ------------------------------------------------------------------------------


class SvmlightParser:
    """Incremental parser: `feed` chunks of any size, then `finish`.

    `block_bytes` is how much new text is gathered before a compiled parse pass runs.
    Memory: one block of text plus the carried incomplete line, plus the parsed arrays
    (grown by doubling, trimmed in `finish`).
    """

    def __init__(self, limits: ParseLimits | None = None, *, block_bytes: int = 1 << 20) -> None:
        self.limits = limits if limits is not None else ParseLimits()
        self._block_bytes = max(1, int(block_bytes))
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._carry = b""
        self._hash = hashlib.sha256()
        self._bytes_read = 0
        self._next_line = 1
        self._classes: set[float] = set()
        self._max_index = 0
        self._out = _Outputs()
        self._state = "open"

    @property
    def bytes_read(self) -> int:
        return self._bytes_read

    @property
    def lines_read(self) -> int:
        """Complete lines parsed so far."""
        return self._next_line - 1

    def feed(self, chunk: bytes) -> None:
        self._check_open()
        if not isinstance(chunk, bytes):
            chunk = bytes(chunk)
        if not chunk:
            return
        self._bytes_read += len(chunk)
        max_bytes = self.limits.max_bytes
        if max_bytes is not None and self._bytes_read > max_bytes:
            self._state = "failed"
            raise SizeLimitError(max_bytes)
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        # re-join the carried line only once as much new text arrived (linear total work)
        if self._pending_bytes >= max(self._block_bytes, len(self._carry)):
            self._guarded(final=False)

    def finish(self) -> ParsedDataset:
        self._check_open()
        self._guarded(final=True)
        self._state = "finished"
        out = self._out
        if out.n_rows == 0:
            raise SvmlightError(None, "no data rows")
        data, indices, indptr, y = out.trimmed()
        self._out = _Outputs(0, 0)
        return ParsedDataset(
            data=data,
            indices=indices,
            indptr=indptr,
            y=y,
            n_features=self._max_index,
            sha256=self._hash.hexdigest(),
            bytes_read=self._bytes_read,
        )

    # -- internals

    def _check_open(self) -> None:
        if self._state != "open":
            raise RuntimeError(f"parser is {self._state}; create a new SvmlightParser")

    def _guarded(self, final: bool) -> None:
        try:
            self._parse_pending(final)
        except BaseException:
            self._state = "failed"
            raise

    def _parse_pending(self, final: bool) -> None:
        pending = self._pending
        text = pending[0] if len(pending) == 1 else b"".join(pending)  # one chunk: no copy
        self._pending = []
        self._pending_bytes = 0
        # sha256 (~1 GB/s) runs in a helper thread while the GIL-free kernel parses
        hashing = _hash_in_background(self._hash, text)
        try:
            self._parse_new_text(text, final)
        finally:
            if hashing is not None:
                hashing.join()

    def _parse_new_text(self, text: bytes, final: bool) -> None:
        start = 0
        if self._carry:
            # finish the carried line on its own, so the new text is never copied
            newline = text.find(b"\n")
            if newline < 0 and not final:
                self._carry += text
                self._check_carry()
                return
            head = self._carry + (text if newline < 0 else text[: newline + 1])
            self._carry = b""
            self._parse_text(head, 0, len(head))
            start = len(text) if newline < 0 else newline + 1
        cut = len(text) if final else max(start, text.rfind(b"\n", start) + 1)
        if cut > start:
            self._parse_text(text, start, cut)
        self._carry = text[cut:]
        self._check_carry()

    def _check_carry(self) -> None:
        """The incomplete last line is refused as soon as it is over max_line_bytes."""
        if len(self._carry) > self.limits.max_line_bytes:
            raise SvmlightError(
                self._next_line,
                f"line longer than max_line_bytes ({self.limits.max_line_bytes} bytes)",
            )

    def _parse_text(self, text: bytes, start: int, cut: int) -> None:
        """Parse text[start:cut] (whole lines) in sub-blocks of about `block_bytes`."""
        buf = np.frombuffer(text, dtype=np.uint8, count=cut)
        position = start
        while position < cut:
            sub_end = cut
            if cut - position > self._block_bytes:
                newline = text.rfind(b"\n", position, position + self._block_bytes)
                if newline < 0:  # a line longer than a block: take it whole
                    newline = text.find(b"\n", position + self._block_bytes, cut)
                if newline >= 0:
                    sub_end = newline + 1
            view = buf[:sub_end]
            while position < sub_end:
                position, full = self._parse_from(text, view, position)
                if full != _k.FULL_NONE:
                    self._out.grow(full)

    def _parse_from(self, text: bytes, buf: np.ndarray, position: int) -> tuple[int, int]:
        """One kernel call from `position`; returns where it stopped and what filled up."""
        limits = self.limits
        out = self._out
        nnz_start, row_start = out.nnz, out.n_rows
        (
            error,
            error_line,
            error_start,
            error_stop,
            error_aux,
            nnz_end,
            n_rows,
            n_slow,
            max_index,
            last_line,
            stop,
            full,
        ) = _k._parse_block_kernel(
            buf,
            position,
            self._next_line,
            limits.max_features,
            limits.max_line_bytes,
            out.data,
            out.indices,
            nnz_start,
            out.indptr,
            out.y,
            row_start,
            out.row_lines,
            out.slow,
        )
        labels = out.y[row_start : row_start + n_rows]
        row_lines = out.row_lines[:n_rows]

        # the first error in file order wins: kernel, slow-path float, or class count
        first_error: SvmlightError | None = None
        if error != _k.OK:
            token = text[error_start:error_stop]
            first_error = SvmlightError(
                int(error_line), _kernel_reason(int(error), token, int(error_aux), limits)
            )

        data, y = out.data, out.y
        for start, stop_byte, target, line in out.slow[:n_slow].tolist():
            value = float(text[start:stop_byte])  # the kernel checked the grammar
            if not math.isfinite(value):
                what = "value" if target >= 0 else "label"
                first_error = SvmlightError(
                    line, f"{what} {_snippet(text[start:stop_byte])} is NaN or infinite"
                )
                # keep only the rows before this line for the class check
                keep = int(np.searchsorted(row_lines, line))
                labels = labels[:keep]
                row_lines = row_lines[:keep]
                break
            if target >= 0:
                data[target] = value
            else:
                y[-target - 1] = value

        class_error = self._add_classes(labels, row_lines)
        if class_error is not None:
            first_error = class_error  # its line precedes any error that stopped the rows
        if first_error is not None:
            raise first_error

        out.nnz = int(nnz_end)
        out.n_rows += int(n_rows)
        self._max_index = max(self._max_index, int(max_index))
        self._next_line = int(last_line) + 1
        return int(stop), int(full)

    def _add_classes(self, labels: np.ndarray, row_lines: np.ndarray) -> SvmlightError | None:
        if labels.shape[0] == 0:
            return None
        max_classes = self.limits.max_classes
        new = set(np.unique(labels).tolist()) - self._classes
        if len(self._classes) + len(new) <= max_classes:
            self._classes |= new
            return None
        # find the first row that brings in one class too many
        seen = set(self._classes)
        for label, line in zip(labels.tolist(), row_lines.tolist(), strict=True):
            seen.add(label)
            if len(seen) > max_classes:
                return SvmlightError(
                    int(line), f"more than max_classes ({max_classes}) distinct labels"
                )
        raise AssertionError("unreachable")  # pragma: no cover


class _Outputs:
    """The growing CSR arrays the kernel appends to, plus its per-call scratch.

    Growth allocates a fresh array twice as large and copies: NumPy asks for transparent
    huge pages on allocations of 4 MiB and more, which makes first-touch page faults far
    cheaper than `ndarray.resize` (a realloc that zero-fills 4 KiB pages). The initial
    entry capacity (8 MiB of data) is that large for the same reason; it stays virtual
    memory until used.
    Shrinking in `trimmed` is a realloc in place.
    """

    def __init__(self, entries: int = 1 << 20, rows: int = 1 << 13) -> None:
        self.nnz = 0
        self.n_rows = 0
        self.data = np.empty(entries, dtype=np.float64)
        self.indices = np.empty(entries, dtype=np.int32)
        self.y = np.empty(rows, dtype=np.float64)
        self.indptr = np.empty(rows + 1, dtype=np.int64)
        self.indptr[0] = 0
        self.row_lines = np.empty(rows, dtype=np.int64)  # per call
        self.slow = np.empty((1 << 10, 4), dtype=np.int64)  # per call

    def grow(self, full: int) -> None:
        """Double the arrays that ran out of room (FULL_DATA / FULL_ROWS / FULL_SLOW)."""
        if full == _k.FULL_DATA:
            self.data = _doubled(self.data, self.nnz)
            self.indices = _doubled(self.indices, self.nnz)
        elif full == _k.FULL_ROWS:
            self.y = _doubled(self.y, self.n_rows)
            self.indptr = _doubled(self.indptr, self.n_rows + 1, size=2 * self.y.shape[0] + 1)
            self.row_lines = np.empty(2 * self.row_lines.shape[0], dtype=np.int64)
        elif full == _k.FULL_SLOW:
            self.slow = np.empty((2 * self.slow.shape[0], 4), dtype=np.int64)

    def trimmed(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The arrays cut to their used length; the unused capacity is released."""
        self._trim("data", self.nnz)
        self._trim("indices", self.nnz)
        self._trim("indptr", self.n_rows + 1)
        self._trim("y", self.n_rows)
        return self.data, self.indices, self.indptr, self.y

    def _trim(self, name: str, used: int) -> None:
        if getattr(self, name).shape[0] == used:
            return
        # ndarray.resize reallocs in place (no copy) but refuses when another reference
        # exists, so the array is never bound to a local name here; should it still
        # refuse (a debugger or profiler holds one), copy instead
        try:
            getattr(self, name).resize(used, refcheck=True)
        except ValueError:
            setattr(self, name, getattr(self, name)[:used].copy())


def _hash_in_background(digest: Any, data: bytes) -> threading.Thread | None:
    """Start `digest.update(data)` in a thread (hashlib releases the GIL) if worth it."""
    if len(data) < _THREADED_HASH_BYTES:
        digest.update(data)
        return None
    thread = threading.Thread(target=digest.update, args=(data,), name="svmlight-sha256")
    thread.start()
    return thread


def _doubled(array: np.ndarray, used: int, size: int | None = None) -> np.ndarray:
    """A new array of `size` (default: twice as long) starting with `array[:used]`."""
    bigger = np.empty(2 * array.shape[0] if size is None else size, dtype=array.dtype)
    bigger[:used] = array[:used]
    return bigger


# ---- decompression -----------------------------------------------------------------------

_MAGIC = {
    "gzip": b"\x1f\x8b",
    "bz2": b"BZh",
    "xz": b"\xfd7zXZ\x00",
}
_MAGIC_PROBE = 6
_XZ_MEMLIMIT = 128 * 2**20  # xz -9 needs 65 MiB; refuse streams that ask for more


def _detect_format(head: bytes) -> str:
    if head.startswith(_MAGIC["gzip"]):
        return "gzip"
    if head.startswith(_MAGIC["bz2"]) and len(head) > 3 and head[3:4] in b"123456789":
        return "bz2"
    if head.startswith(_MAGIC["xz"]):
        return "xz"
    return "plain"


class StreamDecompressor:
    """Incremental gzip/bz2/xz/plain decoder, format chosen by magic bytes.

    Output comes in pieces of at most `step_bytes` (plain input passes through as fed).
    With `max_output_bytes`, `SizeLimitError` is raised as soon as the total output
    would exceed it. `iter_feed` yields lazily (memory: one step); `feed` returns a list.
    Concatenated members/streams (``cat a.gz b.gz``) and trailing NUL padding are accepted.
    Truncated or corrupt input raises ``SvmlightError(None, "truncated or corrupt ...")``.
    """

    def __init__(self, max_output_bytes: int | None = None, step_bytes: int = 1 << 20) -> None:
        self.max_output_bytes = max_output_bytes
        self.step_bytes = max(1, int(step_bytes))
        self.format: str | None = None  # "gzip" | "bz2" | "xz" | "plain" once detected
        self.total_in = 0
        self.total_out = 0
        self._head = b""  # bytes waiting for format detection / the next member's magic
        self._between_members = False
        self._decoder: Any = None
        self._finished = False

    def feed(self, chunk: bytes) -> list[bytes]:
        return list(self.iter_feed(chunk))

    def finish(self) -> list[bytes]:
        return list(self.iter_finish())

    def iter_feed(self, chunk: bytes) -> Iterator[bytes]:
        if self._finished:
            raise RuntimeError("StreamDecompressor already finished")
        if not chunk:
            return
        chunk = bytes(chunk)
        self.total_in += len(chunk)
        if self.format is None:
            self._head += chunk
            if len(self._head) < _MAGIC_PROBE:
                return
            yield from self._start(final=False)
        elif self.format == "plain":
            yield from self._emit(chunk)
        elif self._between_members:
            self._head += chunk
            yield from self._next_member(final=False)
        else:
            yield from self._decode(chunk)

    def iter_finish(self) -> Iterator[bytes]:
        if self._finished:
            return
        if self.format is None:
            yield from self._start(final=True)
        if self._between_members:
            yield from self._next_member(final=True)
        self._finished = True
        if self.format not in (None, "plain") and not self._between_members:
            raise self._corrupt()

    # -- internals

    def _start(self, final: bool) -> Iterator[bytes]:
        head, self._head = self._head, b""
        self.format = _detect_format(head) if head else "plain"
        if self.format == "plain":
            if head:
                yield from self._emit(head)
            return
        self._decoder = self._new_decoder()
        yield from self._decode(head)

    def _new_decoder(self) -> Any:
        if self.format == "gzip":
            return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        if self.format == "bz2":
            return bz2.BZ2Decompressor()
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=_XZ_MEMLIMIT)

    def _corrupt(self) -> SvmlightError:
        return SvmlightError(None, f"truncated or corrupt {self.format} stream")

    def _emit(self, piece: bytes) -> Iterator[bytes]:
        if not piece:
            return
        self.total_out += len(piece)
        if self.max_output_bytes is not None and self.total_out > self.max_output_bytes:
            raise SizeLimitError(self.max_output_bytes)
        yield piece

    def _decode(self, data: bytes) -> Iterator[bytes]:
        decoder = self._decoder
        step = self.step_bytes
        is_zlib = self.format == "gzip"
        while True:
            try:
                piece = decoder.decompress(data, step)
            except lzma.LZMAError as exc:
                self._finished = True
                if "memory" in str(exc).lower():
                    raise SvmlightError(
                        None,
                        f"xz stream needs more than {_XZ_MEMLIMIT >> 20} MiB of memory to decode",
                    ) from exc
                raise self._corrupt() from exc
            except (zlib.error, OSError, EOFError, ValueError) as exc:
                self._finished = True
                raise self._corrupt() from exc
            yield from self._emit(piece)
            if decoder.eof:
                self._between_members = True
                self._head = decoder.unused_data
                self._decoder = None
                if self._head:
                    yield from self._next_member(final=False)
                return
            if is_zlib:
                # more output is pending while input is left or the step was filled
                data = decoder.unconsumed_tail
                if not data and len(piece) < step:
                    return
            else:
                if decoder.needs_input:
                    return
                data = b""

    def _next_member(self, final: bool) -> Iterator[bytes]:
        head = self._head.lstrip(b"\x00")  # NUL padding between/after streams is allowed
        self._head = head
        magic = _MAGIC[str(self.format)]
        if not head:
            return
        if len(head) < len(magic) and not final and magic.startswith(head):
            return  # wait for the rest of the magic
        if not head.startswith(magic):
            self._finished = True
            raise SvmlightError(None, f"trailing garbage after {self.format} stream")
        self._head = b""
        self._between_members = False
        self._decoder = self._new_decoder()
        yield from self._decode(head)


def _iter_chunks(source: BinaryIO | Iterable[bytes], size: int = _READ_BYTES) -> Iterator[bytes]:
    read = getattr(source, "read", None)
    if read is not None:
        while True:
            chunk = read(size)
            if not chunk:
                return
            yield chunk
    else:
        yield from source


def open_decompressed(
    stream: BinaryIO | Iterable[bytes],
    max_output_bytes: int | None = None,
    step_bytes: int = 1 << 20,
) -> Iterator[bytes]:
    """Yield decompressed pieces (<= step_bytes each) of a gzip/bz2/xz/plain byte stream."""
    decompressor = StreamDecompressor(max_output_bytes=max_output_bytes, step_bytes=step_bytes)
    for chunk in _iter_chunks(stream):
        yield from decompressor.iter_feed(chunk)
    yield from decompressor.iter_finish()


def parse_stream(
    chunks: Iterable[bytes] | BinaryIO, limits: ParseLimits | None = None
) -> ParsedDataset:
    """Decompress (by magic bytes) and parse; `limits.max_bytes` caps the decompressed size."""
    limits = limits if limits is not None else ParseLimits()
    parser = SvmlightParser(limits)
    for piece in open_decompressed(chunks, max_output_bytes=limits.max_bytes):
        parser.feed(piece)
    return parser.finish()


def load_svmlight(path: str | os.PathLike[str], limits: ParseLimits | None = None) -> ParsedDataset:
    """Parse a (possibly gzip/bz2/xz-compressed) svmlight file, reading it in chunks."""
    with open(path, "rb") as handle:
        return parse_stream(_iter_chunks(handle), limits)


# ---- writer ------------------------------------------------------------------------------


def dump_svmlight(X_csr: Any, y: Any, fileobj_or_path: Any) -> None:
    """Write svmlight text: 1-based indices, repr() floats, so parsing round-trips exactly.

    Stored zeros are written (and read back) as entries. Non-finite values are refused.
    """
    X = scipy.sparse.csr_matrix(X_csr, dtype=np.float64, copy=True)
    X.sum_duplicates()
    X.sort_indices()
    labels = np.asarray(y, dtype=np.float64).ravel()
    if labels.shape[0] != X.shape[0]:
        raise ValueError(f"y has {labels.shape[0]} labels for {X.shape[0]} rows")
    if not (np.isfinite(labels).all() and np.isfinite(X.data).all()):
        raise ValueError("svmlight cannot represent NaN or infinite labels or values")
    if isinstance(fileobj_or_path, (str, os.PathLike)):
        with open(fileobj_or_path, "wb") as handle:
            _write_rows(X, labels, handle.write, binary=True)
    else:
        binary = not isinstance(fileobj_or_path, io.TextIOBase)
        _write_rows(X, labels, fileobj_or_path.write, binary=binary)


def _write_rows(X: scipy.sparse.csr_matrix, labels: np.ndarray, write: Any, binary: bool) -> None:
    indptr = X.indptr.tolist()
    columns = (X.indices.astype(np.int64) + 1).tolist()
    values = X.data.tolist()
    lines: list[str] = []
    buffered = 0
    for row, label in enumerate(labels.tolist()):
        start, stop = indptr[row], indptr[row + 1]
        pairs = " ".join(
            f"{column}:{value!r}"
            for column, value in zip(columns[start:stop], values[start:stop], strict=True)
        )
        lines.append(f"{label!r} {pairs}\n" if pairs else f"{label!r}\n")
        buffered += stop - start + 1
        if buffered >= 65536:
            _flush(lines, write, binary)
            lines, buffered = [], 0
    _flush(lines, write, binary)


def _flush(lines: list[str], write: Any, binary: bool) -> None:
    text = "".join(lines)
    write(text.encode("ascii") if binary else text)
