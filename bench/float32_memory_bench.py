"""In-memory fits on float32 values: read as stored, or through a float64 copy.

    python -m bench.float32_memory_bench [--quick]

A generated CSR set of exactly-float32 values (multiples of 1/64; 20,000 rows x 100
non-zeros, 5,000 features; --quick 2,000 rows) is fitted by each solver that reads float32
values as stored (SolverSpec.reads_float32), 20 iterations (max_iter 20), twice: on the
float32 matrix itself, and converting it to float64 first inside the measured region (what
solvers.inputs.as_csr_arrays did for every solver before: a copy of the values, 8 bytes a
non-zero, beside the 4 of the stored ones). Figures: the peak of tracemalloc (NumPy's
allocations) over the fit, its seconds and its primal value. The kernels are compiled (or
loaded) by a small fit first. Writes bench/results/float32_in_memory.md.
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers import fit

RESULTS = Path(__file__).parent / "results" / "float32_in_memory.md"
CASES: list[tuple[str, dict[str, Any]]] = [("dcd", {"loss": "l2"}), ("tron", {"loss": "l2"}),
                                           ("logistic_dcd", {}), ("ocas", {})]
MIB = float(1 << 20)


def _data(rows: int, features: int = 5000, per_row: int = 100
          ) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(0)
    indptr = np.arange(0, rows * per_row + 1, per_row, dtype=np.int64)
    indices = np.sort(rng.integers(0, features, size=(rows, per_row)), axis=1)
    values = np.round(rng.random(rows * per_row) * 64).astype(np.float32) / np.float32(64)
    X = sp.csr_matrix((values, indices.astype(np.int32).ravel(), indptr),
                      shape=(rows, features))
    X.sum_duplicates()
    scores = X @ rng.normal(size=features)
    return X, np.where(scores > np.median(scores), 1.0, -1.0)


def _measured(X: sp.csr_matrix, y: np.ndarray, solver: str, params: dict[str, Any],
              widen: bool) -> tuple[float, float, float]:
    """(peak MiB, seconds, primal) of one fit, the float64 copy inside it when `widen`."""
    tracemalloc.start()
    started = time.perf_counter()
    if widen:  # the values only, as as_csr_arrays copied them (indices shared)
        X = sp.csr_matrix((X.data.astype(np.float64), X.indices, X.indptr), shape=X.shape)
    result = fit(X, y, solver=solver, max_iter=20, **params)
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / MIB, seconds, float(result.primal_objective)


def main(quick: bool) -> None:
    X, y = _data(2000 if quick else 20000)
    lines = [
        "# In-memory fits on float32 values: read as stored, or through a float64 copy",
        "",
        f"{X.shape[0]:,} rows x {X.shape[1]:,} features, {X.nnz:,} non-zeros of exactly-"
        f"float32 values ({X.data.nbytes / MIB:.1f} MiB of them as float32); 20 iterations "
        "of each solver; peak of tracemalloc over the fit (bench/float32_memory_bench.py).",
        "",
        "| solver | values read | peak MiB | seconds | primal |",
        "|---|---|---|---|---|",
    ]
    for solver, params in CASES:
        fit(X[:200], y[:200], solver=solver, **params)  # compiled or loaded
        for widen in (False, True):
            peak, seconds, primal = _measured(X, y, solver, params, widen)
            read = "float64 copy" if widen else "float32 as stored"
            lines.append(f"| {solver} | {read} | {peak:.1f} | {seconds:.2f} | {primal:.9g} |")
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main("--quick" in sys.argv[1:])
