"""`fit`: validate the input, split it into binary problems, run a solver, build a FitResult.

Every linear solver module (`solvers.dcd`, later `acf`, `ocas`, `alm`, `pegasos`) exposes

    solve(problem: LinearProblem, params: dict, monitor: ProgressMonitor) -> BinarySolution

for one binary problem (labels +-1, per-example cost C_i, optional bias feature), and is
registered in `SOLVER_MODULES`. This module owns everything around that call: coercing X to
CSR arrays, labels and classes, class weights, one-vs-rest, the wall-clock limit, throttled
progress reporting and cancellation, and the summed result.
"""

from __future__ import annotations

import importlib
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast, overload

import numpy as np
import scipy.sparse as sp

from solvers.objectives import CsrArrays, LinearProblem, margins
from solvers.params import ParamError, _label_key, validate_params
from solvers.result import EXIT_REASONS, FitResult, ProgressCallback

if TYPE_CHECKING:
    from solvers.smo import KernelFitResult

# solver name -> module implementing `solve` (imported on first use).
SOLVER_MODULES: dict[str, str] = {
    "dcd": "solvers.dcd",
    "acf": "solvers.acf",
    "pegasos": "solvers.pegasos",
    "ocas": "solvers.ocas",
    "alm": "solvers.alm",
}

PROGRESS_INTERVAL_S = 0.2  # at most one progress event per this many seconds

# Which exit reason describes a one-vs-rest fit whose outputs stopped differently.
_EXIT_SEVERITY = {reason: rank for rank, reason in enumerate(EXIT_REASONS)}


@dataclass
class BinarySolution:
    """What a solver returns for one binary problem."""

    w: np.ndarray  # (problem.n_weights,) feature weights, then the bias-feature weight
    iterations: int  # outer iterations (sweeps)
    exit_reason: str
    primal: float
    dual: float | None = None  # maximised dual value, so that gap = primal - dual >= 0
    gap: float | None = None
    violation: float | None = None  # the solver's stop-rule quantity at the end
    intercept: float | None = None  # a true (unregularised) intercept, if the solver has one
    alpha: np.ndarray | None = None  # dual variables, if any (tests, warm starts)
    details: dict[str, Any] = field(default_factory=dict)  # small solver-specific facts
    timings: dict[str, float] = field(default_factory=dict)


class SolverModule(Protocol):
    def solve(
        self, problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
    ) -> BinarySolution: ...


class ProgressMonitor:
    """Clock, wall-clock limit, throttled progress events and cancellation of one fit.

    Shared by the binary problems of a one-vs-rest fit: the limit and the throttle are
    global, `class_index` says which output is being trained.
    """

    def __init__(
        self,
        callback: ProgressCallback | None,
        max_seconds: float | None,
        n_classes: int = 1,
        interval: float = PROGRESS_INTERVAL_S,
    ) -> None:
        self.callback = callback
        self.start = time.perf_counter()
        self.deadline = None if max_seconds is None else self.start + max_seconds
        self.interval = interval
        self.n_classes = n_classes
        self.class_index = 0
        self.events = 0
        self.progress_seconds = 0.0  # time spent in snapshots and the callback
        self._last_event = self.start

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def out_of_time(self) -> bool:
        return self.deadline is not None and time.perf_counter() >= self.deadline

    def event_due(self) -> bool:
        """True when a progress event may be emitted now (cheap; call it often)."""
        return (
            self.callback is not None
            and time.perf_counter() - self._last_event >= self.interval
        )

    def report(self, make_event: Callable[[], dict[str, Any]]) -> bool:
        """Build an event (the solver's snapshot, which may cost a data pass) and send it.

        Call only when `event_due()`; adds elapsed_s (and class_index, n_classes for
        one-vs-rest). Returns True when the callback asks to cancel.
        """
        assert self.callback is not None
        started = time.perf_counter()
        event = {"elapsed_s": started - self.start, **make_event()}
        if self.n_classes > 1:
            event["class_index"] = self.class_index
            event["n_classes"] = self.n_classes
        cancel = bool(self.callback(event))
        self._last_event = time.perf_counter()
        self.events += 1
        self.progress_seconds += self._last_event - started
        return cancel


