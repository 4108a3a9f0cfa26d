"""solvers.workflow: scaling inside the model, probabilities as LIBSVM -b 1, warnings.

The probability comparison trains the whole Hinge fit (our SMO, our cross-validation, our
Platt fits) and LIBSVM's `svm_train -b 1` on the same rows and compares the test-set
probabilities as distributions (the cross-validation folds are random in both): log loss
within 2% of LIBSVM's and a correlation of at least 0.99 over every probability.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from libsvm.svmutil import svm_predict, svm_train

from solvers import fit
from solvers.models import Pipeline, model_from_bytes, model_to_bytes
from solvers.params import STANDARD_MIN_DENSITY, ParamError, check_scale_for_data
from solvers.scaling import STANDARD_MIN_DENSITY as SCALING_MIN_DENSITY
from solvers.scaling import fit_scaler
from testkit.datasets import load_dataset, load_local, split


def _log_loss(probabilities: np.ndarray, y: np.ndarray, classes: np.ndarray) -> float:
    columns = np.searchsorted(classes, y)
    picked = np.clip(probabilities[np.arange(y.size), columns], 1e-15, 1.0)
    return float(-np.mean(np.log(picked)))


def compare_with_libsvm(X: sp.csr_matrix, y: np.ndarray, X_test: sp.csr_matrix,
                        y_test: np.ndarray, scale: str = "none"
                        ) -> tuple[float, float, float, float]:
    """(correlation, our log loss, LIBSVM's, LIBSVM's accuracy) on the test rows, RBF,
    C = 1, gamma = 1/features; LIBSVM trains on rows scaled by the same scaler (equal to
    svm-scale's output, tests/solvers/test_scaling.py)."""
    result = fit(X, y, solver="smo", probability=True, scale=scale, seed=1)
    assert isinstance(result.model, Pipeline) and result.model.calibration is not None
    _labels, _values, ours = result.model.predict_with_probabilities(X_test)
    assert ours is not None
    if scale != "none":
        scaler = fit_scaler(X, scale)
        X, X_test = scaler.transform(X), scaler.transform(X_test)
    model = svm_train(y, X, f"-s 0 -t 2 -c 1 -g {1.0 / X.shape[1]!r} -b 1 -q")
    predicted, _, raw = svm_predict(y_test, X_test, model, "-b 1 -q")
    order = np.argsort(model.get_labels())  # LIBSVM's columns follow its label order
    theirs = np.asarray(raw)[:, order]
    classes = np.sort(np.unique(y))
    correlation = float(np.corrcoef(ours.ravel(), theirs.ravel())[0, 1])
    accuracy = float(np.mean(np.asarray(predicted) == y_test))
    return (correlation, _log_loss(ours, y_test, classes), _log_loss(theirs, y_test, classes),
            accuracy)


def _check_against_libsvm(name: str, *args: object, **kwargs: str) -> None:
    correlation, ours, theirs, accuracy = compare_with_libsvm(*args, **kwargs)  # type: ignore[arg-type]
    print(f"\n{name}: log loss ours {ours:.4f}, LIBSVM {theirs:.4f} "
          f"({100 * (ours - theirs) / theirs:+.2f}%), correlation {correlation:.4f}, "
          f"LIBSVM accuracy {accuracy:.4f}")
    assert correlation >= 0.99
    assert abs(ours - theirs) <= 0.02 * theirs


def test_probabilities_agree_with_libsvm_b1_on_cancer() -> None:
    X, y = load_local("cancer")
    _check_against_libsvm("cancer", X, y, X, y)


def test_probabilities_agree_with_libsvm_b1_on_a_onehot3_subsample() -> None:
    X, y, X_test, y_test = split(*load_local("onehot3"))  # like dna.scale
    _check_against_libsvm("onehot3 (600 rows)", X[:600], y[:600], X_test, y_test)


@pytest.mark.slow
def test_probabilities_agree_with_libsvm_b1_on_wine() -> None:
    X, y = load_local("wine")
    _check_against_libsvm("wine", X, y, X, y)


@pytest.mark.slow
def test_probabilities_agree_with_libsvm_b1_on_a_onehot_subsample() -> None:
    X, y, X_test, y_test = split(*load_local("onehot"))  # like a9a
    rows = np.random.default_rng(0).choice(X.shape[0], 3000, replace=False)
    _check_against_libsvm("onehot (3000 rows)", X[rows], y[rows], X_test, y_test)


@pytest.mark.slow
def test_probabilities_agree_with_libsvm_b1_on_onehot3() -> None:
    X, y, X_test, y_test = split(*load_local("onehot3"))
    _check_against_libsvm("onehot3", X, y, X_test, y_test)


@pytest.mark.slow
def test_probabilities_agree_with_libsvm_b1_on_raw_digits_scaled() -> None:
    X, y, X_test, y_test = split(*load_local("digits-raw"))
    _check_against_libsvm("digits, pixel levels (minmax)", X, y, X_test, y_test,
                          scale="minmax")


@pytest.mark.slow
@pytest.mark.parity
def test_probabilities_agree_with_libsvm_b1_on_pendigits_scaled() -> None:
    X, y = load_dataset("pendigits")
    X_test, y_test = load_dataset("pendigits.t", n_features=X.shape[1])
    _check_against_libsvm("pendigits (minmax)", X, y, X_test, y_test, scale="minmax")


@pytest.mark.slow
@pytest.mark.parity
def test_pendigits_minmax_default_gamma_reaches_97_percent() -> None:
    X, y = load_dataset("pendigits")
    X_test, y_test = load_dataset("pendigits.t", n_features=X.shape[1])
    result = fit(X, y, solver="smo", scale="minmax")
    accuracy = float(np.mean(result.predict(X_test) == y_test))
    print(f"\npendigits, scale minmax, default gamma: test accuracy {accuracy:.4f}")
    assert accuracy >= 0.97
    assert result.warnings == []


# ---- scaling inside the model -----------------------------------------------------------


@pytest.mark.parametrize(("solver", "scale"), [("smo", "minmax"), ("dcd", "maxabs"),
                                               ("ocas", "standard")])
def test_a_scaled_fit_is_the_fit_on_scaled_rows_and_predicts_raw_rows(solver: str,
                                                                      scale: str) -> None:
    X, y = load_local("cancer")
    X = X @ sp.diags(np.logspace(-1, 2, X.shape[1]))  # unscale it
    X = sp.csr_matrix(X)
    scaler = fit_scaler(X, scale)  # type: ignore[arg-type]
    plain = fit(scaler.transform(X), y, solver=solver)
    scaled = fit(X, y, solver=solver, scale=scale)
    assert isinstance(scaled.model, Pipeline) and scaled.model.scaler is not None
    assert scaled.params["scale"] == scale
    np.testing.assert_array_equal(scaled.predict(X), plain.predict(scaler.transform(X)))
    np.testing.assert_allclose(scaled.decision_function(X),
                               plain.decision_function(scaler.transform(X)), rtol=0, atol=1e-12)


def test_minmax_lower_zero_keeps_the_zeros_of_sparse_features() -> None:
    X, y = load_local("onehot")  # 0/1 features, like a9a
    X, y = X[:500], y[:500]
    result = fit(X, y, solver="dcd", scale="minmax", scale_lower=0)
    assert isinstance(result.model, Pipeline) and result.model.scaler is not None
    assert result.model.scaler.lower == 0.0
    assert result.model.scaler.transform(X).nnz == X.nnz


@pytest.mark.parametrize(("solver", "extra"), [("smo", {}), ("smo", {"multiclass": "ovr"}),
                                               ("dcd", {}), ("alm", {})])
def test_pipeline_arrays_round_trip_with_scaler_and_sigmoids(solver: str,
                                                             extra: dict[str, str]) -> None:
    X, y = load_local("wine")  # 3 classes
    result = fit(X, y, solver=solver, scale="maxabs", probability=True, **extra)
    model = result.model
    assert isinstance(model, Pipeline) and model.calibration is not None
    restored = model_from_bytes(model.kind, model_to_bytes(model))
    assert isinstance(restored, Pipeline)
    labels, values, probabilities = model.predict_with_probabilities(X)
    labels2, values2, probabilities2 = restored.predict_with_probabilities(X)
    np.testing.assert_array_equal(labels, labels2)
    np.testing.assert_array_equal(values, values2)
    assert probabilities is not None and probabilities2 is not None
    np.testing.assert_array_equal(probabilities, probabilities2)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-9)
    assert probabilities.shape == (X.shape[0], 3)
    layout = "ovr" if solver != "smo" or extra else "pairwise"
    assert model.calibration.layout == layout
    assert model.calibration.A.shape == (3,)
    # the probabilities rank the classes roughly as the labels do
    assert np.mean(model.classes[np.argmax(probabilities, axis=1)] == labels) > 0.9


