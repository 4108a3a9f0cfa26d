"""`solvers.train.fit`: input validation, labels and classes, one-vs-rest, class weights,
bias handling, invariances and degenerate inputs."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import fit as package_fit
from solvers.objectives import LinearProblem, primal_objective
from solvers.params import ParamError
from solvers.train import as_csr_arrays, fit
from solvers.warmup import warmup
from testkit.datasets import LOCAL_NAMES, load_dataset, load_local, split
from tests.solvers.naive import augment, primal, random_sparse_problem


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


# --------------------------------------------------------------------------------------
# validation and coercion


def test_csr_arrays_have_the_documented_layout() -> None:
    X = sp.csr_matrix(
        (np.array([3.0, 1.0, 2.0]), np.array([2, 0, 1]), np.array([0, 2, 2, 3])), shape=(3, 4)
    )
    X.has_sorted_indices = False
    arrays = as_csr_arrays(X)
    assert arrays.data.dtype == np.float64 and arrays.indices.dtype == np.int32
    assert arrays.indptr.dtype == np.int64 and arrays.n_features == 4
    assert all(
        a.flags.c_contiguous and a.flags.writeable
        for a in (arrays.data, arrays.indices, arrays.indptr)
    )
    assert arrays.indices.tolist() == [0, 2, 1]  # sorted within the row
    assert arrays.data.tolist() == [1.0, 3.0, 2.0]
    assert X.indices.tolist() == [2, 0, 1]  # the caller's matrix is untouched


def test_duplicate_entries_are_summed() -> None:
    X = sp.csr_matrix(
        (np.array([1.0, 2.0, 5.0]), np.array([1, 1, 0]), np.array([0, 2, 3])), shape=(2, 2)
    )
    arrays = as_csr_arrays(X)
    assert arrays.indices.tolist() == [1, 0] and arrays.data.tolist() == [3.0, 5.0]


@pytest.mark.parametrize(
    ("X", "y", "message"),
    [
        (np.ones((3, 2)), np.array([1, 2]), "y has 2 labels but X has 3 rows"),
        (np.ones((2, 2)), np.array([[1], [2]]), "pass y.ravel"),
        (np.ones(4), np.array([1, 2, 1, 2]), "X must be 2-D"),
        (np.array([[1.0, np.nan], [0.0, 1.0]]), np.array([1, 2]), "NaN or infinity"),
        (sp.csr_matrix(np.array([[1.0, np.inf], [0.0, 1.0]])), np.array([1, 2]), "NaN or infinity"),
        (np.ones((2, 2)), np.array([1.0, np.nan]), "y contains NaN"),
        (np.array([["a", "b"], ["c", "d"]]), np.array([1, 2]), "must hold numbers"),
        (np.ones((2, 2)), np.array(["x", "y"]), "real numbers"),
        (np.ones((3, 2)), np.array([1, 1, 1]), "needs at least two classes"),
        (np.zeros((0, 2)), np.array([]), "no rows"),
    ],
)
def test_bad_input_is_refused_with_a_helpful_message(X: Any, y: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit(X, y)


def test_malformed_csr_is_refused() -> None:
    X = sp.csr_matrix(np.eye(3))
    X.indices[1] = 7  # out of range; the kernels would read out of bounds
    with pytest.raises(ValueError, match="malformed CSR"):
        fit(X, np.array([1, 2, 1]))


def test_bad_parameters_raise_param_error() -> None:
    X, y = np.eye(2), np.array([1, 2])
    with pytest.raises(ParamError, match="unknown parameter"):
        fit(X, y, gamma=1.0)
    with pytest.raises(ParamError, match="C must be >"):
        fit(X, y, C=0)
    with pytest.raises(ParamError, match="unknown solver"):
        fit(X, y, solver="nope")
    with pytest.raises(ParamError, match="not a class of y") as info:
        fit(X, y, class_weight={"3": 2.0})
    assert info.value.field == "class_weight"


def test_package_fit_delegates_to_train() -> None:
    X, y = random_sparse_problem(50, 4, 0.6, seed=1)
    a = package_fit(X, y, loss="l1")
    b = fit(X, y, loss="l1")
    assert np.array_equal(a.coef, b.coef) and a.solver == "dcd"
    assert a.params["loss"] == "l1" and a.params["eps"] == 0.1  # defaults filled in


# --------------------------------------------------------------------------------------
# labels, classes and the result object


@pytest.mark.parametrize("labels", [(0, 1), (1, 2), (-1.0, 1.0), (-3, 7.5)])
def test_binary_labels_map_larger_class_to_positive(labels: tuple[float, float]) -> None:
    X, y_pm = random_sparse_problem(100, 5, 0.5, seed=2)
    reference = fit(X, y_pm, loss="l2", eps=1e-8)
    y = np.where(y_pm > 0, labels[1], labels[0])
    result = fit(X, y, loss="l2", eps=1e-8)
    assert result.classes.tolist() == [float(labels[0]), float(labels[1])]
    assert np.array_equal(result.coef, reference.coef)
    expected = np.where(reference.predict(X) > 0, labels[1], labels[0])
    assert np.array_equal(result.predict(X), expected)
    assert result.coef.shape == (1, 5) and result.intercept.shape == (1,)


def test_result_fields_for_a_binary_fit() -> None:
    X, y = random_sparse_problem(300, 8, 0.4, seed=3)
    result = fit(X, y, loss="l1", C=0.5)
    assert result.solver == "dcd" and result.exit_reason == "converged"
    assert result.iterations >= 1 and len(result.per_output) == 1
    out = result.per_output[0]
    assert out["positive_class"] == 1.0 and out["exit_reason"] == "converged"
    assert out["primal_objective"] == result.primal_objective
    assert result.dual_objective is not None
    assert result.duality_gap == pytest.approx(result.primal_objective - result.dual_objective)
    assert result.train_seconds > 0
    assert {"validate_s", "solve_s", "setup_s", "iterate_s", "objective_s"} <= set(result.timings)
    assert result.train_seconds == result.timings["solve_s"]
    # decision_function = X w + intercept, the intercept being B * w_bias
    problem = LinearProblem(as_csr_arrays(X), y, np.full(300, 0.5), 1.0)
    w_aug = np.append(result.coef[0], result.intercept[0])
    assert primal_objective(problem, w_aug, "l1") == pytest.approx(
        result.primal_objective, rel=1e-12
    )


# --------------------------------------------------------------------------------------
# one-vs-rest


def raw_digits() -> tuple[Any, np.ndarray]:
    """digits (10 classes) at its pixel levels 0..16 times 6.25: raw coordinates 0..100
    like pendigits', every feature on the same range (no advice to scale)."""
    X, y = load_local("digits-raw")
    return X * 6.25, y


