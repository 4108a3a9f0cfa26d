"""Probabilities from a calibrated SVM at predict time: the servable half of LIBSVM's
``-b 1`` (the fitting half is solvers/calibration.py, a training module).

- ``platt_predict``: libsvm's ``sigmoid_predict``, ``1 / (1 + exp(A f + B))`` evaluated on
  the side where ``exp`` cannot overflow.
- ``pairwise_coupling``: Wu, Lin & Weng 2004, method 2, by libsvm's
  ``multiclass_probability`` fixed-point iteration (stop when
  ``max_t |(Qp)_t - p'Qp| < 0.005 / k``, at most ``max(100, k)`` sweeps).
- ``ovo_probabilities``: libsvm's ``svm_predict_probability`` (pairwise sigmoids clipped to
  ``[1e-7, 1 - 1e-7]``, then coupled; two classes: the clipped sigmoid).
- ``ovr_probabilities``: one-vs-rest models, normalised per-class sigmoids.

NumPy and Numba only: the API imports this module (through solvers.models) to serve
probabilities; it never imports the fitting code.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

MIN_PAIRWISE_PROBABILITY = 1e-7  # libsvm svm_predict_probability's min_prob


@njit(cache=True)
def _coupling_kernel(r, eps, max_iter, out):  # pragma: no cover - jitted
    """libsvm multiclass_probability on every row: r[n, k, k] -> out[n, k]."""
    n_rows = r.shape[0]
    k = r.shape[1]
    Q = np.empty((k, k))
    Qp = np.empty(k)
    # out[row] = argmin_p p'Q(r[row])p s.t. sum(p) = 1 (libsvm's fixed-point iteration)
    for row in range(n_rows):
        p = out[row]
        for t in range(k):
            p[t] = 1.0 / k
            Q[t, t] = 0.0
            for j in range(t):
                Q[t, t] += r[row, j, t] * r[row, j, t]
                Q[t, j] = Q[j, t]
            for j in range(t + 1, k):
                Q[t, t] += r[row, j, t] * r[row, j, t]
                Q[t, j] = -r[row, j, t] * r[row, t, j]
        for _ in range(max_iter):
            # Qp = Q @ p; pQp = p @ Qp (recomputed each sweep for accuracy)
            pQp = 0.0
            for t in range(k):
                Qp[t] = 0.0
                for j in range(k):
                    Qp[t] += Q[t, j] * p[j]
                pQp += p[t] * Qp[t]
            max_error = 0.0
            for t in range(k):
                error = abs(Qp[t] - pQp)
                if error > max_error:
                    max_error = error
            if max_error < eps:
                break
            # for each t: p_t += (pQp - Qp_t) / Q_tt, then renormalise p, Qp and pQp
            for t in range(k):
                diff = (-Qp[t] + pQp) / Q[t, t]
                p[t] += diff
                pQp = (pQp + diff * (diff * Q[t, t] + 2 * Qp[t])) / (1 + diff) / (1 + diff)
                for j in range(k):
                    Qp[j] = (Qp[j] + diff * Q[t, j]) / (1 + diff)
                    p[j] /= 1 + diff


# ---- public API -------------------------------------------------------------------------


def platt_predict(decision_values: Any, A: float, B: float) -> np.ndarray:
    """``1 / (1 + exp(A f + B))`` per value, computed as libsvm's ``sigmoid_predict``:
    ``exp(-z) / (1 + exp(-z))`` for ``z >= 0``, ``1 / (1 + exp(z))`` otherwise."""
    z = np.asarray(decision_values, dtype=np.float64) * A + B
    e = np.exp(-np.abs(z))  # exp(-z) where z >= 0, exp(z) where z < 0: never overflows
    return np.where(z >= 0, e / (1.0 + e), 1.0 / (1 + e))


def pairwise_coupling(r: Any, eps: float | None = None, max_iter: int | None = None) -> np.ndarray:
    """Class probabilities from pairwise ones, Wu, Lin & Weng's method 2 (libsvm).

    r: (k, k) or (n, k, k) with ``r[i, j] = P(i | i or j, x)`` and
    ``r[j, i] = 1 - r[i, j]``; the diagonal is ignored. Returns (k,) or (n, k).
    eps / max_iter: libsvm's 0.005 / k and max(100, k) when None."""
    pairwise = np.asarray(r, dtype=np.float64)
    single = pairwise.ndim == 2
    if single:
        pairwise = pairwise[np.newaxis]
    if pairwise.ndim != 3 or pairwise.shape[1] != pairwise.shape[2]:
        raise ValueError(f"r must have shape (k, k) or (n, k, k), got {np.shape(r)}")
    k = pairwise.shape[1]
    if k == 0:
        raise ValueError("r must describe at least one class")
    pairwise = np.ascontiguousarray(pairwise)
    out = np.empty((pairwise.shape[0], k))
    _coupling_kernel(
        pairwise,
        0.005 / k if eps is None else float(eps),
        max(100, k) if max_iter is None else int(max_iter),
        out,
    )
    return out[0] if single else out


