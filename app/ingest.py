"""Streaming upload of svmlight datasets: request body -> decompressor -> compiled parser.

The body is never held whole: multipart or raw chunks go through an incremental
decompressor (format detected by magic bytes) into the incremental parser, in a worker
thread so the event loop stays free. Compressed and decompressed byte counts are both
capped by HINGE_MAX_UPLOAD_BYTES (413 as soon as either is exceeded).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio.to_thread
from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header

from app.errors import ApiError
from app.settings import Settings
from solvers.svmlight import (
    ParsedDataset,
    ParseLimits,
    SizeLimitError,
    StreamDecompressor,
    SvmlightError,
    SvmlightParser,
)

DISPATCH_BYTES = 1 << 20  # hand data to the parser thread in batches of about 1 MiB
MAX_NAME_BYTES = 255
MULTIPART_OVERHEAD = 64 << 10


class UploadSink:
    """Counts, decompresses and parses bytes; raises ApiError 413/422 on bad input."""

    def __init__(self, settings: Settings) -> None:
        self.max_bytes = settings.max_upload_bytes
        self.raw_bytes = 0
        self.decompressed_bytes = 0
        self.decompressor = StreamDecompressor()
        self.parser = SvmlightParser(
            ParseLimits(
                max_features=settings.max_features,
                max_line_bytes=settings.max_line_bytes,
                max_classes=settings.max_classes,
                max_bytes=settings.max_upload_bytes,
            )
        )

    def _too_large(self, what: str) -> ApiError:
        return ApiError(413, f"{what} exceeds the limit of {self.max_bytes} bytes "
                             "(HINGE_MAX_UPLOAD_BYTES)", {"limit": self.max_bytes})

    def _parse(self, pieces: list[bytes]) -> None:
        for piece in pieces:
            self.decompressed_bytes += len(piece)
            if self.decompressed_bytes > self.max_bytes:
                raise self._too_large("decompressed upload")
            self.parser.feed(piece)

    def write(self, chunks: list[bytes]) -> None:
        try:
            for chunk in chunks:
                self.raw_bytes += len(chunk)
                if self.raw_bytes > self.max_bytes:
                    raise self._too_large("upload")
                self._parse(self.decompressor.feed(chunk))
        except SvmlightError as exc:
            raise invalid_dataset(exc) from None
        except SizeLimitError:
            raise self._too_large("decompressed upload") from None

    def finish(self) -> ParsedDataset:
        try:
            self._parse(self.decompressor.finish())
            return self.parser.finish()
        except SvmlightError as exc:
            raise invalid_dataset(exc) from None
        except SizeLimitError:
            raise self._too_large("decompressed upload") from None


def invalid_dataset(exc: SvmlightError) -> ApiError:
    return ApiError(422, f"invalid dataset: {exc}", {"line": exc.line, "reason": exc.reason})


class _MultipartCollector:
    """Feeds python-multipart; keeps the `file` part's bytes and the small `name` field."""

    def __init__(self, boundary: bytes) -> None:
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.name_parts: list[bytes] = []
        self.saw_file = False
        self.filename: str | None = None
        self._field: str | None = None
        self._header_field = b""
        self._header_value = b""
        self._headers: dict[bytes, bytes] = {}
        self._parser = MultipartParser(
            boundary,
            callbacks={
                "on_part_begin": self._part_begin,
                "on_part_data": self._part_data,
                "on_header_field": self._header_field_cb,
                "on_header_value": self._header_value_cb,
                "on_header_end": self._header_end,
                "on_headers_finished": self._headers_finished,
            },
        )

    def _part_begin(self) -> None:
        self._headers = {}
        self._field = None

    def _header_field_cb(self, data: bytes, start: int, end: int) -> None:
        self._header_field += data[start:end]

    def _header_value_cb(self, data: bytes, start: int, end: int) -> None:
        self._header_value += data[start:end]

    def _header_end(self) -> None:
        self._headers[self._header_field.lower()] = self._header_value
        self._header_field = b""
        self._header_value = b""

    def _headers_finished(self) -> None:
        _, options = parse_options_header(self._headers.get(b"content-disposition", b""))
        self._field = options.get(b"name", b"").decode("latin-1")
        if self._field == "file":
            if self.saw_file:
                raise ApiError(422, "more than one `file` part in the upload")
            self.saw_file = True
            raw_name = options.get(b"filename")
            self.filename = raw_name.decode("utf-8", "replace") if raw_name else None

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._field == "file":
            self.pending.append(data[start:end])
            self.pending_bytes += end - start
        elif self._field == "name":
            self.name_parts.append(data[start:end])
            if sum(len(p) for p in self.name_parts) > MAX_NAME_BYTES:
                raise ApiError(422, f"name: at most {MAX_NAME_BYTES} bytes")

    def write(self, chunk: bytes) -> None:
        try:
            self._parser.write(chunk)
        except MultipartParseError as exc:
            raise ApiError(400, f"malformed multipart body: {exc}") from None

    def finalize(self) -> None:
        try:
            self._parser.finalize()
        except MultipartParseError as exc:
            raise ApiError(400, f"malformed multipart body: {exc}") from None

    def take(self) -> list[bytes]:
        pieces, self.pending, self.pending_bytes = self.pending, [], 0
        return pieces

    @property
    def name(self) -> str | None:
        if not self.name_parts:
            return None
        return b"".join(self.name_parts).decode("utf-8", "replace").strip() or None


async def _capped(body: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    """The request body, cut off with 413 as soon as it is longer than `limit`."""
    total = 0
    async for chunk in body:
        total += len(chunk)
        if total > limit:
            raise ApiError(413, f"request body exceeds the limit of {limit} bytes "
                                "(HINGE_MAX_UPLOAD_BYTES)", {"limit": limit})
        yield chunk


async def receive_dataset(
    body: AsyncIterator[bytes], content_type: str, content_length: str | None,
    settings: Settings,
) -> tuple[ParsedDataset, str | None]:
    """Stream a request body into the parser; return the parsed data and a name, if sent."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise ApiError(400, "Content-Length is not a number") from None
        if declared > settings.max_upload_bytes + MULTIPART_OVERHEAD:
            raise ApiError(413, f"upload of {declared} bytes exceeds the limit of "
                                f"{settings.max_upload_bytes} bytes (HINGE_MAX_UPLOAD_BYTES)",
                           {"limit": settings.max_upload_bytes})
    sink = UploadSink(settings)
    body = _capped(body, settings.max_upload_bytes + MULTIPART_OVERHEAD)
    media_type, options = parse_options_header(content_type or "")
    name: str | None = None
    if media_type == b"multipart/form-data":
        boundary = options.get(b"boundary")
        if not boundary:
            raise ApiError(400, "multipart/form-data without a boundary")
        collector = _MultipartCollector(boundary)
        async for chunk in body:
            collector.write(chunk)
            if collector.pending_bytes >= DISPATCH_BYTES:
                await anyio.to_thread.run_sync(sink.write, collector.take())
        collector.finalize()
        if not collector.saw_file:
            raise ApiError(422, "multipart upload needs a `file` field with the svmlight data")
        await anyio.to_thread.run_sync(sink.write, collector.take())
        name = collector.name or collector.filename
    else:
        pending: list[bytes] = []
        pending_bytes = 0
        async for chunk in body:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes >= DISPATCH_BYTES:
                await anyio.to_thread.run_sync(sink.write, pending)
                pending, pending_bytes = [], 0
        await anyio.to_thread.run_sync(sink.write, pending)
    parsed = await anyio.to_thread.run_sync(sink.finish)
    return parsed, name
