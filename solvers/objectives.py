"""Objectives of the linear SVM problems, shared by every linear solver.

Binary problem (labels y_i in {-1, +1}, per-example cost C_i > 0, optional constant
feature of value B appended to every row and regularised like any other weight):

    primal  P(w) = 1/2 ||w||^2 + sum_i C_i xi_i(w),   xi_i(w) = max(0, 1 - y_i w.x_i)
            (l1, hinge) or max(0, 1 - y_i w.x_i)^2 (l2, squared hinge);
    dual    D(a) = 1/2 a'Qbar a - e'a,  0 <= a_i <= U_i,  Qbar = Q + diag(D_ii),
            Q_ij = y_i y_j x_i.x_j;  l1: U_i = C_i, D_ii = 0;  l2: U_i = inf, D_ii = 1/(2 C_i).

With w(a) = sum_i y_i a_i x_i we have 1/2 a'Q a = 1/2 ||w(a)||^2, so the dual value is
cheap once w(a) is known. We report the *maximised* dual value -D(a), so that the duality
gap P(w(a)) - (-D(a)) = P(w(a)) + D(a) is >= 0 and 0 exactly at the optimum.

Weight vectors: `w` has `problem.n_weights` entries: the feature weights, then (only when
`bias_scale > 0`) the weight of the appended constant feature.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from solvers._kernel_helpers import row_dot
from solvers.backbone import LinearProblem

LOSSES = ("l1", "l2")


def check_loss(loss: str) -> None:
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")


def margins(problem: LinearProblem, w: np.ndarray) -> np.ndarray:
    """y_i * w.x_i (bias feature included) for every row, as a new float64 array."""
    weights = checked_weights(problem, w)
    X = problem.X
    out = np.empty(X.n_rows, dtype=np.float64)
    _margins_kernel(X.data, X.indices, X.indptr, problem.y, weights, problem.bias_scale, out)
    return out


def transpose_times(problem: LinearProblem, u: np.ndarray) -> np.ndarray:
    """Z'u = sum_i u_i z_i (z_i: x_i with the bias feature B last, if any), a new array of
    problem.n_weights entries."""
    X = problem.X
    out = np.zeros(X.n_features + 1)
    _transpose_kernel(X.data, X.indices, X.indptr, np.ascontiguousarray(u, dtype=np.float64),
                      problem.bias_scale, out)
    return out[: problem.n_weights]


def primal_objective(problem: LinearProblem, w: np.ndarray, loss: str) -> float:
    """P(w) = 1/2 ||w||^2 + sum_i C_i loss(1 - y_i w.x_i)."""
    check_loss(loss)
    weights = checked_weights(problem, w)
    X = problem.X
    loss_sum = _loss_sum_kernel(
        X.data, X.indices, X.indptr, problem.y, problem.cost, weights, problem.bias_scale,
        loss == "l2",
    )
    return float(0.5 * np.dot(weights, weights) + loss_sum)


def dual_objective(problem: LinearProblem, alpha: np.ndarray, w: np.ndarray, loss: str) -> float:
    """The maximised dual value -D(a) = e'a - 1/2 ||w||^2 - 1/2 sum_i D_ii a_i^2.

    `w` must be w(a) = sum_i y_i a_i x_i (the solvers maintain it); `duality_gap` of the
    pair is then >= 0 up to rounding.
    """
    check_loss(loss)
    weights = checked_weights(problem, w)
    alpha = np.asarray(alpha, dtype=np.float64)
    value = float(np.sum(alpha)) - 0.5 * float(np.dot(weights, weights))
    if loss == "l2":
        # 1/2 sum_i a_i^2 / (2 C_i)
        value -= 0.25 * float(np.sum(alpha * alpha / problem.cost))
    return value


def dual_box(cost: np.ndarray, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """(U_i, D_ii) of the dual: l1 -> (C_i, 0); l2 -> (inf, 1/(2 C_i))."""
    if loss == "l1":
        return np.ascontiguousarray(cost, dtype=np.float64), np.zeros(cost.shape[0])
    return np.full(cost.shape[0], math.inf), 0.5 / np.asarray(cost, dtype=np.float64)


def qbar_diagonal(problem: LinearProblem, diag: np.ndarray) -> np.ndarray:
    """Qbar_ii = D_ii + x_i.x_i (+ B^2 with the bias feature), checked finite."""
    X = problem.X
    out = np.empty(X.n_rows)
    _qbar_diagonal_kernel(X.data, X.indptr, diag, problem.bias_scale, out)
    if not np.all(np.isfinite(out)):
        raise ValueError(
            "some rows of X have a squared norm that is not a finite float64 (overflow "
            "or NaN); scale the features"
        )
    return out


def checked_weights(problem: LinearProblem, w: Any, name: str = "w") -> np.ndarray:
    """`w` as a contiguous float64 array of the problem's n_weights entries (else a
    ValueError that names it `name`)."""
    weights = np.ascontiguousarray(w, dtype=np.float64)
    if weights.shape != (problem.n_weights,):
        raise ValueError(
            f"{name} has shape {weights.shape}; this problem has {problem.n_weights} weights "
            f"({problem.X.n_features} features"
            + (" + the bias feature)" if problem.bias_scale > 0 else ")")
        )
    return weights


@njit(cache=True)
def _margins_kernel(data, indices, indptr, y, w, bias_scale, out):
    n_features = w.shape[0] - 1 if bias_scale > 0.0 else w.shape[0]
    for i in range(indptr.shape[0] - 1):
        # out[i] = y_i * (x_i . w[:d] + B * w[d])
        dot = row_dot(w, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]))
        if bias_scale > 0.0:
            dot += w[n_features] * bias_scale
        out[i] = y[i] * dot


@njit(cache=True)
def _transpose_kernel(data, indices, indptr, u, bias_scale, out):
    bias_slot = out.shape[0] - 1
    for i in range(indptr.shape[0] - 1):
        # out[:d] += u_i x_i;  out[d] += u_i B
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            out[np.uint32(indices[k])] += u[i] * data[k]
        out[bias_slot] += u[i] * bias_scale


@njit(cache=True)
def _qbar_diagonal_kernel(data, indptr, diag, bias_scale, out):
    for i in range(indptr.shape[0] - 1):
        # out[i] = D_ii + x_i.x_i + B^2
        total = diag[i] + bias_scale * bias_scale
        for k in range(indptr[i], indptr[i + 1]):
            value = np.float64(data[k])  # float32 values: squared in float64
            total += value * value
        out[i] = total


@njit(cache=True)
def _loss_sum_kernel(data, indices, indptr, y, cost, w, bias_scale, squared):
    n_features = w.shape[0] - 1 if bias_scale > 0.0 else w.shape[0]
    total = 0.0
    for i in range(indptr.shape[0] - 1):
        # xi = max(0, 1 - y_i w.x_i); total += C_i * (xi or xi^2)
        dot = row_dot(w, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]))
        if bias_scale > 0.0:
            dot += w[n_features] * bias_scale
        slack = 1.0 - y[i] * dot
        if slack > 0.0:
            total += cost[i] * (slack * slack if squared else slack)
    return total
