"""The shared LIBSVM data sets as SciPy CSR matrices (scikit-learn's reader), cached."""

from __future__ import annotations

import functools
import lzma

import numpy as np
import scipy.sparse as sp

from testkit.paths import DATA_DIR


@functools.cache
def load_dataset(name: str, n_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    """A LIBSVM-format file of /work/shared/data (xz), cached per test session."""
    from sklearn.datasets import load_svmlight_file

    with lzma.open(DATA_DIR / f"{name}.xz") as handle:
        X, y = load_svmlight_file(handle, n_features=n_features)
    X = sp.csr_matrix(X)
    X.sort_indices()
    return X, y
