"""Platt sigmoids as scikit-learn's LIBSVM fits them (`probability=True`): the same folds
from the same generator, each fold trained by Hinge's SMO.

scikit-learn's LIBSVM (sklearn/svm/src/libsvm/svm.cpp, svm_binary_svc_probability)
shuffles each class pair's rows with `bounded_rand_int` (sklearn/svm/src/newrand:
std::mt19937 seeded with the seed scikit-learn draws from `random_state`, and a tweaked
Lemire bounded-integer post-processor), cuts 5 folds, trains each fold's complement at
C = 1 with class weights (C_i, C_j), and fits sigmoid_train on the held-out decision
values. Every nested training re-seeds the generator with the same seed, so each pair's
shuffle starts from the freshly seeded generator (once a pair has trained a fold).
numpy's legacy RandomState seeded with an integer is the same Mersenne twister
(init_genrand), whose state solvers._kernel_helpers.mt_state starts from.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from solvers._kernel_helpers import bounded_rand_int, mt_state

_FOLDS = 5


class _BoundedRand:
    """sklearn's `bounded_rand_int` on std::mt19937(seed) (the compiled generator of
    solvers/_kernel_helpers.py, which the dual CD's sweeps="sklearn" draws from too)."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed) & 0xFFFFFFFF
        self.reseed()

    def reseed(self) -> None:
        self._state = mt_state(self.seed)

    def __call__(self, upper: int) -> int:
        return int(bounded_rand_int(self._state, int(upper) & 0xFFFFFFFF))


def sigmoid_train(values: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """LIBSVM's sigmoid_train (Lin, Lin and Weng's Newton method with backtracking)."""
    prior1 = float(np.sum(labels > 0))
    prior0 = float(labels.shape[0] - prior1)
    hi, lo = (prior1 + 1.0) / (prior1 + 2.0), 1.0 / (prior0 + 2.0)
    t = np.where(labels > 0, hi, lo)
    A, B = 0.0, math.log((prior0 + 1.0) / (prior1 + 1.0))

    def objective(a: float, b: float) -> float:
        f = values * a + b
        return float(np.sum(np.where(f >= 0, t * f + np.log1p(np.exp(-np.abs(f))),
                                     (t - 1) * f + np.log1p(np.exp(-np.abs(f))))))

    fval = objective(A, B)
    for _ in range(100):
        f = values * A + B
        e = np.exp(-np.abs(f))
        p = np.where(f >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
        q = np.where(f >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
        d2 = p * q
        h11 = 1e-12 + float(np.sum(values * values * d2))
        h22 = 1e-12 + float(np.sum(d2))
        h21 = float(np.sum(values * d2))
        d1 = t - p
        g1, g2 = float(np.sum(values * d1)), float(np.sum(d1))
        if abs(g1) < 1e-5 and abs(g2) < 1e-5:
            break
        det = h11 * h22 - h21 * h21
        dA, dB = -(h22 * g1 - h21 * g2) / det, -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= 1e-10:
            newA, newB = A + step * dA, B + step * dB
            newf = objective(newA, newB)
            if newf < fval + 0.0001 * step * gd:
                A, B, fval = newA, newB, newf
                break
            step /= 2.0
        if step < 1e-10:
            break
    return A, B


def pairwise_sigmoids(rows: Any, y: np.ndarray, weights: np.ndarray | None,
                      costs: np.ndarray, seed: int,
                      fit_values: Callable[[Any, np.ndarray, np.ndarray | None, float,
                                            float, Any], np.ndarray]
                      ) -> tuple[np.ndarray, np.ndarray]:
    """probA, probB per class pair (0,1), (0,2), ... as scikit-learn's LIBSVM. `y` class
    indices; `costs[c]` = C times class c's weight; `fit_values(train_rows, labels01,
    train_weights, Cp, Cn, test_rows)` the decision values (positive for label 1) of a
    fit on the training rows."""
    keep = np.arange(y.shape[0]) if weights is None else np.flatnonzero(weights > 0)
    y_kept = y[keep].astype(np.int64)
    k = int(y.max()) + 1
    groups = [keep[y_kept == c] for c in range(k)]  # by class, in row order
    rand = _BoundedRand(seed)
    A, B = [], []
    for i in range(k):
        for j in range(i + 1, k):
            sub = np.concatenate([groups[i], groups[j]])
            signs = np.concatenate([np.ones(groups[i].shape[0]), -np.ones(groups[j].shape[0])])
            n = sub.shape[0]
            perm = np.arange(n)
            for a in range(n):
                b = a + rand(n - a)
                perm[a], perm[b] = perm[b], perm[a]
            values = np.zeros(n)
            trained = False
            for fold in range(_FOLDS):
                begin, end = fold * n // _FOLDS, (fold + 1) * n // _FOLDS
                train = np.concatenate([perm[:begin], perm[end:]])
                held = perm[begin:end]
                positives = int(np.sum(signs[train] > 0))
                if positives == 0 or positives == train.shape[0]:
                    values[held] = 0.0 if train.shape[0] == 0 else (
                        1.0 if positives else -1.0)
                    continue
                values[held] = fit_values(
                    rows[sub[train]], (signs[train] > 0).astype(np.float64),
                    None if weights is None else weights[sub[train]],
                    float(costs[i]), float(costs[j]), rows[sub[held]])
                trained = True
            a_, b_ = sigmoid_train(values, signs)
            A.append(a_)
            B.append(b_)
            if trained:
                rand.reseed()  # the nested trainings re-seed scikit-learn's generator
    return np.asarray(A), np.asarray(B)