# --------------------------------------------------------------------------------------
# Input validation and coercion


def as_csr_arrays(X: Any) -> CsrArrays:
    """X (SciPy sparse, or anything np.asarray makes a 2-D numeric array) as CSR arrays.

    data float64, indices int32 sorted within rows (duplicates summed), indptr int64, all
    C-contiguous; the input is never modified. Raises ValueError saying how to fix X.
    """
    if sp.issparse(X):
        matrix = X.tocsr()
    else:
        try:
            dense = np.asarray(X)
        except Exception as exc:
            raise ValueError(f"X could not be read as a matrix: {exc}") from None
        if dense.ndim != 2:
            raise ValueError(
                f"X must be 2-D (rows = examples, columns = features); got shape {dense.shape}"
            )
        if not (np.issubdtype(dense.dtype, np.number) or dense.dtype == np.bool_):
            raise ValueError(f"X must hold numbers; got dtype {dense.dtype}")
        if np.iscomplexobj(dense):
            raise ValueError("X must be real; got complex values")
        matrix = sp.csr_matrix(dense.astype(np.float64, copy=False))
    if np.iscomplexobj(matrix.data):
        raise ValueError("X must be real; got complex values")
    if not (np.issubdtype(matrix.dtype, np.number) or matrix.dtype == np.bool_):
        raise ValueError(f"X must hold numbers; got dtype {matrix.dtype}")
    n_rows, n_features = matrix.shape
    if n_rows == 0:
        raise ValueError("X has no rows; a training set needs at least two examples")
    if n_features > np.iinfo(np.int32).max:
        raise ValueError(f"X has {n_features} columns; at most 2**31 - 1 are supported")
    _check_csr_structure(matrix)
    if not matrix.has_canonical_format:
        matrix = matrix.copy()
        matrix.sum_duplicates()  # also sorts the indices of every row
    data = np.require(matrix.data, np.float64, ["C", "A", "W"])
    if not np.all(np.isfinite(data)):
        row = int(np.searchsorted(matrix.indptr, np.flatnonzero(~np.isfinite(data))[0], "right"))
        raise ValueError(
            f"X contains NaN or infinity (first in row {row - 1}); remove or impute those values"
        )
    indices = np.require(matrix.indices, np.int32, ["C", "A", "W"])
    indptr = np.require(matrix.indptr, np.int64, ["C", "A", "W"])
    return CsrArrays(data, indices, indptr, int(n_features))


def _check_csr_structure(matrix: sp.csr_matrix | sp.csr_array) -> None:
    # The kernels do not check bounds: a malformed CSR must be refused here.
    n_rows, n_features = matrix.shape
    indptr, indices = matrix.indptr, matrix.indices
    if indptr.shape != (n_rows + 1,) or indptr[0] != 0 or indptr[-1] != indices.shape[0]:
        raise ValueError("X is a malformed CSR matrix (indptr does not match its rows/nnz)")
    if indices.shape[0] != matrix.data.shape[0] or np.any(np.diff(indptr) < 0):
        raise ValueError("X is a malformed CSR matrix (indptr is not non-decreasing)")
    if indices.shape[0] and (indices.min() < 0 or indices.max() >= n_features):
        raise ValueError("X is a malformed CSR matrix (a column index is out of range)")


