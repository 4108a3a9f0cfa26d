"""SMO's other LIBSVM formulations (nu-SVC, one-class, epsilon-SVR, nu-SVR) and instance
weights, certified against LIBSVM 3.37 (libsvm-official) and scikit-learn's LIBSVM (its
`sample_weight` extension) at the same eps:

- the dual objective within 1e-6 relative: LIBSVM's "obj = ..." line (for nu-SVC after
  its rescaling by 1/r^2, as ours), and the same value recomputed from each model's
  support vectors and coefficients by one formula (`model_objective`), so that neither
  side's own bookkeeping is trusted;
- support-vector counts within 1%;
- decision values correlated >= 0.99999 (and close in value).

Both sides run at eps = 1e-8 here. At LIBSVM's default 1e-3 two runs differ by ~5e-4 in
the objective, at 1e-6 by up to ~1.4e-6 (nu-SVC on `blobs`): LIBSVM orders the classes by
first appearance and we by value, so the +1 side, LIBSVM's initial alpha and the
tie-breaks differ and the two runs take different paths to the same optimum (the
benchmark prints the agreement at 1e-3).
"""

from __future__ import annotations

import ctypes
import functools
import os
import tempfile
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn import datasets as skdata
from sklearn import svm as sksvm

from solvers.formats import libsvm_model_text, read_libsvm_model_text
from solvers.kernels import KernelModel
from solvers.models import model_from_bytes, model_to_bytes
from solvers.params import (
    FORMULATIONS,
    LIBSVM_FORMULATIONS,
    SOLVERS,
    ParamError,
    formulations_for,
    task_of,
    validate_params,
)
from solvers.result import FitResult
from solvers.svmlight import load_svmlight
from solvers.train import fit
from testkit.bundled import scale_columns
from testkit.datasets import load_local
from tests.solvers.naive_kernels import kernel_matrix, libsvm_train
from tests.support import SHARED_DATA

EPS = 1e-8
SVM_TYPE = {"c_svc": 0, "nu_svc": 1, "one_class": 2, "epsilon_svr": 3, "nu_svr": 4}


# --------------------------------------------------------------------------------------
# data: bundled classification sets, real regression sets, generated data


def _csr(features: np.ndarray) -> sp.csr_matrix:
    matrix = sp.csr_matrix(features)
    matrix.indices = matrix.indices.astype(np.int32)
    return matrix


