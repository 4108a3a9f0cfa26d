"""Streaming upload of svmlight datasets: request body -> decompressor -> compiled parser.

The body is never held whole: multipart or raw chunks go through an incremental
decompressor (format detected by magic bytes) into the incremental parser, in a worker
thread so the event loop stays free. Everything a hostile upload could inflate is bounded
as it streams, with a 413 the moment a bound is crossed:
- compressed and decompressed bytes (HINGE_MAX_UPLOAD_BYTES): the decompressor yields at
  most DECOMPRESS_STEP bytes per call, and each piece is counted before it is parsed, so a
  few kilobytes that expand to gigabytes never exist in memory at once;
- rows, non-zeros and the bytes the arrays will take (HINGE_MAX_DATASET_ROWS, _NNZ,
  _BYTES, and the tenant's remaining stored bytes), checked after every parsed block: a
  small file of short lines (each row costs ~24 bytes of arrays for 2 of text) stops
  at its bound instead of growing 13x;
- at most HINGE_MAX_CONCURRENT_UPLOADS uploads per API process parse at once (the rest
  wait, their bodies unread), on threads of their own, so they never starve the shared
  thread pool that other requests use.

An svmlight upload given a `ShardWriter` streams to disk: the parser hands its rows over
in shards of about HINGE_SHARD_BYTES of arrays, each written to the blob store as it is
parsed, so the process holds one shard (and the labels, 8 bytes a row), never the
dataset; a disk that cannot keep HINGE_DISK_RESERVE_BYTES free beside the next shard (or
that fills while it is written) is a 507 (`NoSpace`), and the caller aborts the writer.
The formats parsed whole (CSV, TSV, Parquet, .npz) are also bounded by
HINGE_MAX_MEMORY_DATASET_BYTES.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import anyio.to_thread
import numpy as np
from python_multipart import MultipartParser
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import parse_options_header

from app.domain.errors import Invalid, Malformed, TooLarge, Unsupported, no_space
from app.domain.label_tally import LabelTally
from app.domain.metrics import UPLOAD_BYTES
from app.domain.tasks import parse_max_classes
from app.infra.storage import ShardWriter
from app.settings import Settings
from solvers.svmlight import (
    ParsedDataset,
    ParseLimits,
    SizeLimitError,
    StreamDecompressor,
    SvmlightError,
    SvmlightParser,
)
from solvers.tabular import (
    DELIMITERS,
    FORMATS,
    CsvParser,
    MissingExtra,
    SpooledReader,
    TabularError,
    detect_format,
)

DISPATCH_BYTES = 1 << 20  # hand data to the parser thread in batches of about 1 MiB
DECOMPRESS_STEP = 256 << 10  # the most a decompressor call returns
ROW_BYTES = 24  # arrays per row while parsing: label, row pointer, line number
ENTRY_BYTES = 12  # arrays per stored value: float64 value, int32 index
MAX_NAME_BYTES = 255
MAX_OPTION_BYTES = 255  # the form fields `format` and `label_column`
DETECT_BYTES = 64 << 10  # the format is told from at most this much of the start
MULTIPART_OVERHEAD = 64 << 10


class UploadSink:
    """Counts, decompresses and parses bytes; raises TooLarge or Invalid on bad input.

    The format is `fmt` when given (see `configure`), else detected from the first
    decompressed bytes (solvers.tabular.detect_format): svmlight, csv, tsv, parquet or
    npz. `max_array_bytes`: the most the parsed arrays may take (default: the dataset
    limit)."""

    def __init__(self, settings: Settings, max_array_bytes: int | None = None, *,
                 fmt: str | None = None, label_column: str | None = None,
                 task: str = "auto", shard_writer: ShardWriter | None = None,
                 labels: LabelTally | None = None) -> None:
        self.max_bytes = settings.max_upload_bytes
        self.shard_writer = shard_writer
        self.labels = labels if labels is not None else LabelTally(
            task, settings.max_classes, settings.max_memory_dataset_bytes)
        self.shard_bytes = settings.shard_bytes
        self.max_memory_bytes = settings.max_memory_dataset_bytes
        self.max_rows = settings.max_dataset_rows
        self.max_nnz = settings.max_dataset_nnz
        self.max_array_bytes = min(settings.max_dataset_bytes,
                                   max_array_bytes if max_array_bytes is not None
                                   else settings.max_dataset_bytes)
        self.raw_bytes = 0
        self.decompressed_bytes = 0
        self.decompressor = StreamDecompressor(max_output_bytes=settings.max_upload_bytes,
                                               step_bytes=DECOMPRESS_STEP)
        self.limits = ParseLimits(
            max_features=settings.max_features,
            max_line_bytes=settings.max_line_bytes,
            max_classes=parse_max_classes(task, settings.max_classes),
            max_bytes=settings.max_upload_bytes,
        )
        self.format: str | None = None
        self.detected = False  # the format was read from the content, not asked for
        self.label_column: str | None = None
        self.reader: SvmlightParser | CsvParser | SpooledReader | None = None
        self._head = bytearray()
        self._configured = False
        self.configure(fmt, label_column)

    def configure(self, fmt: str | None, label_column: str | None) -> None:
        """The format and label column asked for (before the first byte is written)."""
        if self.raw_bytes:
            raise RuntimeError("configure before the first write")
        if fmt is not None and fmt not in FORMATS:
            raise Invalid(f"format {fmt!r} is not read: one of {', '.join(FORMATS)} "
                          "(or none: detected from the content)", field="format")
        self.format, self.label_column = fmt, label_column

    def _start(self, fmt: str) -> None:
        """Make the reader of `fmt`."""
        self.format = fmt
        if fmt == "svmlight":
            if self.label_column is not None:
                raise Invalid("label_column is for CSV, TSV and Parquet uploads; this "
                              "upload is svmlight (the label is each line's first token)",
                              field="label_column")
            if self.shard_writer is not None:
                self.reader = SvmlightParser(self.limits, shard_bytes=self.shard_bytes,
                                             on_shard=self._write_shard)
            else:
                self.reader = SvmlightParser(self.limits)
        elif fmt in DELIMITERS:
            self.reader = CsvParser(self.limits, delimiter=DELIMITERS[fmt],
                                    label_column=self.label_column)
        else:
            try:
                self.reader = SpooledReader(fmt, self.limits, label_column=self.label_column)
            except MissingExtra as exc:
                raise Unsupported(f"{exc}; this server cannot read {fmt} uploads until "
                                  "then (CSV and svmlight need nothing more)",
                                  {"format": fmt, "install": f"hinge[{exc.extra}]"}) from None

    @property
    def streamed(self) -> bool:
        """Whether the parsed rows go to disk in shards (else they are held whole)."""
        return self.shard_writer is not None and isinstance(self.reader, SvmlightParser)

    def _write_shard(self, arrays: dict[str, np.ndarray]) -> None:
        assert self.shard_writer is not None
        self.labels.add(arrays["y"])
        try:
            self.shard_writer.write(arrays)
        except OSError as exc:
            raise no_space(exc) from None

    def _too_large(self, what: str) -> TooLarge:
        return TooLarge(f"{what} exceeds the limit of {self.max_bytes} bytes "
                        "(HINGE_MAX_UPLOAD_BYTES)", {"limit": self.max_bytes})

    def _check_parsed(self) -> None:
        if self.reader is not None:
            self._check_counts(self.reader.rows_parsed, self.reader.entries_parsed)

    def _check_counts(self, rows: int, nnz: int) -> None:
        if rows > self.max_rows:
            raise TooLarge(f"the dataset has more than {self.max_rows} rows "
                           "(HINGE_MAX_DATASET_ROWS)", {"limit": self.max_rows})
        if nnz > self.max_nnz:
            raise TooLarge(f"the dataset has more than {self.max_nnz} non-zeros "
                           "(HINGE_MAX_DATASET_NNZ)", {"limit": self.max_nnz})
        if rows * ROW_BYTES + nnz * ENTRY_BYTES > self.max_array_bytes:
            raise TooLarge(f"the dataset's arrays would exceed {self.max_array_bytes} "
                           "bytes (HINGE_MAX_DATASET_BYTES, or what is left of the "
                           "tenant's stored bytes)", {"limit": self.max_array_bytes})
        if (not self.streamed
                and rows * ROW_BYTES + nnz * ENTRY_BYTES > self.max_memory_bytes):
            raise TooLarge(f"the dataset's arrays would exceed {self.max_memory_bytes} "
                           f"bytes, the most a {self.format or 'dataset'} upload"
                           f"{' with a weight_column' if self.format == 'svmlight' else ''}"
                           " is parsed in memory (HINGE_MAX_MEMORY_DATASET_BYTES); an "
                           "svmlight upload streams to disk and is bounded by the tenant's "
                           "stored bytes", {"limit": self.max_memory_bytes})

    def _feed(self, piece: bytes, final: bool = False) -> None:
        if self.reader is None:
            if self.format is not None:
                self._start(self.format)
            else:
                self._head += piece
                fmt = detect_format(bytes(self._head[:DETECT_BYTES]),
                                    final or len(self._head) >= DETECT_BYTES)
                if fmt is None:
                    return
                self.detected = True
                self._start(fmt)
                piece, self._head = bytes(self._head), bytearray()
        assert self.reader is not None
        self.reader.feed(piece)

    def _parse(self, pieces: Iterator[bytes]) -> None:
        for piece in pieces:  # one decompressor step at a time, never a whole chunk's
            self.decompressed_bytes += len(piece)
            if self.decompressed_bytes > self.max_bytes:
                raise self._too_large("decompressed upload")
            self._feed(piece)
            self._check_parsed()

    def write(self, chunks: list[bytes]) -> None:
        try:
            for chunk in chunks:
                self.raw_bytes += len(chunk)
                if self.raw_bytes > self.max_bytes:
                    raise self._too_large("upload")
                self._parse(self.decompressor.iter_feed(chunk))
        except SvmlightError as exc:
            raise self._invalid(exc) from None
        except SizeLimitError:
            raise self._too_large("decompressed upload") from None

    def finish(self) -> ParsedDataset:
        try:
            self._parse(self.decompressor.iter_finish())
            if self.reader is None:
                self._feed(b"", final=True)
            reader = self.reader
            assert reader is not None
            if isinstance(reader, SpooledReader):
                parsed = reader.finish(self._check_counts)
            else:
                parsed = reader.finish()
            self._check_counts(parsed.n_samples, parsed.nnz)
            return parsed
        except SvmlightError as exc:
            raise self._invalid(exc) from None
        except SizeLimitError:
            raise self._too_large("decompressed upload") from None
        finally:
            if isinstance(self.reader, SpooledReader):
                self.reader.close()

    def close(self) -> None:
        """Let go of a spooled upload's temporary file (a failed upload)."""
        if isinstance(self.reader, SpooledReader):
            self.reader.close()

    def _invalid(self, exc: SvmlightError) -> Invalid:
        error = invalid_dataset(exc, self.format or "svmlight")
        if (self.detected and self.format == "svmlight" and exc.line == 1
                and "invalid label" in exc.reason):
            error.message += ("; a CSV or TSV file with a header is read with format=csv "
                              "or format=tsv (comma- or tab-separated)")
            error.args = (error.message,)
        return error


