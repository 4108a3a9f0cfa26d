"""Evaluation figures for a classifier on a labelled data set (NumPy only).

Definitions (each equals scikit-learn's, which the tests check to 1e-12):

- ``confusion_matrix``: rows = true class, columns = predicted class, classes sorted.
- per class: precision ``tp / (tp + fp)``, recall ``tp / (tp + fn)``,
  F1 ``2 tp / (2 tp + fp + fn)``, support = true count; a 0/0 is 0 (scikit-learn's
  ``zero_division=0``). Macro averages are plain means over every class of the model;
  weighted averages weigh by support.
- ``balanced_accuracy``: mean recall over the classes present in ``y_true``.
- two classes with ``scores`` (larger = more likely the positive class, which is the
  larger label of the sorted classes): ROC AUC by the trapezoidal rule over the ROC curve
  with one point per distinct score (ties are one step, i.e. count one half), and average
  precision ``sum_n (R_n - R_{n-1}) P_n`` (scikit-learn's step definition, no
  interpolation). Both are ``None`` when ``y_true`` holds one class only (undefined).
- curves: ROC (scikit-learn's ``roc_curve`` with ``drop_intermediate=True``) and
  precision-recall (``precision_recall_curve``) in their order; the first ROC threshold
  (+inf) and the last precision-recall point's threshold (it has none) are ``None``.
  A curve longer than ``MAX_CURVE_POINTS`` is decimated by arc length: with ``s`` the
  cumulative length along the polyline and ``h = s_end / (MAX_CURVE_POINTS - 1)``, the
  first point at or past each of ``0, h, 2h, ...`` (below ``s_end``) is kept, and the last
  point always is. Kept points are points of the curve (none is invented), both endpoints
  stay, and between two consecutive kept points ``a < b`` the curve runs at most ``h``
  from ``a`` to ``b - 1`` before its original segment into ``b``: flat stretches and
  steps are sampled evenly by length, so the shape survives.
- with ``probabilities`` (n, k), columns in the order of ``classes`` as given:
  log loss ``-mean_i log p_i[y_i]`` with p clipped to ``[eps, 1 - eps]`` (eps = float64
  epsilon), and the Brier score ``mean_i sum_k (p_ik - [y_i = k])^2``, halved for two
  classes so that it is the usual binary Brier score ``mean_i (p_i - [y_i = pos])^2``
  (scikit-learn's ``brier_score_loss`` with ``scale_by_half="auto"``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_CURVE_POINTS = 200
_PROBABILITY_SUM_TOLERANCE = 1e-6


def confusion_matrix(y_true: Any, y_pred: Any, classes: Any) -> np.ndarray:
    """counts[i, j] = rows of true class classes[i] predicted as classes[j] (sorted)."""
    ordered = np.unique(np.asarray(classes))
    true_index = _class_index(y_true, ordered, "y_true")
    pred_index = _class_index(y_pred, ordered, "y_pred")
    k = ordered.shape[0]
    return np.bincount(true_index * k + pred_index, minlength=k * k).reshape(k, k)


def precision_recall_f1(counts: np.ndarray) -> dict[str, np.ndarray]:
    """Per-class precision, recall, F1 and support from a confusion matrix (0/0 -> 0)."""
    tp = np.diag(counts).astype(np.float64)
    predicted = counts.sum(axis=0).astype(np.float64)
    support = counts.sum(axis=1)
    return {
        "precision": _safe_divide(tp, predicted),
        "recall": _safe_divide(tp, support.astype(np.float64)),
        "f1": _safe_divide(2 * tp, predicted + support),
        "support": support,
    }


def binary_curve_counts(
    positive: np.ndarray, scores: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(false positives, true positives, threshold) at each distinct score, descending."""
    order = np.argsort(scores, kind="mergesort")[::-1]
    sorted_scores = scores[order]
    sorted_positive = positive[order]
    last_of_each_score = np.r_[np.flatnonzero(np.diff(sorted_scores)), sorted_scores.size - 1]
    tps = np.cumsum(sorted_positive, dtype=np.float64)[last_of_each_score]
    fps = 1.0 + last_of_each_score - tps
    return fps, tps, sorted_scores[last_of_each_score]