@functools.cache
def regression_set(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """Real-valued targets, standardised (so that epsilon means the same on each), features
    scaled to [-1, 1]: scikit-learn's diabetes (442 x 10) and linnerud (20 x 3, target
    Weight), breast_cancer's "mean area" from its other 29 columns (569 x 29), and a
    generated Friedman #1 set (300 x 10)."""
    if name == "diabetes":
        features, target = skdata.load_diabetes(return_X_y=True)
    elif name == "linnerud":
        features, targets = skdata.load_linnerud(return_X_y=True)
        target = targets[:, 0]
    elif name == "cancer_area":
        raw = skdata.load_breast_cancer().data
        features, target = np.delete(raw, 3, axis=1), raw[:, 3]
    elif name == "friedman":
        features, target = skdata.make_friedman1(n_samples=300, noise=0.5, random_state=0)
    else:
        raise KeyError(name)
    target = (target - target.mean()) / target.std()
    return _csr(scale_columns(np.asarray(features, dtype=np.float64))), target


@functools.cache
def classification_set(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """Bundled sets (testkit.bundled: scaled to [-1, 1]); digits: its first 600 rows;
    blobs: generated, 2 classes."""
    if name == "digits":
        X, y = load_local("digits")
        return sp.csr_matrix(X[:600]), y[:600]
    if name == "blobs":
        features, labels = skdata.make_classification(
            n_samples=400, n_features=8, n_informative=5, flip_y=0.05, random_state=3)
        return _csr(scale_columns(features)), labels * 2.0 - 1.0
    return load_local(name)


@functools.cache
def shared_set(name: str, rows: int) -> tuple[sp.csr_matrix, np.ndarray]:
    parsed = load_svmlight(f"{SHARED_DATA}/{name}.xz")
    X, y = parsed.to_csr(), parsed.y
    return sp.csr_matrix(X[:rows]), y[:rows]


# --------------------------------------------------------------------------------------
# the references


def libsvm_options(formulation: str, gamma: float, C: float = 1.0, nu: float = 0.5,
                   epsilon: float = 0.1, eps: float = EPS) -> str:
    return (f"-s {SVM_TYPE[formulation]} -t 2 -g {gamma!r} -c {C!r} -n {nu!r} "
            f"-p {epsilon!r} -e {eps!r} -m 200")


def model_objective(model: KernelModel, X: Any, y: np.ndarray | None, sv_rows: np.ndarray,
                    formulation: str, epsilon: float = 0.0) -> float:
    """The dual objective in LIBSVM's convention, from a two-class / one-class /
    regression model's support vectors (coefficients c, training rows `sv_rows`):
    nu_svc 1/2 c'Kc (LIBSVM's obj / r^2), one_class 1/2 c'Kc, epsilon_svr
    1/2 c'Kc + epsilon |c|_1 - z'c, nu_svr 1/2 c'Kc - z'c, c_svc 1/2 c'Kc - |c|_1."""
    sv = model.support_vectors()
    K = kernel_matrix(sv, sv, model.kernel, model.gamma, model.coef0, model.degree)
    if not model.single_output:  # one-vs-one: the sum over the pairs
        return sum(_pair_objective(model, K, i, j, formulation)
                   for i in range(model.n_classes) for j in range(i + 1, model.n_classes))
    coef = model.sv_coef[0]
    quadratic = 0.5 * float(coef @ K @ coef)
    if formulation == "one_class":
        return quadratic
    assert y is not None
    linear = -float(y[sv_rows] @ coef)
    if formulation == "epsilon_svr":
        linear += epsilon * float(np.abs(coef).sum())
    return quadratic + linear


def _pair_objective(model: KernelModel, K: np.ndarray, i: int, j: int,
                    formulation: str) -> float:
    """Pair (i, j) of LIBSVM's layout: class i's coefficients in sv_coef[j - 1], class j's
    in sv_coef[i]."""
    starts = np.concatenate([[0], np.cumsum(model.n_sv)])
    block = np.r_[starts[i]:starts[i + 1], starts[j]:starts[j + 1]]
    coef = np.concatenate([model.sv_coef[j - 1, starts[i]:starts[i + 1]],
                           model.sv_coef[i, starts[j]:starts[j + 1]]])
    value = 0.5 * float(coef @ K[np.ix_(block, block)] @ coef)
    return value - float(np.abs(coef).sum()) if formulation == "c_svc" else value


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def agreement(ours: np.ndarray, theirs: np.ndarray) -> float:
    ours, theirs = np.ravel(ours), np.ravel(theirs)
    if np.allclose(ours, theirs, rtol=0, atol=1e-12):
        return 1.0
    return float(np.corrcoef(ours, theirs)[0, 1])


def fit_smo(X: Any, y: Any, **params: Any) -> FitResult:
    params.setdefault("eps", EPS)
    params.setdefault("kernel", "rbf")
    return fit(X, y, solver="smo", **params)


def check_against_libsvm(X: sp.csr_matrix, y: np.ndarray, formulation: str,
                         **params: Any) -> dict[str, float]:
    """Train ours and LIBSVM's; assert the certification figures; return them."""
    result = fit_smo(X, None if formulation == "one_class" else y,
                     formulation=formulation, **params)
    assert result.exit_reason == "converged"
    gamma = result.params["gamma"]
    options = libsvm_options(formulation, gamma, params.get("C", 1.0), params.get("nu", 0.5),
                             params.get("epsilon", 0.1))
    labels = np.ones(X.shape[0]) if formulation == "one_class" else y
    reference = libsvm_train(X, labels, options)
    assert "reaching max number of iterations" not in reference.output
    theirs = reference.kernel_model
    ours = result.model
    figures = {
        "objective_rel": relative(result.dual_objective, reference.objective),
        "n_sv": ours.n_support, "libsvm_n_sv": theirs.n_support,
        "n_sv_rel": relative(ours.n_support, theirs.n_support),
        "correlation": agreement(ours.decision_function(X), theirs.decision_function(X)),
        "max_value_diff": float(np.max(np.abs(ours.decision_function(X)
                                              - theirs.decision_function(X)))),
    }
    # recomputed from both models alike (LIBSVM's SVs of a one-class or regression model
    # are in training order: get_sv_indices gives their rows)
    sv_theirs = np.array(reference.model.get_sv_indices(), dtype=np.int64) - 1
    mine = model_objective(ours, X, y, ours.sv_rows, formulation, params.get("epsilon", 0.1))
    other = model_objective(theirs, X, y, sv_theirs, formulation, params.get("epsilon", 0.1))
    figures["recomputed_rel"] = relative(mine, other)
    assert figures["recomputed_rel"] < 1e-6, figures
    # LIBSVM prints "obj = %f": 6 decimals, half a unit of rounding per binary problem
    printed = 5e-7 * len(result.per_output) / max(abs(reference.objective), 1e-300)
    assert figures["objective_rel"] < 1e-6 + printed, figures
    assert figures["n_sv_rel"] <= 0.01, figures
    assert figures["correlation"] >= 0.99999, figures
    return figures


# --------------------------------------------------------------------------------------
# the registry


def test_every_formulation_has_a_task_and_smo_trains_libsvms() -> None:
    assert SOLVERS["smo"].formulations == LIBSVM_FORMULATIONS
    assert {f: FORMULATIONS[f].task for f in FORMULATIONS} == {
        "c_svc": "classification", "nu_svc": "classification", "one_class": "outlier",
        "epsilon_svr": "regression", "nu_svr": "regression",
        "crammer_singer": "classification"}  # LIBLINEAR -s 4 (solvers/linear_tasks.py)
    for name in LIBSVM_FORMULATIONS:
        applied = validate_params("smo", {"formulation": name})
        assert task_of("smo", applied) == FORMULATIONS[name].task
    assert task_of("dcd", validate_params("dcd", {})) == "classification"
    # (auto reaches the linear ones: solvers/auto.py)
    assert formulations_for("regression") == {"smo": ["epsilon_svr", "nu_svr"],
                                              "linear_svr": ["epsilon_svr"],
                                              "auto": ["epsilon_svr"]}
    assert formulations_for("outlier") == {"smo": ["one_class"],
                                           "linear_one_class": ["one_class"],
                                           "auto": ["one_class"]}
    assert "dcd" in formulations_for("classification")
    assert formulations_for("classification")["crammer_singer"] == ["crammer_singer"]


def test_parameters_of_another_formulation_are_refused() -> None:
    with pytest.raises(ParamError, match="nu is not a parameter of formulation 'c_svc'"):
        validate_params("smo", {"nu": 0.3})
    # the applied parameters of a fit, passed back whole (the workflow, a search): accepted
    applied = validate_params("smo", {"formulation": "epsilon_svr", "epsilon": 0.3})
    assert validate_params("smo", applied)["epsilon"] == 0.3
    with pytest.raises(ParamError, match="epsilon is not a parameter"):
        validate_params("smo", {"formulation": "nu_svr", "epsilon": 0.3})
    with pytest.raises(ParamError, match="class_weight applies to classification"):
        validate_params("smo", {"formulation": "epsilon_svr", "class_weight": {"1": 2.0}})
    for bad in (0.0, 1.5):
        with pytest.raises(ParamError, match="nu must be"):
            validate_params("smo", {"formulation": "nu_svc", "nu": bad})
    assert validate_params("smo", {"formulation": "nu_svc", "nu": 1.0})["nu"] == 1.0


def test_infeasible_nu_is_libsvms_error() -> None:
    X, y = classification_set("cancer")  # 212 / 357: nu <= 2 * 212 / 569 = 0.745
    with pytest.raises(ParamError, match=r"specified nu is infeasible.*0\.745"):
        fit_smo(X, y, formulation="nu_svc", nu=0.8)
    with pytest.raises(ValueError, match="specified nu is infeasible"):
        libsvm_train(X, y, libsvm_options("nu_svc", 0.1, nu=0.8))
    assert fit_smo(X, y, formulation="nu_svc", nu=0.74, eps=1e-3).exit_reason == "converged"


def test_sample_weight_is_refused_where_a_solver_cannot_use_it() -> None:
    X, y = classification_set("cancer")
    with pytest.raises(ParamError, match="takes no sample_weight"):
        fit(X, y, solver="acf", sample_weight=np.ones(X.shape[0]))
    with pytest.raises(ValueError, match="one weight per row"):
        fit_smo(X, y, sample_weight=np.ones(3))
    with pytest.raises(ValueError, match=">= 0"):
        fit_smo(X, y, sample_weight=-np.ones(X.shape[0]))


# --------------------------------------------------------------------------------------
# each formulation against LIBSVM 3.37, three real sets each and generated data


@pytest.mark.parametrize(("name", "nu"), [
    ("cancer", 0.3), ("wine", 0.4), ("digits", 0.2), ("blobs", 0.5)])
def test_nu_svc_matches_libsvm(name: str, nu: float) -> None:
    X, y = classification_set(name)
    check_against_libsvm(X, y, "nu_svc", nu=nu)


@pytest.mark.parametrize(("name", "nu"), [
    ("cancer", 0.1), ("wine", 0.3), ("digits", 0.05), ("blobs", 0.5)])
def test_one_class_matches_libsvm(name: str, nu: float) -> None:
    X, y = classification_set(name)
    figures = check_against_libsvm(X, y, "one_class", nu=nu)
    assert figures["n_sv"] >= nu * X.shape[0]  # nu: a lower bound on the SV fraction


@pytest.mark.parametrize(("name", "C", "epsilon"), [
    ("diabetes", 1.0, 0.2), ("cancer_area", 10.0, 0.05), ("linnerud", 1.0, 0.1),
    ("friedman", 5.0, 0.1)])
def test_epsilon_svr_matches_libsvm(name: str, C: float, epsilon: float) -> None:
    X, y = regression_set(name)
    check_against_libsvm(X, y, "epsilon_svr", C=C, epsilon=epsilon)


@pytest.mark.parametrize(("name", "C", "nu"), [
    ("diabetes", 1.0, 0.5), ("cancer_area", 10.0, 0.3), ("linnerud", 1.0, 0.6),
    ("friedman", 5.0, 0.4)])
def test_nu_svr_matches_libsvm(name: str, C: float, nu: float) -> None:
    X, y = regression_set(name)
    result = fit_smo(X, y, formulation="nu_svr", C=C, nu=nu)
    assert result.per_output[0]["epsilon"] > 0  # LIBSVM's "epsilon = -r"
    check_against_libsvm(X, y, "nu_svr", C=C, nu=nu)


# --------------------------------------------------------------------------------------
# instance weights against scikit-learn's LIBSVM (sample_weight)


def _weights(n: int, seed: int) -> np.ndarray:
    """Positive weights (scikit-learn's support_ indexes the rows left after it drops
    those of weight 0, so a zero weight is checked on its own, below)."""
    return np.random.default_rng(seed).uniform(0.2, 3.0, n)


@pytest.mark.parametrize("formulation", ["c_svc", "nu_svc", "one_class", "epsilon_svr",
                                         "nu_svr"])
def test_rows_of_weight_zero_are_left_out(formulation: str) -> None:
    X, y = (regression_set("diabetes") if "svr" in formulation
            else classification_set("blobs"))
    weights = _weights(X.shape[0], 5)
    weights[::7] = 0.0
    kept = weights > 0
    target = None if formulation == "one_class" else y
    weighted = fit_smo(X, target, formulation=formulation, sample_weight=weights)
    dropped = fit_smo(X[kept], None if target is None else y[kept],
                      formulation=formulation, sample_weight=weights[kept])
    np.testing.assert_array_equal(weighted.model.sv_coef, dropped.model.sv_coef)
    np.testing.assert_array_equal(weighted.model.rho, dropped.model.rho)
    np.testing.assert_array_equal(weighted.model.sv_rows,
                                  np.flatnonzero(kept)[dropped.model.sv_rows])


def _check_against_sklearn(result: FitResult, reference: Any, X: sp.csr_matrix,
                           y: np.ndarray | None, formulation: str,
                           epsilon: float = 0.0) -> None:
    ours = result.model
    assert result.exit_reason == "converged"
    mine = model_objective(ours, X, y, ours.sv_rows, formulation, epsilon)
    sv = np.asarray(reference.support_)
    dual_coef = reference.dual_coef_
    theirs_coef = np.asarray(dual_coef.toarray() if sp.issparse(dual_coef) else dual_coef)[0]
    K = kernel_matrix(X[sv], X[sv], "rbf", ours.gamma)
    other = 0.5 * float(theirs_coef @ K @ theirs_coef)
    if formulation == "c_svc":
        other -= float(np.abs(theirs_coef).sum())
    elif formulation in ("epsilon_svr", "nu_svr"):
        assert y is not None
        other += -float(y[sv] @ theirs_coef) + epsilon * float(np.abs(theirs_coef).sum())
    assert relative(mine, other) < 1e-6, (mine, other)
    assert relative(ours.n_support, sv.shape[0]) <= 0.01, (ours.n_support, sv.shape[0])
    if formulation in ("epsilon_svr", "nu_svr"):
        theirs_values = reference.predict(X)
    else:
        theirs_values = reference.decision_function(X)
    assert agreement(ours.decision_function(X), theirs_values) >= 0.99999


@pytest.mark.parametrize("name", ["cancer", "blobs"])
def test_weighted_c_svc_matches_sklearn(name: str) -> None:
    X, y = classification_set(name)
    weights = _weights(X.shape[0], 1)
    result = fit_smo(X, y, C=2.0, gamma=0.2, sample_weight=weights)
    reference = sksvm.SVC(C=2.0, gamma=0.2, tol=EPS).fit(X, y, sample_weight=weights)
    _check_against_sklearn(result, reference, X, y, "c_svc")
    # a weight of 2 is C doubled for that row: the same as a class weight on all rows
    doubled = fit_smo(X, y, C=2.0, gamma=0.2, sample_weight=np.full(X.shape[0], 2.0))
    plain = fit_smo(X, y, C=4.0, gamma=0.2)
    assert relative(doubled.dual_objective, plain.dual_objective) < 1e-9


@pytest.mark.parametrize("name", ["diabetes", "friedman"])
def test_weighted_epsilon_svr_matches_sklearn(name: str) -> None:
    X, y = regression_set(name)
    weights = _weights(X.shape[0], 2)
    result = fit_smo(X, y, formulation="epsilon_svr", C=3.0, epsilon=0.1, gamma=0.3,
                     sample_weight=weights)
    reference = sksvm.SVR(C=3.0, epsilon=0.1, gamma=0.3, tol=EPS).fit(
        X, y, sample_weight=weights)
    _check_against_sklearn(result, reference, X, y, "epsilon_svr", 0.1)


def test_weighted_nu_formulations_match_sklearn() -> None:
    X, y = classification_set("blobs")
    weights = _weights(X.shape[0], 3)
    result = fit_smo(X, y, formulation="nu_svc", nu=0.3, gamma=0.2, sample_weight=weights)
    reference = sksvm.NuSVC(nu=0.3, gamma=0.2, tol=EPS).fit(X, y, sample_weight=weights)
    # scikit-learn's NuSVC keeps LIBSVM's 1/r scaling of the coefficients
    _check_against_sklearn(result, reference, X, y, "nu_svc")
    result = fit_smo(X, None, formulation="one_class", nu=0.2, gamma=0.2,
                     sample_weight=weights)
    reference = sksvm.OneClassSVM(nu=0.2, gamma=0.2, tol=EPS).fit(X, sample_weight=weights)
    _check_against_sklearn(result, reference, X, None, "one_class")
    Xr, yr = regression_set("diabetes")
    weights = _weights(Xr.shape[0], 4)
    result = fit_smo(Xr, yr, formulation="nu_svr", C=2.0, nu=0.4, gamma=0.3,
                     sample_weight=weights)
    reference = sksvm.NuSVR(C=2.0, nu=0.4, gamma=0.3, tol=EPS).fit(Xr, yr,
                                                                   sample_weight=weights)
    _check_against_sklearn(result, reference, Xr, yr, "nu_svr")


# --------------------------------------------------------------------------------------
# the model: predictions, storage, LIBSVM's model file


def test_one_class_labels_inliers_and_outliers() -> None:
    X, _ = classification_set("blobs")
    model = fit_smo(X, None, formulation="one_class", nu=0.1).model
    labels, values = model.predict(X)
    assert set(np.unique(labels)) == {-1.0, 1.0}
    assert np.array_equal(labels, np.where(values > 0, 1.0, -1.0))
    assert model.task == "outlier" and model.classes.tolist() == [-1.0, 1.0]
    # nu: an upper bound on the fraction of training outliers (up to LIBSVM's slack)
    assert np.mean(labels < 0) <= 0.1 + 2 / X.shape[0]


@pytest.mark.parametrize(("formulation", "params"), [
    ("epsilon_svr", {"epsilon": 0.1}), ("nu_svr", {"nu": 0.3})])
def test_regression_computes_each_kernel_row_once(formulation: str,
                                                  params: dict[str, float]) -> None:
    """Variables t and n + t of a regression are both x_t: one cached kernel row of x_t
    serves both (LIBSVM's SVR_Q), so with a cache that holds every row no kernel value is
    computed twice - at most n^2 of them -, and the solution is LIBSVM's."""
    X, y = regression_set("diabetes")
    n = X.shape[0]
    result = fit_smo(X, y, formulation=formulation, C=10.0, cache_mb=200.0, **params)
    assert result.exit_reason == "converged"
    assert 0 < result.per_output[0]["kernel_evaluations"] <= n * n
    check_against_libsvm(X, y, formulation, C=10.0, **params)


def test_regression_predicts_values() -> None:
    X, y = regression_set("diabetes")
    model = fit_smo(X, y, formulation="epsilon_svr", C=1.0, epsilon=0.2).model
    values, decision = model.predict(X)
    assert np.array_equal(values, decision) and values.shape == (X.shape[0],)
    assert model.task == "regression" and model.n_classes == 0
    assert float(np.corrcoef(values, y)[0, 1]) > 0.7


@pytest.mark.parametrize("formulation", ["nu_svc", "one_class", "epsilon_svr", "nu_svr"])
def test_models_survive_storage(formulation: str) -> None:
    X, y = (regression_set("linnerud") if "svr" in formulation
            else classification_set("wine"))
    model = fit_smo(X, y if formulation != "one_class" else None,
                    formulation=formulation).model
    again = model_from_bytes(model.kind, model_to_bytes(model))
    assert isinstance(again, KernelModel) and again.svm_type == formulation
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))


