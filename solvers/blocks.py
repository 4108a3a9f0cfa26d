"""Out-of-core blocks over a ShardSource: row ranges of bounded bytes, read in turn with
the next one read ahead, and released behind (solvers/out_of_core.py trains on them).

A shard no larger than `max_block_bytes` is one block; a larger one (a dataset stored as
one blob, memory-mapped by app.infra.mapped_arrays) is cut into consecutive row ranges of
at most that many bytes (its data, indices, indptr, y and w of those rows). A block's
arrays are views of the shard's (the mapped file's pages, no copy) but for its indptr
(rebased to 0: O(rows)).

Reading: `Reader` walks the blocks in order. While the solver trains on block k, one
thread reads block k + 1: it asks the source for it (`prefetch_rows`, madvise WILLNEED on
mapped arrays, when the source has it; `prefetch` of the shard, posix_fadvise, otherwise)
and then touches every page of the block sequentially, so that block k + 1 is resident
when the solver gets to it and the disk is read in order. Behind, a block done with is
released: `release_rows` of the source when it has it (MADV_DONTNEED over the block's
pages: they leave the process's resident set), the whole shard's `release` once its last
block is done. Resident memory is therefore about two blocks, whatever the dataset's size.

`bytes_read` counts the bytes of the block arrays each pass touches (a pass reads every
block once; a cold page cache makes that a read of the disk).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Generator, Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from solvers.shards import Shard, ShardSource

PAGE = 4096
_TOUCH_CHUNK = 1 << 24  # bytes touched per numpy call (the GIL is released inside)


@dataclass(frozen=True)
class Block:
    """Rows [start, stop) of shard `shard`, rows [first_row, first_row + rows) of the
    dataset."""

    index: int
    shard: int
    start: int
    stop: int
    first_row: int
    nnz: int
    nbytes: int

    @property
    def rows(self) -> int:
        return self.stop - self.start


def row_bytes(weighted: bool) -> int:
    """Bytes of a row's own entries: indptr (int64), y and w (float64)."""
    return 8 + 8 + (8 if weighted else 0)


def plan_blocks(source: ShardSource, max_block_bytes: int) -> list[Block]:
    """The blocks of `source`, each at most `max_block_bytes` (a single row larger than
    that is a block of its own). Shards larger than the limit are loaded (mapped: only
    their indptr is read) to cut them by rows."""
    if max_block_bytes < 1:
        raise ValueError("max_block_bytes must be at least 1")
    blocks: list[Block] = []
    first_row = 0
    for s in range(len(source)):
        info = source.info(s)
        if info.nbytes <= max_block_bytes or info.rows <= 1:
            blocks.append(Block(len(blocks), s, 0, info.rows, first_row, info.nnz,
                                info.nbytes))
            first_row += info.rows
            continue
        shard = source.load(s)
        indptr = np.asarray(shard.X.indptr, dtype=np.int64)
        per_value = shard.X.data.itemsize + 4
        per_row = row_bytes(shard.w is not None)
        cumulative = indptr * per_value + np.arange(indptr.shape[0]) * per_row
        start = 0
        while start < info.rows:
            limit = cumulative[start] + max_block_bytes
            stop = int(np.searchsorted(cumulative, limit, side="right")) - 1
            stop = min(max(stop, start + 1), info.rows)
            nnz = int(indptr[stop] - indptr[start])
            blocks.append(Block(len(blocks), s, start, stop, first_row + start, nnz,
                                int(cumulative[stop] - cumulative[start]) + 8))
            start = stop
        first_row += info.rows
        source.release(s)
    return blocks


def slice_shard(shard: Shard, start: int, stop: int) -> Shard:
    """Rows [start, stop) of a loaded shard: views of its data and indices (no copy), a
    rebased copy of its indptr (O(rows), in the indices' dtype, as SciPy keeps them)."""
    X = shard.X
    if start == 0 and stop == X.shape[0]:
        return shard
    lo, hi = int(X.indptr[start]), int(X.indptr[stop])
    indptr = np.subtract(X.indptr[start:stop + 1], lo, dtype=X.indices.dtype)
    block = csr_view(X.data[lo:hi], X.indices[lo:hi], indptr, X.shape[1])
    w = None if shard.w is None else shard.w[start:stop]
    return Shard(block, shard.y[start:stop], w)


def csr_view(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
             n_features: int) -> sp.csr_matrix:
    """A CSR matrix holding these arrays themselves. Not SciPy's constructor: it copies a
    data or indices array that is a view of less than half of its base (its `prune`), so a
    block of a mapped shard would become an anonymous copy of the block's values and
    indices (the resident memory of two or three blocks beyond the plan, not reclaimable
    as the mapped pages are)."""
    X = sp.csr_matrix((indptr.shape[0] - 1, n_features), dtype=data.dtype)
    X.data, X.indices, X.indptr = data, indices, indptr
    return X


def block_arrays(shard: Shard) -> list[np.ndarray]:
    arrays = [shard.X.data, shard.X.indices, shard.X.indptr, shard.y]
    if shard.w is not None:
        arrays.append(shard.w)
    return arrays


def touch(array: np.ndarray) -> int:
    """Read every page of a 1-D contiguous array (faulting it in from the page cache or
    the disk, in order); returns its bytes."""
    if array.size == 0:
        return 0
    raw = array.reshape(-1).view(np.uint8)
    for offset in range(0, raw.shape[0], _TOUCH_CHUNK):
        int(np.add.reduce(raw[offset:offset + _TOUCH_CHUNK:PAGE], dtype=np.uint64))
    return int(array.nbytes)