@pytest.mark.parametrize(("name", "scale"), [
    ("onehot3", 1.0), ("digits", 1.0),  # like dna and (scaled) pendigits
    pytest.param("dna.scale", 1.0, marks=pytest.mark.parity),
    pytest.param("pendigits", 0.01, marks=pytest.mark.parity)])
def test_one_vs_rest_matches_liblinear(name: str, scale: float) -> None:
    # pendigits holds raw 0..100 coordinates: its dual is so ill-conditioned that plain DCD
    # needs >10^5 sweeps (LIBLINEAR -s 1 gives up after 300 and switches to its primal
    # Newton solver), so it is compared scaled to [0, 1]; see test_raw_pendigits_*.
    from liblinear import liblinearutil

    if name in LOCAL_NAMES:
        X, y, X_test, y_test = split(*load_local(name))
    else:
        X, y = load_dataset(name)
        X_test, y_test = load_dataset(f"{name}.t", X.shape[1])
    X, X_test = X * scale, X_test * scale
    prob = liblinearutil.problem(y, X, bias=1)
    model = liblinearutil.train(prob, "-s 1 -e 1e-6 -B 1 -c 1 -q")
    ll_labels = model.get_labels()
    ll_pred, _, _ = liblinearutil.predict(y_test, X_test, model, "-q")
    ll_accuracy = 100 * np.mean(np.asarray(ll_pred) == y_test)

    result = fit(X, y, loss="l2", eps=1e-3)
    classes = np.unique(y)
    assert result.classes.tolist() == classes.tolist()
    assert result.coef.shape == (len(classes), X.shape[1])
    accuracy = 100 * np.mean(result.predict(X_test) == y_test)
    assert abs(accuracy - ll_accuracy) <= 1.0

    arrays = as_csr_arrays(X)
    total = 0.0
    for k, out in enumerate(result.per_output):
        assert out["positive_class"] == classes[k]
        w, b = model.get_decfun(ll_labels.index(int(classes[k])))
        problem = LinearProblem(
            arrays, np.where(y == classes[k], 1.0, -1.0), np.ones(X.shape[0]), 1.0
        )
        reference = primal_objective(problem, np.append(w, b), "l2")
        assert relative(out["primal_objective"], reference) < 1e-3
        assert out["duality_gap"] >= 0
        total += out["primal_objective"]
    assert result.primal_objective == pytest.approx(total, rel=1e-12)
    assert result.iterations == sum(out["iterations"] for out in result.per_output)


