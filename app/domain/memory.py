"""A fit's memory, estimated before it starts (HINGE_WORKER_MEMORY_BYTES).

The figure is an upper estimate of what the fit holds at its peak, in parts:
- `dataset`: the arrays of X and y as stored (a compact dataset's float32 values: 8 bytes
  a non-zero with their indices). They are mapped from the blob and shared by every
  process of the host that trains on the same dataset (app/infra/mapped_arrays.py), but a
  fit reads them all every epoch, so they count in full: they must be resident;
- `float64 copy`: a compact dataset's values copied to float64 (8 bytes a non-zero), for
  a solver that does not read float32 values as stored (SolverSpec.reads_float32; auto
  counts none for the c_svc problems of the L2 penalty, whose candidates read them) and
  for `scale` or `probability` (solvers/workflow.py starts from a float64 copy);
- `scaled copy`: `scale` makes a scaled copy of X (solvers/scaling.py), in float64;
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

# a job's engines (JobCreate.engine): the data plan decides for auto, the default
ENGINE_AUTO, ENGINE_LOCAL, ENGINE_DASK = "auto", "local", "dask"

MIB = float(1 << 20)
PER_ROW_BYTES = 8 * 8
PER_WEIGHT_BYTES = 4 * 8


def estimate_fit_bytes(solver: str, params: Mapping[str, Any], rows: int, features: int,
                       classes: int, dataset_bytes: int, float32_values: int = 0
                       ) -> dict[str, int]:
    """The estimate's parts, in bytes (their sum is the estimate); `float32_values`: the
    number of values the dataset stores as float32 (0: a float64 dataset)."""
    parts = {"dataset": int(dataset_bytes)}
    if float32_values and (not reads_float32(solver, params) or _scaled(params)
                           or params.get("probability")):  # the workflow's copy
        parts["float64 copy"] = 8 * int(float32_values)
    if _scaled(params):  # float64 values: 4 bytes more a float32 one
        parts["scaled copy"] = int(dataset_bytes) + 4 * int(float32_values)
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


def reads_float32(solver: str, params: Mapping[str, Any]) -> bool:
    """Whether the fit reads a compact dataset's float32 values as stored: a solver whose
    registry entry says so, or auto for a c_svc problem with the L2 penalty (dcd, tron,
    ocas, logistic_dcd; gram and newton, which auto takes for few rows or weights on
    unscaled features, copy them, and newton copies X anyway to append the bias)."""
    spec = SOLVERS[solver]
    if spec.chooses:
        return (params.get("penalty", "l2") == "l2"
                and params.get("formulation", "c_svc") == "c_svc")
    return spec.reads_float32


def _scaled(params: Mapping[str, Any]) -> bool:
    """Whether the fit scales the features first (scale is "none" by default)."""
    return params.get("scale") not in (None, False, "none")


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


# -- the data plan: in memory, or out of core in blocks ------------------------------------

MIN_BLOCK_BYTES = 1 << 20  # a smaller block would spend more on its bookkeeping than on it
RESIDENT_BLOCKS = 2  # the block trained and the one read ahead (solvers/blocks.py)
# per row out of core: alpha, y, cost, U, D, Qbar_ii, the margin, labels (float64), mask
# (uint8)
OUT_OF_CORE_ROW_BYTES = 8 * 8 + 1


def host_free_bytes() -> int:
    """What the host has free now (/proc/meminfo MemAvailable), at most this process's
    cgroup's limit less its usage (cgroup v1 memory controller); 0 when unknown."""
    free = 0
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    free = int(line.split()[1]) * 1024
                    break
    except OSError:
        return 0
    limit = _cgroup_room()
    return min(free, limit) if limit is not None else free