class Blocks:
    """A ShardSource seen as blocks: load, prefetch and release one block at a time. Keeps
    at most the shards of the blocks resident (two groups of a Reader pass) loaded."""

    def __init__(self, source: ShardSource, max_block_bytes: int) -> None:
        self.source = source
        self.n_features = source.n_features
        self.blocks = plan_blocks(source, max_block_bytes)
        self.n_rows = sum(b.rows for b in self.blocks)
        self.max_block_bytes = int(max_block_bytes)
        self._loaded: dict[int, Shard] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.blocks)

    def _shard(self, index: int) -> Shard:
        with self._lock:
            shard = self._loaded.get(index)
            if shard is None:
                shard = self.source.load(index)
                self._loaded[index] = shard
            return shard

    def load(self, k: int) -> Shard:
        block = self.blocks[k]
        return slice_shard(self._shard(block.shard), block.start, block.stop)

    def prefetch(self, k: int) -> None:
        block = self.blocks[k]
        hint = getattr(self.source, "prefetch_rows", None)
        if hint is not None:
            hint(block.shard, block.start, block.stop)
        elif block.start == 0:
            self.source.prefetch(block.shard)

    def release(self, k: int, last_of_shard: bool | None = None) -> None:
        """Drop block k's pages, and its shard's after the shard's last block (of a pass:
        `last_of_shard`; default, the last in the blocks' order). A shard is released
        only once no other block of it is still to come: releasing it earlier (a pass in
        random block order) dropped the pages of a block of it already read ahead."""
        block = self.blocks[k]
        hint = getattr(self.source, "release_rows", None)
        if last_of_shard is None:
            last_of_shard = (k + 1 == len(self.blocks)
                             or self.blocks[k + 1].shard != block.shard)
        if hint is not None and not last_of_shard:
            hint(block.shard, block.start, block.stop)
        if last_of_shard:
            self.source.release(block.shard)
            with self._lock:
                self._loaded.pop(block.shard, None)

    def labels(self) -> tuple[np.ndarray, np.ndarray | None, int]:
        """(y, w or None, bytes read) of every row, in row order: one pass over the
        shards' y and w only."""
        ys: list[np.ndarray] = []
        ws: list[np.ndarray | None] = []
        read = 0
        for s in range(len(self.source)):
            shard = self.source.load(s)
            ys.append(np.array(shard.y, dtype=np.float64))
            ws.append(None if shard.w is None else np.array(shard.w, dtype=np.float64))
            read += int(shard.y.nbytes) + (0 if shard.w is None else int(shard.w.nbytes))
            self.source.release(s)
        if any(w is None for w in ws) and not all(w is None for w in ws):
            raise ValueError("some shards have weights and some do not")
        weights = None if ws and ws[0] is None else np.concatenate(
            [w for w in ws if w is not None])
        return np.concatenate(ys), weights, read


class Reader:
    """One pass over the blocks in order, block k + 1 read ahead by a thread while block k
    trains, each block released behind by the same thread once the solver is done with it
    (its madvise and fadvise calls took 4 s of 58 on the solver's thread in 3 passes of the
    yahoo-korea shape), a pass's releases all done when the pass ends. One thread does
    every load, prefetch and release of a pass, in the order they were asked for: a block
    is released before the one after the next is read. Counts the bytes read."""

    def __init__(self, blocks: Blocks) -> None:
        self.blocks = blocks
        self.bytes_read = 0
        self.passes = 0
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="readahead")

    def _read(self, k: int) -> tuple[Shard, int]:
        shard = self.blocks.load(k)  # a mapped shard: no read yet
        self.blocks.prefetch(k)
        return shard, sum(touch(a) for a in block_arrays(shard))

    def one_pass(self, order: list[int] | None = None) -> Iterator[tuple[Block, Shard]]:
        """(block, its arrays) for every block, in `order` (default: the blocks' order,
        sequential on disk); a pass the caller stops early counts as one too."""
        with contextlib.closing(self.groups(order, 1)) as groups:
            for group in groups:
                yield group[0]

    def groups(self, order: list[int] | None = None, size: int = 1
               ) -> Generator[list[tuple[Block, Shard]], None, None]:
        """One pass as consecutive groups of `size` blocks of `order` (the last may be
        smaller), the next group read ahead while one trains: 2 * size blocks resident."""
        sequence = list(range(len(self.blocks))) if order is None else list(order)
        shard_of = [self.blocks.blocks[k].shard for k in sequence]
        last = {shard: position for position, shard in enumerate(shard_of)}
        chunks = [list(range(p, min(p + size, len(sequence))))
                  for p in range(0, len(sequence), size)]
        self.passes += 1
        released: list[concurrent.futures.Future[None]] = []
        pending = [self._pool.submit(self._read, sequence[p]) for p in chunks[0]]
        try:
            for c, chunk in enumerate(chunks):
                read = [future.result() for future in pending]
                self.bytes_read += sum(nbytes for _, nbytes in read)
                if c + 1 < len(chunks):
                    pending = [self._pool.submit(self._read, sequence[p])
                               for p in chunks[c + 1]]
                group = [(self.blocks.blocks[sequence[p]], shard)
                         for p, (shard, _) in zip(chunk, read, strict=True)]
                del read
                try:
                    yield group
                finally:
                    del group
                    for p in chunk:
                        released.append(self._pool.submit(
                            self.blocks.release, sequence[p], last[shard_of[p]] == p))
        finally:
            for future in released:  # done in order; raises a release's error
                future.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
