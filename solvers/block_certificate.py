"""The out-of-core fits' certificate (solvers/out_of_core.py): certificate.certify's
bounds at w in one streaming pass over the blocks, each block cut into row ranges of
equal non-zeros on threads of their own (the kernel releases the GIL), each with its own
accumulator of the weights' size, added up after the pass: the same figures for the same
thread count, to rounding those of one thread."""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np

from solvers import _out_of_core_kernels as kernels
from solvers.certificate import Certificate

CERTIFICATE_THREADS = 4  # a certificate's pass on at most this many threads
KIND = {"l1": kernels.L1, "l2": kernels.L2, "logistic": kernels.LOGISTIC}


def certificate_threads() -> int:
    """The threads of a certificate's pass: the cores this process may use, at most
    CERTIFICATE_THREADS (each holds an accumulator of the weights' size: the data plan's
    working arrays count them, app.domain.memory.out_of_core_working_bytes)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, CERTIFICATE_THREADS))


def block_rows(shard: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A block's CSR arrays as the kernels take them (int32 indices, int64 indptr)."""
    X = shard.X
    return (np.ascontiguousarray(X.data), np.ascontiguousarray(X.indices, dtype=np.int32),
            np.ascontiguousarray(X.indptr, dtype=np.int64))


def row_parts(indptr: np.ndarray, parts: int) -> list[int]:
    """Row boundaries cutting a block into `parts` ranges of about equal non-zeros."""
    targets = np.linspace(0, int(indptr[-1]), parts + 1)[1:-1]
    cuts = np.searchsorted(indptr, targets).tolist()
    return [0, *cuts, indptr.shape[0] - 1]


def _part(rows: tuple[np.ndarray, np.ndarray, np.ndarray], a: int, b: int, lo: int,
          out: Any, w: np.ndarray, kind: int, acc: np.ndarray, sums: np.ndarray) -> None:
    """Rows [a, b) of the block whose first row is the dataset's row lo."""
    data, indices, indptr = rows
    kernels.certificate_rows((data, indices, indptr[a:b + 1]), out.y[lo + a:lo + b],
                             out.cost[lo + a:lo + b], w, out.bias_scale, kind, acc, sums)


def certify_pass(run: Any, out: Any, loss: str, solver_dual: float) -> Certificate:
    """certificate.certify's bounds at w, computed in one pass over the blocks, each block
    cut into run.threads row ranges of equal non-zeros, each range's sums and accumulator
    (a vector of the weights' size) on a thread of its own (the kernel releases the GIL),
    added up after the pass (the same figures for the same thread count)."""
    w = out.w
    if not np.all(np.isfinite(w)):
        return Certificate(math.inf, -math.inf, "none")
    threads = run.threads
    accs = [np.zeros_like(w) for _ in range(threads)]
    partial = np.zeros((threads, 4))
    run.certificate_passes += 1
    for block, shard in run.reader.one_pass():
        rows = block_rows(shard)
        cuts = row_parts(rows[2], threads)
        lo = block.first_row
        jobs = [(rows, cuts[j], cuts[j + 1], lo, out, w, KIND[loss], accs[j], partial[j])
                for j in range(threads)]
        others = [run.pool.submit(_part, *job) for job in jobs[1:]]
        _part(*jobs[0])
        for future in others:
            future.result()
    acc, sums = accs[0], partial.sum(axis=0)
    for extra in accs[1:]:
        acc += extra
    accs.clear()
    weights, v = w[: out.n_weights], acc[: out.n_weights]
    primal = 0.5 * float(weights @ weights) + float(sums[0])
    bounds: dict[str, float] = {"solver dual": solver_dual}
    if loss == "logistic":
        grad = weights - v
        bounds["gradient"] = primal - 0.5 * float(grad @ grad)
    elif loss == "l2":
        grad = weights - v
        q = 0.5 * float(v @ v) + 0.25 * float(sums[2])
        bounds["gradient"] = primal - 0.5 * float(grad @ grad)
        bounds["dual from slacks"] = float(sums[1]) ** 2 / (4.0 * q) if q > 0.0 else 0.0
    else:
        total, vv = float(sums[1]), float(v @ v)
        t = min(1.0, total / vv) if vv > 0.0 else 1.0
        bounds["dual from slacks"] = t * total - 0.5 * t * t * vv
    source = max(bounds, key=bounds.__getitem__)
    return Certificate(primal, bounds[source], source)
