"""Data sets for the solver tests, by name, cached.

- `load_dataset(name)`: a file of the shared LIBSVM sets (`../shared/data`, xz) through
  scikit-learn's reader. Only the `parity` tests and the benchmarks read these; a user's
  clone has no such folder.
- `load_local(name)`: a set the repository makes by itself (issue 23): every name of
  `testkit.bundled` (scikit-learn's shipped sets, generated one-hot and text), and the
  derived sets of `LOCAL`, stand-ins for shared sets of the same character:

| name | like | what |
|---|---|---|
| onehot-1000 | a9a, 1,000 rows | 1,000 rows of `onehot` drawn without replacement (seed 0) |
| dense | ijcnn1 | `datagen.dense(50_000, 22, seed=7, separation=3)`, scaled to [-1, 1] |
| digits-raw | pendigits | `digits` at its pixel levels 0..16 (natively unscaled) |
| madelon-like | madelon.t | 600 x 500 dense, values ~480 +- 35 (natively unscaled) |

`madelon-like` is Guyon's MADELON design as scikit-learn's `make_classification` builds
it (5 informative features on the vertices of a hypercube, 16 clusters per class, 15
linear combinations of them, 480 noise features, 1% flipped labels; seed 0), every value
mapped to the integer `round(480 + 35 x)` as MADELON's are.

- `split(X, y, seed)`: a seeded two-thirds / one-third train / test split (the stand-in
  for a LIBSVM set's `.t` file).
"""

from __future__ import annotations

import functools
import lzma
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from testkit import bundled, datagen
from testkit.paths import DATA_DIR


@functools.cache
def load_dataset(name: str, n_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """A LIBSVM-format file of the shared data (xz), cached per test session."""
    from sklearn.datasets import load_svmlight_file

    with lzma.open(DATA_DIR / f"{name}.xz") as handle:
        X, y = load_svmlight_file(handle, n_features=n_features)
    X = sp.csr_matrix(X)
    X.sort_indices()
    return X, y


def _rows(name: str, n_rows: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = bundled.load(name)
    chosen = np.sort(np.random.default_rng(seed).choice(X.shape[0], n_rows, replace=False))
    return sp.csr_matrix(X[chosen]), y[chosen]


def _digits_raw() -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = bundled.load("digits")
    X.data = np.rint(X.data * 16.0)
    return X, y


def _dense() -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = datagen.dense(50_000, 22, seed=7, separation=3.0)
    X = sp.csr_matrix(bundled.scale_columns(X.toarray()))
    X.sort_indices()
    return X, y


def madelon_like(n_rows: int = 600, n_features: int = 500, seed: int = 0
                 ) -> tuple[sp.csr_matrix, np.ndarray]:
    """MADELON-like data (see the module docstring); labels -1 / +1."""
    from sklearn.datasets import make_classification

    X, target = make_classification(
        n_samples=n_rows, n_features=n_features, n_informative=5, n_redundant=15,
        n_repeated=0, n_clusters_per_class=16, flip_y=0.01, class_sep=1.0, hypercube=True,
        shuffle=True, random_state=seed)
    X = np.clip(np.rint(480.0 + 35.0 * X), 0.0, None)
    matrix = sp.csr_matrix(X)
    matrix.sort_indices()
    return matrix, np.where(target == 1, 1.0, -1.0)


LOCAL: dict[str, Callable[[], tuple[sp.csr_matrix, np.ndarray]]] = {
    "onehot-1000": lambda: _rows("onehot", 1000, 0),
    "dense": _dense,
    "digits-raw": _digits_raw,
    "madelon-like": madelon_like,
}
LOCAL_NAMES: tuple[str, ...] = (*bundled.NAMES, *LOCAL)


@functools.cache
def load_local(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """A set of testkit.bundled or of LOCAL (X CSR float64, sorted int32 indices; labels
    as the set has them), cached: the same arrays on every call (do not modify them)."""
    if name in LOCAL:
        X, y = LOCAL[name]()
    elif name in bundled.NAMES:
        X, y = bundled.load(name)
    else:
        raise KeyError(f"unknown local data set {name!r}; known: {', '.join(LOCAL_NAMES)}")
    X.indices = X.indices.astype(np.int32)
    return X, y


def load_any(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """`load_local(name)` for a local name, else the shared set `load_dataset(name)`
    (parametrized tests that run on both: the shared ones are marked `parity`)."""
    return load_local(name) if name in LOCAL_NAMES else load_dataset(name)


def split(X: sp.csr_matrix, y: np.ndarray, seed: int = 0
          ) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix, np.ndarray]:
    """(X_train, y_train, X_test, y_test): a seeded permutation, the first two thirds for
    training, the rest for testing, rows in their original order within each part."""
    order = np.random.default_rng(seed).permutation(X.shape[0])
    cut = (2 * X.shape[0]) // 3
    train, test = np.sort(order[:cut]), np.sort(order[cut:])
    return sp.csr_matrix(X[train]), y[train], sp.csr_matrix(X[test]), y[test]
