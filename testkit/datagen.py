"""Seeded generators of large benchmark data (no files: arrays in memory).

- `text_like`: sparse rows like tf-idf bag-of-words text. Word frequencies follow a power
  law (Zipf, exponent ~1.1); every document has a topic, and about half of its ~60 words
  (Poisson) come from that topic's own vocabulary, so documents of a topic share words
  the way real text does. Values are term counts times a smoothed idf (rare words weigh
  most), rows scaled to unit norm; labels from a noisy sparse linear teacher.
- `dense`: low-dimensional dense data (40 features by default), two overlapping Gaussian
  classes, stored as CSR so every solver reads the same format.
- `letter_like`: a many-class dense set shaped like UCI letter (26 classes, 16 features
  with 16 integer levels scaled to [-1, 1]): each class a mixture of a few Gaussian
  clusters, so one-vs-one pairs of ~800 rows (400 rows per class) are small, dense kernel
  problems.

- `smooth_regression`: real-valued targets, a smooth function of 4 uniform features in
  [-1, 1] plus Gaussian noise (every target distinct): a regression set of any size.

`text_like` and `dense` return `(X, y)` with X a scipy CSR matrix (float64, int32 indices)
and y in {-1, +1}; `letter_like` returns labels 1..n_classes.
`VERSION` changes whenever a generator's output for a given seed changes (files written
from it are named with it).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

VERSION = 2  # 1: weights grew with word frequency (nearly parallel rows); 2: topics + idf


def text_like(n_rows: int, n_features: int, seed: int = 0, nnz_per_row: float = 60.0,
              label_noise: float = 0.05, zipf_exponent: float = 1.1, n_topics: int = 50,
              topic_share: float = 0.5) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.maximum(1, rng.poisson(nnz_per_row, size=n_rows)).astype(np.int64)
    lengths = np.minimum(lengths, n_features)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    total = int(indptr[-1])
    ranks = np.arange(1, n_features + 1, dtype=np.float64)
    probabilities = ranks ** -zipf_exponent
    probabilities /= probabilities.sum()
    drawn_rank = rng.choice(n_features, size=total, p=probabilities).astype(np.int32)
    # A word is a Zipf rank read through a vocabulary order: the document's topic's own
    # order (probability topic_share) or the common order shared by all documents.
    vocabularies = np.stack([rng.permutation(n_features).astype(np.int32)
                             for _ in range(n_topics + 1)])  # last: the common one
    topic = rng.integers(0, n_topics, size=n_rows, dtype=np.int32)
    order = np.repeat(topic, lengths)
    order[rng.random(total) >= topic_share] = n_topics
    columns = vocabularies[order, drawn_rank]
    del drawn_rank, order
    X = sp.csr_matrix((np.ones(total), columns, indptr), shape=(n_rows, n_features))
    del columns
    X.sum_duplicates()  # term counts
    document_frequency = np.bincount(X.indices, minlength=n_features)
    idf = np.log((1.0 + n_rows) / (1.0 + document_frequency)) + 1.0  # smoothed, >= 1
    X.data *= idf[X.indices]
    norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1)).ravel())
    X = sp.csr_matrix(sp.diags(1.0 / norms) @ X)
    X.indices = X.indices.astype(np.int32)
    X.sort_indices()  # canonical: a fit reads it as it is (no copy, no sort per fit)
    teacher = np.zeros(n_features)
    informative = rng.choice(n_features, size=max(10, n_features // 20), replace=False)
    teacher[informative] = rng.normal(size=informative.size)
    scores = X @ teacher + 1e-9 * rng.normal(size=n_rows)  # no ties at the median
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


def letter_like(rows_per_class: int = 400, n_classes: int = 26, n_features: int = 16,
                seed: int = 0, clusters: int = 3, spread: float = 0.28
                ) -> tuple[sp.csr_matrix, np.ndarray]:
    """Dense multi-class data like UCI letter (see the module docstring); rows in class
    order are shuffled (seeded), labels 1.0 .. n_classes."""
    rng = np.random.default_rng(seed)
    n_rows = rows_per_class * n_classes
    y = np.repeat(np.arange(1, n_classes + 1, dtype=np.float64), rows_per_class)
    centers = rng.uniform(-0.6, 0.6, size=(n_classes, clusters, n_features))
    cluster = rng.integers(0, clusters, size=n_rows)
    features = centers[(y - 1).astype(np.int64), cluster] + spread * rng.normal(
        size=(n_rows, n_features))
    levels = np.clip(np.round((features + 1.0) * 7.5), 0, 15)  # 16 integer levels
    features = levels / 7.5 - 1.0
    order = rng.permutation(n_rows)
    X = sp.csr_matrix(features[order])
    X.indices = X.indices.astype(np.int32)
    return X, y[order]


def smooth_regression(n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(X, y): X dense (n_rows, 4) in [-1, 1], y = sin(2 x1) + x2 x3 + N(0, 0.1^2)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.0, 1.0, size=(n_rows, 4))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.standard_normal(n_rows)
    return X, y