def test_two_class_probabilities_follow_the_decision_value() -> None:
    X, y = load_local("cancer")
    for solver in ("dcd", "smo"):
        model = fit(X, y, solver=solver, probability=True).model
        assert isinstance(model, Pipeline)
        _labels, values, probabilities = model.predict_with_probabilities(X)
        assert probabilities is not None
        order = np.argsort(values)
        assert np.all(np.diff(probabilities[order, 1]) >= -1e-12)  # P(classes[1]) increases
        assert model.calibration is not None and model.calibration.A[0] < 0


@pytest.mark.parametrize(("solver", "multiclass"), [("smo", "ovo"), ("smo", "ovr"),
                                                     ("dcd", None)])
def test_probabilities_with_class_weights_of_more_than_two_classes(
        solver: str, multiclass: str | None) -> None:
    """The cross-validation trains each class pair (or fold) on its own rows: a pair's fit
    gets the weights of its two classes (it refused the others' labels: issue 28)."""
    X, y = load_local("wine")
    extra = {"multiclass": multiclass} if multiclass else {}
    weights = {"1": 2.0, "2": 0.5, "3": 1.0}
    model = fit(X, y, solver=solver, probability=True, class_weight=weights, **extra).model
    assert isinstance(model, Pipeline) and model.calibration is not None
    _labels, _values, probabilities = model.predict_with_probabilities(X)
    assert probabilities is not None and probabilities.shape == (y.size, 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-9)
    assert np.mean(np.argmax(probabilities, axis=1) + 1 == y) > 0.9