def libsvm_predict(loaded: Any, X: sp.csr_matrix) -> tuple[list[float], list[list[float]]]:
    """LIBSVM's svm_predict_values row by row (what svm-predict does). libsvm-official
    3.37's Python svm_predict sizes the decision-value buffer 1 for nu_svc (it lists NU_SVC
    where NU_SVR is meant), which overflows for more than two classes."""
    from libsvm.svm import gen_svm_nodearray, libsvm

    nr_class = loaded.get_nr_class()
    single = loaded.get_svm_type() in (2, 3, 4)
    n_values = 1 if single else nr_class * (nr_class - 1) // 2
    buffer = (ctypes.c_double * n_values)()
    labels, values = [], []
    for i in range(X.shape[0]):
        row = slice(X.indptr[i], X.indptr[i + 1])
        nodes, _ = gen_svm_nodearray((X.indices[row], X.data[row]))
        labels.append(libsvm.svm_predict_values(loaded, nodes, buffer))
        values.append(list(buffer[:n_values]))
    return labels, values


@pytest.mark.parametrize(("formulation", "name"), [
    ("nu_svc", "wine"), ("nu_svc", "cancer"), ("one_class", "cancer"),
    ("epsilon_svr", "diabetes"), ("nu_svr", "diabetes")])
def test_exported_models_predict_identically_in_libsvm(formulation: str, name: str) -> None:
    from libsvm import svmutil

    X, y = regression_set(name) if "svr" in formulation else classification_set(name)
    model = fit_smo(X, None if formulation == "one_class" else y, formulation=formulation,
                    eps=1e-3).model
    text = libsvm_model_text(model)
    assert text.startswith(f"svm_type {formulation}\n")
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.txt")
        with open(path, "w") as handle:
            handle.write(text)
        loaded = svmutil.svm_load_model(path)
    labels, values = libsvm_predict(loaded, X)
    ours_labels, ours_values = model.predict(X)
    if model.task == "regression":  # the label is the value
        np.testing.assert_allclose(np.array(labels), ours_labels, rtol=1e-9, atol=1e-9)
    else:
        assert np.array_equal(np.array(labels), ours_labels)
    if model.single_output:
        expected = ours_values[:, None]
    else:
        expected = -ours_values[:, None] if model.n_classes == 2 else ours_values
    np.testing.assert_allclose(np.array(values), expected, rtol=1e-9, atol=1e-9)
    back = read_libsvm_model_text(text, n_features=X.shape[1])
    assert back.svm_type == formulation
    np.testing.assert_allclose(back.decision_function(X), model.decision_function(X),
                               rtol=1e-12, atol=1e-12)


