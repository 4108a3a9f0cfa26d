"""Constants shared by the compiled SMO kernels: kernel codes, alpha status, status
codes, the slots of the state arrays (see solvers/backbone.py about the cache)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from numba import njit

from solvers._kernel_helpers import LINEAR, POLY, RBF, SIGMOID

# Kernel codes (LIBSVM's kernel_type) and alpha status.
_LINEAR, _POLY, _RBF, _SIGMOID = LINEAR, POLY, RBF, SIGMOID
_LOWER, _UPPER, _FREE = 0, 1, 2
_U1 = np.uint64(1)
# 0 typed int64: a literal 0 as an argument has Numba compile the callee (and every callee
# it passes it on to) a second time, for Literal[int](0)
_ZERO = np.int64(0)
_TAU = 1e-12  # LIBSVM's TAU: quadratic coefficient used when K_ii + K_jj - 2 K_ij <= 0
_SHRINK_EVERY = 1000

# Kernel status codes.
_PAUSED, _CONVERGED, _MAX_ITER, _NON_FINITE = 0, 1, 2, 3
_STATUS_EXIT = {_CONVERGED: "converged", _MAX_ITER: "max_iter", _NON_FINITE: "numerical_error"}

# counters[] slots (int64) and values[] slots (float64) of the solver state.
(_ITER, _ACTIVE, _COUNTER, _UNSHRINK, _GMAX_IDX, _GMAX_VALID, _CACHE_FREE, _HITS, _MISSES,
 _EVALS, _SHRINKS, _RECONSTRUCTS, _PENDING, _NU, _TWINS, _GMAX_NEG_IDX) = range(16)
_N_COUNTERS = 16  # _NU: 1 for Solver_NU's working-set rule, shrinking and rho (nu-SVC, nu-SVR)
# _TWINS: n for the regressions (variables t and n + t are both row t: their kernel columns
# come from the cached kernel row of row t, LIBSVM's SVR_Q), else 0
_PENDING_CAPACITY = 2 * _SHRINK_EVERY + 8  # deferred G_bar updates between flushes
# values[] slots; _GMAX_POS, _GMAX_NEG (and counters[_GMAX_IDX], [_GMAX_NEG_IDX]): each
# side's max { -y_t G_t : t in I_up } after the last step (Solver_NU's next i, per side)
_GMAX, _VIOLATION, _GMAX_POS, _GMAX_NEG = 0, 1, 2, 3
_N_VALUES = 4


_F = TypeVar("_F", bound=Callable[..., Any])


def leaf(**options: Any) -> Callable[[_F], _F]:
    """`njit(cache=True)` without Numba's reference counting (its `_nrt` option), for the
    functions a step calls: they read and write the arrays they are given, allocate
    nothing and return no array. A compiled function otherwise takes a reference to each
    array argument (an atomic increment and decrement per call) that LLVM's pruning keeps
    whenever the function branches; see steps._smo_steps."""
    return njit(cache=True, _nrt=False, **options)  # type: ignore[call-overload]