def invalid_dataset(exc: SvmlightError, fmt: str = "svmlight") -> Invalid:
    detail: dict[str, object] = {"line": exc.line, "reason": exc.reason, "format": fmt}
    if isinstance(exc, TabularError):
        detail.update(row=exc.row, column=exc.column)
    what = {"csv": "CSV ", "tsv": "TSV ", "parquet": "Parquet ", "npz": ".npz "}.get(fmt, "")
    return Invalid(f"invalid {what}dataset: {exc}", detail)


class _MultipartCollector:
    """Feeds python-multipart; keeps the `file` part's bytes and the small fields `name`,
    `format` and `label_column` (these two before the file part: they say how to read
    it)."""

    def __init__(self, boundary: bytes) -> None:
        self.pending: list[bytes] = []
        self.pending_bytes = 0
        self.name_parts: list[bytes] = []
        self.options: dict[str, bytearray] = {}
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
                raise Invalid("more than one `file` part in the upload")
            self.saw_file = True
            raw_name = options.get(b"filename")
            self.filename = raw_name.decode("utf-8", "replace") if raw_name else None
        elif self._field in ("format", "label_column"):
            if self.saw_file:
                raise Invalid(f"the form field `{self._field}` comes after the file: send "
                              "it before the `file` part (curl: -F before -F file=@...) or "
                              f"as the query parameter ?{self._field}=",
                              field=self._field)
            self.options[self._field] = bytearray()

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if self._field == "file":
            self.pending.append(data[start:end])
            self.pending_bytes += end - start
        elif self._field == "name":
            self.name_parts.append(data[start:end])
            if sum(len(p) for p in self.name_parts) > MAX_NAME_BYTES:
                raise Invalid(f"name: at most {MAX_NAME_BYTES} bytes")
        elif self._field in self.options:
            self.options[self._field] += data[start:end]
            if len(self.options[self._field]) > MAX_OPTION_BYTES:
                raise Invalid(f"{self._field}: at most {MAX_OPTION_BYTES} bytes",
                              field=self._field)

    def write(self, chunk: bytes) -> None:
        try:
            self._parser.write(chunk)
        except MultipartParseError as exc:
            raise Malformed(f"malformed multipart body: {exc}") from None

    def finalize(self) -> None:
        try:
            self._parser.finalize()
        except MultipartParseError as exc:
            raise Malformed(f"malformed multipart body: {exc}") from None

    def take(self) -> list[bytes]:
        pieces, self.pending, self.pending_bytes = self.pending, [], 0
        return pieces

    def option(self, field: str) -> str | None:
        raw = self.options.get(field)
        if raw is None:
            return None
        return raw.decode("utf-8", "replace").strip() or None

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
        UPLOAD_BYTES.inc(len(chunk))
        if total > limit:
            raise TooLarge(f"request body exceeds the limit of {limit} bytes "
                           "(HINGE_MAX_UPLOAD_BYTES)", {"limit": limit})
        yield chunk