def test_threads_and_warm_start_give_the_cold_result() -> None:
    X, y = regression_set("cancer_area")
    one = fit_smo(X, y, formulation="nu_svr", C=5.0, nu=0.3)
    two = fit_smo(X, y, formulation="nu_svr", C=5.0, nu=0.3, threads=2)
    np.testing.assert_array_equal(one.model.sv_coef, two.model.sv_coef)
    small = fit_smo(X, y, formulation="epsilon_svr", C=1.0, keep_solver_state=True)
    warm = fit(X, y, solver="smo", formulation="epsilon_svr", C=4.0, eps=EPS,
               warm_start=small)
    cold = fit_smo(X, y, formulation="epsilon_svr", C=4.0)
    assert warm.per_output[0]["warm_start"] is True
    assert relative(warm.dual_objective, cold.dual_objective) < 1e-6


# --------------------------------------------------------------------------------------
# the shared LIBSVM sets (parity)


@pytest.mark.parity
@pytest.mark.parametrize(("name", "rows", "nu"), [
    ("heart_scale", 270, 0.3), ("breast-cancer_scale", 683, 0.3),
    # mushrooms' first 1500 rows: 177 / 1323, nu <= 0.236 is feasible
    ("mushrooms", 1500, 0.2), ("a9a", 1500, 0.3)])
