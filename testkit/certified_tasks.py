"""Reference optima of the linear formulations of solvers/linear_tasks.py (Crammer-Singer,
epsilon-SVR with l1 / l2 loss, one-class), for the tests: each primal as a QP in (w, slacks)
solved by the interior-point solver clarabel to 1e-10, and the primal objective of any
model recomputed here from its weights (never taken from the solver under test).

Rows are used as given: the caller appends the bias column (solvers.linear_tasks.augmented)
when the model has one. Small sets only (the QP has one constraint per row and class).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import clarabel
import numpy as np
import scipy.sparse as sp


def cs_primal(X: Any, label: np.ndarray, cost: np.ndarray, W: np.ndarray) -> float:
    """1/2 ||W||^2 + sum_i C_i max_m (e_i^m + (w_m - w_yi).x_i); W (k, d)."""
    scores = np.asarray(X @ W.T)
    own = scores[np.arange(scores.shape[0]), label]
    margins = 1.0 + scores - own[:, None]
    margins[np.arange(scores.shape[0]), label] = 0.0
    return 0.5 * float(np.sum(W * W)) + float(cost @ margins.max(axis=1))


def svr_primal(
    X: Any, target: np.ndarray, cost: np.ndarray, w: np.ndarray, loss: str, epsilon: float
) -> float:
    excess = np.maximum(np.abs(X @ w - target) - epsilon, 0.0)
    return 0.5 * float(w @ w) + float(cost @ (excess if loss == "l1" else excess**2))


def one_class_primal(X: Any, upper: np.ndarray, w: np.ndarray, rho: float, nu: float) -> float:
    return (
        0.5 * float(w @ w)
        - rho * nu * float(upper.sum())
        + float(upper @ np.maximum(rho - X @ w, 0.0))
    )


def liblinear_model(args: str, y: np.ndarray, X: Any, path: Path
                    ) -> tuple[np.ndarray, dict[str, list[str]]]:
    """LIBLINEAR 2.50's model trained with `args` (liblinear-official), saved to `path`
    and read back: its weights (rows: features then the bias, columns: outputs) and its
    header lines (name -> values)."""
    from liblinear import liblinearutil

    liblinearutil.save_model(str(path), liblinearutil.train(y, X, args + " -q"))
    lines = path.read_text().splitlines()
    start = lines.index("w")
    header = {line.split()[0]: line.split()[1:] for line in lines[:start]}
    weights = np.array([[float(v) for v in line.split()] for line in lines[start + 1:]])
    return weights, header


def _solve(P: sp.csc_matrix, q: np.ndarray, A: sp.spmatrix, b: np.ndarray) -> np.ndarray:
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = 1e-10
    settings.tol_feas = 1e-10
    solver = clarabel.DefaultSolver(
        sp.triu(P, format="csc"),
        q,
        sp.csc_matrix(A),
        b,
        [clarabel.NonnegativeConeT(A.shape[0])],
        settings,
    )
    solution = solver.solve()
    if str(solution.status) not in ("Solved", "AlmostSolved"):
        raise RuntimeError(f"clarabel: {solution.status}")
    return np.asarray(solution.x)


def cs_optimum(X: Any, label: np.ndarray, cost: np.ndarray, k: int) -> float:
    """min over W of cs_primal: variables W (k * d, class-major) and xi (n)."""
    X = sp.csr_matrix(X)
    n, d = X.shape
    blocks, rhs = [], []
    for m in range(k):
        rows = np.flatnonzero(label != m)
        # (w_m - w_yi).x_i - xi_i <= -1 for m != y_i
        sel = sp.csr_matrix(
            (np.ones(rows.size), (np.arange(rows.size), rows)), shape=(rows.size, n)
        )
        Xr = sel @ X
        own = sp.csr_matrix(
            (np.ones(rows.size), (np.arange(rows.size), label[rows])), shape=(rows.size, k)
        )
        mine = sp.csr_matrix(
            (np.ones(rows.size), (np.arange(rows.size), np.full(rows.size, m))),
            shape=(rows.size, k),
        )
        weights = sp.hstack(
            [sp.diags((mine - own).getcol(c).toarray().ravel()) @ Xr for c in range(k)]
        )
        blocks.append(sp.hstack([weights, -sel]))
        rhs.append(-np.ones(rows.size))
    blocks.append(sp.hstack([sp.csr_matrix((n, k * d)), -sp.identity(n)]))
    rhs.append(np.zeros(n))
    P = sp.block_diag([sp.identity(k * d), sp.csr_matrix((n, n))], format="csc")
    x = _solve(P, np.concatenate([np.zeros(k * d), cost]), sp.vstack(blocks), np.concatenate(rhs))
    return cs_primal(X, label, cost, x[: k * d].reshape(k, d))


def svr_optimum(X: Any, target: np.ndarray, cost: np.ndarray, loss: str, epsilon: float) -> float:
    X = sp.csr_matrix(X)
    n, d = X.shape
    identity = sp.identity(n)
    A = sp.vstack(
        [
            sp.hstack([X, -identity]),
            sp.hstack([-X, -identity]),
            sp.hstack([sp.csr_matrix((n, d)), -identity]),
        ]
    )
    b = np.concatenate([target + epsilon, epsilon - target, np.zeros(n)])
    if loss == "l1":
        P = sp.block_diag([sp.identity(d), sp.csr_matrix((n, n))], format="csc")
        q = np.concatenate([np.zeros(d), cost])
    else:
        P = sp.block_diag([sp.identity(d), sp.diags(2.0 * cost)], format="csc")
        q = np.zeros(d + n)
    x = _solve(P, q, A, b)
    return svr_primal(X, target, cost, x[:d], loss, epsilon)


def one_class_optimum(X: Any, upper: np.ndarray, nu: float) -> float:
    """Variables (w, rho, xi): -x_i.w + rho - xi_i <= 0, xi >= 0."""
    X = sp.csr_matrix(X)
    n, d = X.shape
    identity = sp.identity(n)
    A = sp.vstack(
        [
            sp.hstack([-X, np.ones((n, 1)), -identity]),
            sp.hstack([sp.csr_matrix((n, d + 1)), -identity]),
        ]
    )
    P = sp.block_diag([sp.identity(d), sp.csr_matrix((n + 1, n + 1))], format="csc")
    q = np.concatenate([np.zeros(d), [-nu * float(upper.sum())], upper])
    x = _solve(P, q, A, np.zeros(2 * n))
    return one_class_primal(X, upper, x[:d], float(x[d]), nu)
