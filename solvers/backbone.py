"""The backbone every solver stands on: problem and solution types, the progress monitor,
the bounded-budget driver loop, seeding and the ranking of exit reasons.

The contract of a solver module (registered in `solvers.params.SOLVERS`):

    solve(problem, params: dict, monitor: ProgressMonitor) -> BinarySolution

for one binary problem: a `LinearProblem` for the linear solvers, a
`solvers.smo.KernelProblem` for SMO. `solvers.train.fit` owns everything around that call.
This module imports only NumPy: it is the bottom of the import graph of `solvers/`.

Numba's on-disk cache (`cache=True`) checks a compiled function against its own source
file only, so a kernel that inlines a compiled helper of another file (the row loops, the
RNG and the kernel values of `solvers/_kernel_helpers.py`; SMO's kernels across
`solvers/smo/`) would keep an older helper. `solvers/__init__.py` therefore names the
cache folder after a hash of every source of this package: any edit compiles anew.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

# "converged" means a certificate holds at the returned model (solvers/certificate.py);
# "stalled": the solver's own stop rule held (or it could make no more progress) but the
# certificate did not; "epochs_done": a solver without a certificate ran its fixed number
# of passes (pegasos). Neither is ever reported as "converged".
EXIT_REASONS = ("converged", "epochs_done", "stalled", "max_iter", "max_seconds",
                "cancelled", "numerical_error")
_EXIT_SEVERITY = {reason: rank for rank, reason in enumerate(EXIT_REASONS)}

# progress(event) is called between outer iterations, at most every 0.2 s; a truthy return
# value means "stop now" (exit reason "cancelled"). Event keys: iteration, elapsed_s,
# primal, dual (or None), gap (or None), violation (or None), active_size, and for a
# problem split into several binary problems also class_index and n_classes.
ProgressCallback = Callable[[dict[str, Any]], Any]

PROGRESS_INTERVAL_S = 0.2  # at most one progress event per this many seconds


def worst_exit(reasons: Iterable[str]) -> str:
    """The exit reason of a fit whose binary problems stopped differently: anything but
    "converged" wins, in the order of EXIT_REASONS."""
    return max(reasons, key=_EXIT_SEVERITY.__getitem__)


# --------------------------------------------------------------------------------------
# Problems and solutions


class CsrArrays(NamedTuple):
    """A CSR matrix as the arrays every kernel takes (validated by `solvers.inputs`).

    data float64 (float32, a compact dataset's values as stored, for a solver whose
    registry entry `reads_float32`), indices int32 (sorted within each row), indptr int64;
    all C-contiguous and writeable.
    """

    data: np.ndarray
    indices: np.ndarray
    indptr: np.ndarray
    n_features: int

    @property
    def n_rows(self) -> int:
        return int(self.indptr.shape[0] - 1)


class LinearProblem(NamedTuple):
    """One binary linear SVM problem: rows of `X` (plus the bias feature), labels +-1."""

    X: CsrArrays
    y: np.ndarray  # float64, +1.0 / -1.0
    cost: np.ndarray  # float64, C_i > 0
    bias_scale: float  # value B of the appended constant feature; 0.0 = no bias feature

    @property
    def n_weights(self) -> int:
        return self.X.n_features + (1 if self.bias_scale > 0 else 0)


@dataclass
class BinarySolution:
    """What a solver returns for one binary problem."""

    w: np.ndarray | None  # linear: (n_weights,) feature weights, then the bias feature's
    iterations: int  # outer iterations (sweeps, steps)
    exit_reason: str
    primal: float | None  # None when the solver has no primal objective (SMO)
    # linear: maximised dual value, a valid lower bound of the optimum (a certificate):
    # gap = primal - dual >= 0
    dual: float | None = None
    gap: float | None = None
    violation: float | None = None  # the solver's stop-rule quantity at the end
    intercept: float | None = None  # a true (unregularised) intercept, if the solver has one
    alpha: np.ndarray | None = None  # dual variables, if any (tests, warm starts, SVs)
    details: dict[str, Any] = field(default_factory=dict)  # small solver-specific facts
    timings: dict[str, float] = field(default_factory=dict)
    state: Any = None  # the solver's state, kept to warm-start another fit (SMO)


class SolverModule(Protocol):
    """A training module: one binary problem in, one solution out."""

    def solve(self, problem: Any, params: dict[str, Any],
              monitor: ProgressMonitor) -> BinarySolution: ...


# --------------------------------------------------------------------------------------
# Progress, limits, cancellation


class ProgressMonitor:
    """Clock, wall-clock limit, throttled progress events and cancellation of one fit.

    Shared by the binary problems of a fit: the limit and the throttle are global,
    `class_index` says which binary problem is being trained.
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
        # a path of several solvers (solvers/continuation.py): events name the solver
        # running and count iterations from the start of the path (monotone)
        self.solver: str | None = None
        self.iteration_offset = 0
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
        several binary problems). Returns True when the callback asks to cancel.
        """
        assert self.callback is not None
        started = time.perf_counter()
        event = {"elapsed_s": started - self.start, **make_event()}
        if self.solver is not None:
            event["solver"] = self.solver
            if isinstance(event.get("iteration"), int):
                event["iteration"] += self.iteration_offset
        if self.n_classes > 1:
            event["class_index"] = self.class_index
            event["n_classes"] = self.n_classes
        cancel = bool(self.callback(event))
        self._last_event = time.perf_counter()
        self.events += 1
        self.progress_seconds += self._last_event - started
        return cancel

    def interruption(self, make_event: Callable[[], dict[str, Any]]) -> str | None:
        """Between two iterations: "max_seconds" past the limit, "cancelled" when a due
        progress event asks to stop, else None."""
        if self.out_of_time():
            return "max_seconds"
        if self.event_due() and self.report(make_event):
            return "cancelled"
        return None

    def stop_reason(self, iteration: int, max_iter: int,
                    make_event: Callable[[], dict[str, Any]]) -> str | None:
        """Between two iterations of a solver's own loop: "max_iter" once `iteration`
        reached it, else `interruption`."""
        if iteration >= max_iter:
            return "max_iter"
        return self.interruption(make_event)


# --------------------------------------------------------------------------------------
# The bounded-budget driver loop


@dataclass(frozen=True)
class Budget:
    """Work per compiled call (nonzeros visited, SMO steps...), adapted after every call
    so that a call takes about `call_seconds`: short enough for max_seconds, progress
    and cancellation to act promptly, long enough for the Python overhead to vanish."""

    call_seconds: float = 0.02
    initial: int = 1 << 18
    minimum: int = 1 << 12
    maximum: int = 1 << 34

    def next(self, budget: int, seconds: float) -> int:
        scale = min(max(self.call_seconds / max(seconds, 1e-6), 0.5), 4.0)
        return int(min(max(budget * scale, self.minimum), self.maximum))


PAUSED = 0  # the status a compiled call returns when its budget ran out


class BudgetedState(Protocol):
    """A solver whose compiled kernel keeps all its state in arrays, so that the work can
    be split into calls without changing a bit of the result."""

    @property
    def iteration(self) -> int: ...

    def run(self, budget: int) -> int: ...  # a status code; PAUSED = budget spent

    def snapshot(self) -> dict[str, Any]: ...  # the progress event (may cost a data pass)


def drive(state: BudgetedState, budget: Budget, monitor: ProgressMonitor,
          exits: Mapping[int, str], first_report_after: int = 0) -> str:
    """Call `state.run` in bounded chunks until it returns a status other than PAUSED
    (mapped to an exit reason by `exits`) or the monitor stops it. A progress event is
    sent only once the iteration count exceeds the last one reported (initially
    `first_report_after`)."""
    work = budget.initial
    reported = first_report_after
    while True:
        call_start = time.perf_counter()
        status = state.run(work)
        work = budget.next(work, time.perf_counter() - call_start)
        if status != PAUSED:
            return exits[status]
        if monitor.out_of_time():
            return "max_seconds"
        if state.iteration > reported and monitor.event_due():
            reported = state.iteration
            if monitor.report(state.snapshot):
                return "cancelled"


# --------------------------------------------------------------------------------------
# Seeding


def seed_state(seed: int) -> int:
    """A non-zero 64-bit xorshift state from the user's seed (SplitMix64 finaliser)."""
    mask = (1 << 64) - 1
    z = (int(seed) + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    z ^= z >> 31
    return z or 0x9E3779B97F4A7C15


def rng_of(params: dict[str, Any]) -> np.ndarray:
    """The generator of the sweeps' permutations (solvers._kernel_helpers.shuffle_sweep):
    Hinge's xorshift64* from `seed` (the default), or with `sweeps` "sklearn" the
    MT19937 of scikit-learn's LIBLINEAR, std::mt19937(seed): the shared `rng_state` of the
    fit when solvers.train passes one (LIBLINEAR seeds once per train call and its
    one-vs-rest problems draw from it in turn), else freshly seeded."""
    from solvers._kernel_helpers import mt_state

    if params.get("sweeps", "hinge") != "sklearn":
        return np.array([seed_state(params["seed"])], dtype=np.uint64)
    shared = params.get("rng_state")
    return shared if shared is not None else mt_state(int(params["seed"]))
