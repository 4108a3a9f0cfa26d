"""Helpers of the data-parallel solvers (OCAS, ALM): thread count and row chunks.

The parallel loops run over a fixed number of row chunks determined by the data, not by
the thread count, so results are bit-identical whatever `threads` is (tron: for `threads`
up to MAX_CHUNKS; above it its chunks are as many as the threads asked for, see
solvers/tron.py).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

import numba
import numpy as np

MAX_CHUNKS = 8  # row chunks of the parallel loops (accumulators: MAX_CHUNKS x n_weights)
CHUNK_MEMORY = 1 << 25  # at most this many float64 accumulator entries


@contextlib.contextmanager
def numba_threads(requested: int) -> Iterator[int]:
    """Run the block with min(requested, NUMBA_NUM_THREADS) Numba threads; yields that."""
    previous = numba.get_num_threads()
    limit = int(numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]
    used = max(1, min(int(requested), limit))
    numba.set_num_threads(used)
    try:
        yield used
    finally:
        numba.set_num_threads(previous)


@functools.cache
def _blas_controller() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def single_threaded_blas() -> contextlib.AbstractContextManager[Any]:
    """BLAS limited to one thread for the block (gram, newton: on a loaded machine
    OpenBLAS's spinning threads slow a small Cholesky down a hundredfold). The controller
    is inspected once per process: `threadpool_limits` inspects the loaded libraries on
    every call (about 4 ms, more than a whole fit of heart_scale)."""
    return _blas_controller().limit(limits=1, user_api="blas")


def chunk_bounds(indptr: np.ndarray, n_weights: int, accumulators: int = 1,
                 max_chunks: int = MAX_CHUNKS) -> np.ndarray:
    """Row boundaries of up to `max_chunks` (MAX_CHUNKS) chunks of about equal nnz (+1 per
    row), fewer when `accumulators` per-chunk vectors of n_weights would exceed
    CHUNK_MEMORY entries."""
    n_rows = indptr.shape[0] - 1
    per_chunk = accumulators * max(n_weights, 1)
    n_chunks = max(1, min(max_chunks, n_rows, CHUNK_MEMORY // per_chunk))
    work = indptr + np.arange(n_rows + 1)  # nnz + rows before each row
    targets = np.linspace(0, work[-1], n_chunks + 1)
    bounds = np.searchsorted(work, targets, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_rows
    return np.maximum.accumulate(bounds)