def as_labels(y: Any, n_rows: int) -> np.ndarray:
    """y as a 1-D float64 array of finite class values, one per row of X."""
    labels = np.asarray(y)
    if labels.ndim != 1:
        hint = "; pass y.ravel()" if labels.ndim == 2 and 1 in labels.shape else ""
        raise ValueError(f"y must be 1-D (one label per row); got shape {labels.shape}{hint}")
    if not (np.issubdtype(labels.dtype, np.number) or labels.dtype == np.bool_) or (
        np.iscomplexobj(labels)
    ):
        raise ValueError(f"class labels must be real numbers; got dtype {labels.dtype}")
    labels = labels.astype(np.float64)
    if labels.shape[0] != n_rows:
        raise ValueError(f"y has {labels.shape[0]} labels but X has {n_rows} rows")
    if not np.all(np.isfinite(labels)):
        raise ValueError("y contains NaN or infinity; every label must be a finite number")
    return labels


def class_weights(classes: np.ndarray, given: Mapping[str, float] | None) -> np.ndarray:
    """Per-class multiplier of C, in the order of `classes` (keys are params._label_key)."""
    keys = [_label_key(float(c)) for c in classes]
    given = dict(given or {})
    unknown = sorted(set(given) - set(keys))
    if unknown:
        raise ParamError(
            f"class_weight names label(s) {', '.join(unknown)}, not a class of y "
            f"(classes: {', '.join(keys)})",
            "class_weight",
        )
    return np.array([given.get(key, 1.0) for key in keys], dtype=np.float64)


# --------------------------------------------------------------------------------------
# fit


def solver_module(name: str) -> SolverModule:
    if name not in SOLVER_MODULES:
        raise ParamError(
            f"solver {name!r} has no training module yet; available: "
            f"{', '.join(sorted(SOLVER_MODULES))}",
            "solver",
        )
    return cast(SolverModule, importlib.import_module(SOLVER_MODULES[name]))


@overload
def fit(
    X: Any, y: Any, solver: Literal["smo"], progress: ProgressCallback | None = None,
    **params: Any,
) -> KernelFitResult: ...


@overload
def fit(
    X: Any, y: Any, solver: str = "dcd", progress: ProgressCallback | None = None,
    **params: Any,
) -> FitResult: ...


def fit(
    X: Any, y: Any, solver: str = "dcd", progress: ProgressCallback | None = None,
    **params: Any,
) -> FitResult | KernelFitResult:
    """Train a linear SVM; binary, or one-vs-rest for more than two classes.

    Binary: output positive for classes[1] (the larger label). Multi-class: output k is
    "class k vs the rest", in sorted class order. C_i = C * class_weight[label of row i].
    solver="smo" trains a kernel SVM instead and returns a KernelFitResult (solvers/smo.py).
    """
    # ---- kernel SVM (SMO): its own flow and result type, see solvers/smo.py ----
    if solver == "smo":
        from solvers.smo import fit_kernel

        validate_params("smo", params)
        return fit_kernel(X, y, progress=progress, **params)
    # ---- linear solvers ----
    t0 = time.perf_counter()
    applied = validate_params(solver, params)
    module = solver_module(solver)
    X_arrays = as_csr_arrays(X)
    labels = as_labels(y, X_arrays.n_rows)
    classes, label_index = np.unique(labels, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            f"training needs at least two classes; y has only the label {classes[0]:g}"
        )
    weights = class_weights(classes, applied.get("class_weight"))
    cost = applied["C"] * weights[label_index]
    bias_scale = float(applied["bias_scale"]) if applied.get("bias") == "augment" else 0.0
    positives = [1] if classes.shape[0] == 2 else list(range(classes.shape[0]))
    validate_s = time.perf_counter() - t0

    monitor = ProgressMonitor(progress, applied.get("max_seconds"), n_classes=len(positives))
    solutions: list[BinarySolution] = []
    output_seconds: list[float] = []
    for k, positive in enumerate(positives):
        started = time.perf_counter()
        y_k = np.where(label_index == positive, 1.0, -1.0)
        problem = LinearProblem(X_arrays, y_k, cost, bias_scale)
        if solutions and solutions[-1].exit_reason in ("cancelled", "max_seconds"):
            solution = _untrained(problem, applied, solutions[-1].exit_reason)
        else:
            monitor.class_index = k
            solution = module.solve(problem, applied, monitor)
        solutions.append(solution)
        output_seconds.append(time.perf_counter() - started)
    solve_s = time.perf_counter() - t0 - validate_s
    return _fit_result(
        solver, classes, positives, solutions, output_seconds, applied, bias_scale,
        X_arrays.n_features, {"validate_s": validate_s, "solve_s": solve_s,
                              "progress_s": monitor.progress_seconds},
    )


