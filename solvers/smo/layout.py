"""What the compiled SMO kernels share: alpha status, status codes, the slots of the
state arrays, and the named tuples of the solver state (see solvers/backbone.py about the
cache)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

import numpy as np
from numba import njit

# Alpha status.
LOWER, UPPER, FREE = 0, 1, 2
U1 = np.uint64(1)
# 0 typed int64: a literal 0 as an argument has Numba compile the callee (and every callee
# it passes it on to) a second time, for Literal[int](0)
ZERO = np.int64(0)
TAU = 1e-12  # LIBSVM's TAU: quadratic coefficient used when K_ii + K_jj - 2 K_ij <= 0
SHRINK_EVERY = 1000

# Kernel status codes.
PAUSED, CONVERGED, MAX_ITER, NON_FINITE = 0, 1, 2, 3
STATUS_EXIT = {CONVERGED: "converged", MAX_ITER: "max_iter", NON_FINITE: "numerical_error"}

# counters[] slots (int64) and values[] slots (float64) of the solver state.
(ITER, ACTIVE, COUNTER, UNSHRINK, GMAX_IDX, GMAX_VALID, CACHE_FREE, HITS, MISSES,
 EVALS, SHRINKS, RECONSTRUCTS, PENDING, NU, TWINS, GMAX_NEG_IDX) = range(16)
N_COUNTERS = 16  # NU: 1 for Solver_NU's working-set rule, shrinking and rho (nu-SVC, nu-SVR)
# TWINS: n for the regressions (variables t and n + t are both row t: their kernel columns
# come from the cached kernel row of row t, LIBSVM's SVR_Q), else 0
PENDING_CAPACITY = 2 * SHRINK_EVERY + 8  # deferred G_bar updates between flushes
# values[] slots; GMAX_POS, GMAX_NEG (and counters[GMAX_IDX], [GMAX_NEG_IDX]): each
# side's max { -y_t G_t : t in I_up } after the last step (Solver_NU's next i, per side)
GMAX, VIOLATION, GMAX_POS, GMAX_NEG = 0, 1, 2, 3
N_VALUES = 4


# The solver state as the compiled kernels take it: tuples of arrays (Numba types a named
# tuple as a tuple, with its fields by name), built once by steps.SmoState.


class Positions(NamedTuple):
    """The arrays over the l variables, permuted together by shrinking (LIBSVM's
    swap_index): position t holds row perm[t] of X, variable local[t] of the problem."""

    perm: np.ndarray  # int64
    local: np.ndarray  # int64
    y: np.ndarray  # int8, +1 / -1
    cost: np.ndarray  # C_t
    diagonal: np.ndarray  # K_tt (LIBSVM's QD)
    alpha: np.ndarray
    status: np.ndarray  # int8: LOWER, UPPER, FREE
    gradient: np.ndarray  # G = Qa + p
    gradient_bar: np.ndarray  # G_bar = sum_{a_j = C_j} C_j Q_:j
    linear: np.ndarray  # p


class Pending(NamedTuple):
    """The deferred G_bar updates of the inactive variables (selection.bar_update)."""

    at: np.ndarray  # int64: the variable i of each update
    scale: np.ndarray  # +-C_i
    cover: np.ndarray  # int64: the active size then (positions below it are up to date)


class Parallel(NamedTuple):
    """The parallel loops' chunks, per-chunk scratch and the least work of a parallel
    loop: passes over the active set, kernel columns, the deferred G_bar pass."""

    chunks: Any  # np.int64
    values: np.ndarray  # float64, two slots per chunk (y = +1 at c, y = -1 at chunks + c)
    indices: np.ndarray  # int64, likewise
    values2: np.ndarray  # float64, likewise
    min_pass: Any  # np.int64
    min_kernel: Any
    min_flush: Any


def parallel_modes(chunks: int, min_pass: int, min_kernel: int,
                   min_flush: int) -> dict[bool, Parallel]:
    """The two variants of a solver's Parallel, on the same scratch, that its GrainMeter
    (solvers/grain.py) picks from: True ("fine") runs each loop in parallel above its least
    work, False ("sequential") none (the work of one thread)."""
    count = max(1, int(chunks))
    scratch = (np.int64(count), np.empty(2 * count), np.empty(2 * count, dtype=np.int64),
               np.empty(2 * count))
    never = np.int64(1 << 62)
    return {True: Parallel(*scratch, np.int64(min_pass), np.int64(min_kernel),
                           np.int64(min_flush)),
            False: Parallel(*scratch, never, never, never)}


class StepState(NamedTuple):
    """The counters and buffers of the step loop."""

    counters: np.ndarray  # int64, the slots above
    values: np.ndarray  # float64, the slots above
    swaps: np.ndarray  # int64 (l, 2): one shrinking's swaps
    pending: Pending
    parallel: Parallel


_F = TypeVar("_F", bound=Callable[..., Any])


def leaf(**options: Any) -> Callable[[_F], _F]:
    """`njit(cache=True)` without Numba's reference counting (its `_nrt` option), for the
    functions a step calls: they read and write the arrays they are given, allocate
    nothing and return no array. A compiled function otherwise takes a reference to each
    array argument (an atomic increment and decrement per call) that LLVM's pruning keeps
    whenever the function branches; see steps._smo_steps."""
    return njit(cache=True, _nrt=False, **options)  # type: ignore[call-overload]