def test_raw_pendigits_reports_max_iter_honestly() -> None:
    X, y = raw_digits()
    result = fit(X, y, loss="l2", max_iter=50, fallback=False)
    assert result.exit_reason == "max_iter" and not result.converged
    assert all(out["exit_reason"] == "max_iter" for out in result.per_output)
    assert result.duality_gap is not None
    assert result.duality_gap > 0.01 * result.primal_objective  # far from converged
    assert result.relative_gap is not None and result.relative_gap > 0.01
    assert len(result.warnings) == np.unique(y).size  # one per output
    assert all("max_iter" in w for w in result.warnings)


def test_raw_pendigits_falls_back_to_tron_and_is_certified() -> None:
    """The dual CD stalls on unscaled data; the fallback (tron from its w) certifies each
    output, and the path of every output says so."""
    X, y = raw_digits()
    result = fit(X, y, loss="l2", max_iter=50)
    assert result.converged and result.exit_reason == "converged" and not result.warnings
    assert result.relative_gap is not None and result.relative_gap <= 1e-3
    for k, out in enumerate(result.per_output):
        steps = [(step["solver"], step["exit"]) for step in out["path"]]
        assert steps[0] == ("dcd", "max_iter") and steps[-1][0] == "tron", steps
        assert out["relative_gap"] <= 1e-3
        assert [s for s in result.path if s["output"] == k] == [
            {**s, "output": k} for s in out["path"]]


@pytest.mark.parity
def test_one_vs_rest_progress_names_the_output() -> None:
    # (on raw_digits() the same fit sent no progress event and ran 3.3 s past its 0.6 s:
    # dcd, then ocas on output 0; not yet understood, so this stays on pendigits)
    X, y = load_dataset("pendigits")
    events: list[dict[str, Any]] = []
    result = fit(
        X, y, loss="l1", eps=1e-9, max_iter=100_000, max_seconds=0.6, progress=events.append
    )
    assert result.exit_reason == "max_seconds"
    assert events and all(e["n_classes"] == 10 for e in events)
    assert all(0 <= e["class_index"] < 10 for e in events)
    # the limit is global: outputs never reached are reported, untrained (w = 0)
    stopped = [out for out in result.per_output if out["exit_reason"] == "max_seconds"]
    assert stopped and all(out["iterations"] == 0 for out in stopped[1:])
    assert np.all(np.isfinite(result.coef))


def test_one_vs_rest_exit_reason_is_the_worst() -> None:
    X, y = load_local("onehot3")
    result = fit(X, y, loss="l1", eps=1e-8, max_iter=3, fallback=False)
    assert result.exit_reason == "max_iter"
    assert {out["exit_reason"] for out in result.per_output} == {"max_iter"}
    assert result.iterations == 3 * np.unique(y).size


# --------------------------------------------------------------------------------------
# class weights, bias, invariances


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_class_weight_equals_repeating_rows(loss: str) -> None:
    X, y = random_sparse_problem(80, 5, 0.5, seed=4)
    weighted = fit(X, y, loss=loss, class_weight={"1": 3.0}, eps=1e-9, max_iter=100_000)
    repeat = np.where(y > 0, 3, 1)
    repeated = fit(
        np.repeat(X, repeat, axis=0), np.repeat(y, repeat), loss=loss, eps=1e-9, max_iter=100_000
    )
    assert relative(weighted.primal_objective, repeated.primal_objective) < 1e-9
    np.testing.assert_allclose(weighted.coef, repeated.coef, rtol=1e-5, atol=1e-7)


