"""SMO for kernel SVMs (C-SVC) with second-order working-set selection, shrinking and a
kernel-column cache: LIBSVM 3.37's `Solver` in Numba.

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight[label of row i]):

    min_a  f(a) = 1/2 a'Qa - e'a,   0 <= a_i <= C_i,   y'a = 0,   Q_ij = y_i y_j K(x_i, x_j),

with a free bias: the decision function is f(x) = sum_i y_i a_i K(x_i, x) - rho. Kernels
(solvers/kernels.py): linear, rbf exp(-gamma ||x-z||^2), poly (gamma x.z + coef0)^degree,
sigmoid tanh(gamma x.z + coef0); gamma defaults to 1/n_features.

Algorithm: SMO (Platt 1998, "Sequential Minimal Optimization: A Fast Algorithm for Training
Support Vector Machines", MSR-TR-98-14): every step optimises two variables analytically
(clipped to the box and the line y'a = const). The pair is chosen as in LIBSVM (Fan, Chen &
Lin 2005, "Working Set Selection Using Second Order Information for Training SVM", JMLR 6,
WSS 2): i = argmax { -y_t G_t : t in I_up(a) } and j = argmin over t in I_low(a) with
-y_t G_t < -y_i G_i of -(b_it^2 / a_it), a_it = K_ii + K_tt - 2 K_it (tau = 1e-12 when
a_it <= 0, for non-PSD kernels). After a step, G = Qa - e is updated on the active set and
G_bar = sum_{a_j = C_j} C_j Q_:j on all variables. Shrinking as LIBSVM (every
min(l, 1000) steps, bound variables beyond the current maximal violations leave the active
set; when the violation first falls below 10 eps the gradient is reconstructed and the
full set is made active once more), kernel columns cached in an LRU cache of `cache_mb` MB
whose columns cover only the active set (LIBSVM's Cache: float32 entries, index swaps
follow the shrinking; a cache too small for two full columns is enlarged to two columns).

Where we depart from LIBSVM's code, the arithmetic stays the same:
- the G_bar update when a_i enters or leaves its upper bound is applied at once on the
  active set (Q_i is at hand) and deferred on the inactive set, where the updates are
  applied in one pass, in their order, before G_bar is read (gradient reconstruction,
  progress) or the positions are permuted (shrinking): LIBSVM instead extends column i to
  all l variables and caches it, evicting useful columns;
- the rows of X are kept in position order (gathered again after a shrinking permutes the
  positions), so a kernel column streams through memory; the selection of the next i is
  fused with the gradient update;
- kernel values are computed from the dot product (a dense scatter of x_i, gathered by
  every row) and precomputed squared norms (LIBSVM merges sorted index lists).

Stop rule: m(a) - M(a) = max_{I_up} -y_t G_t - min_{I_low} -y_t G_t < eps on the active
set; the gradient of the inactive variables is then reconstructed and the test repeated on
the full set: only an unshrunk pass that also satisfies it means "converged" (LIBSVM's
rule). rho is the average of y_t G_t over the free variables (midpoint of the feasible
interval if none is free), as LIBSVM's calculate_rho. max_iter counts SMO steps of each
binary problem (LIBSVM: max(10^7, 100 l)); a stopped problem is unshrunk and keeps a usable
model (rho as above).

Dual objective: reported in LIBSVM's sign convention, the minimised value
f(a) = 1/2 a'Qa - e'a (<= 0; LIBSVM's "obj = ..." line), summed over the binary problems.
Progress events carry the same value as `dual` (primal and gap are None), the violation
m - M of the active set, active_size and, for several binary problems, class_index (= index
of the binary problem) / n_classes (= number of binary problems) and the pair's classes.

Multi-class: one-vs-one (default; LIBSVM's pairs over the sorted classes, pair (i, j) with
class i as +1, C_i = C * class_weight of the row's class) or one-vs-rest. Two classes are
always one binary problem.

Threads: the parallel loops (kernel columns and the passes over the active set once per
step - "fine-grained" -, the deferred G_bar pass once per ~1000 steps - "coarse") only
partition elementwise work or exact max/argmax reductions (ties to the larger index, as a
sequential scan), so `threads=2` returns bit-for-bit the result of `threads=1`. The
fine-grained loops are used only when the cores are not busy with other work
(`_cores_busy`). The compiled `_smo_steps` runs a bounded number of steps and returns to
Python, which enforces max_seconds, sends throttled progress events and honours
cancellation; the whole solver state lives in arrays (and the typed list of cached
columns), so splitting the work into calls changes nothing.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numba
import numpy as np
from numba import njit, prange, types
from numba.typed import List

from solvers.kernels import KERNEL_CODES, KernelModel, max_threads, row_sq_norms
from solvers.objectives import CsrArrays
from solvers.params import validate_params
from solvers.result import EXIT_REASONS, ProgressCallback
from solvers.train import ProgressMonitor, as_csr_arrays, as_labels, class_weights

# Kernel codes (LIBSVM's kernel_type) and alpha status.
_LINEAR, _POLY, _RBF, _SIGMOID = 0, 1, 2, 3
_LOWER, _UPPER, _FREE = 0, 1, 2
_U1 = np.uint64(1)
_TAU = 1e-12  # LIBSVM's TAU: quadratic coefficient used when K_ii + K_jj - 2 K_ij <= 0
_SHRINK_EVERY = 1000

# Kernel status codes.
_PAUSED, _CONVERGED, _MAX_ITER, _NON_FINITE = 0, 1, 2, 3
_STATUS_EXIT = {_CONVERGED: "converged", _MAX_ITER: "max_iter", _NON_FINITE: "numerical_error"}

# counters[] slots (int64) and values[] slots (float64) of the solver state.
(_ITER, _ACTIVE, _COUNTER, _UNSHRINK, _GMAX_IDX, _GMAX_VALID, _CACHE_FREE, _HITS, _MISSES,
 _EVALS, _SHRINKS, _RECONSTRUCTS, _PENDING) = range(13)
_N_COUNTERS = 13
_PENDING_CAPACITY = 2 * _SHRINK_EVERY + 8  # deferred G_bar updates between flushes
_GMAX, _VIOLATION = 0, 1

# Parallel loops only above this much work (elements, or rows x (nnz + 8) for kernel
# columns): a parallel region costs microseconds, much more on a loaded machine. Read when
# a solver state is created (tests lower them to exercise the parallel paths).
PARALLEL_MIN_PASS = 40_000
PARALLEL_MIN_KERNEL = 100_000
PARALLEL_MIN_FLUSH = 100_000  # the deferred G_bar updates: one region per ~1000 steps

# Steps per compiled call, adapted so that a call takes about _CALL_SECONDS.
_CALL_SECONDS = 0.05
_INITIAL_STEPS = 256
_MIN_STEPS, _MAX_STEPS = 16, 1 << 24

_EXIT_SEVERITY = {reason: rank for rank, reason in enumerate(EXIT_REASONS)}


@dataclass
class KernelFitResult:
    """A trained kernel SVM and how the solver got there.

    dual_objective: LIBSVM's sign convention, the minimised 1/2 a'Qa - e'a summed over the
    binary problems (<= 0). n_support: distinct support vectors of the model. iterations:
    SMO steps summed over the binary problems. exit_reason: the worst over them.
    """

    model: KernelModel
    dual_objective: float
    n_support: int
    iterations: int
    exit_reason: str
    train_seconds: float
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    per_output: list[dict[str, Any]] = field(default_factory=list)
    solver: str = "smo"

    @property
    def classes(self) -> np.ndarray:
        return self.model.classes

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels (as FitResult.predict)."""
        return self.model.predict(X)[0]

    def decision_function(self, X: Any) -> np.ndarray:
        return self.model.decision_function(X)


