"""Datasets in the forms people have: CSV / TSV with a header, Parquet, NumPy ``.npz``.

Each reader turns its input into the same `ParsedDataset` (CSR arrays + labels) as the
svmlight parser, fed in pieces (already decompressed: gzip/bz2/xz are undone by
`StreamDecompressor` before any of this sees a byte), with the same memory bound: never
the whole input, only a block of it plus the arrays being built. The caller bounds the
arrays as they grow through `rows_parsed` / `entries_parsed` (CSV) or the `check`
callback (`SpooledReader.finish`, called before each batch is kept).

Format detection (`detect_format`) reads the start of the decompressed bytes:
``PAR1`` is Parquet, ``PK\\x03\\x04`` (a zip) is ``.npz``; text whose first non-blank line
holds a comma is CSV, one with tabs and no ``index:value`` pair TSV, anything else
svmlight.

Rules:
* CSV / TSV: the first non-blank line is the header (a UTF-8 BOM is dropped; cells may be
  quoted). The label is the column named by `label_column` (a header name, or else a
  0-based position, negative from the end), by default the column named ``label``
  (case-insensitive); the other columns are the features, in file order, named by the
  header. Every cell must be a finite number: an empty cell, ``NA``, ``nan`` or text is
  refused naming its line, row and column. Zeros are not stored.
* Parquet: the same label rule on the schema's column names; every column numeric
  (integer, float, boolean), nulls and NaN refused naming row and column. Read one row
  group batch at a time from a spooled copy (Parquet keeps its index at the end of the
  file, so it cannot be read as it arrives). Zeros are not stored.
* ``.npz``: the arrays of ``scipy.sparse.save_npz`` (``data``, ``indices``, ``indptr``,
  ``shape``, ``format`` = ``csr``) plus the labels under ``y`` (or ``label`` /
  ``labels``), and optionally ``feature_names`` (strings, one per column). Written e.g.
  with ``np.savez(f, data=X.data, indices=X.indices, indptr=X.indptr, shape=X.shape,
  format="csr", y=y)``. Like svmlight (the other sparse format) the entries it stores are
  kept, explicit zeros included; indices are sorted within rows, a repeated one refused.
  Pickled (object) arrays are never loaded.

The rules the readers share (errors, label column, names, the CSR pieces) are in
solvers/tabular_rules.py, the .npz reader in solvers/tabular_npz.py.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from solvers.svmlight import (
    ParsedDataset,
    ParseLimits,
    SizeLimitError,
    SvmlightError,
    _BlockFeed,
)
from solvers.tabular_npz import read_npz
from solvers.tabular_rules import (
    Blocks,
    MissingExtra,
    TabularError,
    check_finite,
    check_names,
    column_label,
    row_at,
)

FORMATS = ("svmlight", "csv", "tsv", "parquet", "npz")
DELIMITERS = {"csv": ",", "tsv": "\t"}
_BOM = b"\xef\xbb\xbf"
_SPOOL_MEMORY = 1 << 20  # a spooled upload moves to a temporary file beyond this
_PARQUET_CELLS = 1 << 20  # cells per Parquet batch (rows = this / columns)


def detect_format(head: bytes, final: bool) -> str | None:
    """The format of decompressed input starting with `head`; None while more bytes are
    needed to tell (the first non-blank line is not complete yet and `final` is false)."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"PK\x03\x04"):
        return "npz"
    if len(head) < 4 and not final:
        return None
    text = head[len(_BOM):] if head.startswith(_BOM) else head
    position = 0
    while True:
        newline = text.find(b"\n", position)
        if newline < 0 and not final:
            return None
        line = text[position: len(text) if newline < 0 else newline].strip()
        if line or newline < 0:
            break
        position = newline + 1
    if line.startswith(b"#"):
        return "svmlight"
    if b"," in line:
        return "csv"
    if b"\t" in line and b":" not in line:
        return "tsv"
    return "svmlight"