@pytest.mark.parametrize("formulation", ["nu_svc", "one_class"])
def test_shared_sets_match_libsvm(name: str, rows: int, nu: float, formulation: str) -> None:
    X, y = shared_set(name, rows)
    check_against_libsvm(X, y, formulation, nu=nu)


@pytest.mark.parity
@pytest.mark.parametrize(("name", "rows"), [
    ("heart_scale", 270), ("breast-cancer_scale", 683), ("a9a", 1000)])
@pytest.mark.parametrize("formulation", ["epsilon_svr", "nu_svr"])
def test_shared_sets_as_regression_match_libsvm(name: str, rows: int,
                                                formulation: str) -> None:
    """The shared sets are classification sets: their +-1 labels as real targets (what
    svm-train -s 3 / -s 4 does with them). Not mushrooms: its rows are separable, the
    nu-SVR tube shrinks to nothing and LIBSVM itself stops at its 10^7 iterations (483 s
    at eps 1e-6 on the first 1500 rows)."""
    X, y = shared_set(name, rows)
    params = {"C": 1.0, "epsilon": 0.5} if formulation == "epsilon_svr" else {
        "C": 1.0, "nu": 0.5}
    check_against_libsvm(X, y, formulation, **params)


# --------------------------------------------------------------------------------------
# probabilities