@dataclass
class _Binary:
    """One binary problem: rows of X (global ids), labels +-1, costs, and the outcome."""

    rows: np.ndarray  # int64
    y: np.ndarray  # int8, +1 / -1
    cost: np.ndarray  # float64, C_i
    positive: int  # class index of the +1 side
    negative: int  # class index of the -1 side, or -1 for "the rest"
    alpha: np.ndarray | None = None
    rho: float = 0.0
    objective: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------------------
# Public entry point


def fit_kernel(
    X: Any, y: Any, progress: ProgressCallback | None = None, **params: Any
) -> KernelFitResult:
    """Train a kernel C-SVC with SMO; parameters as in solvers.params ("smo")."""
    t0 = time.perf_counter()
    applied = validate_params("smo", params)
    arrays = as_csr_arrays(X)
    labels = as_labels(y, arrays.n_rows)
    classes, label_index = np.unique(labels, return_inverse=True)
    if classes.shape[0] < 2:
        raise ValueError(
            f"training needs at least two classes; y has only the label {classes[0]:g}"
        )
    weights = class_weights(classes, applied.get("class_weight"))
    gamma = applied["gamma"] if applied["gamma"] is not None else 1.0 / max(
        arrays.n_features, 1)
    kernel = (KERNEL_CODES[applied["kernel"]], float(gamma), float(applied["coef0"]),
              int(applied["degree"]))
    strategy = applied["multiclass"] if classes.shape[0] > 2 else "ovo"
    problems = _binary_problems(label_index.astype(np.int64), classes.shape[0], strategy,
                                float(applied["C"]) * weights)
    sq_norms = row_sq_norms(arrays.data, arrays.indptr)
    validate_s = time.perf_counter() - t0

    monitor = ProgressMonitor(progress, applied.get("max_seconds"), n_classes=len(problems))
    threads = _thread_count(int(applied["threads"]))
    fine_grained = threads > 1 and not _cores_busy(threads)
    previous_threads = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        for k, problem in enumerate(problems):
            started = time.perf_counter()
            previous = problems[k - 1].info["exit_reason"] if k > 0 else "converged"
            if previous in ("cancelled", "max_seconds"):
                _leave_untrained(problem, previous)
            elif monitor.out_of_time():
                _leave_untrained(problem, "max_seconds")
            else:
                monitor.class_index = k
                _solve_binary(problem, arrays, sq_norms, kernel, applied, monitor, classes,
                              threads, fine_grained)
            problem.info["train_seconds"] = time.perf_counter() - started
    finally:
        numba.set_num_threads(previous_threads)
    solve_s = time.perf_counter() - t0 - validate_s

    t_model = time.perf_counter()
    model = _build_model(problems, arrays, classes, strategy, applied, gamma)
    timings = {"validate_s": validate_s, "solve_s": solve_s,
               "model_s": time.perf_counter() - t_model,
               "progress_s": monitor.progress_seconds}
    for problem in problems:
        for key in ("kernel_s", "finish_s"):
            timings[key] = timings.get(key, 0.0) + problem.info.get(key, 0.0)
    exit_reason = max((p.info["exit_reason"] for p in problems),
                      key=_EXIT_SEVERITY.__getitem__)
    return KernelFitResult(
        model=model,
        dual_objective=float(sum(p.objective for p in problems)),
        n_support=model.n_support,
        iterations=int(sum(p.info["iterations"] for p in problems)),
        exit_reason=exit_reason,
        train_seconds=solve_s,
        params={**applied, "gamma": float(gamma), "threads_used": threads,
                "fine_grained_parallel": fine_grained},
        timings=timings,
        per_output=[_output_summary(p, classes) for p in problems],
    )


def warmup() -> float:
    """Compile (or load from the on-disk cache) every SMO and prediction kernel, the
    parallel variants included; returns seconds taken."""
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    X = np.round(rng.normal(size=(12, 3)), 2)
    y = np.array([1.0, 2.0, 3.0] * 4)
    for kernel in ("rbf", "linear"):
        for multiclass in ("ovo", "ovr"):
            result = fit_kernel(X, y, kernel=kernel, multiclass=multiclass, cache_mb=1.0,
                                progress=lambda event: None)
            result.model.predict(X)
            result.model.predict(X, threads=1)
    # the parallel variants run only on large problems: call them once directly
    state = _SmoState(as_csr_arrays(X), np.zeros(12) + 1.0, np.arange(12, dtype=np.int64),
                      np.array([1, -1] * 6, dtype=np.int8), np.ones(12),
                      (_RBF, 0.5, 0.0, 3), 1.0, chunks=2)
    _warm_parallel(*state.kernel_args)
    return time.perf_counter() - started


# --------------------------------------------------------------------------------------
# Binary problems and the model


def _binary_problems(label_index: np.ndarray, n_classes: int, strategy: str,
                     class_cost: np.ndarray) -> list[_Binary]:
    rows_of = [np.flatnonzero(label_index == c).astype(np.int64) for c in range(n_classes)]
    problems = []
    if strategy == "ovo":
        for i in range(n_classes):
            for j in range(i + 1, n_classes):
                rows = np.concatenate([rows_of[i], rows_of[j]])
                y = np.concatenate([np.ones(rows_of[i].shape[0], np.int8),
                                    -np.ones(rows_of[j].shape[0], np.int8)])
                cost = np.concatenate([np.full(rows_of[i].shape[0], class_cost[i]),
                                       np.full(rows_of[j].shape[0], class_cost[j])])
                problems.append(_Binary(rows, y, cost, i, j))
    else:
        rows = np.arange(label_index.shape[0], dtype=np.int64)
        cost = class_cost[label_index].astype(np.float64)
        for c in range(n_classes):
            y = np.where(label_index == c, 1, -1).astype(np.int8)
            problems.append(_Binary(rows, y, cost, c, -1))
    return problems


