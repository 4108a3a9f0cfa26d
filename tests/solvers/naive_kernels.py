"""Slow, obviously correct references for the kernel SVM tests, and LIBSVM helpers.

Dense NumPy kernels and decision functions written from the formulas; the C-SVC dual solved
by SciPy (tiny problems); LIBSVM (libsvm-official, a test-only dependency) trained with its
console output captured, so that its dual objective ("obj = ...") can be compared.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.optimize
import scipy.sparse as sp

from solvers.formats import read_libsvm_model_text
from solvers.kernels import KernelModel, pair_classes

KERNEL_TYPE = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3}


def kernel_matrix(A: Any, B: Any, kernel: str, gamma: float = 1.0, coef0: float = 0.0,
                  degree: int = 3) -> np.ndarray:
    """K(a_r, b_s) for all rows, from the definitions (dense float64)."""
    A = np.asarray(A.toarray() if sp.issparse(A) else A, dtype=np.float64)
    B = np.asarray(B.toarray() if sp.issparse(B) else B, dtype=np.float64)
    if kernel == "rbf":
        distances = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)
        return np.exp(-gamma * distances)
    dots = A @ B.T
    if kernel == "linear":
        return dots
    if kernel == "poly":
        return (gamma * dots + coef0) ** degree
    if kernel == "sigmoid":
        return np.tanh(gamma * dots + coef0)
    raise ValueError(kernel)


def model_kernel(model: KernelModel, X: Any) -> np.ndarray:
    A = X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
    if A.shape[1] < model.n_features:
        A = np.hstack([A, np.zeros((A.shape[0], model.n_features - A.shape[1]))])
    SV = model.support_vectors().toarray()
    if A.shape[1] > model.n_features:  # extra query features: zero in every SV
        SV = np.hstack([SV, np.zeros((SV.shape[0], A.shape[1] - model.n_features))])
    return kernel_matrix(A, SV, model.kernel, model.gamma, model.coef0, model.degree)


def raw_decision_values(model: KernelModel, X: Any) -> np.ndarray:
    """LIBSVM-layout values sum_s coef_p[s] K(sv_s, x) - rho_p, from the dense kernel."""
    K = model_kernel(model, X)
    k = model.n_classes
    if model.multiclass == "ovr" and k > 2:
        return K @ model.sv_coef.T - model.rho
    starts = np.concatenate(([0], np.cumsum(model.n_sv)))
    columns = []
    for p, (i, j) in enumerate(zip(*pair_classes(k), strict=True)):
        block_i = slice(starts[i], starts[i + 1])
        block_j = slice(starts[j], starts[j + 1])
        values = (K[:, block_i] @ model.sv_coef[j - 1, block_i]
                  + K[:, block_j] @ model.sv_coef[i, block_j] - model.rho[p])
        columns.append(values)
    return np.column_stack(columns)


def dual_by_scipy(K: np.ndarray, y: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """argmin 1/2 a'Qa - e'a, 0 <= a <= C, y'a = 0 (SLSQP; tiny problems only)."""
    Q = (y[:, None] * y[None, :]) * K

    def value_and_gradient(alpha: np.ndarray) -> tuple[float, np.ndarray]:
        Qa = Q @ alpha
        return 0.5 * alpha @ Qa - alpha.sum(), Qa - 1.0

    result = scipy.optimize.minimize(
        value_and_gradient, np.zeros(y.shape[0]), jac=True, method="SLSQP",
        bounds=[(0.0, c) for c in cost],
        constraints=[{"type": "eq", "fun": lambda a: y @ a, "jac": lambda a: y}],
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    return np.asarray(result.x)


def dual_value(K: np.ndarray, y: np.ndarray, alpha: np.ndarray) -> float:
    Q = (y[:, None] * y[None, :]) * K
    return float(0.5 * alpha @ Q @ alpha - alpha.sum())


# --------------------------------------------------------------------------------------
# LIBSVM


@dataclass
class LibsvmRun:
    model: Any  # libsvm svm_model
    kernel_model: KernelModel  # the same model in our layout (sorted classes)
    objective: float  # sum over binary problems of LIBSVM's "obj = ..."
    iterations: int  # summed "#iter"
    output: str


@contextlib.contextmanager
def single_openmp_thread() -> Iterator[None]:
    """LIBSVM's wheel is built with OpenMP: run it on one thread (its own reference)."""
    try:
        gomp = ctypes.CDLL("libgomp.so.1")
    except OSError:
        yield
        return
    previous = gomp.omp_get_max_threads()
    gomp.omp_set_num_threads(1)
    try:
        yield
    finally:
        gomp.omp_set_num_threads(previous)


def libsvm_train(X: Any, y: np.ndarray, options: str) -> LibsvmRun:
    """svm_train with its console output captured (the C library writes to fd 1)."""
    from libsvm import svmutil

    problem = svmutil.svm_problem(np.asarray(y, dtype=np.float64), sp.csr_matrix(X))
    with tempfile.TemporaryFile(mode="w+b") as capture:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(capture.fileno(), 1)
        try:
            with single_openmp_thread():
                model = svmutil.svm_train(problem, options)
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        capture.seek(0)
        output = capture.read().decode(errors="replace")
    objective = sum(float(v) for v in re.findall(r"obj = (-?[\d.eE+-]+)", output))
    iterations = sum(int(v) for v in re.findall(r"#iter = (\d+)", output))
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.txt")
        svmutil.svm_save_model(path, model)
        with open(path) as handle:
            kernel_model = read_libsvm_model_text(handle.read(), n_features=X.shape[1])
    return LibsvmRun(model, kernel_model, objective, iterations, output)


def libsvm_options(kernel: str = "rbf", C: float = 1.0, gamma: float | None = None,
                   degree: int = 3, coef0: float = 0.0, eps: float = 1e-3,
                   cache_mb: float = 200.0, weights: dict[int, float] | None = None) -> str:
    options = f"-s 0 -t {KERNEL_TYPE[kernel]} -c {C!r} -d {degree} -r {coef0!r} -e {eps!r} "
    options += f"-m {cache_mb!r}"
    if gamma is not None:
        options += f" -g {gamma!r}"
    for label, weight in (weights or {}).items():
        options += f" -w{label} {weight!r}"
    return options
