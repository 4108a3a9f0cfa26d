"""testkit.datagen: seeded, the right shapes and sparsity, labels roughly balanced."""

from __future__ import annotations

import numpy as np
import pytest

from testkit.datagen import dense, text_like


def same(a, b) -> bool:
    (Xa, ya), (Xb, yb) = a, b
    return (
        Xa.shape == Xb.shape
        and np.array_equal(Xa.indptr, Xb.indptr)
        and np.array_equal(Xa.indices, Xb.indices)
        and Xa.data.tobytes() == Xb.data.tobytes()
        and ya.tobytes() == yb.tobytes()
    )


@pytest.mark.parametrize("make", [lambda seed: text_like(400, 2000, seed=seed),
                                  lambda seed: dense(300, 20, seed=seed)],
                         ids=["text_like", "dense"])
def test_same_seed_same_arrays_other_seed_other_arrays(make) -> None:
    assert same(make(7), make(7))
    assert not same(make(7), make(8))


def test_text_like_shape_sparsity_and_labels() -> None:
    X, y = text_like(2000, 5000, seed=1, nnz_per_row=60.0)
    assert X.shape == (2000, 5000)
    assert X.dtype == np.float64 and X.indices.dtype == np.int32
    per_row = np.diff(X.indptr)
    # Poisson(60) draws per row, fewer distinct columns: frequent words are drawn twice
    assert 0.6 * 60 <= per_row.mean() <= 61
    assert per_row.min() >= 1
    assert np.all(X.data > 0)
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    np.testing.assert_allclose(norms, 1.0, rtol=1e-12)
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert 0.4 <= np.mean(y == 1.0) <= 0.6
    # power law: the most frequent column is far more frequent than the median one
    counts = np.bincount(X.indices, minlength=X.shape[1])
    assert counts.max() > 20 * max(1, np.median(counts))


def test_text_like_weights_rare_words_most_and_rows_are_not_near_parallel() -> None:
    """tf-idf, not the reverse: frequent words weigh less on average than rare ones, so
    rows are not dominated by the common words (near-parallel rows make an easy,
    low-dimensional problem unlike real text: version 1 of the generator had a median
    largest cosine of 0.94; news20 has 0.26)."""
    X, _ = text_like(3000, 5000, seed=2, nnz_per_row=60.0)
    counts = np.bincount(X.indices, minlength=X.shape[1])
    frequent = counts[X.indices] > np.percentile(counts[counts > 0], 90)
    assert frequent.any() and not frequent.all()
    assert np.mean(X.data[~frequent]) > np.mean(X.data[frequent])
    sample = X[:1000]
    cosines = (sample @ sample.T).toarray()
    np.fill_diagonal(cosines, -1.0)
    assert np.median(cosines.max(axis=1)) < 0.6


def test_dense_shape_and_labels() -> None:
    X, y = dense(1000, 40, seed=2)
    assert X.shape == (1000, 40)
    assert X.indices.dtype == np.int32
    assert np.all(np.diff(X.indptr) == 40)  # Gaussian features: no zeros
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert 0.4 <= np.mean(y == 1.0) <= 0.6
