"""Small stand-ins for the shared LIBSVM sets, for the benchmark's smoke run.

`make bench` measures on the LIBSVM sets in ../shared/data. The smoke run (`python -m
bench.run --smoke`, run by the default test suite) only checks that every experiment runs
to the end: it points HINGE_SHARED_DATA at a folder that `write_standins` fills with small
files of the same names, shapes of data and label conventions (0/1 features for a9a,
dense 22 features for ijcnn1, 10 digit classes for pendigits, ...), built from
testkit.bundled. Their figures mean nothing and are never kept: the smoke run writes its
tables to a temporary folder.
"""

from __future__ import annotations

import lzma
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from testkit import bundled, datagen

Maker = Callable[[], tuple[sp.csr_matrix, np.ndarray]]


def _onehot(n_rows: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    cardinalities = np.random.default_rng(101).integers(2, 17, size=14)
    return bundled.onehot(n_rows, cardinalities, seed=seed)


def _ijcnn1_like(n_rows: int, seed: int) -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = datagen.dense(n_rows, n_features=22, seed=seed, separation=2.0)
    return X, y


def _pendigits() -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = bundled.load("digits")
    return X, y


def _mushrooms() -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = _onehot(800, seed=7)
    return X, np.where(y > 0, 2.0, 1.0)  # labels 1/2, as in LIBSVM's mushrooms


def _news20() -> tuple[sp.csr_matrix, np.ndarray]:
    X, _ = datagen.text_like(1200, 3000, seed=8)
    y = (np.arange(X.shape[0]) % 20 + 1).astype(np.float64)
    return X, y


# name -> (maker of the training rows, or of (train, test) when the set has a .t split)
_SETS: dict[str, Maker] = {
    "heart_scale": lambda: bundled.load("cancer"),
    "breast-cancer_scale": lambda: bundled.load("cancer"),
    "madelon.t": lambda: bundled.load("cancer_raw"),
    "mushrooms": _mushrooms,
    "news20": _news20,
}
_SPLITS: dict[str, tuple[Maker, int]] = {  # (all rows, how many of them train)
    "a9a": (lambda: _onehot(6000, seed=11), 5200),  # unscaled case a9a-5k-x4 takes 5,000
    "w8a": (lambda: _onehot(2200, seed=13), 1500),
    "ijcnn1": (lambda: _ijcnn1_like(2200, seed=15), 1500),
    "pendigits": (_pendigits, 1200),
    "dna.scale": (lambda: bundled.load("onehot3"), 1400),
}

NAMES = tuple(sorted([*_SETS, *_SPLITS, *(f"{name}.t" for name in _SPLITS)]))


def _write(path: Path, X: sp.csr_matrix, y: np.ndarray) -> None:
    path.write_bytes(lzma.compress(bundled.dump_svmlight(X, y), preset=1))


def write_standins(directory: Path) -> Path:
    """Fill `directory` with `<name>.xz` for every shared set the benchmark reads."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, make in _SETS.items():
        _write(directory / f"{name}.xz", *make())
    for name, (make, n_train) in _SPLITS.items():
        X, y = make()
        _write(directory / f"{name}.xz", X[:n_train], y[:n_train])
        _write(directory / f"{name}.t.xz", X[n_train:], y[n_train:])
    (directory / "MANIFEST.md").write_text(
        "Stand-ins for the benchmark's smoke run (testkit/standins.py): not the LIBSVM sets.\n")
    return directory
