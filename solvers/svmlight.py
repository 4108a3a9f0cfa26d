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
  underscores are rejected. Values are bit-identical to Python's ``float()`` (correctly
  rounded): the Numba kernel converts them exactly, Clinger's fast path (significand <=
  2**53, |power of ten| <= 22) or Eisel-Lemire (`solvers._decimal`; up to 19 significant
  digits, and longer significands whose truncation settles the double); the rare rest
  (an overflow to infinity, an exponent clamped past 100,000, a long significand that
  stays between two doubles) goes to ``float()`` by byte span.

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

import hashlib
import math
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import scipy.sparse

from solvers import _svmlight_kernels as _k
from solvers.svmlight_outputs import _Outputs
from solvers.svmlight_stream import (
    SizeLimitError,
    StreamDecompressor,
    SvmlightError,
    _iter_chunks,
    open_decompressed,
)
from solvers.svmlight_write import dump_svmlight

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
_SNIPPET_CHARS = 40
_THREADED_HASH_BYTES = 1 << 18


@dataclass
class ParseLimits:
    max_features: int = 10_000_000
    max_line_bytes: int = 16 * 2**20
    max_classes: int | None = 1000  # None: no limit (regression targets), not tracked
    max_bytes: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.max_features <= _INT32_MAX:
            raise ValueError(f"max_features must be in [1, {_INT32_MAX}]")
        if self.max_line_bytes < 1:
            raise ValueError("max_line_bytes must be >= 1")
        if self.max_classes is not None and self.max_classes < 1:
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
    source_format: str = "svmlight"  # or csv, tsv, parquet, npz (solvers.tabular)
    feature_names: list[str] | None = None  # where the file named its columns
    # Written as row shards while parsed (SvmlightParser's `on_shard`): how many, and their
    # rows and non-zeros; data, indices, indptr and y are then empty
    shards: int = 0
    shard_rows: int = 0
    shard_nnz: int = 0

    @property
    def n_samples(self) -> int:
        return self.shard_rows if self.shards else int(self.y.shape[0])

    @property
    def nnz(self) -> int:
        return self.shard_nnz if self.shards else int(self.data.shape[0])

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


# What each kernel error code says; {shown} is the offending text, {limits} the ParseLimits.
_REASONS = {
    _k.ERR_NUL: "NUL byte in input",
    _k.ERR_LINE_TOO_LONG: "line longer than max_line_bytes ({limits.max_line_bytes} bytes)",
    _k.ERR_MISSING_LABEL: "missing label (line starts with {shown})",
    _k.ERR_BAD_LABEL: "invalid label {shown} (expected a number)",
    _k.ERR_NONFINITE_LABEL: "label {shown} is NaN or infinite",
    _k.ERR_BAD_QID: "invalid qid {shown} (expected qid:<integer>)",
    _k.ERR_BAD_PAIR: "invalid feature {shown} (expected <index>:<value>)",
    _k.ERR_EMPTY_INDEX: "empty index in {shown}",
    _k.ERR_INDEX_ZERO: ("index 0 in {shown}: indices are 1-based (the first feature is 1:); "
                        "data written with 0-based indices needs every index raised by one"),
    _k.ERR_NEGATIVE_INDEX: "negative index in {shown}",
    _k.ERR_INDEX_TOO_LARGE: "index in {shown} exceeds max_features ({limits.max_features})",
    _k.ERR_EMPTY_VALUE: "empty value in {shown}",
    _k.ERR_BAD_VALUE: "invalid value in {shown} (expected a number)",
    _k.ERR_NONFINITE_VALUE: "value in {shown} is NaN or infinite",
}


def _kernel_reason(code: int, token: bytes, aux: int, limits: ParseLimits) -> str:
    shown = _snippet(token)
    if code not in (_k.ERR_NUL, _k.ERR_LINE_TOO_LONG) and b"\r" in token:
        return "carriage return not followed by a line feed (use LF or CRLF line endings)"
    if code == _k.ERR_INDEX_NOT_INCREASING:
        # <= max_features once leading zeros are gone (int() refuses > 4300 digits)
        index = int(token.split(b":", 1)[0].lstrip(b"0") or b"0")
        if index == aux:
            return f"duplicate index {index} in {shown}"
        return (
            f"index {index} in {shown} is not greater than the previous index {aux} "
            "(indices must be strictly increasing)"
        )
    return _REASONS.get(code, "unparseable input {shown}").format(shown=shown, limits=limits)


# ---- parser ------------------------------------------------------------------------------


class _BlockFeed:
    """What an incremental parser keeps while its text arrives (`feed` pieces, then
    `finish`): the limits, the pieces not parsed yet, the carried incomplete line, the
    hash, the counts of bytes and lines, and the counts of what it parsed."""

    def __init__(self, limits: ParseLimits | None, block_bytes: int) -> None:
        self.limits = limits if limits is not None else ParseLimits()
        self._block_bytes = max(1, int(block_bytes))
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._carry = b""
        self._hash = hashlib.sha256()
        self._bytes_read = 0
        self._next_line = 1  # the file line the next complete line is

    @property
    def rows_parsed(self) -> int:
        """Data rows parsed so far (a caller bounds memory with these two counts)."""
        return self._parsed_counts()[0]

    @property
    def entries_parsed(self) -> int:
        """Stored entries parsed so far."""
        return self._parsed_counts()[1]

    def _parsed_counts(self) -> tuple[int, int]:
        raise NotImplementedError

    def _gather(self, chunk: bytes) -> bool:
        """Count and keep a non-empty piece (SizeLimitError past limits.max_bytes); whether
        a block is due. The carried line is re-joined only once as much new text arrived
        (linear total work)."""
        self._bytes_read += len(chunk)
        max_bytes = self.limits.max_bytes
        if max_bytes is not None and self._bytes_read > max_bytes:
            raise SizeLimitError(max_bytes)
        self._pending.append(chunk)
        self._pending_bytes += len(chunk)
        return self._pending_bytes >= max(self._block_bytes, len(self._carry))


