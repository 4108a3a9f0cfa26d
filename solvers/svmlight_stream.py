"""Reading an svmlight stream before it is parsed: its errors (`SvmlightError`,
`SizeLimitError`) and the decompression of gzip / bz2 / xz input, chosen by magic bytes
(`StreamDecompressor`, `open_decompressed`). Used by solvers/svmlight.py."""

from __future__ import annotations

import bz2
import lzma
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

_READ_BYTES = 1 << 20


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