def test_class_weight_in_one_vs_rest_uses_each_rows_own_class() -> None:
    rng = np.random.default_rng(5)
    X = rng.normal(size=(90, 4))
    y = np.repeat([1.0, 2.0, 3.0], 30)
    X[y == 2] += 1.0
    weights = {"1": 2.0, "2": 0.5, "3": 1.5}
    result = fit(X, y, loss="l2", C=0.8, class_weight=weights, eps=1e-10, max_iter=100_000)
    cost = 0.8 * np.array([weights[str(int(label))] for label in y])
    Xa = augment(X, 1.0)
    for k, label in enumerate([1.0, 2.0, 3.0]):
        w = np.append(result.coef[k], result.intercept[k])
        y_k = np.where(y == label, 1.0, -1.0)
        assert result.per_output[k]["primal_objective"] == pytest.approx(
            primal(Xa, y_k, cost, w, "l2"), rel=1e-12
        )


@pytest.mark.parametrize("bias_scale", [1.0, 3.0])
def test_bias_augment_equals_an_explicit_constant_column(bias_scale: float) -> None:
    X, y = random_sparse_problem(120, 6, 0.5, seed=6)
    augmented = fit(
        X, y, loss="l1", bias="augment", bias_scale=bias_scale, eps=1e-9, max_iter=100_000
    )
    explicit = fit(augment(X, bias_scale), y, loss="l1", bias="none", eps=1e-9, max_iter=100_000)
    assert explicit.intercept[0] == 0.0
    assert relative(augmented.primal_objective, explicit.primal_objective) < 1e-10
    np.testing.assert_allclose(augmented.coef[0], explicit.coef[0, :-1], rtol=1e-6, atol=1e-8)
    assert augmented.intercept[0] == pytest.approx(explicit.coef[0, -1] * bias_scale, rel=1e-6)


def test_bias_none_fits_through_the_origin() -> None:
    X, y = random_sparse_problem(100, 4, 0.6, seed=7)
    result = fit(X, y, bias="none", eps=1e-8)
    assert result.intercept.tolist() == [0.0]
    assert result.primal_objective == pytest.approx(
        primal(X, y, np.ones(100), result.coef[0], "l2"), rel=1e-12
    )


@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_row_order_does_not_change_the_optimum(loss: str) -> None:
    X, y = load_local("cancer")
    order = np.random.default_rng(8).permutation(X.shape[0])
    a = fit(X, y, loss=loss, eps=1e-7, max_iter=1_000_000)
    b = fit(X[order], y[order], loss=loss, eps=1e-7, max_iter=1_000_000)
    assert a.exit_reason == b.exit_reason == "converged"
    assert relative(a.primal_objective, b.primal_objective) < 1e-6
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-3, atol=1e-4)


# --------------------------------------------------------------------------------------
# degenerate inputs


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("bias", ["none", "augment"])
def test_all_zero_rows(loss: str, bias: str) -> None:
    X, y = random_sparse_problem(50, 4, 0.6, seed=9)
    X[:5] = 0.0  # with l1 and no bias, Qbar_ii = 0 for these rows
    result = fit(X, y, loss=loss, bias=bias, eps=1e-9, max_iter=100_000)
    assert result.exit_reason == "converged"
    cost = np.ones(50)
    Xa = augment(X, 1.0 if bias == "augment" else None)
    w = result.coef[0] if bias == "none" else np.append(result.coef[0], result.intercept[0])
    assert result.primal_objective == pytest.approx(primal(Xa, y, cost, w, loss), rel=1e-12)
    assert result.duality_gap == pytest.approx(0.0, abs=1e-6)


def test_all_rows_zero_without_bias() -> None:
    result = fit(np.zeros((4, 3)), np.array([1, 1, 2, 2]), loss="l1", bias="none")
    assert result.exit_reason == "converged"
    assert np.all(result.coef == 0.0)
    assert result.primal_objective == pytest.approx(4.0)


def test_duplicate_rows_and_constant_feature() -> None:
    X, y = random_sparse_problem(60, 4, 0.7, seed=10)
    X[:, 2] = 2.0  # constant feature (acts like a bias)
    X = np.vstack([X, X[:10]])
    y = np.concatenate([y, y[:10]])
    for loss in ("l1", "l2"):
        result = fit(X, y, loss=loss, eps=1e-9, max_iter=100_000)
        assert result.exit_reason == "converged"
        assert np.all(np.isfinite(result.coef))
        assert result.duality_gap == pytest.approx(0.0, abs=1e-6)


def test_single_feature_and_two_rows() -> None:
    result = fit([[1.0], [-1.0]], [5, 3], bias="none", loss="l1", eps=1e-10)
    assert result.classes.tolist() == [3.0, 5.0]
    assert result.coef[0, 0] == pytest.approx(1.0)
    assert result.predict(np.array([[2.0], [-2.0]])).tolist() == [5.0, 3.0]


