"""The data sets of the default test suite: nothing from outside the repository.

A user's clone has no `../shared/data`. The default suite runs on real data sets that
scikit-learn ships inside its wheel and on seeded generated ones; the LIBSVM sets in
`../shared/data` are for the benchmarks and the marked parity tests only (`tests/conftest.py`,
marker `parity`).

- `cancer`: 569 x 30, labels -1 (benign) / +1 (malignant): scikit-learn's breast_cancer
  (UCI WDBC), every column scaled to [-1, 1] as `svm-scale` does;
- `cancer_raw`: the same, natively unscaled (values 0.0008 .. 4254);
- `digits`: 1,797 x 64, labels 0..9: scikit-learn's digits (8x8 images), pixel levels
  0..16 divided by 16 (sparse);
- `wine`: 178 x 13, labels 1..3; `iris`: 150 x 4, labels 1..3; columns scaled to [-1, 1];
- `onehot`: 8,000 x 142, labels -1/+1 (29% positive), generated: 14 categorical
  attributes one-hot coded (0/1 features, ~14 per row), like LIBSVM's a9a;
- `onehot3`: 2,000 x 180, labels 1..3, generated: 60 three-valued attributes, 3 bits
  each, like LIBSVM's dna.scale;
- `text`: 4,000 x 2,000, labels -1/+1, generated tf-idf-like sparse text
  (`testkit.datagen.text_like`).

`load(name)` gives `(X, y)` (CSR float64 with sorted int32 indices, labels float64), cached;
`svmlight_bytes(name)` the same as svmlight text; `write_xz(name, directory)` an `.xz` file
of it, as a user would upload one. The generated sets change only with `VERSION`.
"""

from __future__ import annotations

import functools
import io
import lzma
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from testkit import datagen

VERSION = 1

NAMES = ("cancer", "cancer_raw", "digits", "wine", "iris", "onehot", "onehot3", "text")


def _csr(features: np.ndarray | sp.spmatrix) -> sp.csr_matrix:
    X = sp.csr_matrix(features, dtype=np.float64)
    X.eliminate_zeros()
    X.sort_indices()
    X.indices = X.indices.astype(np.int32)
    X.indptr = X.indptr.astype(np.int64)
    return X


def scale_columns(features: np.ndarray, lower: float = -1.0, upper: float = 1.0
                  ) -> np.ndarray:
    """Every column mapped linearly onto [lower, upper] (LIBSVM's svm-scale); a constant
    column becomes `lower`."""
    low, high = features.min(axis=0), features.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return lower + (upper - lower) * (features - low) / span


def _sklearn(loader_name: str) -> tuple[np.ndarray, np.ndarray]:
    import sklearn.datasets

    loader = getattr(sklearn.datasets, loader_name)
    bunch = loader()
    return np.asarray(bunch.data, dtype=np.float64), np.asarray(bunch.target)


def _cancer(scaled: bool) -> tuple[sp.csr_matrix, np.ndarray]:
    features, target = _sklearn("load_breast_cancer")
    y = np.where(target == 0, 1.0, -1.0)  # scikit-learn: 0 malignant, 1 benign
    return _csr(scale_columns(features) if scaled else features), y


def _digits() -> tuple[sp.csr_matrix, np.ndarray]:
    features, target = _sklearn("load_digits")
    return _csr(features / 16.0), target.astype(np.float64)


def _scaled_classes(loader_name: str) -> Callable[[], tuple[sp.csr_matrix, np.ndarray]]:
    def load_scaled() -> tuple[sp.csr_matrix, np.ndarray]:
        features, target = _sklearn(loader_name)
        return _csr(scale_columns(features)), target.astype(np.float64) + 1.0
    return load_scaled


