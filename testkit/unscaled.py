"""Unscaled data for the solver tests (issue 12): seeded column rescaling, named cases.

The LIBSVM sets `*_scale` have every feature in [-1, 1]; on such data dual coordinate
descent converges in a few sweeps. Real data are often unscaled, and there DCD / ACF can
stall far from the optimum. `unscaled(X, seed)` makes an unscaled variant of a scaled set
by multiplying column j by a factor f_j drawn log-uniformly from [1e-2, 1e3] (NumPy's
`default_rng(seed)`): the sparsity pattern and the row order are kept, the factors span
five orders of magnitude. `factors(d, seed)` gives the factors themselves.

`LOCAL_CASES` names the unscaled binary problems of the default test suite, made from
data the repository has (testkit.datasets.load_local, issue 23); `CASES` those made from
the shared LIBSVM sets, for the benchmarks and the `parity` tests. `load_case(name)`
returns `(X, y)` of either, X CSR float64 and y in {-1, +1}, cached per session.

| local case | source | what |
|---|---|---|
| cancer_raw | cancer_raw | natively unscaled (0.0008..4254), 569 x 30 |
| madelon-like | madelon-like | natively unscaled (values ~480 +- 35), 600 x 500, dense |
| cancer-x1 | cancer | columns x factors(seed 1) |
| wine-x2 | wine | class 3 (+1) vs classes 1, 2 (-1); columns x factors(seed 2) |
| onehot3-3-x3 | onehot3 | class 3 vs classes 1, 2; columns x factors(seed 3) |
| onehot-5k-x4 | onehot | 5,000 rows drawn without replacement (seed 4), x factors(seed 4) |
| onehot-x5 | onehot | columns x factors(seed 5) |

| shared case | source | what |
|---|---|---|
| madelon.t | madelon.t | natively unscaled (values 37..822), 600 x 500, dense |
| pendigits-0 | pendigits | natively unscaled (0..100); digit 0 (+1) vs the rest (-1) |
| pendigits-5 | pendigits | digit 5 vs the rest: least separable (largest optimum) |
| heart_scale-x1 | heart_scale | columns x factors(seed 1) |
| breast-cancer_scale-x2 | breast-cancer_scale | columns x factors(seed 2) |
| dna.scale-3-x3 | dna.scale | class 3 (+1) vs classes 1, 2 (-1); columns x factors(seed 3) |
| a9a-5k-x4 | a9a | 5,000 rows drawn without replacement (seed 4), columns x factors(seed 4) |
| mushrooms-x5 | mushrooms | label 2 -> +1, 1 -> -1; columns x factors(seed 5) |
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from testkit.datasets import LOCAL_NAMES, load_dataset, load_local

LOW, HIGH = 1e-2, 1e3


def factors(n_features: int, seed: int, low: float = LOW, high: float = HIGH) -> np.ndarray:
    """Column factors, log-uniform on [low, high], from numpy's default_rng(seed)."""
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high, got {low}, {high}")
    rng = np.random.default_rng(seed)
    return np.exp(rng.uniform(np.log(low), np.log(high), size=n_features))


def unscaled(X: sp.spmatrix | np.ndarray, seed: int, low: float = LOW,
             high: float = HIGH) -> sp.csr_matrix:
    """X with column j multiplied by factors(d, seed)[j]; CSR float64, same sparsity.

    The input is not modified. Explicitly stored zeros stay stored (as zeros).
    """
    matrix = sp.csr_matrix(X, dtype=np.float64, copy=True)
    scale = factors(matrix.shape[1], seed, low, high)
    matrix.data *= scale[matrix.indices]
    return matrix


@dataclass(frozen=True)
class UnscaledCase:
    name: str
    source: str  # a testkit.datasets local name, or a shared file (without .xz)
    description: str
    positive: float | None = None  # label that becomes +1 (None: the labels are +-1 / max)
    seed: int | None = None  # factors seed; None = the data are natively unscaled
    rows: int | None = None  # random subsample of this many rows (seeded by `seed`)


CASES: tuple[UnscaledCase, ...] = (
    UnscaledCase("madelon.t", "madelon.t", "natively unscaled, 600 x 500, dense"),
    UnscaledCase("pendigits-0", "pendigits", "natively unscaled, digit 0 vs rest", positive=0),
    UnscaledCase("pendigits-5", "pendigits", "natively unscaled, digit 5 vs rest "
                 "(least separable digit)", positive=5),
    UnscaledCase("heart_scale-x1", "heart_scale", "columns x factors(seed 1)", seed=1),
    UnscaledCase("breast-cancer_scale-x2", "breast-cancer_scale",
                 "columns x factors(seed 2)", seed=2),
    UnscaledCase("dna.scale-3-x3", "dna.scale", "class 3 vs rest, columns x factors(seed 3)",
                 positive=3, seed=3),
    UnscaledCase("a9a-5k-x4", "a9a", "5,000 rows (seed 4), columns x factors(seed 4)",
                 seed=4, rows=5000),
    UnscaledCase("mushrooms-x5", "mushrooms", "columns x factors(seed 5)", seed=5),
)
CASE_NAMES: tuple[str, ...] = tuple(case.name for case in CASES)

LOCAL_CASES: tuple[UnscaledCase, ...] = (
    UnscaledCase("cancer_raw", "cancer_raw", "natively unscaled, 569 x 30"),
    UnscaledCase("madelon-like", "madelon-like", "natively unscaled, 600 x 500, dense"),
    UnscaledCase("cancer-x1", "cancer", "columns x factors(seed 1)", seed=1),
    UnscaledCase("wine-x2", "wine", "class 3 vs rest, columns x factors(seed 2)", seed=2),
    UnscaledCase("onehot3-3-x3", "onehot3", "class 3 vs rest, columns x factors(seed 3)",
                 positive=3, seed=3),
    UnscaledCase("onehot-5k-x4", "onehot", "5,000 rows (seed 4), columns x factors(seed 4)",
                 seed=4, rows=5000),
    UnscaledCase("onehot-x5", "onehot", "columns x factors(seed 5)", seed=5),
)
LOCAL_CASE_NAMES: tuple[str, ...] = tuple(case.name for case in LOCAL_CASES)


def binary_labels(y: np.ndarray, positive: float | None = None) -> np.ndarray:
    """+1 for `positive` (default: the largest label), -1 for every other label."""
    y = np.asarray(y, dtype=np.float64)
    target = float(np.max(y)) if positive is None else float(positive)
    if not np.any(y == target):
        raise ValueError(f"label {target} does not occur")
    return np.where(y == target, 1.0, -1.0)


@functools.cache
def load_case(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """The named unscaled binary problem: (X CSR float64, y in {-1, +1}); cached."""
    case = {c.name: c for c in (*LOCAL_CASES, *CASES)}.get(name)
    if case is None:
        known = ", ".join((*LOCAL_CASE_NAMES, *CASE_NAMES))
        raise KeyError(f"unknown unscaled case {name!r}; known: {known}")
    X, y = (load_local(case.source) if case.source in LOCAL_NAMES
            else load_dataset(case.source))
    y = binary_labels(y, case.positive)
    if case.rows is not None:
        rng = np.random.default_rng(case.seed)
        chosen = np.sort(rng.choice(X.shape[0], size=case.rows, replace=False))
        X, y = X[chosen], y[chosen]
    X = unscaled(X, case.seed) if case.seed is not None else sp.csr_matrix(X, copy=True)
    X.sort_indices()
    return X, y
