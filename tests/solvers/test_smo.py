"""The SMO kernel SVM solver: toy problems against a SciPy QP, agreement with LIBSVM 3.37
(dual objective, support vectors, decision values, accuracy) for every kernel and both
multi-class strategies, the cache, limits, progress, cancellation and threads.

The default suite runs on local sets (testkit.datasets); the comparisons on the shared
LIBSVM sets are parity tests, the large ones (a9a, w8a, ijcnn1) also slow."""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

import solvers
from solvers import grain, smo
from solvers.backbone import Budget
from solvers.kernels import KernelModel
from solvers.params import ParamError
from solvers.result import FitResult
from solvers.smo import model as smo_model
from solvers.smo import steps
from solvers.svmlight import load_svmlight
from solvers.train import fit
from testkit.datasets import LOCAL_NAMES, load_local, split
from tests.solvers.naive_kernels import (
    dual_by_scipy,
    dual_value,
    kernel_matrix,
    libsvm_options,
    libsvm_train,
    model_kernel,
)
from tests.support import SHARED_DATA

DATA = str(SHARED_DATA)
KERNELS = ("linear", "poly", "rbf", "sigmoid")


@functools.cache
def dataset(name: str, n_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """A local set (testkit.datasets.load_local; `<name>.train` / `<name>.test`: its seeded
    split), or a shared LIBSVM set through the project's parser (parity tests only)."""
    base, _, part = name.partition(".")
    if base in LOCAL_NAMES and part in ("", "train", "test"):
        X, y = load_local(base)
        if part:
            X_train, y_train, X_test, y_test = split(X, y)
            return (X_train, y_train) if part == "train" else (X_test, y_test)
        return X, y
    parsed = load_svmlight(f"{DATA}/{name}.xz")
    return parsed.to_csr(n_features), parsed.y


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def accuracy(model: KernelModel, X: Any, y: np.ndarray) -> float:
    return float(np.mean(model.predict(X)[0] == y) * 100)


def fit_smo(X: Any, y: Any, **params: Any) -> FitResult:
    return fit(X, y, solver="smo", **params)


def alpha_of(result: FitResult, y: np.ndarray) -> np.ndarray:
    """The dual variables a_i of a binary model (y_i = +1 for classes[0], LIBSVM's side)."""
    model = result.model
    coef = np.zeros(y.shape[0])
    coef[model.sv_rows] = model.sv_coef[0]
    return coef * np.where(y == model.classes[0], 1.0, -1.0)


def compare_with_libsvm(X: Any, y: np.ndarray, X_test: Any, y_test: np.ndarray,
                        **params: Any) -> dict[str, Any]:
    """Train both with the same parameters; the agreement figures the tests check."""
    result = fit_smo(X, y, **params)
    gamma = result.params["gamma"]
    options = libsvm_options(params.get("kernel", "rbf"), params.get("C", 1.0), gamma,
                             params.get("degree", 3), params.get("coef0", 0.0),
                             params.get("eps", 1e-3))
    reference = libsvm_train(X, y, options)
    ours = result.model.decision_function(X_test)
    theirs = reference.kernel_model.decision_function(X_test)
    ours_flat, theirs_flat = np.ravel(ours), np.ravel(theirs)
    return {
        "objective": result.dual_objective, "libsvm_objective": reference.objective,
        "objective_rel": relative(result.dual_objective, reference.objective),
        "n_sv": result.n_support, "libsvm_n_sv": reference.kernel_model.n_support,
        "n_sv_rel": relative(result.n_support, reference.kernel_model.n_support),
        "accuracy": accuracy(result.model, X_test, y_test),
        "libsvm_accuracy": accuracy(reference.kernel_model, X_test, y_test),
        "correlation": float(np.corrcoef(ours_flat, theirs_flat)[0, 1]),
        "iterations": result.iterations, "libsvm_iterations": reference.iterations,
        "train_seconds": result.train_seconds, "exit": result.exit_reason,
    }


# --------------------------------------------------------------------------------------
# toy problems with known answers


@pytest.mark.parametrize("kernel", KERNELS)
def test_tiny_problems_reach_the_qp_optimum(kernel: str) -> None:
    rng = np.random.default_rng(KERNELS.index(kernel))
    X = rng.normal(size=(24, 3))
    y = np.where(X[:, 0] + 0.7 * rng.normal(size=24) > 0, 1.0, -1.0)
    settings: dict[str, Any] = {"gamma": 0.5, "coef0": 0.5 if kernel == "poly" else -0.2,
                                "degree": 2}
    result = fit_smo(X, y, kernel=kernel, C=2.0, eps=1e-6, **settings)
    assert result.exit_reason == "converged"
    K = kernel_matrix(X, X, kernel, **settings)
    y_pm = np.where(y == result.classes[0], 1.0, -1.0)
    alpha = alpha_of(result, y)
    assert np.all(alpha >= 0) and np.all(alpha <= 2.0 + 1e-12)
    assert abs(y_pm @ alpha) < 1e-10
    # the solver's gradient is built from float32 kernel columns (as LIBSVM's): ~1e-7
    assert result.dual_objective == pytest.approx(dual_value(K, y_pm, alpha), rel=1e-6)
    if kernel != "sigmoid":  # the sigmoid kernel is not PSD: SLSQP has no guarantee
        reference = dual_by_scipy(K, y_pm, np.full(24, 2.0))
        assert dual_value(K, y_pm, alpha) <= dual_value(K, y_pm, reference) + 1e-6
    # KKT on the full set: m(a) - M(a) <= eps, and rho inside the feasible interval
    gradient = y_pm * (K @ (y_pm * alpha)) - 1.0
    up = ((y_pm > 0) & (alpha < 2.0)) | ((y_pm < 0) & (alpha > 0))
    low = ((y_pm > 0) & (alpha > 0)) | ((y_pm < 0) & (alpha < 2.0))
    violation = np.max(-y_pm[up] * gradient[up]) - np.min(-y_pm[low] * gradient[low])
    assert violation < 1e-5


def test_separable_points_give_the_maximum_margin_line() -> None:
    """Two points per class on a line; with large C the hard-margin SVM: f(x) = x - 0 with
    margin 1 at x = +-1 (linear kernel)."""
    X = np.array([[-1.0], [-3.0], [1.0], [3.0]])
    y = np.array([-1.0, -1.0, 1.0, 1.0])
    result = fit_smo(X, y, kernel="linear", C=1e6, eps=1e-10)
    values = result.decision_function(np.array([[-1.0], [0.0], [1.0], [2.0]]))
    np.testing.assert_allclose(values, [-1.0, 0.0, 1.0, 2.0], atol=1e-8)
    assert result.n_support == 2
    assert result.dual_objective == pytest.approx(-0.5, rel=1e-9)  # -||w||^2 / 2 with w = 1


def test_reported_objective_is_the_naive_dual() -> None:
    X, y = dataset("cancer")
    result = fit_smo(X, y)
    K = kernel_matrix(X, X, "rbf", gamma=result.params["gamma"])
    y_pm = np.where(y == result.classes[0], 1.0, -1.0)
    assert result.dual_objective == pytest.approx(
        dual_value(K, y_pm, alpha_of(result, y)), rel=1e-6)
    raw = model_kernel(result.model, X) @ result.model.sv_coef[0] - result.model.rho[0]
    np.testing.assert_allclose(result.decision_function(X), -raw, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------------------
# agreement with LIBSVM


@pytest.mark.parametrize("name", ["cancer", "onehot-1000"])
def test_rbf_matches_libsvm(name: str) -> None:
    X, y = dataset(name)
    figures = compare_with_libsvm(X, y, X, y, kernel="rbf", C=1.0)
    assert figures["exit"] == "converged"
    assert figures["objective_rel"] < 1e-3, figures
    assert figures["n_sv_rel"] <= 0.02, figures
    assert figures["correlation"] > 0.999, figures
    assert abs(figures["accuracy"] - figures["libsvm_accuracy"]) <= 0.2, figures


@pytest.mark.parametrize("kernel", ["poly", "sigmoid"])
def test_poly_and_sigmoid_match_libsvm(kernel: str) -> None:
    X, y = dataset("cancer")
    figures = compare_with_libsvm(X, y, X, y, kernel=kernel, C=1.0, coef0=0.5, degree=3)
    assert figures["objective_rel"] < 1e-3, figures
    assert figures["n_sv_rel"] <= 0.02, figures
    assert figures["correlation"] > 0.999, figures
    assert abs(figures["accuracy"] - figures["libsvm_accuracy"]) <= 0.2, figures


def test_linear_kernel_weights_match_libsvm() -> None:
    X, y = dataset("cancer")
    for eps, tolerance in ((1e-3, 2e-2), (1e-6, 1e-4)):
        result = fit_smo(X, y, kernel="linear", eps=eps)
        reference = libsvm_train(X, y, libsvm_options("linear", eps=eps)).kernel_model
        w_ours = result.model.sv_coef[0] @ result.model.support_vectors().toarray()
        w_libsvm = reference.sv_coef[0] @ reference.support_vectors().toarray()
        # both in LIBSVM's layout over sorted classes: positive for classes[0]
        assert np.linalg.norm(w_ours - w_libsvm) <= tolerance * np.linalg.norm(w_libsvm)
        assert abs(result.model.rho[0] - reference.rho[0]) <= tolerance * 10


def test_tight_tolerance_agrees_closely() -> None:
    X, y = dataset("cancer")
    result = fit_smo(X, y, eps=1e-6)
    reference = libsvm_train(X, y, libsvm_options("rbf", gamma=result.params["gamma"],
                                                  eps=1e-6))
    assert relative(result.dual_objective, reference.objective) < 1e-6
    assert result.n_support == reference.kernel_model.n_support
    np.testing.assert_allclose(result.decision_function(X),
                               reference.kernel_model.decision_function(X), atol=1e-4)


def test_class_weights_match_libsvm() -> None:
    X, y = dataset("cancer")
    result = fit_smo(X, y, class_weight={"1": 3.0, "-1": 0.5})
    reference = libsvm_train(X, y, libsvm_options("rbf", gamma=result.params["gamma"],
                                                  weights={1: 3.0, -1: 0.5}))
    assert relative(result.dual_objective, reference.objective) < 1e-3
    assert relative(result.n_support, reference.kernel_model.n_support) <= 0.02


@pytest.mark.parametrize(("name", "rows"), [
    ("onehot3", None),  # like dna: 3 classes, 0/1 features
    ("digits", None),  # 10 classes, dense (like pendigits)
    pytest.param("dna", None, marks=pytest.mark.parity),
    # the first 2500 rows (all 10 classes): LIBSVM takes ~10 s on all
    pytest.param("pendigits", 2500, marks=pytest.mark.parity),
    pytest.param("pendigits", None, marks=[pytest.mark.slow, pytest.mark.parity]),
])
def test_one_vs_one_matches_libsvm(name: str, rows: int | None) -> None:
    if name in LOCAL_NAMES:
        X, y = dataset(f"{name}.train")
        X_test, y_test = dataset(f"{name}.test")
    else:
        train = f"{name}.scale" if name == "dna" else name
        X, y = dataset(train)
        X_test, y_test = dataset(f"{train}.t", X.shape[1])
    X, y = X[:rows], y[:rows]
    result = fit_smo(X, y)
    reference = libsvm_train(X, y, libsvm_options("rbf", gamma=result.params["gamma"]))
    assert result.model.multiclass == "ovo"
    k = result.classes.shape[0]
    assert len(result.per_output) == k * (k - 1) // 2
    assert relative(result.dual_objective, reference.objective) < 1e-3
    assert relative(result.n_support, reference.kernel_model.n_support) <= 0.02
    ours = accuracy(result.model, X_test, y_test)
    theirs = accuracy(reference.kernel_model, X_test, y_test)
    assert abs(ours - theirs) <= 0.5, (ours, theirs)


def test_one_vs_rest() -> None:
    X, y = dataset("onehot3.train")
    X_test, y_test = dataset("onehot3.test")
    result = fit_smo(X, y, multiclass="ovr")
    model = result.model
    assert model.multiclass == "ovr" and model.sv_coef.shape == (3, model.n_support)
    _labels, values = model.predict(X_test)
    assert values.shape == (X_test.shape[0], 3)
    ovo = fit_smo(X, y)
    assert accuracy(model, X_test, y_test) >= accuracy(ovo.model, X_test, y_test) - 2.0
    # output c is the binary problem "class c vs the rest"
    binary = fit_smo(X, np.where(y == result.classes[1], 1.0, 0.0))
    assert np.corrcoef(values[:, 1], binary.decision_function(X_test))[0, 1] > 0.9999
    for output in result.per_output:
        assert output["negative_class"] is None


def test_two_classes_are_one_problem_whatever_the_strategy() -> None:
    X, y = dataset("cancer")
    ovo, ovr = fit_smo(X, y, multiclass="ovo"), fit_smo(X, y, multiclass="ovr")
    assert ovr.model.multiclass == "ovo" and len(ovr.per_output) == 1
    np.testing.assert_array_equal(ovo.decision_function(X), ovr.decision_function(X))


def test_label_values_do_not_matter() -> None:
    X, y = dataset("cancer")
    first = fit_smo(X, y)
    second = fit_smo(X, np.where(y > 0, 7.0, 3.0))
    assert first.dual_objective == second.dual_objective
    np.testing.assert_array_equal(first.decision_function(X), second.decision_function(X))
    assert np.array_equal(second.model.classes, [3.0, 7.0])


@pytest.mark.parametrize(("name", "kernel"), [("cancer", "rbf"), ("iris", "poly")])
def test_exported_models_predict_identically_in_libsvm(name: str, kernel: str) -> None:
    import os
    import tempfile

    from libsvm import svmutil

    from solvers.formats import libsvm_model_text

    X, y = dataset(name)
    model = fit_smo(X, y, kernel=kernel, coef0=1.0).model
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.txt")
        with open(path, "w") as handle:
            handle.write(libsvm_model_text(model))
        loaded = svmutil.svm_load_model(path)
    labels, _, values = svmutil.svm_predict([], X, loaded, "-q")
    ours_labels, ours_values = model.predict(X)
    assert np.array_equal(np.array(labels), ours_labels)
    expected = -ours_values[:, None] if model.n_classes == 2 else ours_values
    np.testing.assert_allclose(np.array(values), expected, rtol=1e-9, atol=1e-9)


# --------------------------------------------------------------------------------------
# cache, limits, progress, threads


def test_a_tiny_cache_gives_the_same_solution() -> None:
    X, y = dataset("onehot3")
    full = fit_smo(X, y, cache_mb=200)
    tiny = fit_smo(X, y, cache_mb=1)
    assert sum(o["cache_misses"] for o in tiny.per_output) > sum(
        o["cache_misses"] for o in full.per_output)
    assert tiny.dual_objective == full.dual_objective
    np.testing.assert_array_equal(tiny.model.sv_coef, full.model.sv_coef)
    np.testing.assert_array_equal(tiny.model.rho, full.model.rho)


def test_max_iter_stops_with_a_usable_model() -> None:
    X, y = dataset("cancer")
    result = fit_smo(X, y, max_iter=5)
    assert result.exit_reason == "max_iter" and result.iterations == 5
    labels, values = result.model.predict(X)
    assert np.all(np.isfinite(values)) and set(labels) <= set(result.classes)
    assert result.dual_objective < 0
    converged = fit_smo(X, y)
    assert converged.dual_objective < result.dual_objective


@functools.cache
def a9a_subset() -> tuple[sp.csr_matrix, np.ndarray]:
    """onehot (a9a-like, 0/1 features): 8,000 rows."""
    return dataset("onehot")


def test_progress_events_and_cancellation() -> None:
    X, y = a9a_subset()
    events: list[dict[str, Any]] = []

    def record(event: dict[str, Any]) -> bool:
        events.append(event)
        return len(events) >= 2

    # an event after every compiled call (not every 0.2 s): a short fit sends several
    result = fit_smo(X, y, C=10.0, progress=record, progress_interval=0.0)
    assert result.exit_reason == "cancelled"
    assert len(events) == 2
    for event in events:
        assert {"iteration", "elapsed_s", "dual", "violation", "active_size"} <= set(event)
        assert event["primal"] is None and event["gap"] is None
        assert math.isfinite(event["dual"]) and event["dual"] < 0
    assert events[1]["dual"] <= events[0]["dual"]
    assert events[1]["elapsed_s"] > events[0]["elapsed_s"]
    assert events[1]["iteration"] > events[0]["iteration"]
    assert result.iterations >= events[-1]["iteration"]
    _labels, values = result.model.predict(X[:50])
    assert np.all(np.isfinite(values))


def test_kkt_violators_fall_from_all_to_none() -> None:
    """The progress events' kkt_violators: every variable at a = 0, none once m - M <= eps
    (they count the share of the work done while m - M barely moves)."""
    from solvers.smo.solution import kkt_violators

    X, y = a9a_subset()
    events: list[dict[str, Any]] = []
    # every snapshot an event (the default 0.2 s interval: a quick machine's fit ends
    # before the first)
    result = fit_smo(X, y, progress=lambda e: bool(events.append(e)), progress_interval=0.0)
    assert result.exit_reason == "converged" and events
    for event in events:
        assert 0 <= event["kkt_violators"] <= event["active_size"]
    labels = np.where(y[:2000] > 0, 1, -1).astype(np.int8)
    status = np.zeros(2000, dtype=np.int8)  # a = 0: every variable at its lower bound
    assert kkt_violators(labels, status, np.full(2000, -1.0), 2000, 1e-3) == 2000
    # the stop rule's point: m - M <= eps leaves no variable outside b +- eps / 2
    gradient = -labels * np.linspace(-4e-4, 4e-4, 2000) * (labels > 0)
    assert kkt_violators(labels, status, gradient, 2000, 1e-3) == 0


def test_max_seconds_stops_with_a_usable_model() -> None:
    X, y = a9a_subset()
    started = time.perf_counter()
    result = fit_smo(X, y, C=1000.0, max_seconds=0.05)  # C = 1000: seconds, not 0.3 s
    assert result.exit_reason == "max_seconds"
    assert time.perf_counter() - started < 5.0
    assert np.all(np.isfinite(result.model.predict(X[:50])[1]))


@pytest.mark.parametrize(("formulation", "params", "rows"), [
    ("nu_svc", {"nu": 0.3}, 5000), ("epsilon_svr", {"C": 1.0, "epsilon": 0.1}, 1500),
    ("nu_svr", {"C": 1.0, "nu": 0.5}, 1500)])
def test_two_threads_give_the_result_of_one_for_the_nu_and_regression_loops(
        monkeypatch: pytest.MonkeyPatch, formulation: str, params: dict[str, float],
        rows: int) -> None:
    """Solver_NU's parallel selection (both sides' maxima per chunk), the regressions'
    parallel fill of a column from its kernel row and the feature-major dense dot products,
    switched on and off at every call: the fit of one thread, bit for bit."""
    monkeypatch.setattr(steps, "PARALLEL_MIN_PASS", 64)
    monkeypatch.setattr(steps, "PARALLEL_MIN_KERNEL", 64)
    monkeypatch.setattr(steps, "PARALLEL_MIN_FLUSH", 64)
    monkeypatch.setattr(grain, "FORCE", "alternate")
    monkeypatch.setattr(smo, "BUDGET", Budget(1e-4, 16, 16, 64))  # many short calls
    monkeypatch.setattr(smo, "FIRST_CALL_WORK", 0)
    X, y = dataset("dense")
    X, y = X[:rows], y[:rows].astype(np.float64)
    # a tight eps: > 1,000 steps, so shrinking, the deferred G_bar and reconstruction run
    one = fit_smo(X, y, formulation=formulation, gamma=0.5, eps=1e-7, **params)
    two = fit_smo(X, y, formulation=formulation, gamma=0.5, eps=1e-7, threads=2, **params)
    assert one.per_output[0]["kernel_values"] == "dense"
    assert one.per_output[0]["shrinkings"] > 0
    if two.params["threads_used"] > 1:
        assert 0.3 < two.per_output[0]["fine_grained_share"] < 0.7
    assert one.dual_objective == two.dual_objective
    assert one.iterations == two.iterations
    np.testing.assert_array_equal(one.model.sv_coef, two.model.sv_coef)
    np.testing.assert_array_equal(one.model.rho, two.model.rho)

def test_later_pairs_are_left_untrained_after_a_stop() -> None:
    X, y = dataset("digits")
    result = fit_smo(X, y, max_seconds=0.01)
    assert result.exit_reason == "max_seconds"
    untrained = [o for o in result.per_output if o["iterations"] == 0]
    assert untrained and all(o["exit_reason"] == "max_seconds" for o in untrained)
    assert np.all(np.isfinite(result.model.predict(X[:20])[1]))


@pytest.mark.parametrize("force", ["fine", "alternate", None])
def test_two_threads_give_the_result_of_one(monkeypatch: pytest.MonkeyPatch,
                                            force: str | None) -> None:
    """The parallel loops only split elementwise work and exact argmax reductions: the
    fine-grained loops throughout, switched on and off at every call of the step loop,
    or as the grain meter measures, the fit is that of one thread."""
    monkeypatch.setattr(steps, "PARALLEL_MIN_PASS", 64)
    monkeypatch.setattr(steps, "PARALLEL_MIN_KERNEL", 64)
    monkeypatch.setattr(steps, "PARALLEL_MIN_FLUSH", 64)
    monkeypatch.setattr(grain, "FORCE", force)
    monkeypatch.setattr(smo, "BUDGET", Budget(1e-4, 16, 16, 64))  # many short calls
    monkeypatch.setattr(smo, "FIRST_CALL_WORK", 0)
    X, y = dataset("onehot")
    X, y = X[:3000], y[:3000]  # > 1000 steps: shrinking, deferred G_bar, reconstruction
    one = fit_smo(X, y, threads=1)
    two = fit_smo(X, y, threads=2)
    assert one.per_output[0]["shrinkings"] > 0
    assert one.per_output[0]["gradient_reconstructions"] > 0
    assert two.params["threads_used"] == min(2, smo.max_threads())
    assert two.params["fine_grained_parallel"] == (two.params["threads_used"] > 1)
    assert one.per_output[0]["fine_grained_share"] == 0.0
    share = two.per_output[0]["fine_grained_share"]
    if force == "fine" and two.params["threads_used"] > 1:
        assert share == 1.0
    elif force == "alternate" and two.params["threads_used"] > 1:
        assert 0.3 < share < 0.7
    assert one.dual_objective == two.dual_objective
    assert one.iterations == two.iterations
    np.testing.assert_array_equal(one.model.sv_coef, two.model.sv_coef)
    np.testing.assert_array_equal(one.model.rho, two.model.rho)


@functools.cache
def letter_subset() -> tuple[sp.csr_matrix, np.ndarray]:
    """8 classes of the letter-like set: 28 pairs of ~400 rows."""
    from testkit.datagen import letter_like

    return letter_like(rows_per_class=200, n_classes=8, seed=3)


def test_pairs_in_parallel_give_the_result_of_one_thread() -> None:
    X, y = letter_subset()
    one = fit_smo(X, y, C=10.0, gamma=0.5, threads=1)
    two = fit_smo(X, y, C=10.0, gamma=0.5, threads=2)
    assert one.params["parallel_grain"] == "none" and one.params["pair_workers"] == 1
    if smo.max_threads() >= 2:
        assert two.params["parallel_grain"] == "pairs" and two.params["pair_workers"] == 2
    assert one.dual_objective == two.dual_objective
    assert one.iterations == two.iterations
    np.testing.assert_array_equal(one.model.sv_rows, two.model.sv_rows)
    np.testing.assert_array_equal(one.model.sv_coef, two.model.sv_coef)
    np.testing.assert_array_equal(one.model.rho, two.model.rho)
    for first, second in zip(one.per_output, two.per_output, strict=True):
        assert (first["positive_class"], first["negative_class"], first["iterations"]) == (
            second["positive_class"], second["negative_class"], second["iterations"])


def test_parallel_grain_follows_the_problem_sizes() -> None:
    assert smo_model.parallel_grain(1, [800] * 325) == ("columns", 1)
    assert smo_model.parallel_grain(2, [5000]) == ("columns", 1)  # one problem
    assert smo_model.parallel_grain(2, [800] * 325) == ("pairs", 2)
    assert smo_model.parallel_grain(2, [2000] * 3) == ("pairs", 2)  # small: no step loops
    assert smo_model.parallel_grain(2, [60_000] * 3) == ("columns", 1)  # few and large
    assert smo_model.parallel_grain(2, [60_000] * 4) == ("pairs", 2)  # two per thread
    assert smo_model.parallel_grain(4, [800] * 3) == ("pairs", 3)


@pytest.mark.parametrize("threads", [1, 2])
def test_many_small_pairs_send_progress_and_stop_together(threads: int) -> None:
    """Pairs solved within one compiled call still send events (at their end); a
    cancellation stops the running pairs and leaves the rest untrained."""
    from testkit.datagen import letter_like

    X, y = letter_like()  # 325 pairs of ~800 rows: longer than one event interval
    events: list[dict[str, Any]] = []

    def cancel_at_first(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    result = fit_smo(X, y, C=10.0, gamma=0.5, threads=threads, progress=cancel_at_first)
    assert result.exit_reason == "cancelled" and len(events) == 1
    assert events[0]["n_classes"] == 325 and 0 <= events[0]["class_index"] < 325
    assert len(events[0]["pair"]) == 2 and events[0]["dual"] < 0
    untrained = [o for o in result.per_output if o["iterations"] == 0]
    assert untrained and all(o["exit_reason"] == "cancelled" for o in untrained)
    assert np.all(np.isfinite(result.model.predict(X[:20])[1]))
    late = fit_smo(X, y, C=10.0, gamma=0.5, threads=threads, max_seconds=0.001)
    assert late.exit_reason == "max_seconds"
    assert np.all(np.isfinite(late.model.predict(X[:20])[1]))


def test_non_finite_kernel_values_are_reported() -> None:
    X = np.array([[1e30, 0.0], [0.0, 1e30], [1e30, 1e30], [-1e30, 1.0]])
    y = np.array([1.0, -1.0, 1.0, -1.0])
    result = fit_smo(X, y, kernel="poly", degree=20, gamma=1.0)
    assert result.exit_reason == "numerical_error"


# --------------------------------------------------------------------------------------
# entry point and validation


def test_solvers_fit_dispatches_to_smo() -> None:
    X, y = dataset("cancer")
    result = solvers.fit(X, y, solver="smo", C=2.0)
    assert isinstance(result, FitResult) and isinstance(result.model, KernelModel)
    assert result.params["C"] == 2.0 and result.params["kernel"] == "rbf"
    assert result.params["gamma"] == pytest.approx(1.0 / X.shape[1])
    assert np.mean(result.predict(X) == y) > 0.85
    with pytest.raises(ParamError, match="unknown parameter"):
        solvers.fit(X, y, solver="smo", loss="l1")
    with pytest.raises(ParamError, match="kernel"):
        solvers.fit(X, y, solver="smo", kernel="cubic")


def test_input_errors() -> None:
    X, y = dataset("cancer")
    with pytest.raises(ValueError, match="two classes"):
        fit_smo(X, np.ones(X.shape[0]))
    with pytest.raises(ValueError, match="labels"):
        fit_smo(X, y[:10])


# --------------------------------------------------------------------------------------
# the benchmark data sets (slow: LIBSVM alone takes 6-22 s on each)


@pytest.mark.slow
@pytest.mark.parity
@pytest.mark.parametrize("name", ["a9a", "w8a", "ijcnn1"])
def test_large_sets_match_libsvm(name: str) -> None:
    X, y = dataset(name)
    X_test, y_test = dataset(f"{name}.t", X.shape[1])
    figures = compare_with_libsvm(X, y, X_test, y_test, kernel="rbf", C=1.0)
    print(name, figures)
    assert figures["objective_rel"] < 1e-3, figures
    assert figures["n_sv_rel"] <= 0.02, figures
    assert figures["correlation"] > 0.999, figures
    assert abs(figures["accuracy"] - figures["libsvm_accuracy"]) <= 0.2, figures