def onehot(n_rows: int, cardinalities: list[int] | np.ndarray, n_classes: int = 2,
           seed: int = 0, positive_share: float = 0.25, label_noise: float = 0.08,
           missing: float = 0.01) -> tuple[sp.csr_matrix, np.ndarray]:
    """Categorical attributes one-hot coded: attribute g takes one of `cardinalities[g]`
    values (skewed frequencies, absent with probability `missing`), so every stored value
    is 1.0. Labels from a noisy linear teacher over the indicator features: binary {-1, +1}
    with about `positive_share` positives, or 1..n_classes (arg max of one teacher per
    class)."""
    rng = np.random.default_rng(seed)
    cardinalities = np.asarray(cardinalities, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(cardinalities)])
    n_features = int(offsets[-1])
    columns = []
    for g, size in enumerate(cardinalities):
        weights = rng.dirichlet(np.full(int(size), 0.8))
        columns.append(offsets[g] + rng.choice(int(size), size=n_rows, p=weights))
    chosen = np.stack(columns, axis=1)  # rows x attributes, feature index of each
    present = rng.random(chosen.shape) >= missing
    lengths = present.sum(axis=1)
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    X = sp.csr_matrix((np.ones(int(indptr[-1])), chosen[present].astype(np.int32), indptr),
                      shape=(n_rows, n_features))
    teachers = rng.normal(size=(n_features, max(1, n_classes if n_classes > 2 else 1)))
    scores = X @ teachers + 0.5 * rng.normal(size=(n_rows, teachers.shape[1]))
    if n_classes == 2:
        threshold = np.quantile(scores[:, 0], 1.0 - positive_share)
        y = np.where(scores[:, 0] > threshold, 1.0, -1.0)
        flip = rng.random(n_rows) < label_noise
        y[flip] = -y[flip]
    else:
        y = np.argmax(scores, axis=1).astype(np.float64) + 1.0
        noisy = rng.random(n_rows) < label_noise
        y[noisy] = rng.integers(1, n_classes + 1, size=int(noisy.sum()))
    return _csr(X), y


def _onehot() -> tuple[sp.csr_matrix, np.ndarray]:
    cardinalities = np.random.default_rng(101).integers(2, 17, size=14)
    return onehot(8000, cardinalities, seed=1)


def _onehot3() -> tuple[sp.csr_matrix, np.ndarray]:
    return onehot(2000, [3] * 60, n_classes=3, seed=2, missing=0.25)


def _text() -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = datagen.text_like(4000, 2000, seed=3)
    return _csr(X), y


_LOADERS: dict[str, Callable[[], tuple[sp.csr_matrix, np.ndarray]]] = {
    "cancer": lambda: _cancer(scaled=True),
    "cancer_raw": lambda: _cancer(scaled=False),
    "digits": _digits,
    "wine": _scaled_classes("load_wine"),
    "iris": _scaled_classes("load_iris"),
    "onehot": _onehot,
    "onehot3": _onehot3,
    "text": _text,
}


@functools.cache
def _load(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    if name not in _LOADERS:
        raise KeyError(f"unknown bundled data set {name!r}; known: {', '.join(NAMES)}")
    X, y = _LOADERS[name]()
    X.data.flags.writeable = False
    y.flags.writeable = False
    return X, y


def load(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """The named set as (X CSR float64, y float64); a fresh copy each call."""
    X, y = _load(name)
    return X.copy(), y.copy()


def dump_svmlight(X: sp.spmatrix, y: np.ndarray) -> bytes:
    """svmlight text, one-based indices, labels and values written with repr (exact)."""
    X = sp.csr_matrix(X)
    if not X.has_sorted_indices:
        X = X.copy()
        X.sort_indices()
    out = io.StringIO()
    for i in range(X.shape[0]):
        start, end = X.indptr[i], X.indptr[i + 1]
        label = float(y[i])
        text = str(int(label)) if label.is_integer() else repr(label)
        pairs = " ".join(f"{j + 1}:{v!r}" for j, v in zip(X.indices[start:end].tolist(),
                                                         X.data[start:end].tolist(), strict=True))
        out.write(f"{text} {pairs}\n" if pairs else f"{text}\n")
    return out.getvalue().encode()


@functools.cache
def svmlight_bytes(name: str) -> bytes:
    """The named set as svmlight text."""
    return dump_svmlight(*_load(name))


def write_xz(name: str, directory: Path) -> Path:
    """The named set as `<directory>/<name>.xz` (svmlight text, xz-compressed)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.xz"
    if not path.exists():
        path.write_bytes(lzma.compress(svmlight_bytes(name)))
    return path
