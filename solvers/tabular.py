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
"""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import math
import tempfile
import warnings
import zipfile
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

FORMATS = ("svmlight", "csv", "tsv", "parquet", "npz")
DELIMITERS = {"csv": ",", "tsv": "\t"}
_BOM = b"\xef\xbb\xbf"
_SPOOL_MEMORY = 1 << 20  # a spooled upload moves to a temporary file beyond this
_PARQUET_CELLS = 1 << 20  # cells per Parquet batch (rows = this / columns)
_NPZ_LABEL_KEYS = ("y", "label", "labels")
_NPZ_KEYS = {"data", "indices", "indptr", "shape", "format", "feature_names",
             *_NPZ_LABEL_KEYS}


class TabularError(SvmlightError):
    """Malformed CSV / TSV / Parquet / .npz input. `line` (CSV/TSV only) is the file's
    1-based line; `row` the 1-based data row; `column` the column's name (or key)."""

    def __init__(self, line: int | None, reason: str, row: int | None = None,
                 column: str | None = None) -> None:
        super().__init__(line, reason)
        self.row = row
        self.column = column

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.line, self.reason, self.row, self.column))


class MissingExtra(RuntimeError):
    """The format needs an optional package that is not installed."""

    def __init__(self, fmt: str, package: str, extra: str) -> None:
        super().__init__(f"{fmt} uploads need the optional package {package}: "
                         f"pip install 'hinge[{extra}]'")
        self.format = fmt
        self.package = package
        self.extra = extra


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


def _column_label(label_column: str | None, names: list[str], where: str) -> int:
    """The position of the label column among `names` (see the module's rules)."""
    if label_column is None:
        matches = [i for i, name in enumerate(names) if name.lower() == "label"]
        if len(matches) == 1:
            return matches[0]
        shown = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
        raise TabularError(1 if where == "header" else None,
                           f"no column named 'label' in the {where} ({shown}): say which "
                           "column holds the labels with label_column=<name or 0-based "
                           "position>")
    if label_column in names:
        return names.index(label_column)
    try:
        position = int(label_column)
    except ValueError:
        raise TabularError(1 if where == "header" else None,
                           f"label_column {label_column!r} is not a column of the {where} "
                           f"({', '.join(repr(n) for n in names[:20])})") from None
    if not -len(names) <= position < len(names):
        raise TabularError(None, f"label_column {position} is out of range: the {where} "
                           f"has {len(names)} columns (0-based positions)")
    return position % len(names)


def _check_names(names: list[str], limits: ParseLimits, where: str) -> None:
    if len(names) < 1:
        raise TabularError(1, f"the {where} names no columns")
    if len(names) - 1 > limits.max_features:
        raise TabularError(1, f"{len(names) - 1} feature columns exceed max_features "
                           f"({limits.max_features})")
    seen: set[str] = set()
    for position, name in enumerate(names):
        if not name:
            hint = (" (pandas writes its index so: to_csv(..., index=False))"
                    if position == 0 else "")
            raise TabularError(1, f"column {position + 1} of the {where} has no name{hint}")
        if name in seen:
            raise TabularError(1, f"column name {name!r} appears twice in the {where}")
        seen.add(name)