class CsvParser(_BlockFeed):
    """Incremental CSV / TSV parser (`feed` pieces, then `finish`), per the module's rules.

    Complete lines are parsed per block of about `block_bytes` by NumPy's compiled text
    reader; only the incomplete last line is carried. A block the reader refuses is looked
    at again line by line to name the first bad line, row and column."""

    def __init__(self, limits: ParseLimits | None = None, *, delimiter: str = ",",
                 label_column: str | None = None, block_bytes: int = 1 << 20) -> None:
        super().__init__(limits, block_bytes)
        self.delimiter = delimiter
        self.format = "tsv" if delimiter == "\t" else "csv"
        self.label_column = label_column
        self._next_row = 1
        self.names: list[str] | None = None
        self._label = 0
        self._blocks = Blocks()

    def _parsed_counts(self) -> tuple[int, int]:
        return self._blocks.rows, self._blocks.nnz

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        chunk = bytes(chunk)
        self._hash.update(chunk)
        if self._gather(chunk):
            self._parse_pending(final=False)

    def finish(self) -> ParsedDataset:
        self._parse_pending(final=True)
        if self.names is None:
            raise SvmlightError(None, "no header and no data rows")
        return self._blocks.dataset(len(self.names) - 1, self._hash.hexdigest(),
                                    self._bytes_read, self.format,
                                    [n for i, n in enumerate(self.names) if i != self._label])

    # -- internals

    def _parse_pending(self, final: bool) -> None:
        text = self._carry + b"".join(self._pending)
        self._pending, self._pending_bytes = [], 0
        cut = len(text) if final else text.rfind(b"\n") + 1
        self._carry = text[cut:]
        if len(self._carry) > self.limits.max_line_bytes:
            raise TabularError(self._next_line + text.count(b"\n", 0, cut),
                               f"line longer than max_line_bytes "
                               f"({self.limits.max_line_bytes} bytes)")
        if cut == 0:
            return
        if b"\x00" in text[:cut]:
            line = self._next_line + text.count(b"\n", 0, text.index(b"\x00"))
            raise TabularError(line, "NUL byte in input")
        if self.names is None:
            text = self._header(text[:cut])
            if self.names is None:
                return
        else:
            text = text[:cut]
        self._parse_block(text)

    def _header(self, text: bytes) -> bytes:
        """Take the header from the first non-blank line; the rest of `text`."""
        if self._next_line == 1 and text.startswith(_BOM):
            text = text[len(_BOM):]
        position = 0
        while position < len(text):
            newline = text.find(b"\n", position)
            end = len(text) if newline < 0 else newline + 1
            raw = text[position:end]
            self._next_line += 1
            position = end
            if raw.strip():
                self._set_header(raw)
                return text[position:]
        return b""

    def _set_header(self, raw: bytes) -> None:
        line = self._next_line - 1
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise TabularError(line, "the header is not UTF-8 text") from None
        cells = next(csv.reader([decoded.rstrip("\r\n")], delimiter=self.delimiter))
        names = [c.strip() for c in cells]
        if names and all(_is_number(n) for n in names):
            raise TabularError(line, f"the first line of this {self.format.upper()} is "
                               "data, not a header: the first line must name the columns "
                               "(one of them 'label', or say which with label_column=)")
        check_names(names, self.limits, "header")
        self._label = column_label(self.label_column, names, "header")
        self.names = names

    def _parse_block(self, text: bytes) -> None:
        first_line = self._next_line
        lines = text.count(b"\n") + (0 if text.endswith(b"\n") or not text else 1)
        self._next_line += lines
        if not text.strip():
            return
        assert self.names is not None
        width = len(self.names)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table = np.loadtxt(io.BytesIO(text), delimiter=self.delimiter,
                                   dtype=np.float64, ndmin=2, comments=None,
                                   quotechar='"', encoding="utf-8")
        except ValueError as exc:
            self._locate(text, first_line)
            raise TabularError(first_line, f"unreadable rows: {exc}") from None
        if table.shape[0] == 0:
            return
        if table.shape[1] != width:
            self._locate(text, first_line)
            raise TabularError(first_line, f"rows have {table.shape[1]} cells, the header "
                               f"{width}")
        if not np.isfinite(table).all():
            self._locate(text, first_line)
            check_finite(table, self.names, self._next_row)
        y = table[:, self._label]
        X = np.delete(table, self._label, axis=1) if width > 1 else table[:, :0]

        def row_of(i: int) -> tuple[int | None, int]:
            return None, self._next_row + i

        self._blocks.check_classes(y, self.limits, row_of)
        self._blocks.add_dense(X, y)
        self._next_row += table.shape[0]

    def _locate(self, text: bytes, first_line: int) -> None:
        """Raise the error of the first bad line of a refused block, if one is found."""
        assert self.names is not None
        row = self._next_row
        decoded = text.decode("utf-8", "replace").split("\n")
        for offset, raw in enumerate(decoded):
            line = first_line + offset
            if not raw:
                continue  # empty lines are skipped
            if not raw.strip("\r"):
                continue
            cells = next(csv.reader([raw.rstrip("\r")], delimiter=self.delimiter))
            if len(cells) != len(self.names):
                raise TabularError(line, f"line {line} (row {row}) has {len(cells)} cells "
                                   f"but the header names {len(self.names)} columns",
                                   row=row)
            for position, cell in enumerate(cells):
                name = self.names[position]
                value = cell.strip()
                if not value or value.lower() in _MISSING:
                    raise TabularError(line, f"row {row}, column {name!r}: missing value "
                                       f"{cell!r}: every cell must be a number", row=row,
                                       column=name)
                if not _is_number(value):
                    raise TabularError(line, f"row {row}, column {name!r}: {_shown(cell)} "
                                       "is not a number", row=row, column=name)
                if not math.isfinite(float(value)):
                    raise TabularError(line, f"row {row}, column {name!r}: {_shown(cell)} "
                                       "is NaN or infinite", row=row, column=name)
            row += 1