def test_a_model_without_workflow_stays_bare() -> None:
    X, y = load_local("cancer")
    model = fit(X, y, solver="dcd").model
    assert not isinstance(model, Pipeline)
    assert not isinstance(model_from_bytes(model.kind, model_to_bytes(model)), Pipeline)


# ---- cancellation and time limits ---------------------------------------------------------


def test_cancel_during_the_cross_validation_cancels_the_fit() -> None:
    X, y = load_local("cancer")
    calls = {"calibration": 0}

    def progress(event: dict[str, object]) -> bool:
        if event.get("phase") == "calibration":
            calls["calibration"] += 1
            return calls["calibration"] >= 3
        return False

    result = fit(X, y, solver="smo", probability=True, progress=progress)
    assert result.exit_reason == "cancelled"
    assert isinstance(result.model, Pipeline) and result.model.calibration is None
    assert any("cancelled during the cross-validation" in w for w in result.warnings)


def test_calibration_events_place_their_phase_after_the_fit_on_the_fit_clock() -> None:
    """The dashboard draws the fit and the calibration in turn: each calibration event
    says where its phase started (phase_start_s, on the clock of the fit's elapsed_s),
    and counts the cross-validation's fits (class_index of n_classes)."""
    X, y = load_local("cancer")
    events: list[dict[str, object]] = []
    result = fit(X, y, solver="smo", probability=True, progress=events.append,
                 progress_interval=0.0)
    fit_events = [e for e in events if e.get("phase") is None]
    calibration = [e for e in events if e.get("phase") == "calibration"]
    assert fit_events and calibration
    starts = {e["phase_start_s"] for e in calibration}
    assert len(starts) == 1
    start = float(starts.pop())  # type: ignore[arg-type]
    assert max(float(e["elapsed_s"]) for e in fit_events) <= start  # type: ignore[arg-type]
    assert start <= result.train_seconds + 0.5
    assert {e["n_classes"] for e in calibration} == {5}  # two classes: 5 folds of one pair
    assert sorted({e["class_index"] for e in calibration}) == [0, 1, 2, 3, 4]