class SvmlightParser(_BlockFeed):
    """Incremental parser: `feed` chunks of any size, then `finish`.

    `block_bytes` is how much new text is gathered before a compiled parse pass runs.
    Memory: one block of text plus the carried incomplete line, plus the parsed arrays
    (grown by doubling, trimmed in `finish`).

    With `on_shard`, the parsed rows are handed over in row shards of about `shard_bytes`
    of arrays (at most, plus one block's rows): `on_shard(arrays)` gets the shard's
    `data`, `indices`, `indptr` (from 0) and `y` (views, valid during the call: it writes
    them out) and the arrays are reused for the next shard, so memory stays about one
    shard. A dataset smaller than one shard is never handed over: `finish` returns it
    whole, as without `on_shard`.
    """

    def __init__(self, limits: ParseLimits | None = None, *, block_bytes: int = 1 << 20,
                 shard_bytes: int = 64 << 20,
                 on_shard: Callable[[dict[str, np.ndarray]], None] | None = None) -> None:
        if on_shard is not None:  # a pass never parses much more text than a shard
            block_bytes = min(block_bytes, max(1 << 12, shard_bytes))
        super().__init__(limits, block_bytes)
        self._classes: set[float] = set()
        self._max_index = 0
        self._out = _Outputs()
        self._state = "open"
        self._on_shard = on_shard
        self._shard_bytes = max(1, int(shard_bytes))
        self._shards = 0
        self._shard_rows = 0
        self._shard_nnz = 0

    @property
    def bytes_read(self) -> int:
        return self._bytes_read

    @property
    def lines_read(self) -> int:
        """Complete lines parsed so far."""
        return self._next_line - 1

    def _parsed_counts(self) -> tuple[int, int]:
        return self._shard_rows + self._out.n_rows, self._shard_nnz + self._out.nnz

    def _shard_due(self, fraction: int = 1) -> bool:
        out = self._out
        return (self._on_shard is not None
                and out.nnz * 12 + out.n_rows * 16 >= self._shard_bytes // fraction)

    def _flush_shard(self) -> None:
        """Hand the rows parsed since the last shard to `on_shard`; start the next."""
        out = self._out
        if out.n_rows == 0 or self._on_shard is None:
            return
        self._on_shard({"data": out.data[:out.nnz], "indices": out.indices[:out.nnz],
                        "indptr": out.indptr[:out.n_rows + 1], "y": out.y[:out.n_rows]})
        self._shards += 1
        self._shard_rows += out.n_rows
        self._shard_nnz += out.nnz
        out.nnz = out.n_rows = 0  # indptr[0] stays 0

    def feed(self, chunk: bytes) -> None:
        self._check_open()
        if not isinstance(chunk, bytes):
            chunk = bytes(chunk)
        if not chunk:
            return
        try:
            block_due = self._gather(chunk)
        except SizeLimitError:
            self._state = "failed"
            raise
        if block_due:
            self._guarded(final=False)

    def finish(self) -> ParsedDataset:
        self._check_open()
        self._guarded(final=True)
        self._state = "finished"
        if self._shards:
            return self._finish_shards()
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

    def _finish_shards(self) -> ParsedDataset:
        self._guarded_flush()
        self._out = _Outputs(0, 0)
        return ParsedDataset(
            data=np.empty(0, np.float64), indices=np.empty(0, np.int32),
            indptr=np.zeros(1, np.int64), y=np.empty(0, np.float64),
            n_features=self._max_index, sha256=self._hash.hexdigest(),
            bytes_read=self._bytes_read, shards=self._shards, shard_rows=self._shard_rows,
            shard_nnz=self._shard_nnz)

    # -- internals

    def _guarded_flush(self) -> None:
        try:
            self._flush_shard()
        except BaseException:
            self._state = "failed"
            raise

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
                if full in (_k.FULL_DATA, _k.FULL_ROWS) and self._shard_due(2):
                    self._flush_shard()  # rather than grow past a shard
                elif full != _k.FULL_NONE:
                    self._out.grow(full)
            if self._shard_due():
                self._flush_shard()

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
        max_classes = self.limits.max_classes
        if labels.shape[0] == 0 or max_classes is None:
            return None
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


def _hash_in_background(digest: Any, data: bytes) -> threading.Thread | None:
    """Start `digest.update(data)` in a thread (hashlib releases the GIL) if worth it."""
    if len(data) < _THREADED_HASH_BYTES:
        digest.update(data)
        return None
    thread = threading.Thread(target=digest.update, args=(data,), name="svmlight-sha256")
    thread.start()
    return thread


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