def _untrained(problem: LinearProblem, params: dict[str, Any], reason: str) -> BinarySolution:
    """An output that was never trained because the fit was stopped: w = 0, alpha = 0."""
    from solvers.objectives import primal_objective

    w = np.zeros(problem.n_weights)
    primal = primal_objective(problem, w, params.get("loss", "l1"))
    return BinarySolution(w=w, iterations=0, exit_reason=reason, primal=primal, dual=0.0,
                          gap=primal)


def _fit_result(
    solver: str, classes: np.ndarray, positives: list[int], solutions: list[BinarySolution],
    output_seconds: list[float], applied: dict[str, Any], bias_scale: float, n_features: int,
    timings: dict[str, float],
) -> FitResult:
    coef = np.vstack([s.w[:n_features] for s in solutions])
    intercept = np.array([_intercept(s, bias_scale, n_features) for s in solutions])
    duals = [s.dual for s in solutions]
    gaps = [s.gap for s in solutions]
    exit_reason = max((s.exit_reason for s in solutions), key=_EXIT_SEVERITY.__getitem__)
    per_output = []
    for positive, s, seconds in zip(positives, solutions, output_seconds, strict=True):
        per_output.append({
            "positive_class": float(classes[positive]),
            "primal_objective": s.primal, "dual_objective": s.dual, "duality_gap": s.gap,
            "violation": s.violation, "iterations": s.iterations,
            "exit_reason": s.exit_reason, "train_seconds": seconds, **s.details,
        })
        for key, value in s.timings.items():
            timings[key] = timings.get(key, 0.0) + value
    return FitResult(
        solver=solver,
        classes=classes,
        coef=coef,
        intercept=intercept,
        primal_objective=float(sum(s.primal for s in solutions)),
        dual_objective=None if any(d is None for d in duals) else float(sum(cast(
            list[float], duals))),
        duality_gap=None if any(g is None for g in gaps) else float(sum(cast(
            list[float], gaps))),
        iterations=int(sum(s.iterations for s in solutions)),
        exit_reason=exit_reason,
        train_seconds=timings["solve_s"],
        params=applied,
        timings=timings,
        per_output=per_output,
    )


def _intercept(solution: BinarySolution, bias_scale: float, n_features: int) -> float:
    if solution.intercept is not None:
        return float(solution.intercept)
    if bias_scale > 0:
        return float(solution.w[n_features] * bias_scale)
    return 0.0


def warmup() -> float:
    """Compile (or load from the on-disk cache) every solver kernel; returns seconds taken.

    The worker calls this once at start, so that no training job pays for compilation.
    """
    started = time.perf_counter()
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [-1.0, 0.5]]))
    y = np.array([1.0, -1.0, 1.0, -1.0])
    problem = LinearProblem(as_csr_arrays(X), y, np.ones(4), 1.0)
    margins(problem, np.zeros(problem.n_weights))
    for name in SOLVER_MODULES:
        variants: tuple[dict[str, Any], ...] = getattr(
            solver_module(name), "WARMUP_VARIANTS", ({},)
        )
        for variant in variants:
            result = fit(X, y, solver=name, progress=lambda event: None, **variant)
            if not all(math.isfinite(v) for v in result.coef.ravel()):
                raise RuntimeError(f"warm-up fit of solver {name!r} produced non-finite weights")
    from solvers import smo  # kernel SVM: its compiled kernels, parallel variants included

    smo.warmup()
    return time.perf_counter() - started