# ---- warnings ---------------------------------------------------------------------------


def _unscaled_cancer() -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = load_local("cancer")  # every column spans [-1, 1]
    return sp.csr_matrix(X @ sp.diags(np.logspace(-2, 3, X.shape[1]))), y


@pytest.mark.parametrize(("solver", "extra"), [("dcd", {}), ("acf", {}), ("pegasos", {}),
                                               ("smo", {"kernel": "rbf"})])
def test_scale_sensitive_solvers_warn_about_ranges_and_name_the_fix(
        solver: str, extra: dict[str, str]) -> None:
    X, y = _unscaled_cancer()
    # (an uncertified fit also says so in its own warning: only the scale ones count here)
    warnings = _scale_warnings(fit(X, y, solver=solver, max_iter=50, **extra))
    assert len(warnings) == 1 and "differ by 1e+05x" in warnings[0]
    assert '"scale": "minmax"' in warnings[0]
    assert _scale_warnings(fit(X, y, solver=solver, max_iter=50, scale="minmax",
                               **extra)) == []


def _scale_warnings(result: Any) -> list[str]:
    return [text for text in result.warnings if '"scale"' in text]


@pytest.mark.parametrize(("solver", "extra"), [("ocas", {}), ("alm", {}),
                                               ("smo", {"kernel": "linear"})])
def test_scale_insensitive_solvers_do_not_warn(solver: str, extra: dict[str, str]) -> None:
    X, y = _unscaled_cancer()
    assert _scale_warnings(fit(X, y, solver=solver, max_iter=20, **extra)) == []


def test_all_rows_support_vectors_on_unscaled_data_warns() -> None:
    X, y = load_local("digits-raw")  # pixel levels 0..16, like pendigits' 0..100
    X, y = X[:600], y[:600]
    n = X.shape[0]
    result = fit(X, y, solver="smo")
    assert result.n_support == n
    assert len(result.warnings) == 1 and f"{n} of {n} training rows are support vectors" in \
        result.warnings[0]
    assert fit(X, y, solver="smo", scale="minmax").warnings == []


# ---- standard on sparse data -------------------------------------------------------------


def test_the_api_density_rule_is_the_scalers() -> None:
    assert STANDARD_MIN_DENSITY == SCALING_MIN_DENSITY
    check_scale_for_data({"scale": "standard"}, rows=10, features=10, nnz=50)
    with pytest.raises(ParamError, match=r"scale 'standard' needs dense data: only 49\.0%"):
        check_scale_for_data({"scale": "standard"}, rows=10, features=10, nnz=49)
    check_scale_for_data({"scale": "maxabs"}, rows=10, features=10, nnz=1)


def test_feature_ranges_equal_the_dense_ranges() -> None:
    from solvers import workflow
    from solvers.inputs import as_csr_arrays

    rng = np.random.default_rng(3)
    dense = rng.normal(size=(40, 9)) * (rng.random((40, 9)) < 0.3)
    dense[:, 4] = 0.0  # a feature never stored
    dense[:, 6] = rng.uniform(1.0, 2.0, 40)  # stored in every row: no implicit zero
    ranges = workflow.feature_ranges(as_csr_arrays(sp.csr_matrix(dense)))
    np.testing.assert_array_equal(ranges, dense.max(axis=0) - dense.min(axis=0))
    assert ranges[6] < 1.0
    no_rows = workflow._feature_ranges(np.zeros(0), np.zeros(0, dtype=np.int32), 0, 3)
    np.testing.assert_array_equal(no_rows, np.zeros(3))
