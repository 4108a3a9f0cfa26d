"""Slow, obviously correct dense references for the solver tests.

Everything here works on dense NumPy arrays with the bias feature (if any) already
appended as an explicit column, and follows the formulas of solvers/objectives.py
literally: no shrinking, no clever bookkeeping.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize


def augment(X: np.ndarray, bias_scale: float | None) -> np.ndarray:
    """Append the constant column B (LIBLINEAR -B); None = no bias feature."""
    X = np.asarray(X, dtype=np.float64)
    if bias_scale is None:
        return X
    return np.hstack([X, np.full((X.shape[0], 1), bias_scale)])


def primal(X: np.ndarray, y: np.ndarray, cost: np.ndarray, w: np.ndarray, loss: str) -> float:
    """P(w) = 1/2 w.w + sum_i C_i max(0, 1 - y_i w.x_i)^(1 or 2)."""
    slack = np.maximum(0.0, 1.0 - y * (X @ w))
    losses = slack if loss == "l1" else slack**2
    return float(0.5 * w @ w + cost @ losses)


def qbar(X: np.ndarray, y: np.ndarray, cost: np.ndarray, loss: str) -> np.ndarray:
    """Qbar = Q + diag(D_ii), Q_ij = y_i y_j x_i.x_j; D_ii = 0 (l1) or 1/(2 C_i) (l2)."""
    Q = (y[:, None] * X) @ (y[:, None] * X).T
    if loss == "l2":
        Q = Q + np.diag(1.0 / (2.0 * cost))
    return Q


def dual_value(
    X: np.ndarray, y: np.ndarray, cost: np.ndarray, alpha: np.ndarray, loss: str
) -> float:
    """The maximised dual value -D(a) = -(1/2 a'Qbar a - e'a)."""
    return float(-(0.5 * alpha @ qbar(X, y, cost, loss) @ alpha - alpha.sum()))


def w_of_alpha(X: np.ndarray, y: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """w(a) = sum_i y_i a_i x_i."""
    return (y * alpha) @ X


def upper_bounds(cost: np.ndarray, loss: str) -> np.ndarray:
    return cost.astype(np.float64) if loss == "l1" else np.full(cost.shape, np.inf)


def cyclic_dcd(
    X: np.ndarray, y: np.ndarray, cost: np.ndarray, loss: str, max_sweeps: int
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 1 of Hsieh et al. 2008 in its plainest form: cyclic order, no shrinking,
    until a sweep changes no alpha_i by more than 1e-15 (or max_sweeps)."""
    Q = qbar(X, y, cost, loss)
    upper = upper_bounds(cost, loss)
    alpha = np.zeros(X.shape[0])
    for _ in range(max_sweeps):
        largest_change = 0.0
        for i in range(X.shape[0]):
            gradient = Q[i] @ alpha - 1.0
            if Q[i, i] > 0:
                new = min(max(alpha[i] - gradient / Q[i, i], 0.0), upper[i])
            else:
                new = upper[i] if gradient < 0 else alpha[i]
            largest_change = max(largest_change, abs(new - alpha[i]))
            alpha[i] = new
        if largest_change <= 1e-15:
            break
    return alpha, w_of_alpha(X, y, alpha)


def dual_by_lbfgsb(
    X: np.ndarray, y: np.ndarray, cost: np.ndarray, loss: str
) -> tuple[np.ndarray, np.ndarray]:
    """The box-constrained dual QP solved by L-BFGS-B (tiny problems); returns (alpha, w)."""
    Q = qbar(X, y, cost, loss)
    upper = upper_bounds(cost, loss)

    def value_and_gradient(alpha: np.ndarray) -> tuple[float, np.ndarray]:
        Qa = Q @ alpha
        return 0.5 * alpha @ Qa - alpha.sum(), Qa - 1.0

    bounds = [(0.0, None if np.isinf(u) else u) for u in upper]
    result = scipy.optimize.minimize(
        value_and_gradient,
        np.zeros(X.shape[0]),
        jac=True,
        method="L-BFGS-B",
        bounds=bounds,
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 100_000, "maxfun": 100_000},
    )
    return result.x, w_of_alpha(X, y, result.x)


def primal_l2_by_lbfgs(X: np.ndarray, y: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """argmin of the (once differentiable) squared-hinge primal by L-BFGS."""

    def value_and_gradient(w: np.ndarray) -> tuple[float, np.ndarray]:
        slack = np.maximum(0.0, 1.0 - y * (X @ w))
        value = 0.5 * w @ w + cost @ slack**2
        gradient = w - 2.0 * ((cost * slack * y) @ X)
        return value, gradient

    result = scipy.optimize.minimize(
        value_and_gradient,
        np.zeros(X.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 100_000},
    )
    return result.x


def random_sparse_problem(
    n_rows: int, n_features: int, density: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """A dense matrix with many zeros, and labels from a noisy linear rule."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features)) * (rng.random((n_rows, n_features)) < density)
    truth = rng.normal(size=n_features)
    y = np.where(X @ truth + 0.5 * rng.normal(size=n_rows) > 0, 1.0, -1.0)
    if np.all(y == y[0]):
        y[0] = -y[0]
    return X, y
