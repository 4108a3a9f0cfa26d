"""A fit's memory, estimated before it starts (HINGE_WORKER_MEMORY_BYTES).

The figure is an upper estimate of what the fit holds at its peak, in parts:
- `dataset`: the arrays of X and y. They are mapped from the blob and shared by every
  process of the host that trains on the same dataset (app/infra/mapped_arrays.py), but a
  fit reads them all every epoch, so they count in full: they must be resident;
- `scaled copy`: `scale` makes a scaled copy of X (solvers/scaling.py);
- `kernel cache`: `cache_mb` of a solver that has one (smo; default 200 MB);
- `gram matrix`: the dense rows x rows matrix of a solver that holds one (`dense_gram`:
  the `gram` solver);
- `working arrays`: per row (dual variables, gradients, labels, index lists: 8 arrays of
  8 bytes) and per feature and class (weights, gradients: 4 of 8 bytes).
A job whose estimate is above HINGE_WORKER_MEMORY_BYTES (0: no limit) fails before it
loads anything more, with the figure and its parts in its error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from solvers.params import SOLVERS

MIB = float(1 << 20)
PER_ROW_BYTES = 8 * 8
PER_WEIGHT_BYTES = 4 * 8


def estimate_fit_bytes(solver: str, params: Mapping[str, Any], rows: int, features: int,
                       classes: int, dataset_bytes: int) -> dict[str, int]:
    """The estimate's parts, in bytes (their sum is the estimate)."""
    parts = {"dataset": int(dataset_bytes)}
    if params.get("scale"):
        parts["scaled copy"] = int(dataset_bytes)
    spec = SOLVERS[solver]
    cache_default = next((p.default for p in spec.params if p.name == "cache_mb"), None)
    if cache_default is not None:
        cache_mb = params.get("cache_mb")
        parts["kernel cache"] = int(float(cache_default if cache_mb is None
                                          else cache_mb) * MIB)
    if spec.dense_gram:
        parts["gram matrix"] = rows * rows * 8
    parts["working arrays"] = (rows * PER_ROW_BYTES
                               + features * max(1, classes) * PER_WEIGHT_BYTES)
    return parts


def refusal(parts: Mapping[str, int], limit: int) -> str | None:
    """The error of a job whose estimate is over `limit` bytes (None: it fits, or no
    limit)."""
    total = sum(parts.values())
    if limit <= 0 or total <= limit:
        return None
    detail = ", ".join(f"{name} {size / MIB:,.0f} MiB" for name, size in parts.items())
    return (f"this job needs an estimated {total / MIB:,.0f} MiB ({detail}); a worker "
            f"may use {limit / MIB:,.0f} MiB (HINGE_WORKER_MEMORY_BYTES): lower cache_mb, "
            "train on fewer rows, or give the workers more memory")
