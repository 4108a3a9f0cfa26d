"""solvers.metrics against scikit-learn on the same predictions (to 1e-12)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

from solvers.metrics import MAX_CURVE_POINTS, decimate, evaluate

TOL = 1e-12


def sklearn_figures(y_true, y_pred, classes, scores=None, probabilities=None) -> dict:
    """The same figures computed by scikit-learn."""
    ordered = np.unique(classes)
    precision, recall, f1, support = skm.precision_recall_fscore_support(
        y_true, y_pred, labels=ordered, zero_division=0
    )
    figures = {
        "accuracy": skm.accuracy_score(y_true, y_pred),
        "confusion_matrix": skm.confusion_matrix(y_true, y_pred, labels=ordered),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "support": support,
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # y_pred classes absent from y_true
        figures["balanced_accuracy"] = skm.balanced_accuracy_score(y_true, y_pred)
    for average in ("macro", "weighted"):
        p, r, f, _ = skm.precision_recall_fscore_support(
            y_true, y_pred, labels=ordered, average=average, zero_division=0
        )
        figures[average] = {"precision": p, "recall": r, "f1": f}
    if scores is not None:
        positive = np.asarray(y_true) == ordered[1]
        figures["roc_auc"] = skm.roc_auc_score(positive, scores)
        figures["average_precision"] = skm.average_precision_score(positive, scores)
        figures["roc"] = skm.roc_curve(positive, scores)
        figures["pr"] = skm.precision_recall_curve(positive, scores)
    if probabilities is not None:
        sorted_columns = np.asarray(probabilities)[:, np.argsort(classes)]  # ours: given order
        figures["log_loss"] = skm.log_loss(y_true, sorted_columns, labels=ordered)
        figures["brier_score"] = skm.brier_score_loss(y_true, sorted_columns, labels=ordered)
    return figures


def assert_matches_sklearn(y_true, y_pred, classes, scores=None, probabilities=None) -> dict:
    ours = evaluate(y_true, y_pred, classes, scores=scores, probabilities=probabilities)
    json.dumps(ours, allow_nan=False)  # JSON-ready, no NaN or inf
    theirs = sklearn_figures(y_true, y_pred, classes, scores, probabilities)
    assert abs(ours["accuracy"] - theirs["accuracy"]) <= TOL
    assert abs(ours["balanced_accuracy"] - theirs["balanced_accuracy"]) <= TOL
    assert ours["confusion_matrix"] == theirs["confusion_matrix"].tolist()
    for name in ("precision", "recall", "f1"):
        got = [row[name] for row in ours["per_class"]]
        assert np.max(np.abs(np.array(got) - theirs[name])) <= TOL, name
        for average in ("macro", "weighted"):
            assert abs(ours[average][name] - theirs[average][name]) <= TOL, (average, name)
    assert [row["support"] for row in ours["per_class"]] == theirs["support"].tolist()
    assert ours["classes"] == sorted(np.unique(classes).tolist())
    if scores is not None:
        assert abs(ours["roc_auc"] - theirs["roc_auc"]) <= TOL
        assert abs(ours["average_precision"] - theirs["average_precision"]) <= TOL
        fpr, tpr, roc_thresholds = theirs["roc"]
        precision, recall, pr_thresholds = theirs["pr"]
        if fpr.size <= MAX_CURVE_POINTS:
            assert ours["roc_curve"]["fpr"] == fpr.tolist()
            assert ours["roc_curve"]["tpr"] == tpr.tolist()
            assert ours["roc_curve"]["thresholds"] == [None, *roc_thresholds[1:].tolist()]
        if precision.size <= MAX_CURVE_POINTS:
            assert ours["precision_recall_curve"]["precision"] == precision.tolist()
            assert ours["precision_recall_curve"]["recall"] == recall.tolist()
            assert ours["precision_recall_curve"]["thresholds"] == [*pr_thresholds.tolist(), None]
    if probabilities is not None:
        assert abs(ours["log_loss"] - theirs["log_loss"]) <= TOL
        assert abs(ours["brier_score"] - theirs["brier_score"]) <= TOL
    return ours


# ---- fixed cases -------------------------------------------------------------------------


def test_binary_with_tied_scores() -> None:
    y_true = np.array([1, 1, -1, -1, 1, -1, 1, -1, -1, 1])
    scores = np.array([0.9, 0.5, 0.5, 0.1, 0.5, 0.9, 0.3, 0.3, -2.0, 0.9])
    y_pred = np.where(scores > 0.4, 1, -1)
    probabilities = np.column_stack([1 - (scores + 2) / 3, (scores + 2) / 3])
    ours = assert_matches_sklearn(y_true, y_pred, [-1, 1], scores, probabilities)
    assert ours["positive_class"] == 1


def test_all_scores_tied_give_auc_one_half() -> None:
    y_true = np.array([0, 1, 0, 1, 1])
    ours = assert_matches_sklearn(y_true, np.ones(5, dtype=int), [0, 1], np.zeros(5))
    assert ours["roc_auc"] == 0.5


def test_multiclass_with_a_class_never_predicted() -> None:
    y_true = np.array([3, 1, 2, 2, 3, 1, 1, 3, 2, 2])
    y_pred = np.array([3, 1, 1, 1, 3, 1, 3, 3, 1, 1])  # class 2 is never predicted
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.ones(3), size=10)
    ours = assert_matches_sklearn(y_true, y_pred, [3, 1, 2], probabilities=probabilities)
    assert ours["per_class"][1]["precision"] == 0.0
    assert ours["classes"] == [1, 2, 3]


def test_probability_columns_follow_the_given_class_order() -> None:
    y_true = np.array(["b", "a", "c", "a"])
    probabilities_bac = np.array(
        [[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.2, 0.5, 0.3]]
    )
    ours = evaluate(y_true, y_true, ["b", "a", "c"], probabilities=probabilities_bac)
    sorted_columns = probabilities_bac[:, [1, 0, 2]]
    assert (
        abs(ours["log_loss"] - skm.log_loss(y_true, sorted_columns, labels=["a", "b", "c"])) <= TOL
    )


def test_a_class_absent_from_the_truth_and_from_predictions() -> None:
    y_true = np.array([0, 0, 1, 1, 1])
    y_pred = np.array([0, 1, 1, 1, 0])
    ours = assert_matches_sklearn(y_true, y_pred, [0, 1, 2])
    assert ours["per_class"][2] == {
        "class": 2,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
        "support": 0,
    }


def test_one_class_in_truth_leaves_auc_undefined() -> None:
    ours = evaluate(np.ones(4), np.ones(4), [-1.0, 1.0], scores=np.arange(4.0))
    assert ours["roc_auc"] is None and ours["average_precision"] is None
    assert "roc_curve" not in ours
    json.dumps(ours, allow_nan=False)


def test_perfect_and_confident_probabilities() -> None:
    y_true = np.array([0, 1, 1, 0])
    probabilities = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    assert_matches_sklearn(y_true, np.array([0, 1, 0, 0]), [0, 1], probabilities=probabilities)


def test_brier_score_definition() -> None:
    y_true = np.array([0, 1, 2])
    p3 = np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.2, 0.2, 0.6]])
    ours = evaluate(y_true, y_true, [0, 1, 2], probabilities=p3)
    direct = np.mean([(0.2**2 + 0.01 + 0.01), (0.04 + 0.09 + 0.01), (0.04 + 0.04 + 0.16)])
    assert abs(ours["brier_score"] - direct) <= TOL
    p2 = np.array([[0.9, 0.1], [0.4, 0.6]])
    binary = evaluate(np.array([0, 1]), np.array([0, 1]), [0, 1], probabilities=p2)
    assert abs(binary["brier_score"] - np.mean([0.1**2, 0.4**2])) <= TOL


def test_input_errors_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="labels the model does not have"):
        evaluate(np.array([0, 5]), np.array([0, 1]), [0, 1])
    with pytest.raises(ValueError, match="two classes only"):
        evaluate(np.array([0, 1]), np.array([0, 1]), [0, 1, 2], scores=np.zeros(2))
    with pytest.raises(ValueError, match="shape"):
        evaluate(np.array([0, 1]), np.array([0, 1]), [0, 1], probabilities=np.ones((2, 3)))
    with pytest.raises(ValueError, match="sum to 1"):
        evaluate(np.array([0, 1]), np.array([0, 1]), [0, 1], probabilities=np.full((2, 2), 0.4))
    with pytest.raises(ValueError, match="distinct"):
        evaluate(np.array([0, 1]), np.array([0, 1]), [0, 1, 1])


# ---- long curves -------------------------------------------------------------------------


def test_long_curves_are_decimated_keeping_endpoints_and_shape() -> None:
    rng = np.random.default_rng(1)
    n = 5000
    y_true = np.where(rng.random(n) < 0.3, 1, 0)
    scores = y_true + rng.normal(scale=1.5, size=n)
    ours = assert_matches_sklearn(y_true, (scores > 0.5).astype(int), [0, 1], scores)
    fpr, tpr, _ = skm.roc_curve(y_true == 1, scores)
    assert fpr.size > MAX_CURVE_POINTS
    curve = ours["roc_curve"]
    assert len(curve["fpr"]) <= MAX_CURVE_POINTS
    assert (curve["fpr"][0], curve["tpr"][0]) == (0.0, 0.0)
    assert (curve["fpr"][-1], curve["tpr"][-1]) == (1.0, 1.0)
    full = set(zip(fpr.tolist(), tpr.tolist(), strict=True))
    assert all(point in full for point in zip(curve["fpr"], curve["tpr"], strict=True))
    # the decimated curve's area stays within the spacing of the sampling
    assert abs(np.trapezoid(curve["tpr"], curve["fpr"]) - ours["roc_auc"]) < 2 / MAX_CURVE_POINTS
    precision, recall, _ = skm.precision_recall_curve(y_true == 1, scores)
    pr = ours["precision_recall_curve"]
    assert len(pr["recall"]) <= MAX_CURVE_POINTS
    assert (pr["precision"][0], pr["recall"][0]) == (precision[0], recall[0])
    assert (pr["precision"][-1], pr["recall"][-1]) == (1.0, 0.0)


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 3000), max_points=st.integers(2, 300))
def test_decimation_gaps_are_bounded_by_the_arc_length_spacing(
    seed: int, n: int, max_points: int
) -> None:
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.exponential(size=n) * (rng.random(n) < 0.5))
    y = np.cumsum(rng.exponential(size=n) * (rng.random(n) < 0.5))
    kept = decimate(x, y, max_points)
    assert kept.size <= max_points
    assert kept[0] == 0 and kept[-1] == n - 1
    assert np.all(np.diff(kept) > 0)
    if n > max_points:
        arc = np.r_[0.0, np.cumsum(np.hypot(np.diff(x), np.diff(y)))]
        spacing = arc[-1] / (max_points - 1)
        gaps = arc[kept[1:] - 1] - arc[kept[:-1]]
        assert np.all(gaps <= spacing * (1 + 1e-12))


# ---- random cases ------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    k=st.integers(2, 6),
    with_ties=st.booleans(),
)
def test_random_predictions_match_sklearn(seed: int, n: int, k: int, with_ties: bool) -> None:
    rng = np.random.default_rng(seed)
    classes = rng.permutation(np.arange(k) * 10 - 7)  # unsorted, negative labels too
    y_true = rng.choice(classes, size=n)
    y_pred = np.where(rng.random(n) < 0.6, y_true, rng.choice(classes, size=n))
    probabilities = rng.dirichlet(np.full(k, 0.5), size=n)
    scores = None
    if k == 2 and len(np.unique(y_true)) == 2:
        scores = rng.integers(0, 4, size=n) / 3.0 if with_ties else rng.normal(size=n)
    assert_matches_sklearn(y_true, y_pred, classes, scores, probabilities)