# Run in a fresh interpreter: every compiled function that Python code of the loaded
# solvers modules calls must have a compiled (or cache-loaded) signature after warmup().
_WARMUP_PROBE = """
import ast, importlib, inspect, json, sys
from numba.core.dispatcher import Dispatcher
from solvers.params import SOLVERS
from solvers.warmup import warmup

warmup()
for spec in SOLVERS.values():  # a registered solver that warmup skipped is checked too
    importlib.import_module(spec.module)
entries, cold = [], []
for name, module in sorted(sys.modules.items()):
    if module is None or not (name == "solvers" or name.startswith("solvers.")):
        continue
    tree = ast.parse(inspect.getsource(module))
    jitted = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and (any(
        "njit" in ast.unparse(d) or "intrinsic" in ast.unparse(d) for d in n.decorator_list)
        or isinstance(getattr(module, n.name, None), Dispatcher))}
    called = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name not in jitted:
            called |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    for ident in sorted(called):
        target = getattr(module, ident, None)
        if isinstance(target, Dispatcher):
            entries.append(f"{name}.{ident}")
            if not target.signatures:
                cold.append(f"{name}.{ident}")
print(json.dumps({"entries": entries, "cold": cold}))
"""
# Called from Python only by tests and the benchmarks, never on a worker's path.
_NOT_WARMED = {"solvers.kernels._kernel_column_kernel"}


def test_warmup_compiles_every_kernel_that_python_calls() -> None:
    done = subprocess.run([sys.executable, "-c", _WARMUP_PROBE], capture_output=True,
                          text=True, timeout=600, check=True)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # the probe sees every solver's entry kernels, SMO's and the prediction kernels
    for expected in ("solvers.dcd._dcd_sweeps", "solvers.acf._acf_sweeps",
                     "solvers.pegasos._pegasos_steps", "solvers.ocas.signed_margins",
                     "solvers.alm._x_times", "solvers.smo.steps._smo_steps",
                     "solvers.kernels._decision_kernel"):
        assert expected in report["entries"]
    assert set(report["cold"]) - _NOT_WARMED == set()


def _compiled_signatures() -> dict[str, tuple[Any, ...]]:
    """Every compiled function of the loaded solvers modules and its compiled signatures."""
    from numba.core.dispatcher import Dispatcher

    found = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "solvers" or name.startswith("solvers.")):
            continue
        for attribute, value in vars(module).items():
            if isinstance(value, Dispatcher):
                found[f"{name}.{attribute}"] = tuple(value.signatures)
    return found


def test_warmup_compiles_everything_once() -> None:
    # (counted, not timed: a second warm-up compiles nothing new and adds no signature)
    warmup()
    before = _compiled_signatures()
    warmup()
    assert _compiled_signatures() == before
    assert sum(len(signatures) for signatures in before.values()) > 0


# --------------------------------------------------------------------------------------
# progress_interval


@pytest.mark.parametrize("scale", ["none", "minmax"])  # the plain fit, and the workflow's
def test_progress_interval_sets_the_least_time_between_events(scale: str) -> None:
    """Fits bounded by max_seconds, so that what is counted does not depend on the speed
    of the machine: no event within a longer interval, one per compiled call at 0."""
    X, y = load_local("onehot")
    spec = {"loss": "l1", "eps": 1e-12, "max_iter": 10_000_000, "max_seconds": 0.5,
            "fallback": False, "scale": scale}
    counted: dict[float, list[float]] = {}
    for interval in (60.0, 0.0, 0.15):  # the first one compiles (when not cached)
        events: list[dict[str, Any]] = []
        result = fit(X, y, progress=events.append, progress_interval=interval, **spec)
        assert result.exit_reason == "max_seconds"
        counted[interval] = [e["elapsed_s"] for e in events]
    assert counted[60.0] == []
    assert len(counted[0.0]) >= 5 and len(counted[0.0]) > len(counted[0.15])
    times = counted[0.15]
    assert 1 <= len(times) <= 4 and times[0] >= 0.15
    assert all(b - a >= 0.15 for a, b in itertools.pairwise(times))
    with pytest.raises(ValueError, match="progress_interval"):
        fit(X, y, progress_interval=-1.0)
