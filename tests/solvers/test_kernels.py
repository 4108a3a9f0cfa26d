"""Kernel functions, KernelModel (layout, sign conventions, storage) and the LIBSVM model
format: every compiled kernel against a dense NumPy reference, and exported models against
LIBSVM's own svm_predict."""

from __future__ import annotations

import io
import os
import tempfile
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import kernels, smo
from solvers.formats import libsvm_model_text, read_libsvm_model_text
from solvers.inputs import as_csr_arrays
from solvers.kernels import KernelModel, decision_values, kernel_column, pair_classes
from solvers.smo.columns import _fill_column
from tests.solvers.naive_kernels import kernel_matrix, raw_decision_values

KERNELS = ("linear", "poly", "rbf", "sigmoid")
KERNEL_SETTINGS: dict[str, dict[str, Any]] = {
    "linear": {}, "poly": {"gamma": 0.3, "coef0": 0.7, "degree": 3}, "rbf": {"gamma": 0.4},
    "sigmoid": {"gamma": 0.2, "coef0": -0.3},
}


def sparse_rows(n_rows: int, n_features: int, density: float, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.normal(size=(n_rows, n_features)) * (rng.random((n_rows, n_features)) < density)
    dense[0] = 0.0  # an empty row
    return sp.csr_matrix(dense)


def random_model(n_classes: int, multiclass: str, kernel: str = "rbf", seed: int = 0,
                 n_features: int = 6) -> KernelModel:
    """A model with random coefficients in the stated layout (not a trained one)."""
    rng = np.random.default_rng(seed)
    n_sv = rng.integers(1, 5, size=n_classes)
    total = int(n_sv.sum())
    svs = sparse_rows(total, n_features, 0.6, seed + 1)
    rows = n_classes if (multiclass == "ovr" and n_classes > 2) else n_classes - 1
    n_outputs = 1 if n_classes == 2 else (
        n_classes if multiclass == "ovr" else n_classes * (n_classes - 1) // 2)
    settings = KERNEL_SETTINGS[kernel]
    return KernelModel(
        classes=np.sort(rng.choice(np.arange(-5.0, 20.0), size=n_classes, replace=False)),
        kernel=kernel, gamma=settings.get("gamma", 1.0), degree=settings.get("degree", 3),
        coef0=settings.get("coef0", 0.0), multiclass=multiclass, n_features=n_features,
        sv_data=svs.data, sv_indices=svs.indices, sv_indptr=svs.indptr,
        sv_coef=rng.normal(size=(rows, total)), rho=rng.normal(size=n_outputs), n_sv=n_sv,
        sv_rows=np.arange(total),
    )


# --------------------------------------------------------------------------------------
# kernel values


@pytest.mark.parametrize("kernel", KERNELS)
def test_kernel_column_matches_dense(kernel: str) -> None:
    X = sparse_rows(60, 9, 0.4, seed=3)
    settings = KERNEL_SETTINGS[kernel]
    reference = kernel_matrix(X, X, kernel, **settings)
    for j in (0, 7, 59):
        np.testing.assert_allclose(kernel_column(X, j, kernel, threads=1, **settings),
                                   reference[:, j], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(kernel_column(X, 7, kernel, threads=2, **settings),
                               reference[:, 7], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("density", [0.3, 0.9])  # scattered sparse rows / dense rows
@pytest.mark.parametrize("kernel", KERNELS)
def test_training_columns_match_dense(kernel: str, density: float) -> None:
    """smo keeps its own copy of the kernel code: Q_ij = y_i y_j K_ij, stored as float32."""
    X = sparse_rows(50, 7, density, seed=4)
    arrays = as_csr_arrays(X)
    settings: dict[str, Any] = {"gamma": 1.0, "coef0": 0.0, "degree": 3,
                                **KERNEL_SETTINGS[kernel]}
    params = (kernels.KERNEL_CODES[kernel], settings["gamma"], settings["coef0"],
              settings["degree"])
    y = np.where(np.arange(50) % 3 == 0, 1, -1).astype(np.int8)
    rows = np.arange(50, dtype=np.int64)[::-1].copy()  # positions != rows
    state = smo.SmoState(arrays, kernels.row_sq_norms(arrays.data, arrays.indptr), rows, y,
                          np.ones(50), params, 1.0, chunks=1)
    assert state.dense_rows == (density > 0.5)
    K = kernel_matrix(X, X, kernel, **KERNEL_SETTINGS[kernel])
    Q = (y[:, None] * y[None, :]) * K[np.ix_(rows, rows)]
    np.testing.assert_allclose(state.positions.diagonal, np.diag(K)[rows], rtol=1e-12)
    for i in (0, 13, 49):
        column = np.zeros(50, dtype=np.float32)
        _fill_column(state.kernel_args[0], params, state.positions, i, 0, 50, column,
                         state.kernel_args[4].parallel)
        np.testing.assert_allclose(column, Q[:, i], rtol=2e-7, atol=1e-7)


def test_vectorised_rbf_exp_matches_libm() -> None:
    """The rbf columns' exp (range reduction + polynomial) against NumPy's, in float64,
    over the whole range an rbf argument takes (and beyond: clamped to 0 in float32)."""
    from solvers.smo.columns import _rbf_values_checked

    arguments = np.concatenate([-np.geomspace(1e-12, 800.0, 20_000), [0.0, 1e-3, 0.5]])
    exact = np.exp(np.maximum(arguments, -708.0))
    ours = _rbf_values_checked(arguments)
    np.testing.assert_allclose(ours, exact, rtol=5e-16, atol=0)


# --------------------------------------------------------------------------------------
# decision values and labels


@pytest.mark.parametrize(("n_classes", "multiclass"), [(2, "ovo"), (4, "ovo"), (4, "ovr")])
@pytest.mark.parametrize("kernel", KERNELS)
def test_decision_values_match_dense(n_classes: int, multiclass: str, kernel: str) -> None:
    model = random_model(n_classes, multiclass, kernel, seed=n_classes)
    X = sparse_rows(150, 6, 0.5, seed=9)  # > one block of rows: several parallel items
    reference = raw_decision_values(model, X)
    for dot in ("scatter", "merge"):
        for threads in (1, 2):
            raw = kernels.raw_decision_values(model, X, threads=threads, dot=dot)
            np.testing.assert_allclose(raw, reference, rtol=1e-10, atol=1e-10)
    labels, values = model.predict(X)
    if n_classes == 2:
        np.testing.assert_allclose(values, -reference[:, 0], rtol=1e-10, atol=1e-10)
        assert np.array_equal(labels, np.where(reference[:, 0] > 0, model.classes[0],
                                               model.classes[1]))
    else:
        np.testing.assert_allclose(values, reference, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(decision_values(model, X), values)
    np.testing.assert_array_equal(model.decision_function(X.toarray()), values)


def test_binary_values_are_positive_for_the_larger_class() -> None:
    model = random_model(2, "ovo", seed=5)
    labels, values = model.predict(sparse_rows(40, 6, 0.6, seed=6))
    assert values.shape == (40,)
    assert np.all(labels[values > 0] == model.classes[1])
    assert np.all(labels[values < 0] == model.classes[0])


def test_ovo_voting_ties_go_to_the_smaller_class() -> None:
    """Three classes, each pair won by a different class: one vote each -> classes[0]."""
    model = random_model(3, "ovo", seed=2)
    raw = np.array([[1.0, -1.0, 1.0],  # (0,1)->0, (0,2)->2, (1,2)->1: a three-way tie
                    [-1.0, -1.0, -1.0],  # 1, 2, 2 -> class 2
                    [-1.0, 1.0, 1.0]])  # 1, 0, 1 -> class 1
    assert np.array_equal(model._labels(raw), model.classes[[0, 2, 1]])
    first, second = pair_classes(4)
    assert list(zip(first, second, strict=True)) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3),
                                                     (2, 3)]


def test_ovr_labels_are_the_argmax() -> None:
    model = random_model(4, "ovr", seed=3)
    X = sparse_rows(30, 6, 0.6, seed=8)
    labels, values = model.predict(X)
    assert values.shape == (30, 4)
    assert np.array_equal(labels, model.classes[np.argmax(values, axis=1)])


def test_query_features_beyond_the_model_count_in_the_rbf_norm() -> None:
    """As LIBSVM: a query feature no support vector has adds to ||x - sv||^2."""
    model = random_model(2, "ovo", "rbf", seed=7, n_features=6)
    X = sparse_rows(20, 9, 0.6, seed=10)
    np.testing.assert_allclose(kernels.raw_decision_values(model, X),
                               raw_decision_values(model, X), rtol=1e-10, atol=1e-10)


def test_empty_query() -> None:
    model = random_model(3, "ovo", seed=1)
    labels, values = model.predict(sp.csr_matrix((0, 6)))
    assert labels.shape == (0,) and values.shape == (0, 3)


# --------------------------------------------------------------------------------------
# storage


@pytest.mark.parametrize(("n_classes", "multiclass", "kernel"),
                         [(2, "ovo", "rbf"), (4, "ovo", "poly"), (3, "ovr", "sigmoid")])
def test_arrays_round_trip_through_npz(n_classes: int, multiclass: str, kernel: str) -> None:
    model = random_model(n_classes, multiclass, kernel, seed=11)
    arrays = model.to_arrays()
    assert all(isinstance(v, np.ndarray) and v.dtype.kind in "iuf" for v in arrays.values())
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        restored = KernelModel.from_arrays(loaded)
    assert (restored.kernel, restored.multiclass, restored.degree) == (
        model.kernel, model.multiclass, model.degree)
    X = sparse_rows(25, 6, 0.5, seed=12)
    for got, expected in zip(restored.predict(X), model.predict(X), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_from_arrays_refuses_inconsistent_input() -> None:
    arrays = random_model(3, "ovo", seed=4).to_arrays()
    with pytest.raises(ValueError, match="format"):
        KernelModel.from_arrays({**arrays, "format_version": np.array(99)})
    with pytest.raises(ValueError, match="inconsistent"):
        KernelModel.from_arrays({**arrays, "rho": np.zeros(2)})
    with pytest.raises(ValueError, match="unknown"):
        KernelModel.from_arrays({**arrays, "kernel": np.array(9, dtype=np.uint8)})


# --------------------------------------------------------------------------------------
# LIBSVM's model format


def libsvm_predict(text: str, X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    from libsvm import svmutil

    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.txt")
        with open(path, "w") as handle:
            handle.write(text)
        loaded = svmutil.svm_load_model(path)
    labels, _, values = svmutil.svm_predict([], X, loaded, "-q")
    return np.array(labels), np.array(values)


@pytest.mark.parametrize(("n_classes", "kernel"), [(2, "rbf"), (2, "linear"), (3, "poly"),
                                                   (4, "sigmoid"), (5, "rbf")])
def test_libsvm_loads_the_model_and_predicts_the_same(n_classes: int, kernel: str) -> None:
    model = random_model(n_classes, "ovo", kernel, seed=20 + n_classes)
    model.classes = np.arange(n_classes, dtype=np.float64) * 3 - 2
    X = sparse_rows(80, 6, 0.5, seed=21)
    text = libsvm_model_text(model)
    labels, values = libsvm_predict(text, X)
    ours_labels, ours_values = model.predict(X)
    assert np.array_equal(labels, ours_labels)
    if n_classes == 2:  # LIBSVM's value is positive for its first label, classes[0]
        np.testing.assert_allclose(values[:, 0], -ours_values, rtol=1e-9, atol=1e-9)
    else:
        np.testing.assert_allclose(values, ours_values, rtol=1e-9, atol=1e-9)
    again = read_libsvm_model_text(text, n_features=6)
    np.testing.assert_allclose(again.sv_coef, model.sv_coef, rtol=0, atol=0)
    np.testing.assert_array_equal(again.predict(X)[1], ours_values)


def test_reading_reorders_labels_in_first_appearance_order() -> None:
    """LIBSVM orders labels by first appearance; reading converts to sorted classes: class
    blocks are reordered and pairs whose classes swap places change sign."""
    model = random_model(4, "ovo", "rbf", seed=30)
    model.classes = np.array([1.0, 2.0, 3.0, 4.0])
    X = sparse_rows(40, 6, 0.5, seed=31)
    file_labels = [3, 1, 4, 2]  # the same model, its classes renamed 1->3, 2->1, 3->4, 4->2
    renamed = libsvm_model_text(model).replace("label 1 2 3 4", "label 3 1 4 2")
    reread = read_libsvm_model_text(renamed, n_features=6)
    assert np.array_equal(reread.classes, [1.0, 2.0, 3.0, 4.0])
    labels, values = libsvm_predict(renamed, X)
    raw = kernels.raw_decision_values(reread, X)
    file_pairs = list(zip(*pair_classes(4), strict=True))
    order = np.argsort(file_labels)  # file class of each sorted class
    for p, (a, b) in enumerate(zip(*pair_classes(4), strict=True)):
        fa, fb = int(order[a]), int(order[b])
        q = file_pairs.index((min(fa, fb), max(fa, fb)))
        sign = 1.0 if fa < fb else -1.0
        np.testing.assert_allclose(raw[:, p], sign * values[:, q], rtol=1e-9, atol=1e-9)
    votes = np.zeros((40, 4), dtype=int)
    for p, (a, b) in enumerate(zip(*pair_classes(4), strict=True)):
        votes[np.arange(40), np.where(raw[:, p] > 0, a, b)] += 1
    unique_winner = (votes == votes.max(axis=1, keepdims=True)).sum(axis=1) == 1
    assert unique_winner.sum() > 10
    ours, _ = reread.predict(X)
    assert np.array_equal(labels[unique_winner], ours[unique_winner])


def test_ovr_and_fractional_labels_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="one-vs-rest"):
        libsvm_model_text(random_model(3, "ovr", seed=1))
    model = random_model(2, "ovo", seed=1)
    model.classes = np.array([0.5, 1.0])
    with pytest.raises(ValueError, match="integers"):
        libsvm_model_text(model)
