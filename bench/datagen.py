"""Seeded generators of large benchmark data (no files: arrays in memory).

- `text_like`: sparse rows like bag-of-words text: feature frequencies follow a power law
  (Zipf, exponent ~1.1), about `nnz_per_row` non-zeros per row (Poisson), tf-idf-like
  positive values, rows scaled to unit norm; labels from a noisy sparse linear teacher.
- `dense`: low-dimensional dense data (40 features by default), two overlapping Gaussian
  classes, stored as CSR so every solver reads the same format.

Both return `(X, y)` with X a scipy CSR matrix (float64, int32 indices) and y in {-1, +1}.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def text_like(n_rows: int, n_features: int, seed: int = 0, nnz_per_row: float = 60.0,
              label_noise: float = 0.05, zipf_exponent: float = 1.1
              ) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.maximum(1, rng.poisson(nnz_per_row, size=n_rows)).astype(np.int64)
    lengths = np.minimum(lengths, n_features)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    total = int(indptr[-1])
    ranks = np.arange(1, n_features + 1, dtype=np.float64)
    probabilities = ranks ** -zipf_exponent
    probabilities /= probabilities.sum()
    permutation = rng.permutation(n_features)  # frequent features are not the first columns
    columns = permutation[rng.choice(n_features, size=total, p=probabilities)].astype(np.int32)
    values = rng.exponential(1.0, size=total) * np.log1p(
        np.float64(n_features) * probabilities[np.argsort(permutation)][columns])
    X = sp.csr_matrix((values, columns, indptr), shape=(n_rows, n_features))
    X.sum_duplicates()  # a word drawn twice in a row: one feature
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    norms[norms == 0] = 1.0
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    X.indices = X.indices.astype(np.int32)
    teacher = np.zeros(n_features)
    informative = rng.choice(n_features, size=max(10, n_features // 20), replace=False)
    teacher[informative] = rng.normal(size=informative.size)
    scores = X @ teacher
    y = np.where(scores > np.median(scores), 1.0, -1.0)
    flip = rng.random(n_rows) < label_noise
    y[flip] = -y[flip]
    return X, y


def dense(n_rows: int, n_features: int = 40, seed: int = 0, separation: float = 1.0
          ) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.where(rng.random(n_rows) < 0.5, 1.0, -1.0)
    direction = rng.normal(size=n_features)
    direction *= separation / np.linalg.norm(direction)
    features = rng.normal(size=(n_rows, n_features)) + 0.5 * y[:, None] * direction[None, :]
    X = sp.csr_matrix(features)
    X.indices = X.indices.astype(np.int32)
    return X, y