def roc_curve(positive: np.ndarray, scores: np.ndarray) -> dict[str, np.ndarray]:
    """fpr, tpr, thresholds as scikit-learn's roc_curve(drop_intermediate=True)."""
    fps, tps, thresholds = binary_curve_counts(positive, scores)
    if fps.size > 2:  # drop points collinear with their neighbours
        keep = np.flatnonzero(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)), True])
        fps, tps, thresholds = fps[keep], tps[keep], thresholds[keep]
    fps, tps = np.r_[0.0, fps], np.r_[0.0, tps]
    thresholds = np.r_[np.inf, thresholds]
    return {"fpr": fps / fps[-1], "tpr": tps / tps[-1], "thresholds": thresholds}


def precision_recall_curve(positive: np.ndarray, scores: np.ndarray) -> dict[str, np.ndarray]:
    """precision, recall (decreasing recall, ending at (1, 0)) and thresholds, as
    scikit-learn's precision_recall_curve(drop_intermediate=False)."""
    fps, tps, thresholds = binary_curve_counts(positive, scores)
    predicted = tps + fps
    precision = _safe_divide(tps, predicted)
    recall = tps / tps[-1]
    return {
        "precision": np.r_[precision[::-1], 1.0],
        "recall": np.r_[recall[::-1], 0.0],
        "thresholds": thresholds[::-1],
    }


def roc_auc(positive: np.ndarray, scores: np.ndarray) -> float | None:
    if positive.all() or not positive.any():
        return None
    curve = roc_curve(positive, scores)
    return float(np.trapezoid(curve["tpr"], curve["fpr"]))


def average_precision(positive: np.ndarray, scores: np.ndarray) -> float | None:
    if positive.all() or not positive.any():
        return None
    curve = precision_recall_curve(positive, scores)
    return float(-np.sum(np.diff(curve["recall"]) * curve["precision"][:-1]))


def decimate(x: np.ndarray, y: np.ndarray, max_points: int = MAX_CURVE_POINTS) -> np.ndarray:
    """Indices of at most max_points points of the polyline (x, y), by arc length (see the
    module docstring); all indices when it is short enough."""
    n = x.shape[0]
    if n <= max_points:
        return np.arange(n)
    if max_points < 2:
        raise ValueError("a decimated curve keeps at least its two endpoints")
    arc = np.r_[0.0, np.cumsum(np.hypot(np.diff(x), np.diff(y)))]
    targets = np.linspace(0.0, arc[-1], max_points)[:-1]
    chosen = np.minimum(np.searchsorted(arc, targets, side="left"), n - 1)
    return np.unique(np.r_[chosen, n - 1])


def log_loss(true_index: np.ndarray, probabilities: np.ndarray) -> float:
    eps = np.finfo(np.float64).eps
    picked = np.clip(probabilities[np.arange(true_index.size), true_index], eps, 1 - eps)
    return float(-np.mean(np.log(picked)))


def brier_score(true_index: np.ndarray, probabilities: np.ndarray) -> float:
    onehot = np.zeros_like(probabilities)
    onehot[np.arange(true_index.size), true_index] = 1.0
    score = float(np.mean(np.sum((probabilities - onehot) ** 2, axis=1)))
    return score / 2 if probabilities.shape[1] == 2 else score


def evaluate(
    y_true: Any,
    y_pred: Any,
    classes: Any,
    scores: Any = None,
    probabilities: Any = None,
) -> dict[str, Any]:
    """Every figure of the module docstring as a JSON-ready dict (floats, ints, lists).

    classes: the model's class labels (every label of y_true and y_pred must be one);
    figures list them in sorted order. scores: (n,) for two classes only.
    probabilities: (n, k), columns in the order of ``classes`` as passed."""
    given_classes = np.asarray(classes)
    ordered = np.unique(given_classes)
    if ordered.size != given_classes.size or ordered.size == 0:
        raise ValueError(f"classes must be distinct labels, at least one, got {classes!r}")
    truth = np.asarray(y_true)
    prediction = np.asarray(y_pred)
    if truth.ndim != 1 or truth.shape != prediction.shape or truth.size == 0:
        raise ValueError(
            f"y_true and y_pred must be 1-D of one non-zero length, got {truth.shape} and "
            f"{prediction.shape}"
        )
    counts = confusion_matrix(truth, prediction, ordered)
    per_class = precision_recall_f1(counts)
    support = per_class["support"]
    present = support > 0
    report: dict[str, Any] = {
        "n_samples": int(truth.size),
        "classes": [_plain(c) for c in ordered],
        "accuracy": float(np.trace(counts) / truth.size),
        "balanced_accuracy": float(np.mean(per_class["recall"][present])),
        "confusion_matrix": counts.tolist(),
        "per_class": [
            {
                "class": _plain(ordered[i]),
                "precision": float(per_class["precision"][i]),
                "recall": float(per_class["recall"][i]),
                "f1": float(per_class["f1"][i]),
                "support": int(support[i]),
            }
            for i in range(ordered.size)
        ],
        "macro": {name: float(np.mean(per_class[name])) for name in ("precision", "recall", "f1")},
        "weighted": {
            name: float(np.average(per_class[name], weights=support))
            for name in ("precision", "recall", "f1")
        },
    }
    if scores is not None:
        report.update(_score_figures(truth, ordered, scores))
    if probabilities is not None:
        report.update(_probability_figures(truth, ordered, given_classes, probabilities))
    return report


