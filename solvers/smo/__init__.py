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

The regressions (epsilon-SVR, nu-SVR) have 2n variables, t and n + t both x_t (y = +1 / -1):
as LIBSVM's SVR_Q, the kernel row K(x_t, x_s) over the n rows (problem order, never
permuted) is computed once and cached for both, in the same LRU cache and budget as the
columns; a variable's column over the active positions is read from it (a gather, no
kernel value), and cached as every column. Their initial gradient (nu-SVR starts from
a_t = a_{n+t}) is G = p + y_t K b with the net coefficient b_r of each row: a kernel row
only for b_r != 0 (none at nu-SVR's start), where LIBSVM takes one per nonzero alpha.

Where we depart from LIBSVM's code, the arithmetic stays the same:
- the G_bar update when a_i enters or leaves its upper bound is applied at once on the
  active set (Q_i is at hand) and deferred on the inactive set, where the updates are
  applied in one pass, in their order, before G_bar is read (gradient reconstruction,
  progress) or the positions are permuted (shrinking): LIBSVM instead extends column i to
  all l variables and caches it, evicting useful columns;
- the rows of X are kept in position order (gathered again after a shrinking permutes the
  positions), so a kernel column streams through memory; the selection of the next i is
  fused with the gradient update;
- kernel values are computed from the dot product and precomputed squared norms (LIBSVM
  merges sorted index lists). The dot products of a column come from the cheapest source
  the data allow, reported per binary problem as "kernel_values": "dense" (a dense copy of
  the rows, for dense data), "bits" (0/1 features: rows as bit sets, x_t . x_i =
  popcount(b_t & b_i); with rbf the kernel value is then read from a table of
  exp(-gamma k) over the integer squared distances k), "columns" (a CSC copy in position
  order, when x_i's feature columns hold fewer entries than the rows) or "rows" (a dense
  scatter of x_i, gathered by every row). Every source gives the same float64 dot
  products, so the same kernel values and the same fit.

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
m - M of the active set, active_size, kkt_violators (active variables that break the KKT
conditions by more than eps / 2: all at the start, none at convergence; it falls while
m - M barely does) and, for several binary problems, class_index (= index of the binary
problem) / n_classes (= number of binary problems) and the pair's classes.

Multi-class: one-vs-one (default; LIBSVM's pairs over the sorted classes, pair (i, j) with
class i as +1, C_i = C * class_weight of the row's class) or one-vs-rest. Two classes are
always one binary problem.

Threads: the parallel grain is chosen from the problem sizes (model.parallel_grain) and
reported in the result's params ("parallel_grain", "pair_workers"). "pairs": several
binary problems (one-vs-one pairs, one-vs-rest classes) of a fit are trained at once, one
thread each (`solve_all`; the compiled kernels release the GIL), when there are at least
two and they are small or numerous. "columns": one problem at a time, whose parallel loops
(kernel columns and the passes over the active set once per step - "fine-grained" -, the
deferred G_bar pass once per ~1000 steps - "coarse") only partition elementwise work or
exact max/argmax reductions (ties to the larger index, as a sequential scan). Either way
`threads=2` returns bit-for-bit the result of `threads=1`. Whether the fine-grained
loops run is measured as the fit runs (solvers/grain.py: short probes of the other
mode, compared with the current one back to back), never read from the load average; the
result's per_output "fine_grained_share" says how many steps used them. The compiled
`_smo_steps` runs a bounded number of steps (the first call enough to finish a small
problem) and returns to Python, which enforces max_seconds, sends throttled progress
events (also at the end of each binary problem) and honours cancellation; the whole solver
state lives in arrays (and the typed list of cached columns), so splitting the work into
calls changes nothing.

Warm start (solvers.train.fit(warm_start=..., keep_solver_state=True); a search's C
path of one gamma): a binary problem continues from the previous fit's SmoState - the
same rows in the same positions, its kernel-column cache, and its alphas, which stay
feasible for a larger C (0 <= a_i <= C_old <= C_new, y'a unchanged; a smaller C scales
them into the box) -; G and G_bar are rebuilt from the support vectors' columns as
LIBSVM's Solver::Solve does for an initial alpha (`SmoState.restart`), and the stop rule
is the cold fit's.

Layout of this package: layout.py (constants and named tuples of the state arrays),
columns.py (kernel values, kernel columns), rows.py (the rows in position order and the
copies the dot products come from), cache.py (the column cache), selection.py
(working-set selection, the two-variable step, G_bar, shrinking), solution.py (the
gradient of an initial alpha, rho, the objective), steps.py (the solver state and the
compiled step loop), model.py (binary problems, the KernelModel), this file (the solver
contract). The names a module shares with the others are public; within the package
only: the package's API is `__all__` below.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

from solvers import parallel
from solvers._kernel_helpers import RBF
from solvers.backbone import BinarySolution, Budget, ProgressMonitor, drive
from solvers.inputs import as_csr_arrays
from solvers.kernels import max_threads
from solvers.smo.batched import B_EVALS, B_HITS, B_ITER, B_MISSES, B_OUTER, BatchedState
from solvers.smo.layout import (
    ACTIVE,
    EVALS,
    HITS,
    ITER,
    MISSES,
    RECONSTRUCTS,
    SHRINKS,
    STATUS_EXIT,
    VIOLATION,
)
from solvers.smo.model import ASSEMBLY, KernelProblem
from solvers.smo.steps import SmoState, warm_parallel

__all__ = ["ASSEMBLY", "WARMUP_VARIANTS", "KernelProblem", "SmoState",
           "max_threads", "solve", "solve_all", "warm_batched_kernels", "warm_formulation_kernels",
           "warm_rare_kernels"]

# Warm-up fits (solvers.warmup.warmup): both multi-class layouts and two kernels.
WARMUP_VARIANTS: tuple[dict[str, Any], ...] = tuple(
    {"kernel": kernel, "multiclass": multiclass, "cache_mb": 1.0}
    for kernel in ("rbf", "linear") for multiclass in ("ovo", "ovr"))

BUDGET = Budget(call_seconds=0.05, initial=256, minimum=16, maximum=1 << 24)  # SMO steps
# The first call's steps: about this many kernel values / gradient entries (a step visits
# each active variable a few times), so that a small problem is solved in one call.
FIRST_CALL_WORK = 2_000_000
_STOPPED = ("cancelled", "max_seconds")  # the fit was stopped: later problems are skipped
WARM_FORMULATIONS = ("c_svc", "epsilon_svr")  # a C path continues from the last alphas
TWINS = ("epsilon_svr", "nu_svr")  # 2n variables, rows t and n + t both x_t (SVR_Q's cache)


def _same_linear(old: np.ndarray | None, new: np.ndarray | None) -> bool:
    if old is None or new is None:
        return old is None and new is None
    return old.shape == new.shape and bool(np.array_equal(old, new))


def solve(problem: KernelProblem, params: dict[str, Any],
          monitor: ProgressMonitor) -> BinarySolution:
    """Solve one binary kernel problem with SMO; params as filled by validate_params("smo")."""
    share = problem.cache_share if problem.keep_state else 1
    if problem.grain == "pairs":  # one thread of several: no Numba parallel region here
        return _solve(problem, params, monitor,
                      float(params["cache_mb"]) / max(problem.workers, share))
    with parallel.numba_threads(problem.threads):
        return _solve(problem, params, monitor, float(params["cache_mb"]) / share)


def _solve(problem: KernelProblem, params: dict[str, Any], monitor: ProgressMonitor,
           cache_mb: float) -> BinarySolution:
    if params.get("working_set", "pair") == "batched":
        return _solve_batched(problem, params, monitor, cache_mb)
    t_start = time.perf_counter()
    l = int(problem.rows.shape[0])
    state = problem.warm
    # a C path continues c_svc and epsilon_svr (the same linear term); the nu formulations'
    # equality constraint e'a moves with C, so they start from LIBSVM's initial alpha
    warm = isinstance(state, SmoState) and problem.formulation in WARM_FORMULATIONS and (
        state.formulation == problem.formulation)
    if warm:  # the same problem at another C: its alphas and kernel columns
        if not state.continues(problem.rows, problem.y, problem.kernel) or not (
                _same_linear(state.linear0, problem.linear)):
            raise ValueError("warm_start must come from a fit of the same rows, classes "
                             "and kernel (and epsilon)")
        state.restart(problem.cost)
    else:
        state = SmoState(problem.X, problem.sq_norms, problem.rows, problem.y, problem.cost,
                         problem.kernel, cache_mb, chunks=problem.threads,
                         fine_grained=problem.fine_grained, linear=problem.linear,
                         alpha0=problem.alpha0, nu=problem.nu,
                         twins=problem.rows.shape[0] // 2 if problem.formulation in TWINS
                         else 0)
        state.formulation = problem.formulation
        state.linear0 = None if problem.linear is None else problem.linear.copy()
    state.eps, state.max_iter = float(params["eps"]), int(params["max_iter"])
    state.pair = list(problem.pair)
    first = min(max(FIRST_CALL_WORK // max(l, 1), BUDGET.initial), BUDGET.maximum)
    budget = Budget(BUDGET.call_seconds, first, BUDGET.minimum, BUDGET.maximum)
    exit_reason = drive(state, budget, monitor, STATUS_EXIT, first_report_after=-1)
    t_finish = time.perf_counter()
    alpha, rho, objective = state.finish()
    extra: dict[str, Any] = {}
    if problem.formulation == "nu_svc":  # solve_nu_svc: the C-SVC model with C = 1 / r
        r = state.r
        alpha, rho, objective = alpha / r, rho / r, objective / (r * r)
        extra = {"r": r, "bound_scale": 1.0 / r}
    elif problem.formulation == "nu_svr":
        extra = {"r": state.r, "epsilon": -state.r}
    if not (math.isfinite(rho) and math.isfinite(objective) and np.all(np.isfinite(alpha))):
        exit_reason = "numerical_error"
    counters = state.counters
    return BinarySolution(
        w=None,
        iterations=int(counters[ITER]),
        exit_reason=exit_reason,
        primal=None,
        dual=objective,
        violation=float(state.values[VIOLATION]),
        intercept=-rho,
        alpha=alpha,
        details={
            "rho": rho,
            "active_size": int(counters[ACTIVE]),
            "cache_hits": int(counters[HITS]),
            "cache_misses": int(counters[MISSES]),
            "kernel_evaluations": int(counters[EVALS]),
            "shrinkings": int(counters[SHRINKS]),
            "gradient_reconstructions": int(counters[RECONSTRUCTS]),
            "kernel_values": state.column_source,
            # steps run with the parallel per-step loops, and the meter's switches
            "fine_grained_share": state.grain.share_fine(),
            "grain_switches": state.grain.switches,
            "warm_start": warm,
            **extra,
        },
        timings={"kernel_s": t_finish - t_start, "finish_s": time.perf_counter() - t_finish},
        state=state if problem.keep_state else None,
    )


def _solve_batched(problem: KernelProblem, params: dict[str, Any], monitor: ProgressMonitor,
                   cache_mb: float) -> BinarySolution:
    """One binary problem by batched working sets (solvers/smo/batched.py). It keeps no
    solver state: a search's C path starts every C cold."""
    t_start = time.perf_counter()
    state = BatchedState(problem.X, problem.sq_norms, problem.rows, problem.y, problem.cost,
                         problem.kernel, cache_mb, chunks=problem.threads,
                         linear=problem.linear, alpha0=problem.alpha0)
    state.eps, state.max_iter = float(params["eps"]), int(params["max_iter"])
    state.pair = list(problem.pair)
    # a call's budget in outer iterations (tens of milliseconds each on the binary sets of
    # bench/results/kernel_peers.md): one to start, as the grain meter's calls
    budget = Budget(BUDGET.call_seconds, 1, 1, 1 << 20)
    exit_reason = drive(state, budget, monitor, STATUS_EXIT, first_report_after=-1)
    t_finish = time.perf_counter()
    alpha, rho, objective = state.finish()
    if not (math.isfinite(rho) and math.isfinite(objective) and np.all(np.isfinite(alpha))):
        exit_reason = "numerical_error"
    counters = state.counters
    return BinarySolution(
        w=None,
        iterations=int(counters[B_ITER]),
        exit_reason=exit_reason,
        primal=None,
        dual=objective,
        violation=float(state.values[0]),
        intercept=-rho,
        alpha=alpha,
        details={
            "rho": rho,
            "active_size": state.l,
            "cache_hits": int(counters[B_HITS]),
            "cache_misses": int(counters[B_MISSES]),
            "kernel_evaluations": int(counters[B_EVALS]),
            "shrinkings": 0,
            "gradient_reconstructions": 0,
            "kernel_values": state.column_source,
            "working_set": "batched",
            "working_set_size": state.q,
            "outer_iterations": int(counters[B_OUTER]),
            # Amdahl's s of this fit: its time outside the passes on all the threads
            "serial_share": state.serial_share(),
            "parallel_s": state.parallel_seconds,
            "fine_grained_share": state.grain.share_fine(),
            "grain_switches": state.grain.switches,
            "warm_start": False,
        },
        timings={"kernel_s": t_finish - t_start, "finish_s": time.perf_counter() - t_finish},
        state=None,
    )


def solve_all(problems: list[KernelProblem], params: dict[str, Any],
              monitor: ProgressMonitor) -> list[BinarySolution]:
    """Every binary problem of a fit (solvers.train.fit calls this instead of `solve` per
    problem). Grain "pairs": up to `workers` problems at once, each on its own thread
    (the compiled kernels release the GIL), the largest first; each problem's arithmetic
    is that of a one-thread fit, so the solutions are bit-identical to threads=1. A stop
    (max_seconds, cancellation) of one problem stops the running ones and leaves the
    others untrained, as in the sequential order."""
    workers = problems[0].workers if problems else 1
    if workers <= 1:
        solutions: list[BinarySolution] = []
        stopped = None
        for k, problem in enumerate(problems):
            solution, stop = _solve_or_skip(k, problem, params, monitor, stopped)
            stopped = stopped or stop
            solutions.append(solution)
        return solutions
    return _solve_concurrently(problems, params, monitor, workers)


def _solve_or_skip(k: int, problem: KernelProblem, params: dict[str, Any],
                   monitor: Any, stopped: str | None) -> tuple[BinarySolution, str | None]:
    """Problem k's solution (untrained after a stop or past the time limit) and the stop
    it causes: its own exit when stopped, or "cancelled" when the progress event sent at
    its end (a problem solved within one compiled call sends none of its own) asks so."""
    started = time.perf_counter()
    stop = None
    if stopped in _STOPPED:
        solution = ASSEMBLY.untrained(problem, params, str(stopped))
    elif monitor.out_of_time():
        solution = ASSEMBLY.untrained(problem, params, "max_seconds")
    else:
        if isinstance(monitor, ProgressMonitor):
            monitor.class_index = k
        solution = solve(problem, params, monitor)
        solution.details["end_s"] = monitor.elapsed()  # on the progress events' clock
        if solution.exit_reason in _STOPPED:
            stop = solution.exit_reason
        elif monitor.event_due() and monitor.report(lambda: _final_event(problem, solution)):
            stop = "cancelled"
    solution.details["train_seconds"] = time.perf_counter() - started
    return solution, stop


def _final_event(problem: KernelProblem, solution: BinarySolution) -> dict[str, Any]:
    return {"iteration": solution.iterations, "primal": None, "dual": solution.dual,
            "gap": None, "violation": solution.violation,
            "active_size": int(problem.rows.shape[0]), "pair": list(problem.pair),
            "kkt_violators": 0 if solution.exit_reason == "converged" else None}


class _SharedMonitor:
    """One problem's view of the fit's ProgressMonitor when problems run concurrently:
    events are sent one at a time (with this problem's class_index), and a stop of any
    problem stops this one at its next return to Python."""

    def __init__(self, monitor: ProgressMonitor, k: int, lock: threading.Lock,
                 stops: list[str]) -> None:
        self.monitor, self.k, self.lock, self.stops = monitor, k, lock, stops

    def out_of_time(self) -> bool:
        return self.monitor.out_of_time()

    def elapsed(self) -> float:
        return self.monitor.elapsed()

    def event_due(self) -> bool:
        return bool(self.stops) or self.monitor.event_due()

    def report(self, make_event: Any) -> bool:
        with self.lock:
            if self.stops:
                return True
            self.monitor.class_index = self.k
            return self.monitor.report(make_event)


def _solve_concurrently(problems: list[KernelProblem], params: dict[str, Any],
                        monitor: ProgressMonitor, workers: int) -> list[BinarySolution]:
    solutions: list[BinarySolution | None] = [None] * len(problems)
    # largest first (the longest problems start early), ties in problem order
    order = iter(sorted(range(len(problems)), key=lambda k: -problems[k].rows.shape[0]))
    lock = threading.Lock()
    stops: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        while True:
            with lock:
                k = next(order, None)
                stopped = stops[0] if stops else ("error" if errors else None)
            if k is None or stopped == "error":
                return
            try:
                solution, stop = _solve_or_skip(k, problems[k], params,
                                                _SharedMonitor(monitor, k, lock, stops),
                                                stopped)
            except BaseException as error:  # re-raised by the calling thread
                with lock:
                    errors.append(error)
                return
            if stop is not None:
                with lock:
                    if not stops:
                        stops.append(stop)
            solutions[k] = solution

    helpers = [threading.Thread(target=work, name=f"smo-pairs-{w}", daemon=True)
               for w in range(1, workers)]
    for helper in helpers:
        helper.start()
    work()
    for helper in helpers:
        helper.join()
    if errors:
        raise errors[0]
    return [s for s in solutions if s is not None]


def warm_formulation_kernels() -> None:
    """Compile (or load) the kernels of the formulations besides c_svc (their working-set
    and stop rules are kernels of their own): without them a worker's first nu-SVC, one-class
    or SVR job would wait for the compiler. A group of its own (solvers.warmup.WARMUP_GROUPS),
    after the ones a worker needs to report ready."""
    from solvers.train import fit

    X = np.round(np.random.default_rng(0).normal(size=(12, 3)), 2)
    y = np.array([1.0, -1.0] * 6)
    for formulation in ("nu_svc", "one_class", "epsilon_svr", "nu_svr"):
        fit(X, y, solver="smo", formulation=formulation, cache_mb=1.0,
            progress=lambda event: None).model.predict(X)


def warm_batched_kernels() -> None:
    """Compile (or load) the batched working sets' kernels (working_set="batched"): their
    sequential and parallel passes on dense rows and bit sets, and one fit through the
    solver. A group of its own (solvers.warmup.WARMUP_GROUPS)."""
    from solvers.smo.batched import warm_batched
    from solvers.train import fit

    warm_batched()
    X = np.round(np.random.default_rng(0).normal(size=(12, 3)), 2)
    for formulation, y in (("c_svc", np.array([1.0, -1.0] * 6)), ("one_class", np.ones(12))):
        # one_class: the initial alpha's gradient (_initial_gradient, update_status)
        fit(X, y, solver="smo", working_set="batched", formulation=formulation,
            cache_mb=1.0, progress=lambda event: None).model.predict(X)


def warm_rare_kernels() -> None:
    """Compile (or load) what the small warm-up fits do not reach: the parallel loops
    (large problems only), the progress snapshot (at most one event per 0.2 s) and the
    restart of a warm start."""
    X = as_csr_arrays(np.round(np.random.default_rng(0).normal(size=(12, 3)), 2))
    state = SmoState(X, np.zeros(12) + 1.0, np.arange(12, dtype=np.int64),
                     np.array([1, -1] * 6, dtype=np.int8), np.ones(12), (RBF, 0.5, 0.0, 3),
                     1.0, chunks=2)
    warm_parallel(*state.kernel_args)
    ones = as_csr_arrays(np.eye(12)[:, :8] + np.eye(12, 8, 1))  # 0/1 rows: bit sets
    SmoState(ones, ones.indptr[1:] - ones.indptr[:-1] + 0.0, np.arange(12, dtype=np.int64),
             np.array([1, -1] * 6, dtype=np.int8), np.ones(12), (RBF, 0.5, 0.0, 3), 1.0,
             chunks=2)
    state.snapshot()
    state.restart(np.full(12, 2.0))  # a search's C path: the warm-started gradient
