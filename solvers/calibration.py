"""Probability outputs for SVMs, as LIBSVM's ``-b 1`` computes them.

- ``platt_fit``: Platt's sigmoid ``P(y = +1 | f) = 1 / (1 + exp(A f + B))`` fitted by the
  robust Newton method of Lin, Lin & Weng 2007 ("A note on Platt's probabilistic outputs
  for support vector machines", Algorithm 1): minimise
  ``F(A, B) = sum_i -t_i log p_i - (1 - t_i) log(1 - p_i)`` with Platt's smoothed targets
  ``t_i = (N+ + 1)/(N+ + 2)`` for positives and ``1/(N- + 2)`` for negatives, Newton
  directions on ``H + sigma I`` (sigma = 1e-12), backtracking line search with sufficient
  decrease ``F(new) < F + 1e-4 * step * g'd``, steps down to 1e-10. Stop rule:
  ``|dF/dA| < 1e-5 and |dF/dB| < 1e-5``, at most 100 iterations. Identical operation for
  operation to libsvm's ``sigmoid_train`` (svm.cpp, LIBSVM 3.x).
- ``platt_predict``: ``sigmoid_predict``, evaluated on the side where ``exp`` cannot
  overflow.
- ``pairwise_coupling``: Wu, Lin & Weng 2004 ("Probability estimates for multi-class
  classification by pairwise coupling"), method 2: ``min_p p'Qp`` subject to
  ``sum_t p_t = 1`` with ``Q_tt = sum_{j != t} r_jt^2``, ``Q_tj = -r_jt r_tj``; solved by
  libsvm's ``multiclass_probability`` fixed-point iteration, stop when
  ``max_t |(Qp)_t - p'Qp| < eps`` (eps = 0.005 / k), at most ``max(100, k)`` sweeps. That
  stop rule leaves p about 1e-3 from the exact minimiser: pass a smaller ``eps`` for more.
- ``ovo_probabilities``: libsvm's ``svm_predict_probability``: pairwise sigmoids clipped to
  ``[1e-7, 1 - 1e-7]``, then coupled; with two classes the clipped sigmoid is the answer
  (LIBSVM 3.x: ``if (nr_class == 2) prob_estimates[0] = pairwise_prob[0][1]``).
- ``ovr_probabilities``: one-vs-rest models (LIBLINEAR style) - see its docstring.
- ``cv_decision_values``: the internal 5-fold cross-validation of libsvm's
  ``svm_binary_svc_probability`` that produces the decision values ``platt_fit`` sees.

Randomness only through the ``numpy.random.Generator`` (or the permutation) passed in.

The predict-time half (``platt_predict``, ``pairwise_coupling``, ``ovo_probabilities``,
``ovr_probabilities``) lives in solvers/probability.py, which the API may import; it is
re-exported here. This module is training code (the worker's side).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from solvers.probability import (
    DENSITY_MARKS,
    MIN_PAIRWISE_PROBABILITY,
    ovo_probabilities,
    ovr_probabilities,
    pairwise_coupling,
    platt_predict,
)

__all__ = [
    "CV_FOLDS", "MIN_PAIRWISE_PROBABILITY", "PlattFit", "cv_decision_values", "ovo_probabilities",
    "ovr_probabilities", "pairwise_coupling", "platt_fit", "platt_predict",
]

CV_FOLDS = 5

_PLATT_MAX_ITER = 100
_PLATT_MIN_STEP = 1e-10
_PLATT_SIGMA = 1e-12
_PLATT_EPS = 1e-5

_EXIT_REASONS = ("converged", "max_iter", "line_search_failed")


@dataclass(frozen=True)
class PlattFit:
    """A, B of ``P(+1 | f) = 1 / (1 + exp(A f + B))``, the iterations and why it stopped
    (``converged``, ``max_iter``, or ``line_search_failed``: libsvm returns the last
    iterate in all three cases, and so do we)."""

    A: float
    B: float
    n_iter: int
    exit_reason: str


# ---- kernels ----------------------------------------------------------------------------


@njit(cache=True)
def _platt_objective(dec, targets, A, B):  # pragma: no cover - jitted
    fval = 0.0
    # fval = sum(t * z + log1p(exp(-z))), z = dec * A + B, on the side that cannot overflow
    for i in range(dec.shape[0]):
        fApB = dec[i] * A + B
        if fApB >= 0:
            fval += targets[i] * fApB + np.log(1 + np.exp(-fApB))
        else:
            fval += (targets[i] - 1) * fApB + np.log(1 + np.exp(fApB))
    return fval


@njit(cache=True)
def _platt_kernel(dec, positive):  # pragma: no cover - jitted
    """libsvm sigmoid_train; returns (A, B, iterations, exit code index)."""
    n = dec.shape[0]
    prior1 = 0.0
    prior0 = 0.0
    # prior1, prior0 = sum(positive), sum(~positive)
    for i in range(n):
        if positive[i]:
            prior1 += 1
        else:
            prior0 += 1
    hi_target = (prior1 + 1.0) / (prior1 + 2.0)
    lo_target = 1 / (prior0 + 2.0)
    targets = np.empty(n)
    # targets = where(positive, hi_target, lo_target)
    for i in range(n):
        targets[i] = hi_target if positive[i] else lo_target
    A = 0.0
    B = np.log((prior0 + 1.0) / (prior1 + 1.0))
    fval = _platt_objective(dec, targets, A, B)
    iteration = 0
    while iteration < _PLATT_MAX_ITER:
        h11 = _PLATT_SIGMA
        h22 = _PLATT_SIGMA
        h21 = 0.0
        g1 = 0.0
        g2 = 0.0
        # p = 1 - sigmoid(z); H = [[sum f^2 pq, sum f pq], [., sum pq]] + sigma I;
        # g = [sum f (t - p), sum (t - p)]
        for i in range(n):
            fApB = dec[i] * A + B
            if fApB >= 0:
                p = np.exp(-fApB) / (1.0 + np.exp(-fApB))
                q = 1.0 / (1.0 + np.exp(-fApB))
            else:
                p = 1.0 / (1.0 + np.exp(fApB))
                q = np.exp(fApB) / (1.0 + np.exp(fApB))
            d2 = p * q
            h11 += dec[i] * dec[i] * d2
            h22 += d2
            h21 += dec[i] * d2
            d1 = targets[i] - p
            g1 += dec[i] * d1
            g2 += d1
        if abs(g1) < _PLATT_EPS and abs(g2) < _PLATT_EPS:
            return A, B, iteration, 0
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        stepsize = 1.0
        # backtracking: halve the step until F(A + s dA, B + s dB) < F + 1e-4 s g'd
        while stepsize >= _PLATT_MIN_STEP:
            new_A = A + stepsize * dA
            new_B = B + stepsize * dB
            new_f = _platt_objective(dec, targets, new_A, new_B)
            if new_f < fval + 0.0001 * stepsize * gd:
                A = new_A
                B = new_B
                fval = new_f
                break
            stepsize = stepsize / 2.0
        if stepsize < _PLATT_MIN_STEP:
            return A, B, iteration, 2
        iteration += 1
    return A, B, iteration, 1


# ---- public API -------------------------------------------------------------------------


def platt_fit(decision_values: Any, labels: Any) -> PlattFit:
    """Fit Platt's sigmoid to decision values (oriented: large = class +1) and labels
    (> 0 is the positive class, anything else negative; libsvm's rule). Priors are the
    class counts of ``labels``."""
    dec = np.ascontiguousarray(decision_values, dtype=np.float64)
    positive = np.ascontiguousarray(np.asarray(labels) > 0)
    if dec.ndim != 1 or positive.shape != dec.shape:
        raise ValueError(
            f"decision_values and labels must be 1-D of one length, got shapes "
            f"{dec.shape} and {positive.shape}"
        )
    if dec.shape[0] == 0:
        raise ValueError("platt_fit needs at least one decision value")
    if not np.all(np.isfinite(dec)):
        raise ValueError("decision_values hold NaN or infinite values")
    A, B, n_iter, code = _platt_kernel(dec, positive)
    return PlattFit(float(A), float(B), int(n_iter), _EXIT_REASONS[code])


DecisionFunction = Callable[[Any], Any]
FitFunction = Callable[[Any, np.ndarray], DecisionFunction]


def cv_decision_values(
    X: Any,
    labels: Any,
    fit_fn: FitFunction,
    rng: np.random.Generator | None = None,
    permutation: Any = None,
    n_folds: int = CV_FOLDS,
) -> np.ndarray:
    """Cross-validated decision values, as libsvm's ``svm_binary_svc_probability``.

    Rows are shuffled (``permutation``, or ``rng.permutation(n)``); fold i holds the
    shuffled rows ``[i n / n_folds, (i + 1) n / n_folds)`` (integer division); the other
    rows, in shuffled order, train ``fit_fn(X_train, labels_train)``, which returns a
    function giving the decision values of rows (oriented: positive = label > 0). When the
    training part holds one class only, the fold's values are +1 (all positive) or -1
    (all negative) without training, 0 when it is empty - libsvm's special cases.
    """
    y = np.asarray(labels)
    n = y.shape[0]
    if permutation is None:
        if rng is None:
            raise ValueError("pass rng (a numpy Generator) or an explicit permutation")
        order = rng.permutation(n)
    else:
        order = np.asarray(permutation, dtype=np.int64)
        if order.shape != (n,) or not np.array_equal(np.sort(order), np.arange(n)):
            raise ValueError(f"permutation must be a permutation of range({n})")
    if n_folds < 2:
        raise ValueError(f"n_folds must be at least 2, got {n_folds}")
    dec = np.zeros(n)
    for fold in range(n_folds):
        begin, end = fold * n // n_folds, (fold + 1) * n // n_folds
        held_out = order[begin:end]
        train = np.concatenate([order[:begin], order[end:]])
        n_positive = int(np.count_nonzero(y[train] > 0))
        if train.shape[0] == 0:
            dec[held_out] = 0.0
        elif n_positive == train.shape[0]:
            dec[held_out] = 1.0
        elif n_positive == 0:
            dec[held_out] = -1.0
        else:
            decide = fit_fn(X[train], y[train])
            dec[held_out] = np.asarray(decide(X[held_out]), dtype=np.float64).reshape(-1)
    return dec


# -- one-class probabilities (LIBSVM 3.35+, `-b 1` with -s 2) ------------------------------


def one_class_density_marks(decision_values: Any) -> np.ndarray | None:
    """LIBSVM's prob_density_marks of a one-class model (svm_one_class_probability: the
    binning by density of Que & Lin): the training rows' decision values sorted, five
    marks between quantiles of the negative ones, five of the non-negative ones, each the
    mean of two neighbouring bin edges. None (LIBSVM warns and stores none) when fewer than
    five values are negative or fewer than five non-negative."""
    values = np.sort(np.asarray(decision_values, dtype=np.float64).reshape(-1))
    n = values.shape[0]
    non_negative = np.flatnonzero(values >= 0)
    negative = int(non_negative[0]) if non_negative.size else 0  # LIBSVM's neg_counter
    positive = n - negative
    mid = DENSITY_MARKS // 2
    if negative < mid or positive < mid:
        return None
    edges = np.empty(DENSITY_MARKS + 1)
    for i in range(mid):
        edges[i] = values[i * negative // mid]
    edges[mid] = 0.0
    for i in range(mid + 1, DENSITY_MARKS + 1):
        edges[i] = values[negative - 1 + (i - mid) * positive // mid]
    return (edges[:-1] + edges[1:]) / 2