def _cgroup_room() -> int | None:
    try:
        with open("/proc/self/cgroup") as groups:
            path = next((line.rstrip("\n").split(":", 2)[2] for line in groups
                         if line.split(":", 2)[1].split(",").count("memory")), None)
        if path is None:
            return None
        base = f"/sys/fs/cgroup/memory{path}"
        with open(f"{base}/memory.limit_in_bytes") as handle:
            limit = int(handle.read())
        with open(f"{base}/memory.usage_in_bytes") as handle:
            usage = int(handle.read())
    except (OSError, ValueError, StopIteration, IndexError):
        return None
    if limit >= 1 << 60:  # no limit set
        return None
    return max(limit - usage, 0)


def out_of_core_working_bytes(rows: int, features: int, classes: int) -> int:
    """What an out-of-core fit holds besides its blocks: the per-row arrays, and its
    vectors of weights (w, tron's gradient, preconditioner and conjugate-gradient vectors,
    or the certificate's accumulators, one a thread of its pass, at most 4
    (solvers.block_certificate.CERTIFICATE_THREADS): 9) and the model's (one per output)."""
    outputs = 1 if classes <= 2 else classes
    return rows * OUT_OF_CORE_ROW_BYTES + (features + 1) * 8 * (9 + outputs)


def plan_fit(solver: str, params: Mapping[str, Any], rows: int, features: int,
             classes: int, dataset_bytes: int, budget: int,
             out_of_core: tuple[str, ...], engine: str = ENGINE_LOCAL,
             float32_values: int = 0) -> dict[str, Any]:
    """The fit's data plan: {"mode": "distributed", ...} for `engine` "dask", and for
    "auto" (a Dask scheduler that can train the job: workers/dask_fit.py) when the
    estimate does not fit `budget`; {"mode": "in_memory", ...} when it fits (0: no
    limit), {"mode": "blocks", "max_block_bytes", ...} when it does not but the solver
    has an out-of-core path (`out_of_core`) and two blocks of at least MIN_BLOCK_BYTES fit
    beside its working arrays; else {"mode": "refused", "error"} with the figures.
    `float32_values`: estimate_fit_bytes's."""
    parts = estimate_fit_bytes(solver, params, rows, features, classes, dataset_bytes,
                               float32_values)
    estimate = sum(parts.values())
    plan: dict[str, Any] = {"budget_bytes": int(budget), "estimate_bytes": int(estimate),
                            "dataset_bytes": int(dataset_bytes)}
    if engine == ENGINE_DASK or (engine == ENGINE_AUTO and 0 < budget < estimate):
        return {"mode": "distributed", **plan}
    if budget <= 0 or estimate <= budget:
        return {"mode": "in_memory", "blocks": 1, **plan}
    error = refusal(parts, budget)
    workflow = _scaled(params) or bool(params.get("probability"))
    if solver not in out_of_core or workflow:
        why = ("it has no out-of-core path" if solver not in out_of_core else
               "scale and probability need the data in memory")
        return {"mode": "refused", "error": f"{error}; out of core is not possible: "
                f"solver {solver!r}: {why} (out of core: {', '.join(out_of_core)})", **plan}
    working = out_of_core_working_bytes(rows, features, classes)
    block = (budget - working) // RESIDENT_BLOCKS
    plan.update({"working_bytes": int(working)})
    if block < MIN_BLOCK_BYTES:
        need = working + RESIDENT_BLOCKS * MIN_BLOCK_BYTES
        return {"mode": "refused", "error": (
            f"{error}; out of core it needs at least {need / MIB:,.0f} MiB (working arrays "
            f"{working / MIB:,.0f} MiB: {rows:,} rows x {OUT_OF_CORE_ROW_BYTES} bytes and "
            f"the weights of {features:,} features, and {RESIDENT_BLOCKS} blocks of at "
            f"least {MIN_BLOCK_BYTES / MIB:,.0f} MiB): give the workers more memory"),
            **plan}
    return {"mode": "blocks", "max_block_bytes": int(min(block, max(dataset_bytes, 1))),
            **plan}
