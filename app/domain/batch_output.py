"""A batch prediction's output: written block by block, read back block by block.

The output is one .npz (an uncompressed zip of .npy members): `labels` (n,), and
`decision_values` ((n,) or (n, k), as the online predict answers them) and
`probabilities` ((n, classes), models trained with probability: true) when asked for.
`OutputWriter` appends each block of rows to one temporary .npy file per array (the
header, written first, already holds the whole shape: the row count is known), then
copies them into the zip; nothing holds more than a block of rows in memory.
`read_blocks` reads the members back a block of rows at a time (zip members are read
side by side from one file), and `encode` turns those blocks into CSV, JSON Lines or
the .npz bytes themselves, for a streamed download.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO

import numpy as np

OUTPUTS = ("labels", "decision_values", "probabilities")
FORMATS = {"csv": "text/csv", "jsonl": "application/x-ndjson",
           "npz": "application/octet-stream"}
READ_BLOCK_ROWS = 8192
COPY_BYTES = 1 << 20


class OutputWriter:
    """Appends blocks of `rows` rows in all to .npy files in `parts` (a directory of its
    own: what an earlier attempt left there is removed first, and everything on exit);
    `close(path)` writes the .npz to `path`."""

    def __init__(self, rows: int, parts: Path) -> None:
        self.rows = rows
        self.written = 0
        self.parts = parts
        shutil.rmtree(parts, ignore_errors=True)
        parts.mkdir(parents=True)
        self._files: dict[str, BinaryIO] = {}

    def __enter__(self) -> OutputWriter:
        return self

    def __exit__(self, *_exc: object) -> None:
        for handle in self._files.values():
            handle.close()
        shutil.rmtree(self.parts, ignore_errors=True)

    def append(self, block: dict[str, np.ndarray]) -> None:
        """One block: each array's next rows (the same number for every array)."""
        count = None
        for name, values in block.items():
            values = np.ascontiguousarray(values, dtype=np.float64)
            if name not in self._files:
                handle = open(self.parts / f"{name}.npy", "wb")  # noqa: SIM115
                np.lib.format.write_array_header_2_0(handle, {
                    "descr": np.lib.format.dtype_to_descr(values.dtype),
                    "fortran_order": False, "shape": (self.rows, *values.shape[1:])})
                self._files[name] = handle
            self._files[name].write(values.tobytes())
            count = values.shape[0]
        self.written += count or 0

    def close(self, path: Path) -> None:
        """The .npz of every array at `path`, fsynced; every row must have been written."""
        if self.written != self.rows:
            raise ValueError(f"{self.written} rows written of {self.rows}")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for name, handle in self._files.items():
                handle.close()
                with open(handle.name, "rb") as source, \
                        archive.open(f"{name}.npy", "w", force_zip64=True) as target:
                    shutil.copyfileobj(source, target, COPY_BYTES)
        with open(path, "rb+") as synced:
            os.fsync(synced.fileno())


def _member(archive: zipfile.ZipFile, name: str) -> tuple[IO[bytes], tuple[int, ...],
                                                           np.dtype[Any]]:
    handle = archive.open(name)
    version = np.lib.format.read_magic(handle)
    reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
              else np.lib.format.read_array_header_2_0)
    shape, _fortran, dtype = reader(handle)
    return handle, shape, dtype


def read_blocks(handle: BinaryIO, block_rows: int = READ_BLOCK_ROWS
                ) -> Iterator[dict[str, np.ndarray]]:
    """The stored arrays a block of rows at a time (the file must be seekable)."""
    with zipfile.ZipFile(handle) as archive:
        names = [n[:-4] for n in archive.namelist() if n.endswith(".npy")]
        members = {name: _member(archive, f"{name}.npy") for name in names}
        rows = members["labels"][1][0] if members else 0
        try:
            for start in range(0, rows, block_rows):
                count = min(block_rows, rows - start)
                block = {}
                for name, (member, shape, dtype) in members.items():
                    width = int(np.prod(shape[1:])) if len(shape) > 1 else 1
                    raw = member.read(count * width * dtype.itemsize)
                    block[name] = np.frombuffer(raw, dtype=dtype).reshape(count,
                                                                           *shape[1:])
                yield block
        finally:
            for member, _shape, _dtype in members.values():
                member.close()


def csv_header(block: dict[str, np.ndarray], classes: Sequence[float]) -> list[str]:
    columns = ["row", "label"]
    values = block.get("decision_values")
    if values is not None:
        columns += (["decision_value"] if values.ndim == 1 else
                    [f"decision_value_{i}" for i in range(values.shape[1])])
    if "probabilities" in block:
        columns += [f"probability_{c:g}" for c in classes]
    return columns


def _csv(block: dict[str, np.ndarray], start: int) -> str:
    parts = [np.arange(start, start + len(block["labels"]))[:, None].astype(np.float64),
             block["labels"][:, None]]
    for name in ("decision_values", "probabilities"):
        if name in block:
            values = block[name]
            parts.append(values[:, None] if values.ndim == 1 else values)
    table = np.hstack(parts)
    return "".join(f"{int(r[0])}," + ",".join(repr(float(v)) for v in r[1:]) + "\n"
                   for r in table)


def _jsonl(block: dict[str, np.ndarray], start: int) -> str:
    lines = []
    for i in range(len(block["labels"])):
        row: dict[str, Any] = {"row": start + i, "label": float(block["labels"][i])}
        for name in ("decision_values", "probabilities"):
            if name in block:
                row[name] = block[name][i].tolist()
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n" if lines else ""


def encode(handle: BinaryIO, fmt: str, classes: Sequence[float]) -> Iterator[bytes]:
    """The stored output as `fmt` (csv, jsonl or npz), a piece at a time; closes
    `handle` at the end."""
    with handle:
        if fmt == "npz":
            while piece := handle.read(COPY_BYTES):
                yield piece
            return
        start = 0
        for block in read_blocks(handle):
            if fmt == "csv":
                if start == 0:
                    yield (",".join(csv_header(block, classes)) + "\n").encode()
                yield _csv(block, start).encode()
            else:
                yield _jsonl(block, start).encode()
            start += len(block["labels"])