_MISSING = {"na", "n/a", "nan", "null", "none", "-nan", "+nan", "?", "-"}


def _is_number(text: str) -> bool:
    if "_" in text:
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


def _shown(cell: str) -> str:
    return repr(cell[:40] + ("..." if len(cell) > 40 else ""))


class SpooledReader:
    """Parquet and .npz cannot be read front to back: the bytes are spooled (to a
    temporary file beyond 1 MiB, bounded by `limits.max_bytes` like any upload) and read
    in `finish`, batch by batch, each batch's counts passed to `check` before it is
    kept."""

    def __init__(self, fmt: str, limits: ParseLimits | None = None, *,
                 label_column: str | None = None) -> None:
        if fmt not in ("parquet", "npz"):
            raise ValueError(f"not a spooled format: {fmt}")
        if fmt == "parquet":
            _pyarrow()  # refuse at once, before the body is read
        self.format = fmt
        self.limits = limits if limits is not None else ParseLimits()
        self.label_column = label_column
        self._file: Any = tempfile.SpooledTemporaryFile(max_size=_SPOOL_MEMORY)  # noqa: SIM115
        self._hash = hashlib.sha256()
        self._bytes_read = 0
        self.rows_parsed = 0
        self.entries_parsed = 0

    def feed(self, chunk: bytes) -> None:
        if not chunk:
            return
        self._hash.update(chunk)
        self._bytes_read += len(chunk)
        if self.limits.max_bytes is not None and self._bytes_read > self.limits.max_bytes:
            raise SizeLimitError(self.limits.max_bytes)
        self._file.write(chunk)

    def close(self) -> None:
        self._file.close()

    def finish(self, check: Callable[[int, int], None] | None = None) -> ParsedDataset:
        check = check or (lambda rows, nnz: None)
        try:
            self._file.seek(0)
            if self.format == "parquet":
                return self._parquet(check)
            return self._npz(check)
        finally:
            self._file.close()

    # -- Parquet

    def _parquet(self, check: Callable[[int, int], None]) -> ParsedDataset:
        pa, pq = _pyarrow()
        try:
            source = pq.ParquetFile(self._file)
        except (pa.ArrowException, OSError, ValueError) as exc:
            raise TabularError(None, f"not a readable Parquet file: {exc}") from None
        names = [str(n) for n in source.schema_arrow.names]
        check_names(names, self.limits, "Parquet schema")
        for field in source.schema_arrow:
            kind = field.type
            if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                    or pa.types.is_boolean(kind) or pa.types.is_decimal(kind)):
                raise TabularError(None, f"column {field.name!r} has type {kind}: every "
                                   "column must be numeric (integer, float or boolean)",
                                   column=str(field.name))
        label = column_label(self.label_column, names, "Parquet schema")
        blocks = Blocks()
        batch_rows = max(1, _PARQUET_CELLS // len(names))
        row = 1
        try:
            for batch in source.iter_batches(batch_size=batch_rows):
                table = np.empty((batch.num_rows, len(names)), dtype=np.float64)
                for position, column in enumerate(batch.columns):
                    if column.null_count:
                        first = int(np.flatnonzero(
                            column.is_null().to_numpy(zero_copy_only=False))[0])
                        raise TabularError(None, f"row {row + first}, column "
                                           f"{names[position]!r}: missing value (null)",
                                           row=row + first, column=names[position])
                    table[:, position] = column.to_numpy(zero_copy_only=False)
                check_finite(table, names, row)
                y = table[:, label]
                X = np.delete(table, label, axis=1)
                blocks.check_classes(y, self.limits, functools.partial(row_at, row))
                counted = int(np.count_nonzero(X))
                check(blocks.rows + batch.num_rows, blocks.nnz + counted)
                blocks.add_dense(X, y)
                row += batch.num_rows
                self.rows_parsed, self.entries_parsed = blocks.rows, blocks.nnz
        except (pa.ArrowException, OSError) as exc:
            raise TabularError(None, f"not a readable Parquet file: {exc}") from None
        return blocks.dataset(len(names) - 1, self._hash.hexdigest(), self._bytes_read,
                              "parquet", [n for i, n in enumerate(names) if i != label])

    # -- .npz

    def _npz(self, check: Callable[[int, int], None]) -> ParsedDataset:
        dataset = read_npz(self._file, self.limits, self.label_column, check,
                           self._hash.hexdigest(), self._bytes_read)
        self.rows_parsed = int(dataset.y.shape[0])
        self.entries_parsed = int(dataset.data.shape[0])
        return dataset


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra("Parquet", "pyarrow", "parquet") from None
    return pa, pq