def _score_figures(truth: np.ndarray, ordered: np.ndarray, scores: Any) -> dict[str, Any]:
    values = np.asarray(scores, dtype=np.float64)
    if ordered.size != 2:
        raise ValueError(
            f"scores give ROC and precision-recall figures for two classes only, "
            f"this model has {ordered.size}"
        )
    if values.shape != truth.shape or not np.all(np.isfinite(values)):
        raise ValueError(f"scores must be {truth.shape[0]} finite values, got {values.shape}")
    positive = truth == ordered[1]
    figures: dict[str, Any] = {
        "positive_class": _plain(ordered[1]),
        "roc_auc": roc_auc(positive, values),
        "average_precision": average_precision(positive, values),
    }
    if positive.any() and not positive.all():
        roc = roc_curve(positive, values)
        kept = decimate(roc["fpr"], roc["tpr"])
        figures["roc_curve"] = {
            "fpr": roc["fpr"][kept].tolist(),
            "tpr": roc["tpr"][kept].tolist(),
            "thresholds": [_finite_or_none(t) for t in roc["thresholds"][kept]],
        }
        pr = precision_recall_curve(positive, values)
        kept = decimate(pr["recall"], pr["precision"])
        thresholds = np.r_[pr["thresholds"], np.nan]  # the end point (recall 0) has none
        figures["precision_recall_curve"] = {
            "precision": pr["precision"][kept].tolist(),
            "recall": pr["recall"][kept].tolist(),
            "thresholds": [_finite_or_none(t) for t in thresholds[kept]],
        }
    return figures


def _probability_figures(
    truth: np.ndarray, ordered: np.ndarray, given_classes: np.ndarray, probabilities: Any
) -> dict[str, float]:
    values = np.asarray(probabilities, dtype=np.float64)
    if values.shape != (truth.size, ordered.size):
        raise ValueError(
            f"probabilities must have shape ({truth.size}, {ordered.size}), one column per "
            f"class in the order of classes; got {values.shape}"
        )
    if not np.all((values >= 0) & (values <= 1)):
        raise ValueError("probabilities must lie in [0, 1]")
    if np.max(np.abs(values.sum(axis=1) - 1.0)) > _PROBABILITY_SUM_TOLERANCE:
        raise ValueError("each row of probabilities must sum to 1")
    sorted_columns = values[:, np.argsort(given_classes, kind="stable")]
    true_index = _class_index(truth, ordered, "y_true")
    return {
        "log_loss": log_loss(true_index, sorted_columns),
        "brier_score": brier_score(true_index, sorted_columns),
    }


def _class_index(labels: Any, ordered: np.ndarray, name: str) -> np.ndarray:
    values = np.asarray(labels)
    index = np.searchsorted(ordered, values)
    unknown = (index >= ordered.size) | (ordered[np.minimum(index, ordered.size - 1)] != values)
    if np.any(unknown):
        raise ValueError(
            f"{name} holds labels the model does not have: "
            f"{sorted({_plain(v) for v in values[unknown]})[:10]} (classes: "
            f"{[_plain(c) for c in ordered]})"
        )
    return index


def _safe_divide(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    out = np.zeros_like(numerator, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator != 0)
    return out


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