def _build_model(problems: list[_Binary], X: CsrArrays, classes: np.ndarray, strategy: str,
                 applied: dict[str, Any], gamma: float) -> KernelModel:
    """LIBSVM's model layout: SVs grouped by class (rows ascending within a class)."""
    n_rows = X.n_rows
    k = classes.shape[0]
    support = np.zeros(n_rows, dtype=bool)
    for p in problems:
        assert p.alpha is not None
        support[p.rows[p.alpha > 0]] = True
    label_of = np.empty(n_rows, dtype=np.int64)
    for p in problems:
        label_of[p.rows[p.y > 0]] = p.positive
        if p.negative >= 0:
            label_of[p.rows[p.y < 0]] = p.negative
    sv_rows = np.concatenate([np.flatnonzero(support & (label_of == c)) for c in range(k)])
    n_sv = np.array([np.count_nonzero(support & (label_of == c)) for c in range(k)])
    position = np.full(n_rows, -1, dtype=np.int64)
    position[sv_rows] = np.arange(sv_rows.shape[0])
    sv_coef = np.zeros((k if strategy == "ovr" else k - 1, sv_rows.shape[0]))
    for p in problems:
        assert p.alpha is not None
        nonzero = p.alpha > 0
        target = position[p.rows[nonzero]]
        coef = p.alpha[nonzero] * p.y[nonzero]  # y_i a_i
        if strategy == "ovr":
            sv_coef[p.positive, target] = coef
        else:
            # pair (i, j): class i's coefficients in row j-1, class j's in row i
            is_i = p.y[nonzero] > 0
            sv_coef[p.negative - 1, target[is_i]] = coef[is_i]
            sv_coef[p.positive, target[~is_i]] = coef[~is_i]
    data, indices, indptr = _gather_rows(X, sv_rows)
    return KernelModel(
        classes=classes, kernel=applied["kernel"], gamma=gamma, degree=int(applied["degree"]),
        coef0=float(applied["coef0"]), multiclass=strategy, n_features=X.n_features,
        sv_data=data, sv_indices=indices, sv_indptr=indptr, sv_coef=sv_coef,
        rho=np.array([p.rho for p in problems]), n_sv=n_sv, sv_rows=sv_rows,
    )