class _Blocks:
    """CSR pieces appended block by block, joined once at the end."""

    def __init__(self) -> None:
        self.data: list[np.ndarray] = []
        self.indices: list[np.ndarray] = []
        self.row_nnz: list[np.ndarray] = []
        self.y: list[np.ndarray] = []
        self.rows = 0
        self.nnz = 0
        self.classes: set[float] = set()

    def add_dense(self, X: np.ndarray, y: np.ndarray) -> None:
        rows, columns = np.nonzero(X)  # row-major: indices sorted within each row
        self.add(X[rows, columns], columns.astype(np.int32),
                 np.bincount(rows, minlength=X.shape[0]).astype(np.int64), y)

    def add(self, data: np.ndarray, indices: np.ndarray, row_nnz: np.ndarray,
            y: np.ndarray) -> None:
        self.data.append(np.asarray(data, dtype=np.float64))
        self.indices.append(np.asarray(indices, dtype=np.int32))
        self.row_nnz.append(row_nnz)
        self.y.append(np.asarray(y, dtype=np.float64))
        self.rows += int(y.shape[0])
        self.nnz += int(data.shape[0])

    def check_classes(self, y: np.ndarray, limits: ParseLimits,
                      row_of: Callable[[int], tuple[int | None, int]]) -> None:
        if limits.max_classes is None:  # no limit: regression targets
            return
        new = set(np.unique(y).tolist()) - self.classes
        if len(self.classes) + len(new) <= limits.max_classes:
            self.classes |= new
            return
        seen = set(self.classes)
        for i, label in enumerate(y.tolist()):
            seen.add(label)
            if len(seen) > limits.max_classes:
                line, row = row_of(i)
                raise TabularError(line, f"row {row}: more than max_classes "
                                   f"({limits.max_classes}) distinct labels", row=row)

    def dataset(self, n_features: int, sha256: str, bytes_read: int, fmt: str,
                names: list[str] | None) -> ParsedDataset:
        if self.rows == 0:
            raise SvmlightError(None, "no data rows")
        indptr = np.zeros(self.rows + 1, dtype=np.int64)
        np.cumsum(np.concatenate(self.row_nnz), out=indptr[1:])
        return ParsedDataset(
            data=np.concatenate(self.data), indices=np.concatenate(self.indices),
            indptr=indptr, y=np.concatenate(self.y), n_features=n_features,
            sha256=sha256, bytes_read=bytes_read, source_format=fmt, feature_names=names)


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
        self._blocks = _Blocks()

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
        _check_names(names, self.limits, "header")
        self._label = _column_label(self.label_column, names, "header")
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
            _check_finite(table, self.names, self._next_row)
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
        _check_names(names, self.limits, "Parquet schema")
        for field in source.schema_arrow:
            kind = field.type
            if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                    or pa.types.is_boolean(kind) or pa.types.is_decimal(kind)):
                raise TabularError(None, f"column {field.name!r} has type {kind}: every "
                                   "column must be numeric (integer, float or boolean)",
                                   column=str(field.name))
        label = _column_label(self.label_column, names, "Parquet schema")
        blocks = _Blocks()
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
                _check_finite(table, names, row)
                y = table[:, label]
                X = np.delete(table, label, axis=1)
                blocks.check_classes(y, self.limits, functools.partial(_row_at, row))
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
        if self.label_column is not None:
            raise TabularError(None, "label_column is for CSV, TSV and Parquet: a .npz "
                               f"holds its labels under {' / '.join(_NPZ_LABEL_KEYS)}")
        try:
            archive = zipfile.ZipFile(self._file)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise TabularError(None, f"not a readable .npz (zip) file: {exc}") from None
        with archive:
            members = {info.filename.removesuffix(".npy"): info
                       for info in archive.infolist()}
            missing = [k for k in ("data", "indices", "indptr", "shape") if k not in members]
            labels = [k for k in _NPZ_LABEL_KEYS if k in members]
            if missing or not labels:
                wanted = missing + ([] if labels else ["y"])
                raise TabularError(None, f".npz without {', '.join(wanted)}: it must hold a "
                                   "CSR matrix as scipy.sparse.save_npz writes it (data, "
                                   "indices, indptr, shape, format) and the labels under y "
                                   f"(keys found: {', '.join(sorted(members)) or 'none'})")
            if len(labels) > 1:
                raise TabularError(None, f".npz holds labels under {' and '.join(labels)}: "
                                   "keep one")
            unknown = sorted(set(members) - _NPZ_KEYS)
            if unknown:
                raise TabularError(None, f".npz keys {', '.join(unknown)} are not read: "
                                   f"expected {', '.join(sorted(_NPZ_KEYS))}")
            arrays = _NpzArrays(archive, members)
            if "format" in members:
                fmt = arrays.read("format", 1, kinds="US").item()
                fmt = fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else str(fmt)
                if fmt != "csr":
                    raise TabularError(None, f".npz format {fmt!r}: only csr is read "
                                       "(X.tocsr() before save_npz)", column="format")
            shape = arrays.read("shape", 2, kinds="iu")
            if shape.shape != (2,) or (shape < 0).any():
                raise TabularError(None, ".npz shape must be two non-negative integers",
                                   column="shape")
            n_rows, n_columns = int(shape[0]), int(shape[1])
            if n_columns > self.limits.max_features:
                raise TabularError(None, f"{n_columns} columns exceed max_features "
                                   f"({self.limits.max_features})", column="shape")
            nnz = arrays.length("data")
            check(n_rows, nnz)  # before any array of that size is read
            indptr = arrays.read("indptr", n_rows + 1, kinds="iu").astype(np.int64)
            if indptr.shape != (n_rows + 1,):
                raise TabularError(None, f".npz indptr has {indptr.shape[0]} entries for "
                                   f"{n_rows} rows (rows + 1 expected)", column="indptr")
            data = arrays.read("data", nnz, kinds="iuf").astype(np.float64, copy=False)
            indices = arrays.read("indices", nnz, kinds="iu")
            y = arrays.read(labels[0], n_rows, kinds="iuf").astype(np.float64, copy=False)
            names = None
            if "feature_names" in members:
                raw_names = arrays.read("feature_names", n_columns, kinds="US")
                names = [str(n) for n in raw_names.tolist()]
                if raw_names.ndim != 1 or len(names) != n_columns:
                    raise TabularError(None, f".npz feature_names has {len(names)} names "
                                       f"for {n_columns} columns", column="feature_names")
                _check_names(names, self.limits, ".npz feature_names")
        data, indices = _check_csr(data, indices, indptr, y, n_columns, labels[0])
        blocks = _Blocks()
        blocks.check_classes(y, self.limits, lambda i: (None, i + 1))
        blocks.add(data, indices, np.diff(indptr), y)
        self.rows_parsed, self.entries_parsed = blocks.rows, blocks.nnz
        return blocks.dataset(n_columns, self._hash.hexdigest(), self._bytes_read, "npz",
                              names)