def test_nu_svc_probabilities_are_platts() -> None:
    X, y = classification_set("wine")
    result = fit_smo(X, y, formulation="nu_svc", nu=0.3, probability=True, eps=1e-3)
    probabilities = result.model.predict_with_probabilities(X)[2]
    assert probabilities.shape == (X.shape[0], 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-9)
    assert float(np.mean(result.model.classes[np.argmax(probabilities, axis=1)] == y)) > 0.9


@pytest.mark.parametrize("formulation", ["epsilon_svr", "nu_svr"])
def test_svr_probability_is_libsvms_laplace_width(formulation: str) -> None:
    """LIBSVM's -b 1 for regression: sigma from 5-fold cross-validated residuals. The folds
    are random on both sides (LIBSVM's rand, our seeded permutation), so the widths agree
    only as two estimates of one quantity; the formula itself is checked exactly on our
    own out-of-fold predictions."""
    from solvers.workflow import laplace_sigma

    X, y = regression_set("diabetes")
    params = {"C": 1.0, "epsilon": 0.2} if formulation == "epsilon_svr" else {
        "C": 1.0, "nu": 0.5}
    result = fit_smo(X, y, formulation=formulation, probability=True, eps=1e-3, **params)
    calibration = result.model.calibration
    assert calibration is not None and calibration.layout == "laplace"
    sigma = calibration.sigma
    assert sigma is not None and sigma > 0
    assert result.model.predict_with_probabilities(X)[2] is None
    text = libsvm_model_text(result.model.estimator, calibration.A, calibration.B)
    assert f"probA {sigma:.17g}\n" in text
    reference = libsvm_train(X, y, libsvm_options(formulation, result.params["gamma"],
                                                  eps=1e-3, **params) + " -b 1")
    theirs = reference.model.get_svr_probability()
    assert abs(sigma - theirs) / theirs < 0.15, (sigma, theirs)
    residual = np.array([3.0, -1.0, 0.5, 100.0])
    # mean |r| = 26.125, std = 36.9: 100 is kept (< 5 std); LIBSVM's formula
    assert laplace_sigma(residual, np.zeros(4)) == pytest.approx(26.125)
    assert laplace_sigma(np.array([1.0] * 99 + [1000.0]), np.zeros(100)) == 1.0


def test_models_stored_before_formulations_read_as_c_svc() -> None:
    X, y = classification_set("wine")
    model = fit_smo(X, y, eps=1e-3).model
    assert model.svm_type == "c_svc"
    arrays = model.to_arrays()
    del arrays["svm_type"]  # a model stored before svm_type existed
    again = KernelModel.from_arrays(arrays)
    assert again.svm_type == "c_svc"
    np.testing.assert_array_equal(again.decision_function(X), model.decision_function(X))
    with pytest.raises(ValueError, match="unknown svm_type"):
        KernelModel.from_arrays({**arrays, "svm_type": np.array(9, dtype=np.uint8)})
