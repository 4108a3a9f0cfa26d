"""Objectives and certificates of the L1-regularised linear problems (LIBLINEAR -s 5, 6).

Binary problem (y_i in {-1, +1}, C_i > 0, optional bias feature B, regularised like any
other weight, as LIBLINEAR -B without -R):

    primal  P(w) = ||w||_1 + sum_i C_i loss(m_i),  m_i = y_i w.x_i,
            loss "l2": max(0, 1 - m)^2;  "logistic": log(1 + exp(-m));
    dual    max_a  D(a)  s.t.  ||Z'(y a)||_inf <= 1, a_i >= 0 (Z: rows x_i, B appended),
            l2:        D(a) = sum_i a_i - a_i^2 / (4 C_i);
            logistic:  D(a) = sum_i C_i H(a_i / C_i), 0 <= a_i <= C_i,
                       H(p) = -p log p - (1 - p) log(1 - p).

Weak duality gives D(a) <= P* for every feasible a: a certificate. From w alone we take
the multipliers the optimum has at w* (l2: a_i = 2 C_i max(0, 1 - m_i); logistic:
a_i = C_i sigma(-m_i)) and scale them by the best t in [0, t_max] (t_max keeps
||Z'(y t a)||_inf <= 1 and, logistic, t a_i <= C_i): at the optimum t = 1 and the gap is
0, so the bound tightens as w approaches w* (the lasso's dual scaling, as in
scikit-learn's and glmnet's duality gaps).
"""

from __future__ import annotations

import math

import numpy as np

from solvers.backbone import LinearProblem
from solvers.objectives import margins, transpose_times

LOSSES = ("l2", "logistic")
_BISECTIONS = 60


def primal_value(
    problem: LinearProblem, w: np.ndarray, loss: str, m: np.ndarray | None = None
) -> float:
    """P(w) = ||w||_1 + sum_i C_i loss(y_i w.x_i)."""
    m = margins(problem, w) if m is None else m
    if loss == "l2":
        slack = np.maximum(0.0, 1.0 - m)
        losses = slack * slack
    elif loss == "logistic":
        losses = np.logaddexp(0.0, -m)
    else:
        raise ValueError(f"L1-regularised loss must be one of {LOSSES}, got {loss!r}")
    return float(np.abs(w).sum() + np.sum(problem.cost * losses))


def bounds_at(problem: LinearProblem, w: np.ndarray, loss: str) -> tuple[float, dict[str, float]]:
    """(P(w), {"dual from w": D(t a(w))}), D(t a(w)) <= P*."""
    w = np.asarray(w, dtype=np.float64)
    m = margins(problem, w)
    primal = primal_value(problem, w, loss, m)
    cost = problem.cost
    if loss == "l2":
        alpha = 2.0 * cost * np.maximum(0.0, 1.0 - m)
    else:
        alpha = cost * np.exp(-np.logaddexp(0.0, m))  # C_i sigma(-m_i)
    largest = float(np.max(np.abs(transpose_times(problem, alpha * problem.y)), initial=0.0))
    t_max = 1.0 / largest if largest > 0.0 else math.inf
    if loss == "l2":
        # D(t a) = t S - t^2 q, maximal at t = S / (2 q)
        total, q = float(alpha.sum()), 0.25 * float(np.sum(alpha * alpha / cost))
        t = min(total / (2.0 * q), t_max) if q > 0.0 else 0.0
        return primal, {"dual from w": t * total - t * t * q}
    p = alpha / cost
    t = _best_entropy_scale(cost, p, min(t_max, 1.0 / float(np.max(p, initial=1.0))))
    return primal, {"dual from w": _entropy(cost, t * p)}


def _entropy(cost: np.ndarray, p: np.ndarray) -> float:
    """sum_i C_i H(p_i), 0 <= p_i <= 1."""
    p = np.clip(p, 0.0, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = -np.where(p > 0, p * np.log(p), 0.0) - np.where(
            p < 1, (1.0 - p) * np.log1p(-p), 0.0
        )
    return float(np.sum(cost * terms))


def _best_entropy_scale(cost: np.ndarray, p: np.ndarray, t_max: float) -> float:
    """argmax over t in [0, t_max] of the concave sum_i C_i H(t p_i), by bisection on its
    derivative sum_i C_i p_i log((1 - t p_i) / (t p_i))."""
    active = p > 0
    cost, p = cost[active], p[active]
    if p.shape[0] == 0 or not math.isfinite(t_max):
        return 0.0 if not math.isfinite(t_max) else t_max

    def slope(t: float) -> float:
        tp = np.minimum(t * p, 1.0)
        with np.errstate(divide="ignore"):
            return float(np.sum(cost * p * (np.log1p(-tp) - np.log(tp))))

    if slope(t_max) >= 0.0:
        return t_max
    low, high = 0.0, t_max
    for _ in range(_BISECTIONS):
        middle = 0.5 * (low + high)
        if slope(middle) > 0.0:
            low = middle
        else:
            high = middle
    return low