def _gather_rows(X: CsrArrays, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    lengths = X.indptr[rows + 1] - X.indptr[rows]
    indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    take = np.concatenate([np.arange(X.indptr[r], X.indptr[r + 1]) for r in rows]) if (
        rows.shape[0]) else np.zeros(0, dtype=np.int64)
    return X.data[take].copy(), X.indices[take].copy(), indptr


def _output_summary(problem: _Binary, classes: np.ndarray) -> dict[str, Any]:
    assert problem.alpha is not None
    alpha = problem.alpha
    summary = {
        "positive_class": float(classes[problem.positive]),
        "negative_class": None if problem.negative < 0 else float(classes[problem.negative]),
        "dual_objective": problem.objective,
        "rho": problem.rho,
        "n_support": int(np.count_nonzero(alpha > 0)),
        "n_bounded_support": int(np.count_nonzero(alpha >= problem.cost)),
    }
    summary.update({key: value for key, value in problem.info.items()
                    if key not in ("kernel_s", "finish_s")})
    return summary


def _leave_untrained(problem: _Binary, reason: str) -> None:
    """A binary problem never trained because the fit was stopped: a = 0, rho = 0."""
    problem.alpha = np.zeros(problem.rows.shape[0])
    problem.rho = 0.0
    problem.objective = 0.0
    problem.info = {"exit_reason": reason, "iterations": 0, "violation": None,
                    "active_size": int(problem.rows.shape[0])}


def _cores_busy(threads: int) -> bool:
    """True when other processes keep the cores busy (1-minute load average, minus this
    process, plus the threads we would add, exceeds the cores): then a fork/join per SMO
    step waits for descheduled threads (measured: 2-5x slower on a loaded 2-core machine),
    and only the coarse parallel loops (the deferred G_bar pass, ~ once per 1000 steps)
    are used. The solution does not depend on this choice."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return False
    return load - 1.0 + threads > (os.cpu_count() or 1) + 0.5


def _thread_count(requested: int) -> int:
    return max(1, min(requested, max_threads()))


# --------------------------------------------------------------------------------------
# One binary problem


def _solve_binary(problem: _Binary, X: CsrArrays, sq_norms: np.ndarray,
                  kernel: tuple[int, float, float, int], applied: dict[str, Any],
                  monitor: ProgressMonitor, classes: np.ndarray, threads: int,
                  fine_grained: bool) -> None:
    t_start = time.perf_counter()
    state = _SmoState(X, sq_norms, problem.rows, problem.y, problem.cost, kernel,
                      float(applied["cache_mb"]), chunks=threads, fine_grained=fine_grained)
    pair = [float(classes[problem.positive]),
            None if problem.negative < 0 else float(classes[problem.negative])]
    t_iterate = time.perf_counter()
    exit_reason = _iterate(state, float(applied["eps"]), int(applied["max_iter"]), monitor,
                           pair)
    t_finish = time.perf_counter()
    alpha, rho, objective = state.finish()
    if not (math.isfinite(rho) and math.isfinite(objective) and np.all(np.isfinite(alpha))):
        exit_reason = "numerical_error"
    problem.alpha, problem.rho, problem.objective = alpha, rho, objective
    counters = state.counters
    problem.info = {
        "exit_reason": exit_reason,
        "iterations": int(counters[_ITER]),
        "violation": float(state.values[_VIOLATION]),
        "active_size": int(counters[_ACTIVE]),
        "cache_hits": int(counters[_HITS]),
        "cache_misses": int(counters[_MISSES]),
        "kernel_evaluations": int(counters[_EVALS]),
        "shrinkings": int(counters[_SHRINKS]),
        "gradient_reconstructions": int(counters[_RECONSTRUCTS]),
        "kernel_s": t_finish - t_iterate + (t_iterate - t_start),
        "finish_s": time.perf_counter() - t_finish,
    }


def _iterate(state: _SmoState, eps: float, max_iter: int, monitor: ProgressMonitor,
             pair: list[float | None]) -> str:
    """Call the compiled steps in bounded chunks until they stop or the monitor stops them."""
    steps = _INITIAL_STEPS
    reported = -1
    while True:
        call_start = time.perf_counter()
        status = state.run(eps, max_iter, steps)
        steps = _next_steps(steps, time.perf_counter() - call_start)
        if status != _PAUSED:
            return _STATUS_EXIT[status]
        if monitor.out_of_time():
            return "max_seconds"
        if state.iteration > reported and monitor.event_due():
            reported = state.iteration
            if monitor.report(lambda: {**state.snapshot(), "pair": pair}):
                return "cancelled"


def _next_steps(steps: int, seconds: float) -> int:
    scale = min(max(_CALL_SECONDS / max(seconds, 1e-6), 0.5), 4.0)
    return int(min(max(steps * scale, _MIN_STEPS), _MAX_STEPS))


class _SmoState:
    """The arrays the compiled kernels work on.

    Positions 0..l-1 are permuted by shrinking (LIBSVM's swap_index): the active set is
    positions [0, active_size). `perm[t]` is the row of X at position t, `local[t]` its
    index in the binary problem.
    """

    def __init__(self, X: CsrArrays, sq_norms: np.ndarray, rows: np.ndarray, y: np.ndarray,
                 cost: np.ndarray, kernel: tuple[int, float, float, int], cache_mb: float,
                 chunks: int, fine_grained: bool = True) -> None:
        l = int(rows.shape[0])
        self.l = l
        perm = np.ascontiguousarray(rows, dtype=np.int64).copy()
        local = np.arange(l, dtype=np.int64)
        y = np.ascontiguousarray(y, dtype=np.int8).copy()
        cost = np.ascontiguousarray(cost, dtype=np.float64).copy()
        nnz = int(np.sum(X.indptr[perm + 1] - X.indptr[perm]))
        rows_arrays = ((np.empty(nnz), np.empty(nnz, dtype=np.int32),
                        np.empty(l + 1, dtype=np.int64), np.empty(l),
                        np.zeros(X.n_features + 1)),
                       (X.data, X.indices, X.indptr, sq_norms))
        _gather_positional_rows(rows_arrays, perm)
        diagonal = np.empty(l)
        _kernel_diagonal(rows_arrays[0][3], kernel, diagonal)
        alpha = np.zeros(l)
        status = np.full(l, _LOWER, dtype=np.int8)
        gradient = np.full(l, -1.0)  # G = Qa + p, p = -e, a = 0
        gradient_bar = np.zeros(l)
        self.counters = np.zeros(_N_COUNTERS, dtype=np.int64)
        self.counters[_ACTIVE] = l
        self.counters[_COUNTER] = min(l, _SHRINK_EVERY) + 1
        # LIBSVM's Cache: bytes / sizeof(float) minus the heads, at least two full columns
        floats = int(cache_mb * (1 << 20)) // 4 - l * 8
        self.counters[_CACHE_FREE] = max(floats, 2 * l)
        self.values = np.array([-math.inf, math.inf])
        columns = _new_column_list(l)
        lru_prev = np.full(l + 1, l, dtype=np.int64)
        lru_next = np.full(l + 1, l, dtype=np.int64)
        self.positions = (perm, local, y, cost, diagonal, alpha, status, gradient, gradient_bar)
        self.cache = (columns, np.zeros(l, dtype=np.int64), lru_prev, lru_next,
                      np.zeros(0, dtype=np.float32))
        # (chunks, per-chunk scratch x 3, minimum work of a parallel loop: passes over the
        # active set and kernel columns (once per step), the deferred G_bar pass)
        never = np.int64(1 << 62)
        parallel = (np.int64(max(1, chunks)), np.empty(max(1, chunks)),
                    np.empty(max(1, chunks), dtype=np.int64), np.empty(max(1, chunks)),
                    np.int64(PARALLEL_MIN_PASS) if fine_grained else never,
                    np.int64(PARALLEL_MIN_KERNEL) if fine_grained else never,
                    np.int64(PARALLEL_MIN_FLUSH))
        pending = (np.empty(_PENDING_CAPACITY, dtype=np.int64), np.empty(_PENDING_CAPACITY),
                   np.empty(_PENDING_CAPACITY, dtype=np.int64))
        self.kernel_args = (rows_arrays, kernel, self.positions, self.cache,
                            (self.counters, self.values, np.empty((l, 2), dtype=np.int64),
                             pending,
                             parallel))

    @property
    def iteration(self) -> int:
        return int(self.counters[_ITER])

    def run(self, eps: float, max_iter: int, steps: int) -> int:
        return int(_smo_steps(*self.kernel_args, (float(eps), int(max_iter), int(steps))))

    def snapshot(self) -> dict[str, Any]:
        """The progress event: the dual objective (exact, from G and G_bar; O(l))."""
        _flush_pending(*self.kernel_args)
        _, _, _, _, _, alpha, status, gradient, gradient_bar = self.positions
        return {"iteration": self.iteration, "primal": None,
                "dual": float(_objective_from_bar(alpha, status, gradient, gradient_bar)),
                "gap": None, "violation": float(self.values[_VIOLATION]),
                "active_size": int(self.counters[_ACTIVE])}

    def finish(self) -> tuple[np.ndarray, float, float]:
        """Unshrink (reconstruct the gradient), then (alpha in problem order, rho, f(a))."""
        out = np.zeros(3)
        alpha = np.empty(self.l)
        _finish(*self.kernel_args, alpha, out)
        return alpha, float(out[0]), float(out[1])


# --------------------------------------------------------------------------------------
# Compiled kernels. Kernel values: copies of solvers/kernels.py's `_powi` and
# `_kernel_from_dot` (Numba's on-disk cache is invalidated only when the file of the cached
# function changes, so a solver module keeps its own copies of the small inlined helpers).


@njit(cache=True, inline="always")
def _powi(base, times):
    """base**times by squaring, exactly as LIBSVM's powi."""
    tmp = base
    ret = 1.0
    t = times
    while t > 0:
        if t % 2 == 1:
            ret *= tmp
        tmp = tmp * tmp
        t //= 2
    return ret


@njit(cache=True, inline="always")
def _kernel_from_dot(kind, dot, sq_a, sq_b, gamma, coef0, degree):
    """K(a, b) from a.b and the squared norms (kind: LIBSVM's kernel_type)."""
    if kind == _RBF:
        return math.exp(-gamma * (sq_a + sq_b - 2.0 * dot))
    if kind == _LINEAR:
        return dot
    if kind == _POLY:
        return _powi(gamma * dot + coef0, degree)
    return math.tanh(gamma * dot + coef0)


@njit(cache=True)
def _kernel_diagonal(sq_norms, kernel, out):
    kind, gamma, coef0, degree = kernel
    for t in range(sq_norms.shape[0]):
        # out[t] = K(x_t, x_t)   (LIBSVM's QD)
        sq = sq_norms[t]
        out[t] = _kernel_from_dot(kind, sq, sq, sq, gamma, coef0, degree)


@njit(cache=True)
def _new_column_list(n):
    columns = List.empty_list(types.float32[::1])
    empty = np.zeros(0, dtype=np.float32)
    for _ in range(n):
        columns.append(empty)
    return columns


# ---- kernel columns ------------------------------------------------------------------


@njit(cache=True, inline="always")
def _column_range(rows, kernel, y, i, lo, hi, out):
    """out[t] = y_i y_t K(x_i, x_t) for positions t in [lo, hi), with x_i scattered in the
    dense buffer. rows = the positional CSR (row t = the example at position t) + buffer."""
    data, indices, indptr, sq_norms, dense = rows
    kind, gamma, coef0, degree = kernel
    sq_i = sq_norms[i]
    y_i = y[i]
    for t in range(lo, hi):
        r = np.uint64(t)  # unsigned: no negative-index wraparound code
        # dot = x_t . x_i  (gather from the scattered x_i)
        dot = 0.0
        for k in range(np.uint64(indptr[r]), np.uint64(indptr[r + _U1])):
            dot += data[k] * dense[np.uint32(indices[k])]
        value = _kernel_from_dot(kind, dot, sq_i, sq_norms[r], gamma, coef0, degree)
        out[t] = np.float32(value if y[t] == y_i else -value)


# The parallel loops take plain arrays and scalars: Numba's parfor lowering mishandles
# writes through arrays that arrive inside tuple arguments.


@njit(cache=True, parallel=True)
def _column_parallel(data, indices, indptr, sq_norms, dense, kind, gamma, coef0, degree, y,
                     i, start, stop, out, chunks):
    n = stop - start
    for c in prange(chunks):
        _column_range((data, indices, indptr, sq_norms, dense), (kind, gamma, coef0, degree),
                      y, i, start + c * n // chunks, start + (c + 1) * n // chunks, out)


@njit(cache=True)
def _fill_column(rows, kernel, positions, i, start, stop, out, parallel):
    """out[start:stop] = Q_{i, start:stop} (float32), in parallel when large."""
    positional = rows[0]
    data, indices, indptr, _, dense = positional
    y = positions[2]
    for k in range(indptr[i], indptr[i + 1]):
        dense[indices[k]] = data[k]
    chunks = parallel[0]
    work = (stop - start) * (8 + (indptr[-1] // max(indptr.shape[0] - 1, 1)))
    if chunks > 1 and work >= parallel[5]:
        _column_parallel(data, indices, indptr, positional[3], dense, kernel[0], kernel[1],
                         kernel[2], kernel[3], y, i, start, stop, out, chunks)
    else:
        _column_range(positional, kernel, y, i, start, stop, out)
    for k in range(indptr[i], indptr[i + 1]):
        dense[indices[k]] = 0.0


@njit(cache=True)
def _gather_positional_rows(rows, perm):
    """Row t of the positional CSR = row perm[t] of X (sequential memory in the kernel
    columns; rebuilt after shrinking permutes the positions)."""
    data, indices, indptr, sq_norms, _ = rows[0]
    x_data, x_indices, x_indptr, x_sq_norms = rows[1]
    offset = 0
    indptr[0] = 0
    for t in range(perm.shape[0]):
        r = perm[t]
        for k in range(x_indptr[r], x_indptr[r + 1]):
            data[offset] = x_data[k]
            indices[offset] = x_indices[k]
            offset += 1
        indptr[t + 1] = offset
        sq_norms[t] = x_sq_norms[r]


# ---- the column cache (LIBSVM's Cache: LRU list of variable-length columns) -----------


@njit(cache=True, inline="always")
def _lru_delete(lru_prev, lru_next, h):
    lru_next[lru_prev[h]] = lru_next[h]
    lru_prev[lru_next[h]] = lru_prev[h]


@njit(cache=True, inline="always")
def _lru_insert(lru_prev, lru_next, h):
    """Insert h at the most-recently-used end (before the sentinel)."""
    head = lru_prev.shape[0] - 1
    lru_next[h] = head
    lru_prev[h] = lru_prev[head]
    lru_next[lru_prev[h]] = h
    lru_prev[head] = h


@njit(cache=True)
def _get_column(i, length, rows, kernel, positions, cache, counters, parallel):
    """Q_{i, 0:length} (float32; the array may be longer): cached, extended or computed."""
    columns, col_len, lru_prev, lru_next, empty = cache
    head = col_len.shape[0]
    old_len = col_len[i]
    if old_len > 0:
        _lru_delete(lru_prev, lru_next, i)
    more = length - old_len
    if more > 0:
        # evict least recently used columns until `more` floats are free
        while counters[_CACHE_FREE] < more:
            old = lru_next[head]
            if old == head:
                break
            _lru_delete(lru_prev, lru_next, old)
            columns[old] = empty
            counters[_CACHE_FREE] += col_len[old]
            col_len[old] = 0
        column = np.empty(length, dtype=np.float32)
        if old_len > 0:
            column[:old_len] = columns[i][:old_len]
        counters[_CACHE_FREE] -= more
        col_len[i] = length
        _fill_column(rows, kernel, positions, i, old_len, length, column, parallel)
        columns[i] = column
        counters[_MISSES] += 1
        counters[_EVALS] += more
    else:
        column = columns[i]
        counters[_HITS] += 1
    _lru_insert(lru_prev, lru_next, i)
    return column


@njit(cache=True)
def _swap_positions(positions, cache, i, j):
    """LIBSVM's Solver::swap_index + the cache heads (entries: _swap_cached_entries)."""
    for array in positions[:2]:  # perm, local
        array[i], array[j] = array[j], array[i]
    y = positions[2]
    y[i], y[j] = y[j], y[i]
    for array in positions[3:6]:  # cost, diagonal, alpha
        array[i], array[j] = array[j], array[i]
    status = positions[6]
    status[i], status[j] = status[j], status[i]
    for array in positions[7:]:  # G, G_bar
        array[i], array[j] = array[j], array[i]
    columns, col_len, lru_prev, lru_next, _ = cache
    if col_len[i] > 0:
        _lru_delete(lru_prev, lru_next, i)
    if col_len[j] > 0:
        _lru_delete(lru_prev, lru_next, j)
    column = columns[i]
    columns[i] = columns[j]
    columns[j] = column
    col_len[i], col_len[j] = col_len[j], col_len[i]
    if col_len[i] > 0:
        _lru_insert(lru_prev, lru_next, i)
    if col_len[j] > 0:
        _lru_insert(lru_prev, lru_next, j)


@njit(cache=True)
def _swap_cached_entries(cache, counters, swaps, n_swaps):
    """Apply the swaps (i < j) in order to the entries of every cached column; a column that
    covers i but not j is dropped (LIBSVM's Cache::swap_index, batched per column)."""
    columns, col_len, lru_prev, lru_next, empty = cache
    head = col_len.shape[0]
    h = lru_next[head]
    while h != head:
        following = lru_next[h]
        length = col_len[h]
        column = columns[h]
        for s in range(n_swaps):
            i = swaps[s, 0]
            j = swaps[s, 1]
            if length > i:
                if length > j:
                    column[i], column[j] = column[j], column[i]
                else:
                    _lru_delete(lru_prev, lru_next, h)
                    columns[h] = empty
                    counters[_CACHE_FREE] += length
                    col_len[h] = 0
                    break
        h = following


# ---- selection, gradient update, shrinking ---------------------------------------------


@njit(cache=True, inline="always")
def _gmax_range(y, status, gradient, lo, hi):
    """max { -y_t G_t : t in I_up } over [lo, hi) and its last argmax (-1 if none)."""
    best = -np.inf
    best_t = -1
    for t in range(lo, hi):
        if y[t] > 0:
            if status[t] != _UPPER and -gradient[t] >= best:
                best = -gradient[t]
                best_t = t
        elif status[t] != _LOWER and gradient[t] >= best:
            best = gradient[t]
            best_t = t
    return best, best_t


@njit(cache=True, inline="always")
def _select_j_range(y, status, gradient, diagonal, q_i, i, gmax, lo, hi):
    """LIBSVM's second loop over [lo, hi): (min objective decrease, its last argmin or -1,
    max { y_t G_t : t in I_low })."""
    gmax2 = -np.inf
    best = np.inf
    best_t = -1
    y_i = y[i]
    diagonal_i = diagonal[i]
    for t in range(lo, hi):
        if y[t] > 0:
            if status[t] != _LOWER:
                grad_diff = gmax + gradient[t]
                if gradient[t] >= gmax2:
                    gmax2 = gradient[t]
                if grad_diff > 0:
                    # a_it = K_ii + K_tt - 2 y_i Q_it;  decrease = -b^2 / a_it
                    quad = diagonal_i + diagonal[t] - 2.0 * y_i * q_i[t]
                    decrease = -(grad_diff * grad_diff) / (quad if quad > 0 else _TAU)
                    if decrease <= best:
                        best_t = t
                        best = decrease
        elif status[t] != _UPPER:
            grad_diff = gmax - gradient[t]
            if -gradient[t] >= gmax2:
                gmax2 = -gradient[t]
            if grad_diff > 0:
                quad = diagonal_i + diagonal[t] + 2.0 * y_i * q_i[t]
                decrease = -(grad_diff * grad_diff) / (quad if quad > 0 else _TAU)
                if decrease <= best:
                    best_t = t
                    best = decrease
    return best, best_t, gmax2


@njit(cache=True, inline="always")
def _update_range(gradient, q_i, q_j, delta_i, delta_j, y, status, lo, hi):
    """G[t] += Q_it d_i + Q_jt d_j on [lo, hi), fused with the next step's selection of i:
    returns max { -y_t G_t : t in I_up } and its last argmax."""
    best = -np.inf
    best_t = -1
    for t in range(lo, hi):
        g = gradient[t] + (q_i[t] * delta_i + q_j[t] * delta_j)
        gradient[t] = g
        if y[t] > 0:
            if status[t] != _UPPER and -g >= best:
                best = -g
                best_t = t
        elif status[t] != _LOWER and g >= best:
            best = g
            best_t = t
    return best, best_t


@njit(cache=True, parallel=True)
def _gmax_parallel(y, status, gradient, n, chunks, values, indices):
    for c in prange(chunks):
        best, best_t = _gmax_range(y, status, gradient, c * n // chunks, (c + 1) * n // chunks)
        values[c] = best
        indices[c] = best_t


@njit(cache=True, parallel=True)
def _select_j_parallel(y, status, gradient, diagonal, q_i, i, gmax, n, chunks, values,
                       indices, values2):
    for c in prange(chunks):
        best, best_t, gmax2 = _select_j_range(y, status, gradient, diagonal, q_i, i, gmax,
                                              c * n // chunks, (c + 1) * n // chunks)
        values[c] = best
        indices[c] = best_t
        values2[c] = gmax2


@njit(cache=True, parallel=True)
def _update_parallel(gradient, q_i, q_j, delta_i, delta_j, y, status, n, chunks, values,
                     indices):
    for c in prange(chunks):
        best, best_t = _update_range(gradient, q_i, q_j, delta_i, delta_j, y, status,
                                     c * n // chunks, (c + 1) * n // chunks)
        values[c] = best
        indices[c] = best_t


@njit(cache=True)
def _reduce_max(parallel):
    """Chunk results in order, ties to the later chunk: the sequential scan's answer."""
    chunks, values, indices, _, _, _, _ = parallel
    best = -np.inf
    best_t = -1
    for c in range(chunks):
        if indices[c] >= 0 and values[c] >= best:
            best = values[c]
            best_t = indices[c]
    return best, best_t


@njit(cache=True)
def _gmax(positions, n, parallel):
    y, status, gradient = positions[2], positions[6], positions[7]
    if parallel[0] > 1 and n >= parallel[4]:
        _gmax_parallel(y, status, gradient, n, parallel[0], parallel[1], parallel[2])
        return _reduce_max(parallel)
    return _gmax_range(y, status, gradient, 0, n)


@njit(cache=True)
def _select_working_set(rows, kernel, positions, cache, counters, values, parallel):
    """LIBSVM's select_working_set: (i, j, Gmax, Gmax2); i or j = -1 if there is none."""
    active = counters[_ACTIVE]
    if counters[_GMAX_VALID] == 1:
        gmax = values[_GMAX]
        i = counters[_GMAX_IDX]
    else:
        gmax, i = _gmax(positions, active, parallel)
    if i < 0:
        return -1, -1, gmax, -np.inf
    q_i = _get_column(i, active, rows, kernel, positions, cache, counters, parallel)
    y, diagonal, status, gradient = positions[2], positions[4], positions[6], positions[7]
    if parallel[0] > 1 and active >= parallel[4]:
        _select_j_parallel(y, status, gradient, diagonal, q_i, i, gmax, active, parallel[0],
                           parallel[1], parallel[2], parallel[3])
        chunks, decreases, indices, gmax2s, _, _, _ = parallel
        best = np.inf
        j = -1
        gmax2 = -np.inf
        for c in range(chunks):
            gmax2 = max(gmax2, gmax2s[c])
            if indices[c] >= 0 and decreases[c] <= best:
                best = decreases[c]
                j = indices[c]
    else:
        best, j, gmax2 = _select_j_range(y, status, gradient, diagonal, q_i, i, gmax, 0,
                                         active)
    return i, j, gmax, gmax2


@njit(cache=True, inline="always")
def _update_status(alpha, cost, status, t):
    if alpha[t] >= cost[t]:
        status[t] = _UPPER
    elif alpha[t] <= 0.0:
        status[t] = _LOWER
    else:
        status[t] = _FREE


@njit(cache=True, error_model="numpy")
def _take_step(i, j, rows, kernel, positions, cache, counters, values, pending, parallel):
    """LIBSVM's two-variable update of a_i, a_j, then G (fused with the next selection of
    i) and G_bar. Returns False if the step is not finite."""
    _, _, y, cost, diagonal, alpha, status, gradient, _ = positions
    active = counters[_ACTIVE]
    chunks = parallel[0]
    q_i = _get_column(i, active, rows, kernel, positions, cache, counters, parallel)
    q_j = _get_column(j, active, rows, kernel, positions, cache, counters, parallel)
    c_i = cost[i]
    c_j = cost[j]
    old_i = alpha[i]
    old_j = alpha[j]
    a_i = old_i
    a_j = old_j
    if y[i] != y[j]:
        # minimise along a_i - a_j = const:  delta = (-G_i - G_j) / (K_ii + K_jj + 2 Q_ij)
        quad = diagonal[i] + diagonal[j] + 2.0 * q_i[j]
        if quad <= 0:
            quad = _TAU
        delta = (-gradient[i] - gradient[j]) / quad
        diff = a_i - a_j
        a_i += delta
        a_j += delta
        if diff > 0:
            if a_j < 0:
                a_j = 0.0
                a_i = diff
        elif a_i < 0:
            a_i = 0.0
            a_j = -diff
        if diff > c_i - c_j:
            if a_i > c_i:
                a_i = c_i
                a_j = c_i - diff
        elif a_j > c_j:
            a_j = c_j
            a_i = c_j + diff
    else:
        # minimise along a_i + a_j = const:  delta = (G_i - G_j) / (K_ii + K_jj - 2 Q_ij)
        quad = diagonal[i] + diagonal[j] - 2.0 * q_i[j]
        if quad <= 0:
            quad = _TAU
        delta = (gradient[i] - gradient[j]) / quad
        total = a_i + a_j
        a_i -= delta
        a_j += delta
        if total > c_i:
            if a_i > c_i:
                a_i = c_i
                a_j = total - c_i
        elif a_j < 0:
            a_j = 0.0
            a_i = total
        if total > c_j:
            if a_j > c_j:
                a_j = c_j
                a_i = total - c_j
        elif a_i < 0:
            a_i = 0.0
            a_j = total
    delta_i = a_i - old_i
    delta_j = a_j - old_j
    if not (np.isfinite(delta_i) and np.isfinite(delta_j)):
        return False
    alpha[i] = a_i
    alpha[j] = a_j
    was_upper_i = status[i] == _UPPER
    was_upper_j = status[j] == _UPPER
    _update_status(alpha, cost, status, i)
    _update_status(alpha, cost, status, j)

    # G[:active] += Q_i d_i + Q_j d_j, and the next step's i
    if chunks > 1 and active >= parallel[4]:
        _update_parallel(gradient, q_i, q_j, delta_i, delta_j, y, status, active, chunks,
                         parallel[1], parallel[2])
        gmax, gmax_t = _reduce_max(parallel)
    else:
        gmax, gmax_t = _update_range(gradient, q_i, q_j, delta_i, delta_j, y, status, 0,
                                     active)
    values[_GMAX] = gmax
    counters[_GMAX_IDX] = gmax_t
    counters[_GMAX_VALID] = 1

    # G_bar += +-C Q_:i when a_i enters / leaves its upper bound: now on the active set
    # (Q_i is at hand), deferred on the inactive one (one pass at the next flush)
    if was_upper_i != (status[i] == _UPPER):
        _update_gradient_bar(i, -c_i if was_upper_i else c_i, q_i, rows, kernel, positions,
                             cache, counters, pending, parallel)
    if was_upper_j != (status[j] == _UPPER):
        _update_gradient_bar(j, -c_j if was_upper_j else c_j, q_j, rows, kernel, positions,
                             cache, counters, pending, parallel)
    return True


@njit(cache=True)
def _update_gradient_bar(i, scale, q_i, rows, kernel, positions, cache, counters, pending,
                         parallel):
    gradient_bar = positions[8]
    active = counters[_ACTIVE]
    for t in range(active):
        # G_bar[:active] += s Q_i[:active]
        gradient_bar[t] += scale * q_i[t]
    if active == gradient_bar.shape[0]:
        return
    if counters[_PENDING] == pending[0].shape[0]:
        _flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel)
    pending[0][counters[_PENDING]] = i
    pending[1][counters[_PENDING]] = scale
    pending[2][counters[_PENDING]] = active
    counters[_PENDING] += 1


@njit(cache=True, inline="always")
def _gradient_bar_range(positional, kernel, y, pending_at, pending_scale, cover, n_pending,
                        gradient_bar, lo, hi):
    """G_bar[t] += s_p Q_{i_p, t} for t in [max(lo, cover[p]), hi), p = 0, 1, ... in order
    (fresh kernel values, rounded to float32 like every cached Q)."""
    data, indices, indptr, sq_norms, dense = positional
    kind, gamma, coef0, degree = kernel
    for p in range(n_pending):
        i = pending_at[p]
        start = max(lo, cover[p])
        if start >= hi:
            continue
        for k in range(indptr[i], indptr[i + 1]):
            dense[indices[k]] = data[k]
        scale = pending_scale[p]
        sq_i = sq_norms[i]
        y_i = y[i]
        for t in range(start, hi):
            r = np.uint64(t)
            dot = 0.0
            for k in range(np.uint64(indptr[r]), np.uint64(indptr[r + _U1])):
                dot += data[k] * dense[np.uint32(indices[k])]
            value = _kernel_from_dot(kind, dot, sq_i, sq_norms[r], gamma, coef0, degree)
            gradient_bar[t] += scale * np.float32(value if y[t] == y_i else -value)
        for k in range(indptr[i], indptr[i + 1]):
            dense[indices[k]] = 0.0


@njit(cache=True, parallel=True)
def _gradient_bar_parallel(data, indices, indptr, sq_norms, n_features, kind, gamma, coef0,
                           degree, y, pending_at, pending_scale, cover, n_pending,
                           gradient_bar, blocks):
    n = gradient_bar.shape[0]
    for b in prange(blocks):
        dense = np.zeros(n_features)  # each block scatters into its own buffer
        _gradient_bar_range((data, indices, indptr, sq_norms, dense),
                            (kind, gamma, coef0, degree), y, pending_at, pending_scale, cover,
                            n_pending, gradient_bar, b * n // blocks, (b + 1) * n // blocks)


@njit(cache=True)
def _flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel):
    """Apply the deferred G_bar updates of the inactive variables (s_p Q_{i_p, t} for
    t >= the active size at update p), in their order, in parallel when large. Every G_bar_t
    receives its updates in time order, as with LIBSVM's immediate full-column update."""
    n_pending = counters[_PENDING]
    if n_pending == 0:
        return
    counters[_PENDING] = 0
    pending_at, pending_scale, cover = pending
    y, gradient_bar = positions[2], positions[8]
    l = gradient_bar.shape[0]
    fresh = 0
    for p in range(n_pending):
        fresh += l - cover[p]
    counters[_EVALS] += fresh
    positional = rows[0]
    data, indices, indptr, sq_norms, dense = positional
    chunks = parallel[0]
    work = fresh * (8 + (indptr[-1] // max(indptr.shape[0] - 1, 1)))
    if chunks > 1 and work >= parallel[6]:
        _gradient_bar_parallel(data, indices, indptr, sq_norms, dense.shape[0], kernel[0],
                               kernel[1], kernel[2], kernel[3], y, pending_at, pending_scale,
                               cover, n_pending, gradient_bar, chunks)
    else:
        _gradient_bar_range(positional, kernel, y, pending_at, pending_scale, cover,
                            n_pending, gradient_bar, 0, l)


@njit(cache=True, inline="always")
def _be_shrunk(t, gmax1, gmax2, y, status, gradient):
    if status[t] == _UPPER:
        if y[t] > 0:
            return -gradient[t] > gmax1
        return -gradient[t] > gmax2
    if status[t] == _LOWER:
        if y[t] > 0:
            return gradient[t] > gmax2
        return gradient[t] > gmax1
    return False


@njit(cache=True)
def _reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel):
    """G of the inactive variables from G_bar and the free variables (LIBSVM)."""
    _, _, _, _, _, alpha, status, gradient, gradient_bar = positions
    active = counters[_ACTIVE]
    l = alpha.shape[0]
    if active == l:
        return
    _flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel)
    counters[_RECONSTRUCTS] += 1
    for t in range(active, l):
        gradient[t] = gradient_bar[t] - 1.0
    n_free = 0
    for t in range(active):
        if status[t] == _FREE:
            n_free += 1
    if n_free * l > 2 * active * (l - active):
        for i in range(active, l):
            # G_i += sum_{free t} a_t Q_it
            column = _get_column(i, active, rows, kernel, positions, cache, counters, parallel)
            total = gradient[i]
            for t in range(active):
                if status[t] == _FREE:
                    total += alpha[t] * column[t]
            gradient[i] = total
    else:
        for i in range(active):
            if status[i] == _FREE:
                # G[active:] += a_i Q_i,active:
                column = _get_column(i, l, rows, kernel, positions, cache, counters, parallel)
                a_i = alpha[i]
                for t in range(active, l):
                    gradient[t] += a_i * column[t]


@njit(cache=True)
def _do_shrinking(rows, kernel, positions, cache, counters, eps, swaps, pending, parallel):
    """LIBSVM's do_shrinking (with its one-time unshrink when m - M <= 10 eps)."""
    _flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel)
    y, status, gradient = positions[2], positions[6], positions[7]
    l = y.shape[0]
    counters[_SHRINKS] += 1
    active = counters[_ACTIVE]
    gmax1 = -np.inf  # max { -y_t G_t : t in I_up }
    gmax2 = -np.inf  # max { y_t G_t : t in I_low }
    for t in range(active):
        if y[t] > 0:
            if status[t] != _UPPER and -gradient[t] >= gmax1:
                gmax1 = -gradient[t]
            if status[t] != _LOWER and gradient[t] >= gmax2:
                gmax2 = gradient[t]
        else:
            if status[t] != _UPPER and -gradient[t] >= gmax2:
                gmax2 = -gradient[t]
            if status[t] != _LOWER and gradient[t] >= gmax1:
                gmax1 = gradient[t]
    if counters[_UNSHRINK] == 0 and gmax1 + gmax2 <= eps * 10:
        counters[_UNSHRINK] = 1
        _reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
        active = l
        counters[_ACTIVE] = l
    n_swaps = 0
    t = 0
    while t < active:
        if _be_shrunk(t, gmax1, gmax2, y, status, gradient):
            active -= 1
            while active > t:
                if not _be_shrunk(active, gmax1, gmax2, y, status, gradient):
                    _swap_positions(positions, cache, t, active)
                    swaps[n_swaps, 0] = t
                    swaps[n_swaps, 1] = active
                    n_swaps += 1
                    break
                active -= 1
        t += 1
    counters[_ACTIVE] = active
    _swap_cached_entries(cache, counters, swaps, n_swaps)
    if n_swaps > 0:
        _gather_positional_rows(rows, positions[0])


@njit(cache=True, error_model="numpy")
def _smo_steps(rows, kernel, positions, cache, state, settings):
    """Run SMO steps until convergence, max_iter, a non-finite step or the step budget.

    rows = ((data, indices, indptr, ||x||^2 of the rows in position order, a dense scatter
    buffer), (the same four arrays of X: source of the positional rows)); kernel = (kind,
    gamma, coef0, degree); positions = (perm, local, y, C, K_tt, alpha, status, G, G_bar),
    permuted together by shrinking; cache = (columns, lengths, lru_prev, lru_next, empty);
    state = (counters, values, swap buffer, parallel scratch); settings = (eps, max_iter,
    step_budget). Returns a status code; everything else is kept in the arrays.
    """
    counters, values, swaps, pending, parallel = state
    eps, max_iter, budget = settings
    l = positions[0].shape[0]
    steps = 0
    while True:
        if counters[_ITER] >= max_iter:
            return _MAX_ITER
        if steps >= budget:
            return _PAUSED
        counters[_COUNTER] -= 1
        if counters[_COUNTER] == 0:
            counters[_COUNTER] = min(l, _SHRINK_EVERY)
            _do_shrinking(rows, kernel, positions, cache, counters, eps, swaps, pending, parallel)
            counters[_GMAX_VALID] = 0
        i, j, gmax, gmax2 = _select_working_set(rows, kernel, positions, cache, counters,
                                                values, parallel)
        values[_VIOLATION] = gmax + gmax2
        if gmax + gmax2 < eps or j < 0:
            # converged on the active set: reconstruct the whole gradient and check again
            _reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
            counters[_ACTIVE] = l
            counters[_GMAX_VALID] = 0
            i, j, gmax, gmax2 = _select_working_set(rows, kernel, positions, cache,
                                                    counters, values, parallel)
            values[_VIOLATION] = gmax + gmax2
            if gmax + gmax2 < eps or j < 0:
                return _CONVERGED
            counters[_COUNTER] = 1  # shrink at the next step
        counters[_ITER] += 1
        steps += 1
        if not _take_step(i, j, rows, kernel, positions, cache, counters, values, pending,
                          parallel):
            return _NON_FINITE


@njit(cache=True)
def _finish(rows, kernel, positions, cache, state, alpha_out, out):
    """Unshrink, then alpha_out (problem order), out[0] = rho, out[1] = f(a) =
    1/2 sum_t a_t (G_t + p_t) (LIBSVM's obj), out[2] = violation on the full set."""
    counters, _, _, pending, parallel = state
    _, local, y, _, _, alpha, status, gradient, _ = positions
    l = alpha.shape[0]
    _reconstruct_gradient(rows, kernel, positions, cache, counters, pending, parallel)
    counters[_ACTIVE] = l
    counters[_GMAX_VALID] = 0
    # rho = mean of y_t G_t over free t, else the middle of [lb, ub]
    upper = np.inf
    lower = -np.inf
    n_free = 0
    free_sum = 0.0
    for t in range(l):
        y_grad = y[t] * gradient[t]
        if status[t] == _UPPER:
            if y[t] < 0:
                upper = min(upper, y_grad)
            else:
                lower = max(lower, y_grad)
        elif status[t] == _LOWER:
            if y[t] > 0:
                upper = min(upper, y_grad)
            else:
                lower = max(lower, y_grad)
        else:
            n_free += 1
            free_sum += y_grad
    out[0] = free_sum / n_free if n_free > 0 else (upper + lower) / 2
    objective = 0.0
    for t in range(l):
        objective += alpha[t] * (gradient[t] - 1.0)
    out[1] = objective / 2
    for t in range(l):
        alpha_out[local[t]] = alpha[t]


@njit(cache=True)
def _flush_pending(rows, kernel, positions, cache, state):
    counters, _, _, pending, parallel = state
    _flush_gradient_bar(rows, kernel, positions, cache, counters, pending, parallel)


@njit(cache=True)
def _objective_from_bar(alpha, status, gradient, gradient_bar):
    """f(a) = 1/2 a'Qa - e'a with a'Qa = sum_{free} a_t (G_t + 1) + sum_t a_t G_bar_t
    (free variables are always active, so their G is exact; G_bar is kept on all)."""
    quadratic = 0.0
    linear = 0.0
    for t in range(alpha.shape[0]):
        if status[t] == _FREE:
            quadratic += alpha[t] * (gradient[t] + 1.0)
        quadratic += alpha[t] * gradient_bar[t]
        linear += alpha[t]
    return 0.5 * quadratic - linear


@njit(cache=True)
def _warm_parallel(rows, kernel, positions, cache, state):
    """Run every parallel variant once (compilation / cache load)."""
    parallel = state[4]
    y, status, gradient, diagonal = positions[2], positions[6], positions[7], positions[4]
    n = y.shape[0]
    column = np.zeros(n, dtype=np.float32)
    data, indices, indptr, sq_norms, dense = rows[0]
    kind, gamma, coef0, degree = kernel
    chunks, values, best, values2, _, _, _ = parallel
    _column_parallel(data, indices, indptr, sq_norms, dense, kind, gamma, coef0, degree, y,
                     0, 0, n, column, chunks)
    _gmax_parallel(y, status, gradient, n, chunks, values, best)
    _select_j_parallel(y, status, gradient, diagonal, column, 0, 1.0, n, chunks, values, best,
                       values2)
    _update_parallel(gradient.copy(), column, column, 0.0, 0.0, y, status, n, chunks, values,
                     best)
    _reduce_max(parallel)
    pending_at, pending_scale, cover = state[3]
    pending_at[0] = 0
    pending_scale[0] = 0.0
    cover[0] = 0
    _gradient_bar_parallel(data, indices, indptr, sq_norms, dense.shape[0], kind, gamma,
                           coef0, degree, y, pending_at, pending_scale, cover, 1,
                           positions[8].copy(), chunks)
