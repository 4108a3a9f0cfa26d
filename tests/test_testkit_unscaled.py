"""testkit.unscaled: seeded, factors log-uniform on [1e-2, 1e3], sparsity kept, the named
cases are binary problems that really are unscaled."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from testkit.datasets import load_dataset, load_local
from testkit.unscaled import (
    CASE_NAMES,
    HIGH,
    LOCAL_CASE_NAMES,
    LOW,
    binary_labels,
    factors,
    load_case,
    unscaled,
)


def sparse_sample(seed: int = 0, n: int = 300, d: int = 40) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng, dtype=np.float64)
    X.data = rng.uniform(-1.0, 1.0, size=X.data.shape[0])
    return X


def test_same_seed_same_matrix_other_seed_other_matrix() -> None:
    X = sparse_sample()
    a, b, c = unscaled(X, 7), unscaled(X, 7), unscaled(X, 8)
    assert a.data.tobytes() == b.data.tobytes()
    assert not np.array_equal(a.data, c.data)
    assert np.array_equal(factors(50, 3), factors(50, 3))
    assert not np.array_equal(factors(50, 3), factors(50, 4))


def test_factors_are_log_uniform_on_the_range() -> None:
    f = factors(20_000, 0)
    assert f.min() >= LOW and f.max() <= HIGH
    logs = np.log10(f)
    # log10 uniform on [-2, 3]: covers the range, mean 0.5, each unit interval ~1/5
    assert logs.min() < -1.99 and logs.max() > 2.99
    assert abs(logs.mean() - 0.5) < 0.05
    counts = np.histogram(logs, bins=5, range=(-2.0, 3.0))[0] / f.shape[0]
    assert np.all(np.abs(counts - 0.2) < 0.02)


def test_columns_are_multiplied_and_sparsity_is_kept() -> None:
    X = sparse_sample(1)
    X.data[::7] = 0.0  # explicitly stored zeros stay stored
    before = X.copy()
    Y = unscaled(X, 5)
    assert sp.isspmatrix_csr(Y) and Y.dtype == np.float64 and Y.shape == X.shape
    assert np.array_equal(Y.indptr, X.indptr) and np.array_equal(Y.indices, X.indices)
    f = factors(X.shape[1], 5)
    np.testing.assert_array_equal(Y.data, X.data * f[X.indices])
    np.testing.assert_allclose(Y.toarray(), X.toarray() * f[None, :], rtol=1e-15)
    # the input is untouched
    assert X.data.tobytes() == before.data.tobytes()


def test_dense_input_and_custom_range() -> None:
    X = np.ones((3, 4))
    Y = unscaled(X, 2, low=10.0, high=10.0)
    np.testing.assert_allclose(Y.toarray(), 10.0 * X, rtol=1e-14)
    with pytest.raises(ValueError):
        factors(3, 0, low=0.0)


def test_binary_labels() -> None:
    y = np.array([0.0, 3.0, 5.0, 3.0])
    assert binary_labels(y, 3).tolist() == [-1.0, 1.0, -1.0, 1.0]
    assert binary_labels(y).tolist() == [-1.0, -1.0, 1.0, -1.0]
    with pytest.raises(ValueError):
        binary_labels(y, 4)


@pytest.mark.parametrize("name", [*LOCAL_CASE_NAMES, *(
    pytest.param(name, marks=pytest.mark.parity) for name in CASE_NAMES)])
def test_named_cases_are_binary_unscaled_problems(name: str) -> None:
    X, y = load_case(name)
    assert sp.isspmatrix_csr(X) and X.dtype == np.float64 and X.has_sorted_indices
    assert set(np.unique(y)) == {-1.0, 1.0} and y.shape == (X.shape[0],)
    assert np.all(np.isfinite(X.data))
    column_max = np.asarray(abs(X).max(axis=0).todense()).ravel()
    used = column_max[column_max > 0]
    # scaled sets have every |value| <= 1: these do not, by design
    assert used.max() > 50.0
    assert load_case(name) is load_case(name)  # cached


def test_local_cases_are_built_as_documented() -> None:
    X, y = load_local("cancer")
    Xu, yu = load_case("cancer-x1")
    np.testing.assert_array_equal(Xu.toarray(), unscaled(X, 1).toarray())
    np.testing.assert_array_equal(yu, y)
    X, y = load_local("wine")
    Xw, yw = load_case("wine-x2")
    np.testing.assert_array_equal(Xw.toarray(), unscaled(X, 2).toarray())
    assert (yw == 1.0).sum() == (y == 3.0).sum() and Xw.shape == X.shape
    Xr, _yr = load_case("cancer_raw")
    np.testing.assert_array_equal(Xr.toarray(), load_local("cancer_raw")[0].toarray())
    Xo, _yo = load_case("onehot-5k-x4")
    assert Xo.shape == (5000, load_local("onehot")[0].shape[1])
    Xm, ym = load_case("madelon-like")
    assert Xm.shape == (600, 500) and Xm.nnz > 0.99 * 600 * 500
    assert set(np.unique(ym)) == {-1.0, 1.0}
    with pytest.raises(KeyError):
        load_case("nope")


@pytest.mark.parity
def test_cases_are_built_as_documented() -> None:
    X, y = load_dataset("heart_scale")
    Xu, yu = load_case("heart_scale-x1")
    np.testing.assert_array_equal(Xu.toarray(), unscaled(X, 1).toarray())
    np.testing.assert_array_equal(yu, np.where(y == 1.0, 1.0, -1.0))
    Xp, yp = load_case("pendigits-0")
    Xs, ys = load_dataset("pendigits")
    assert (yp == 1.0).sum() == (ys == 0).sum() and Xp.shape == Xs.shape
    Xa, _ya = load_case("a9a-5k-x4")
    assert Xa.shape == (5000, 123)
    with pytest.raises(KeyError):
        load_case("nope")