class UploadGate:
    """At most `slots` uploads of this API process parse at once, on `slots` threads of
    their own (not the shared pool /healthz and the other routes use)."""

    def __init__(self, slots: int) -> None:
        self.slots = anyio.Semaphore(slots)
        self.threads = anyio.CapacityLimiter(slots)


def upload_gate(state: object, settings: Settings) -> UploadGate:
    """The app's gate (made on first use, inside the event loop)."""
    gate = getattr(state, "upload_gate", None)
    if gate is None:
        gate = UploadGate(settings.max_concurrent_uploads)
        setattr(state, "upload_gate", gate)  # noqa: B010 - Starlette's State
    return gate


def check_name(name: str) -> str:
    """A dataset name as stored: 422 for control characters (NUL cannot be stored)."""
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise Invalid("name: control characters (such as NUL) are not allowed",
                      field="name")
    return name


async def receive_dataset(
    body: AsyncIterator[bytes], content_type: str, content_length: str | None,
    settings: Settings, *, threads: anyio.CapacityLimiter | None = None,
    max_array_bytes: int | None = None, fmt: str | None = None,
    label_column: str | None = None, task: str = "auto",
    shard_writer: ShardWriter | None = None, labels: LabelTally | None = None,
) -> tuple[ParsedDataset, str | None]:
    """Stream a request body into the parser; return the parsed data and a name, if sent.
    `threads`: the limiter the parsing threads come from; `max_array_bytes`: see
    UploadSink; `fmt`, `label_column`: the query parameters (multipart form fields of the
    same names, before the file, say the same; the two may not disagree); `shard_writer`:
    where an svmlight upload's shards go (the caller aborts it on failure); `labels`: what
    their labels add up to (app.domain.label_tally)."""
    if content_length is not None:
        try:
            declared = int(content_length)
        except ValueError:
            raise Malformed("Content-Length is not a number") from None
        if declared > settings.max_upload_bytes + MULTIPART_OVERHEAD:
            raise TooLarge(f"upload of {declared} bytes exceeds the limit of "
                           f"{settings.max_upload_bytes} bytes (HINGE_MAX_UPLOAD_BYTES)",
                           {"limit": settings.max_upload_bytes})
    sink = UploadSink(settings, max_array_bytes, fmt=fmt, label_column=label_column,
                      task=task, shard_writer=shard_writer, labels=labels)
    try:
        return await _receive(sink, body, content_type, settings, threads, fmt,
                              label_column)
    finally:
        sink.close()