def _row_at(first: int, i: int) -> tuple[int | None, int]:
    return None, first + i


def _check_finite(table: np.ndarray, names: list[str], first_row: int) -> None:
    finite = np.isfinite(table)
    if finite.all():
        return
    row, column = (int(v) for v in np.argwhere(~finite)[0])
    what = "missing value (NaN)" if np.isnan(table[row, column]) else "infinite value"
    raise TabularError(None, f"row {first_row + row}, column {names[column]!r}: {what}",
                       row=first_row + row, column=names[column])


class _NpzArrays:
    """Members of an .npz read one at a time; each one's header is checked (kind, size)
    before its data is read, and object (pickled) arrays are refused."""

    def __init__(self, archive: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo]) -> None:
        self.archive = archive
        self.members = members

    def _header(self, key: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        with self.archive.open(self.members[key]) as handle:
            try:
                version = np.lib.format.read_magic(handle)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(handle)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(handle)
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise TabularError(None, f".npz member {key!r} is not a NumPy array: "
                                   f"{exc}", column=key) from None
        return shape, dtype

    def length(self, key: str) -> int:
        shape, _ = self._header(key)
        return int(np.prod(shape)) if shape else 1

    def read(self, key: str, most: int, kinds: str) -> np.ndarray:
        shape, dtype = self._header(key)
        count = int(np.prod(shape)) if shape else 1
        if dtype.kind not in kinds or dtype.hasobject:
            raise TabularError(None, f".npz {key} has dtype {dtype}: expected "
                               f"{_KIND_WORDS[kinds]}", column=key)
        if count > most or len(shape) > 1:
            raise TabularError(None, f".npz {key} has shape {tuple(shape)}: at most "
                               f"{most} values in one dimension expected", column=key)
        with self.archive.open(self.members[key]) as handle:
            try:
                array: np.ndarray = np.lib.format.read_array(handle, allow_pickle=False)
                return array
            except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
                raise TabularError(None, f".npz member {key!r} is damaged: {exc}",
                                   column=key) from None


_KIND_WORDS = {"US": "text", "iu": "integers", "iuf": "numbers"}


def _check_csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, y: np.ndarray,
               n_columns: int, label_key: str) -> tuple[np.ndarray, np.ndarray]:
    """The CSR arrays checked (422 naming the first bad row) with indices sorted within
    rows; data and indices as stored."""
    n_rows = indptr.shape[0] - 1
    if y.shape != (n_rows,):
        raise TabularError(None, f".npz {label_key} has {y.shape[0]} labels for {n_rows} "
                           "rows", column=label_key)
    if indices.shape != data.shape:
        raise TabularError(None, f".npz has {indices.shape[0]} indices for "
                           f"{data.shape[0]} values", column="indices")
    if indptr[0] != 0 or indptr[-1] != data.shape[0]:
        raise TabularError(None, f".npz indptr must start at 0 and end at {data.shape[0]} "
                           "(the number of values)", column="indptr")
    steps = np.diff(indptr)
    if (steps < 0).any():
        row = int(np.flatnonzero(steps < 0)[0]) + 1
        raise TabularError(None, f"row {row}: indptr decreases", row=row, column="indptr")
    rows_of = np.repeat(np.arange(1, n_rows + 1), steps)  # 1-based row of each entry
    bad = (indices < 0) | (indices >= n_columns)
    if bad.any():
        at = int(np.flatnonzero(bad)[0])
        raise TabularError(None, f"row {rows_of[at]}: column index {int(indices[at])} is "
                           f"outside [0, {n_columns})", row=int(rows_of[at]),
                           column="indices")
    finite = np.isfinite(data)
    if not finite.all():
        at = int(np.flatnonzero(~finite)[0])
        raise TabularError(None, f"row {rows_of[at]}, column {int(indices[at]) + 1}: value "
                           f"{float(data[at])} is NaN or infinite", row=int(rows_of[at]),
                           column=str(int(indices[at]) + 1))
    if not np.isfinite(y).all():
        row = int(np.flatnonzero(~np.isfinite(y))[0]) + 1
        raise TabularError(None, f"row {row}: label {float(y[row - 1])} is NaN or infinite",
                           row=row, column=label_key)
    indices = indices.astype(np.int32)
    order = np.lexsort((indices, rows_of))
    if (order != np.arange(order.shape[0])).any():
        indices, data = indices[order], data[order]
    same = (np.diff(indices) == 0) & (np.diff(rows_of) == 0)
    if same.any():
        at = int(np.flatnonzero(same)[0])
        raise TabularError(None, f"row {rows_of[at]}: column index {int(indices[at])} "
                           "appears twice", row=int(rows_of[at]), column="indices")
    return np.ascontiguousarray(data), np.ascontiguousarray(indices)


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingExtra("Parquet", "pyarrow", "parquet") from None
    return pa, pq
