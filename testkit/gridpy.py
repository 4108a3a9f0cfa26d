"""LIBSVM's grid.py method, for the search's reference (slow test and bench): 5-fold
cross-validation (`svm_train -v 5`) over grid.py's default grid, C = 2^-5 .. 2^15 step
2^2 and gamma = 2^3 .. 2^-15 step 2^-2, points spread over local processes; the best
point as grid.py picks it (the highest CV rate; a tie to the earlier point unless same
gamma and smaller C), then trained on every row and scored on the test set."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

C_EXPONENTS = tuple(range(-5, 16, 2))
GAMMA_EXPONENTS = tuple(range(3, -16, -2))

_PROBLEM: Any = None


def _init(y: np.ndarray, X: sp.csr_matrix) -> None:
    global _PROBLEM
    # One thread per process, as grid.py's svm-train (LIBSVM's Makefile builds it without
    # OpenMP): the PyPI wheel is built with OpenMP, and its default of one thread per core
    # in each of the 2 processes oversubscribed the 2 cores (grid.py's 550 fits on 6,000
    # ijcnn1 rows took 1,137 s, GridSearchCV's 54 s). Set before libsvm loads libgomp.
    os.environ["OMP_NUM_THREADS"] = "1"
    from libsvm import svmutil

    _PROBLEM = svmutil.svm_problem(np.asarray(y, dtype=np.float64), sp.csr_matrix(X))


def _cv_rate(point: tuple[float, float, int]) -> float:
    from libsvm import svmutil

    c, g, folds = point
    return float(svmutil.svm_train(_PROBLEM, f"-c {c!r} -g {g!r} -v {folds} -q"))


@contextlib.contextmanager
def _one_omp_thread() -> Iterator[None]:
    """OMP_NUM_THREADS=1 in the environment the pool's processes start with."""
    before = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["OMP_NUM_THREADS"]
        else:
            os.environ["OMP_NUM_THREADS"] = before


@dataclass(frozen=True)
class GridResult:
    C: float
    gamma: float
    cv_rate: float  # percent
    seconds: float  # wall time of the cross-validation over the grid
    rates: dict[tuple[float, float], float]


def grid_search(X: Any, y: np.ndarray, processes: int = 2, folds: int = 5,
                c_exponents: tuple[int, ...] = C_EXPONENTS,
                gamma_exponents: tuple[int, ...] = GAMMA_EXPONENTS) -> GridResult:
    points = [(2.0 ** c, 2.0 ** g, folds) for c in c_exponents for g in gamma_exponents]
    started = time.perf_counter()
    # spawn, not fork: a fork of a process whose OpenMP threads have run (Numba's, or
    # LIBSVM's) can deadlock in the child
    context = multiprocessing.get_context("spawn")
    with _one_omp_thread(), context.Pool(processes, initializer=_init,
                                         initargs=(y, X)) as pool:
        rates = pool.map(_cv_rate, points, chunksize=1)
    seconds = time.perf_counter() - started
    best_c = best_g = 0.0
    best_rate = -1.0
    for (c, g, _), rate in zip(points, rates, strict=True):
        if rate > best_rate or (rate == best_rate and g == best_g and c < best_c):
            best_c, best_g, best_rate = c, g, rate
    return GridResult(best_c, best_g, best_rate, seconds,
                      {(c, g): r for (c, g, _), r in zip(points, rates, strict=True)})


def refit_test_accuracy(X: Any, y: np.ndarray, X_test: Any, y_test: np.ndarray, C: float,
                  gamma: float) -> float:
    """Percent accuracy on the test set of LIBSVM trained on every row at (C, gamma)."""
    from libsvm import svmutil

    problem = svmutil.svm_problem(np.asarray(y, dtype=np.float64), sp.csr_matrix(X))
    model = svmutil.svm_train(problem, f"-c {C!r} -g {gamma!r} -q")
    labels, _, _ = svmutil.svm_predict(np.asarray(y_test, dtype=np.float64),
                                       sp.csr_matrix(X_test), model, "-q")
    return float(np.mean(np.asarray(labels) == y_test) * 100.0)
