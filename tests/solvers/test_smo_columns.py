"""SMO's kernel-column sources (solvers/smo/columns.py): dense rows, bit sets of 0/1 rows
(with the rbf table), a positional CSC and the row gather all give the same dot products,
so a fit is bit-for-bit the same whichever source is used, with 1 thread or 2, through
shrinking, the deferred G_bar updates and the gradient reconstruction; and each source is
chosen where it pays."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit

from solvers import grain
from solvers.result import FitResult
from solvers.smo import columns, steps
from solvers.smo import rows as positional_rows
from solvers.train import fit
from testkit.datasets import load_local

SOURCES = ("rows", "columns", "bits")


@njit
def _popcounts(words: np.ndarray) -> np.ndarray:
    out = np.empty(words.shape[0], dtype=np.int64)
    for k in range(words.shape[0]):
        out[k] = columns._popcount(words[k])
    return out


def test_popcount_counts_the_set_bits() -> None:
    words = np.random.default_rng(0).integers(0, 2**63, size=500, dtype=np.uint64)
    words[:4] = [0, 1, 2**63 - 1, 2**63 + 5]
    words[2] |= np.uint64(2**63)  # all 64 bits
    expected = [bin(int(w)).count("1") for w in words]
    assert _popcounts(words).tolist() == expected
    assert _popcounts(words)[2] == 64


@pytest.mark.parametrize("gamma", [1 / 123, 0.5, 3.0])
def test_rbf_table_holds_the_columns_values(gamma: float) -> None:
    """table[k] = float32 of `_rbf_values`' exp(-gamma k), the value of every pair of 0/1
    rows at squared distance k."""
    table = columns.rbf_table(gamma, 150)
    assert table.shape == (301,) and table.dtype == np.float32
    k = np.arange(301, dtype=np.float64)
    np.testing.assert_array_equal(table, columns._rbf_values_checked(-gamma * k)
                                  .astype(np.float32))
    np.testing.assert_allclose(table, np.exp(-gamma * k), rtol=1e-6, atol=1e-38)


@functools.cache
def binary_rows(rows: int = 5000) -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = load_local("onehot")  # 0/1 features, like a9a
    return X[:rows], y[:rows]


@functools.cache
def valued_rows(rows: int = 5000) -> tuple[sp.csr_matrix, np.ndarray]:
    """onehot's sparsity pattern with values that are not 0/1 (seeded, per entry)."""
    X, y = binary_rows(rows)
    X = X.copy()
    X.data = np.round(np.random.default_rng(1).uniform(0.1, 2.0, X.nnz), 3)
    return X, y


