"""The task of a dataset, a job and a model: classification, regression or outlier.

A dataset is `classification` (class labels: `labels` and `class_counts`) or `regression`
(real-valued targets: `label_stats`, no class list). An upload says which with `task`
(auto, classification, regression); `auto` (the default) reads the labels: any
non-integer label, or more distinct labels than HINGE_MAX_CLASSES, makes it a regression
dataset. The distinct-label limit applies to classification only.

A job's task is its formulation's (solvers.params.task_of); `check_task` says whether a
dataset suits it: classification and regression need a dataset of their own task, an
outlier model (one_class) trains on any dataset and ignores its labels.

The figures of a regression or outlier evaluation are here too (a classification
evaluation's are solvers.metrics.evaluate's): for regression what LIBSVM's svm-predict
prints (mean squared error, squared correlation) with RMSE, MAE and R^2; for one-class
the outlier fraction and, when the labels are +1 (inlier) / -1 (outlier), ROC AUC,
average precision, precision and recall of the outlier class.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.domain.errors import Invalid
from solvers.metrics import average_precision, roc_auc
from solvers.models import estimator_of
from solvers.params import label_key

DETECT = "auto"  # an upload's task when the labels are to say it (dataset_task)
UPLOAD_TASKS = (DETECT, "classification", "regression")  # what an upload's `task` may say
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)
# the search metrics of regression (higher is better); the others are classification's
REGRESSION_METRICS = ("neg_mse", "r2")


def parse_max_classes(asked: str, max_classes: int) -> int | None:
    """The parser's distinct-label limit for an upload of task `asked`: the service's for
    classification, none otherwise (auto decides after the parse)."""
    return max_classes if asked == "classification" else None


def dataset_task(y: np.ndarray, asked: str, max_classes: int) -> str:
    """The task of a dataset of targets `y`, uploaded with task `asked`."""
    if asked != DETECT:
        return asked
    if not np.all(np.mod(y, 1.0) == 0):
        return "regression"
    return "regression" if np.unique(y).shape[0] > max_classes else "classification"


def label_summary(
    y: np.ndarray, task: str
) -> tuple[list[float], dict[str, int], dict[str, Any] | None]:
    """(labels, class_counts, label_stats) of a dataset: class counts for classification,
    statistics of the targets for regression (min, max, mean, std, quantiles, distinct)."""
    if task != "regression":
        labels, counts = np.unique(y, return_counts=True)
        return (
            [float(v) for v in labels],
            {label_key(v): int(c) for v, c in zip(labels, counts, strict=True)},
            None,
        )
    stats = {
        "min": float(np.min(y)),
        "max": float(np.max(y)),
        "mean": float(np.mean(y)),
        "std": float(np.std(y)),
        "distinct": int(np.unique(y).shape[0]),
        "quantiles": {
            f"{q:g}": float(v) for q, v in zip(QUANTILES, np.quantile(y, QUANTILES), strict=True)
        },
    }
    return [], {}, stats


def check_task(
    task: str, dataset_task: str, dataset_id: str, what: str, *, training: bool = True
) -> None:
    """422 unless a `task` model suits a dataset of `dataset_task`; `what` says whose task
    it is ("formulation 'nu_svr' trains", "model 'x' is"); `training`: a job (the answer
    also suggests a formulation of the dataset's task)."""
    if task == "outlier" or task == dataset_task:
        return
    fix = (
        "upload the file with task=regression (real-valued targets)"
        if task == "regression"
        else "upload the file with task=classification (at most HINGE_MAX_CLASSES distinct labels)"
    )
    if training:
        fix += f", or choose a {dataset_task} formulation (one_class trains on any dataset)"
    raise Invalid(
        f"{what} a {task} model but dataset {dataset_id!r} is a {dataset_task} dataset; {fix}",
        {"task": task, "dataset_task": dataset_task},
        field="dataset_id",
    )


def model_task(model: Any) -> str:
    """A servable model's task: its estimator's (a linear model without one classifies)."""
    return str(getattr(estimator_of(model), "task", "classification"))


def regression_report(y: np.ndarray, predicted: np.ndarray) -> dict[str, Any]:
    """What svm-predict prints for regression (mean squared error, squared correlation
    coefficient), with RMSE, MAE and R^2 (scikit-learn's r2_score: 1 - SS_res / SS_tot,
    null when the targets are constant)."""
    y = np.asarray(y, dtype=np.float64)
    v = np.asarray(predicted, dtype=np.float64)
    n = y.shape[0]
    mse = float(np.mean((v - y) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    # svm-predict: ((l sum vy - sum v sum y)^2) / ((l sum vv - (sum v)^2)(l sum yy - (sum y)^2))
    sv, sy = float(v.sum()), float(y.sum())
    numerator = (n * float(v @ y) - sv * sy) ** 2
    denominator = (n * float(v @ v) - sv * sv) * (n * float(y @ y) - sy * sy)
    return {
        "n_samples": int(n),
        "mse": mse,
        "rmse": float(np.sqrt(mse)),
        "mae": float(np.mean(np.abs(v - y))),
        "r2": None if total == 0 else 1.0 - float(np.sum((v - y) ** 2)) / total,
        "squared_correlation": None if denominator == 0 else numerator / denominator,
    }


def regression_score(y: np.ndarray, predicted: np.ndarray, metric: str) -> float | None:
    """A search's regression metric (REGRESSION_METRICS) of the predicted values."""
    report = regression_report(y, predicted)
    return -report["mse"] if metric == "neg_mse" else report["r2"]


def outlier_report(y: np.ndarray, predicted: np.ndarray, scores: np.ndarray) -> dict[str, Any]:
    """One-class figures: the predicted outlier fraction; with labels +1 (inlier) and -1
    (outlier), the outlier class's ROC AUC and average precision (score: minus the decision
    value) and its precision and recall."""
    predicted_outlier = np.asarray(predicted) == -1.0
    report: dict[str, Any] = {
        "n_samples": int(predicted_outlier.shape[0]),
        "outlier_fraction": float(np.mean(predicted_outlier)),
    }
    labels = set(np.unique(y).tolist())
    if not labels <= {-1.0, 1.0}:
        report["labels_note"] = (
            "the dataset's labels are not +1 (inlier) / -1 (outlier): no figures against them"
        )
        return report
    outlier = np.asarray(y) == -1.0
    hits = int(np.sum(outlier & predicted_outlier))
    flagged, actual = int(predicted_outlier.sum()), int(outlier.sum())
    report.update(
        {
            "true_outlier_fraction": float(np.mean(outlier)),
            "accuracy": float(np.mean(outlier == predicted_outlier)),
            "outlier_precision": hits / flagged if flagged else None,
            "outlier_recall": hits / actual if actual else None,
            "roc_auc": roc_auc(outlier, -np.asarray(scores, dtype=np.float64)),
            "average_precision": average_precision(outlier, -np.asarray(scores, dtype=np.float64)),
        }
    )
    return report