def _merged(field: str, query: str | None, form: str | None) -> str | None:
    if query is not None and form is not None and query != form:
        raise Invalid(f"{field} is {query!r} in the query but {form!r} in the form",
                      field=field)
    return query if query is not None else form


async def _receive(sink: UploadSink, body: AsyncIterator[bytes], content_type: str,
                   settings: Settings, threads: anyio.CapacityLimiter | None,
                   fmt: str | None, label_column: str | None
                   ) -> tuple[ParsedDataset, str | None]:
    async def run(write: Callable[..., object], *args: object) -> None:
        await anyio.to_thread.run_sync(write, *args, limiter=threads)

    body = _capped(body, settings.max_upload_bytes + MULTIPART_OVERHEAD)
    media_type, options = parse_options_header(content_type or "")
    name: str | None = None
    if media_type == b"multipart/form-data":
        boundary = options.get(b"boundary")
        if not boundary:
            raise Malformed("multipart/form-data without a boundary")
        collector = _MultipartCollector(boundary)
        configured = False

        def configure() -> None:
            sink.configure(_merged("format", fmt, collector.option("format")),
                           _merged("label_column", label_column,
                                   collector.option("label_column")))

        async for chunk in body:
            collector.write(chunk)
            if collector.pending_bytes >= DISPATCH_BYTES:
                if not configured:
                    configure()
                    configured = True
                await run(sink.write, collector.take())
        collector.finalize()
        if not collector.saw_file:
            raise Invalid("multipart upload needs a `file` field with the data (svmlight, "
                          "CSV, TSV, Parquet or .npz)")
        if not configured:
            configure()
        await run(sink.write, collector.take())
        name = collector.name or collector.filename
    else:
        pending: list[bytes] = []
        pending_bytes = 0
        async for chunk in body:
            pending.append(chunk)
            pending_bytes += len(chunk)
            if pending_bytes >= DISPATCH_BYTES:
                await run(sink.write, pending)
                pending, pending_bytes = [], 0
        await run(sink.write, pending)
    parsed = await anyio.to_thread.run_sync(sink.finish, limiter=threads)
    return parsed, check_name(name) if name is not None else None