def forced(monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    """Allow only `source` (and the row gather) for sparse data."""
    monkeypatch.setattr(positional_rows, "bits_pay", columns.bits_pay if source == "bits"
                        else lambda *args: False)
    monkeypatch.setattr(positional_rows, "csc_pays", columns.csc_pays if source == "columns"
                        else lambda *args: False)


def fit_with(monkeypatch: pytest.MonkeyPatch, source: str, X: Any, y: Any,
             **params: Any) -> FitResult:
    with monkeypatch.context() as patch:
        forced(patch, source)
        return fit(X, y, solver="smo", **params)


def assert_same_fit(a: FitResult, b: FitResult, X: Any) -> None:
    assert a.dual_objective == b.dual_objective
    assert a.iterations == b.iterations
    np.testing.assert_array_equal(a.model.sv_coef, b.model.sv_coef)
    np.testing.assert_array_equal(a.model.rho, b.model.rho)
    np.testing.assert_array_equal(a.model.predict(X[:500])[1], b.model.predict(X[:500])[1])


@pytest.mark.parametrize("kernel", ["rbf", "poly", "linear"])
def test_bit_sets_give_the_fit_of_the_row_gather(monkeypatch: pytest.MonkeyPatch,
                                                 kernel: str) -> None:
    X, y = binary_rows()
    params: dict[str, Any] = {"kernel": kernel, "C": 2.0, "gamma": 0.02, "coef0": 1.0,
                              "degree": 2}
    gathered = fit_with(monkeypatch, "rows", X, y, **params)
    from_bits = fit_with(monkeypatch, "bits", X, y, **params)
    assert gathered.per_output[0]["kernel_values"] == "rows"
    assert from_bits.per_output[0]["kernel_values"] == "bits"
    assert gathered.per_output[0]["shrinkings"] > 0
    assert gathered.per_output[0]["gradient_reconstructions"] > 0
    assert_same_fit(gathered, from_bits, X)


def test_the_positional_csc_gives_the_fit_of_the_row_gather(
        monkeypatch: pytest.MonkeyPatch) -> None:
    X, y = valued_rows()
    gathered = fit_with(monkeypatch, "rows", X, y, C=2.0)
    from_columns = fit_with(monkeypatch, "columns", X, y, C=2.0)
    assert gathered.per_output[0]["kernel_values"] == "rows"
    assert from_columns.per_output[0]["kernel_values"] == "columns"
    assert_same_fit(gathered, from_columns, X)


@pytest.mark.parametrize("features", [3, 4, 11, 23])
def test_dense_dots_sum_the_features_in_order(features: int) -> None:
    """Each x_t . x_i of the dense rows is LIBSVM's sum, feature by feature in order, to the
    bit (products of very different magnitudes: any other order rounds differently)."""
    rng = np.random.default_rng(features)
    n = 700
    Xd = rng.normal(size=(features, n)) * 10.0 ** rng.uniform(-6, 6, size=(features, n))
    dots = np.full(n, np.nan)
    lo, hi, i = 3, n - 5, 17  # [lo, hi) spans blocks of DOTS_BLOCK
    columns._dense_dots(Xd, i, lo, hi, dots)
    expected = []
    for t in range(lo, hi):
        total = 0.0
        for k in range(features):
            total += float(Xd[k, t]) * float(Xd[k, i])
        expected.append(total)
    np.testing.assert_array_equal(dots[lo:hi], np.array(expected))
    assert np.isnan(dots[:lo]).all() and np.isnan(dots[hi:]).all()


@pytest.mark.parametrize("formulation", ["c_svc", "epsilon_svr"])
def test_dense_rows_give_the_fit_of_the_row_gather(monkeypatch: pytest.MonkeyPatch,
                                                   formulation: str) -> None:
    """A fit from the dense rows (four features a pass, 11 features: two passes and three
    single ones) is the fit from the row gather, with the regressions' kernel rows too."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1200, 11))
    y = (np.sin(X[:, 0] * 2) + X[:, 1] * X[:, 2] > 0).astype(float)
    if formulation == "epsilon_svr":
        y = np.sin(X[:, 0] * 2) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=1200)
    params: dict[str, Any] = {"formulation": formulation, "C": 4.0, "gamma": 0.2}
    dense = fit(X, y, solver="smo", **params)
    with monkeypatch.context() as patch:
        patch.setattr(positional_rows, "use_dense_rows", lambda *args: False)
        gathered = fit(X, y, solver="smo", **params)
    assert dense.per_output[0]["kernel_values"] == "dense"
    assert gathered.per_output[0]["kernel_values"] == "rows"
    assert dense.per_output[0]["shrinkings"] > 0
    assert_same_fit(dense, gathered, X)


@pytest.mark.parametrize("source", ["columns", "bits"])
def test_two_threads_give_the_fit_of_one_for_every_source(
        monkeypatch: pytest.MonkeyPatch, source: str) -> None:
    """The parallel column and G_bar loops split [lo, hi) into chunks: the CSC pass
    searches each chunk's first entry, the bit sets read their own rows."""
    monkeypatch.setattr(steps, "PARALLEL_MIN_PASS", 64)
    monkeypatch.setattr(steps, "PARALLEL_MIN_KERNEL", 64)
    monkeypatch.setattr(steps, "PARALLEL_MIN_FLUSH", 64)
    monkeypatch.setattr(grain, "FORCE", "fine")
    X, y = valued_rows() if source == "columns" else binary_rows()
    one = fit_with(monkeypatch, "rows", X, y, threads=1)
    two = fit_with(monkeypatch, source, X, y, threads=2)
    assert two.per_output[0]["kernel_values"] == source
    assert two.params["threads_used"] == 2
    assert_same_fit(one, two, X)


def test_one_vs_one_pairs_take_their_own_source(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each binary problem decides on its own rows (onehot3, like dna: 0/1 features, 3
    pairs)."""
    X, y = load_local("onehot3")
    assert set(np.unique(X.data)) == {1.0}
    gathered = fit_with(monkeypatch, "rows", X, y, threads=2)
    chosen = fit(X, y, solver="smo", threads=2)
    assert {o["kernel_values"] for o in chosen.per_output} == {"bits"}
    assert_same_fit(gathered, chosen, X)


def skewed_rows() -> tuple[sp.csr_matrix, np.ndarray]:
    """Feature 0 in every row and one of 19 others (values not 0/1): density 0.1, but x_i's
    columns hold about l entries, more than half of the gather's 2 l."""
    rng = np.random.default_rng(4)
    l = 400
    rows = np.repeat(np.arange(l), 2)
    cols = np.column_stack([np.zeros(l, dtype=int), rng.integers(1, 20, l)]).ravel()
    X = sp.csr_matrix((rng.uniform(1, 2, 2 * l), (rows, cols)), shape=(l, 20))
    return X, np.where(rng.random(l) > 0.5, 1, -1)


SourceCase = tuple[str, Callable[[], tuple[Any, np.ndarray]], str]


@pytest.mark.parametrize("case", [
    ("0/1 features (onehot)", binary_rows, "bits"),
    ("valued sparse rows", valued_rows, "columns"),
    ("dense rows", lambda: (sp.csr_matrix(np.random.default_rng(2).normal(size=(300, 5))),
                            np.where(np.random.default_rng(3).random(300) > 0.5, 1, -1)),
     "dense"),
    ("a feature in every row", skewed_rows, "rows"),
], ids=lambda case: case[0])
def test_each_source_is_chosen_where_it_pays(case: SourceCase) -> None:
    _, data, expected = case
    X, y = data()
    result = fit(X, y, solver="smo")
    assert {o["kernel_values"] for o in result.per_output} == {expected}


def test_feature_frequencies_decide_the_csc() -> None:
    """The CSC pays when x_i's columns hold few entries: rare features, not a feature in
    every row."""
    l = 1000
    rare = np.full(200, 10)  # 200 features in 10 rows each: 2,000 entries
    assert columns.csc_pays(l, int(rare.sum()), rare)
    common = np.array([l, 1])  # one feature in every row
    assert not columns.csc_pays(l, int(common.sum()), common)
    assert columns.bits_pay(123, 14 * l, l, all_ones=True)
    assert not columns.bits_pay(123, 14 * l, l, all_ones=False)
    assert not columns.bits_pay(100_000, 14 * l, l, all_ones=True)  # 1,563 words a row
