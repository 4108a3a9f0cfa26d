"""The growing CSR arrays solvers/svmlight.py's compiled parser appends to."""

from __future__ import annotations

import numpy as np

from solvers import _svmlight_kernels as _k


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


def _doubled(array: np.ndarray, used: int, size: int | None = None) -> np.ndarray:
    """A new array of `size` (default: twice as long) starting with `array[:used]`."""
    bigger = np.empty(2 * array.shape[0] if size is None else size, dtype=array.dtype)
    bigger[:used] = array[:used]
    return bigger