def ovo_probabilities(decision_values: Any, A: Any, B: Any,
                      min_probability: float = MIN_PAIRWISE_PROBABILITY,
                      order: Any = None) -> np.ndarray:
    """libsvm's ``svm_predict_probability`` for a one-vs-one model of k classes.

    decision_values: (n, k(k-1)/2) in libsvm's pair order (0,1), (0,2), ..., (k-2, k-1),
    positive for the first class of the pair; A, B: one sigmoid per pair. Returns (n, k),
    columns in the model's class order. order (a permutation of the k classes): couple
    in that class order, as libsvm does with a model file that lists its labels so (the
    iteration stops at a tolerance, so the order moves the result within it)."""
    dec = np.asarray(decision_values, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if dec.ndim != 2:
        raise ValueError(f"decision_values must be 2-D (n, pairs), got shape {dec.shape}")
    n_pairs = dec.shape[1]
    k = round((1 + float(np.sqrt(1 + 8 * n_pairs))) / 2)
    if k * (k - 1) // 2 != n_pairs or n_pairs == 0 or A.shape != (n_pairs,) or B.shape != A.shape:
        raise ValueError(
            f"{n_pairs} pairwise decision values need k(k-1)/2 columns for some k >= 2 and "
            f"one A and one B per pair (got A {A.shape}, B {B.shape})"
        )
    first, second = np.triu_indices(k, 1)  # libsvm's pair order
    pairwise_probability = np.clip(platt_predict(dec, A, B), min_probability, 1 - min_probability)
    if k == 2:
        return np.column_stack([pairwise_probability[:, 0], 1 - pairwise_probability[:, 0]])
    r = np.zeros((dec.shape[0], k, k))
    r[:, first, second] = pairwise_probability
    r[:, second, first] = 1 - pairwise_probability
    if order is None:
        return pairwise_coupling(r)
    order = np.asarray(order, dtype=np.int64)
    coupled = pairwise_coupling(np.ascontiguousarray(r[:, order][:, :, order]))
    probabilities = np.empty_like(coupled)
    probabilities[:, order] = coupled
    return probabilities


def ovr_probabilities(decision_values: Any, A: Any, B: Any) -> np.ndarray:
    """Probabilities for a one-vs-rest model (a linear model per class, LIBLINEAR style).

    Each column's sigmoid ``platt_predict(f_k, A_k, B_k)`` estimates P(class k | x) from the
    k-versus-rest score alone; the k sigmoids are fitted independently, so they need not
    sum to 1, and we divide by their sum (LIBLINEAR's rule for its one-vs-rest logistic
    models). The result is a distribution that ranks classes as the calibrated scores
    do, not a jointly calibrated one. For a binary model with a single decision function
    use ``platt_predict`` directly: ``[1 - p, p]``."""
    dec = np.asarray(decision_values, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    if dec.ndim != 2 or dec.shape[1] < 2 or A.shape != (dec.shape[1],) or B.shape != A.shape:
        raise ValueError(
            f"decision_values must be (n, k), k >= 2, with one A and one B per class; got "
            f"{dec.shape}, A {A.shape}, B {B.shape}"
        )
    per_class = platt_predict(dec, A, B)
    return per_class / per_class.sum(axis=1, keepdims=True)


DENSITY_MARKS = 10  # LIBSVM's nr_marks (one-class prob_density_marks)


def one_class_probability(marks: np.ndarray, decision_values: Any) -> np.ndarray:
    """P(inlier) of each decision value (LIBSVM's predict_one_class_probability): 0.001
    below the first mark, 0.999 above the last, else i / 10 for the first mark i >= 1 that
    the value is below (0 for a value equal to the last mark, as LIBSVM's loop gives)."""
    values = np.asarray(decision_values, dtype=np.float64).reshape(-1)
    first = np.searchsorted(marks[1:], values, side="right") + 1  # first i: value < m[i]
    inner = np.where(first < DENSITY_MARKS, first / DENSITY_MARKS, 0.0)
    return np.where(values < marks[0], 0.001,
                    np.where(values > marks[-1], 0.999, inner))
