"""Hinge's numerical core: svmlight parsing, CSR data, and one module per SVM solver.

Imports only NumPy, SciPy and Numba. `fit` is the single entry point:

    from solvers import fit
    result = fit(X_csr, y, solver="dcd", C=1.0, loss="l2", eps=0.1)

returns a `solvers.result.FitResult` whose `model` (solvers/models.py: LinearModel or
KernelModel) is what the worker stores and the API serves. Layout: backbone.py (types,
progress monitor, driver loop), inputs.py (validation), params.py (the registry), train.py
(fit, warmup), one module per solver (smo/ a package), objectives.py, kernels.py,
models.py, formats.py (LIBLINEAR / LIBSVM files), svmlight.py (the parser).

Training modules are imported lazily, so that `solvers.params`, `solvers.models`,
`solvers.formats` and `solvers.svmlight` (used by the API) never load a solver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from solvers.result import FitResult


def fit(X: Any, y: Any, solver: str = "dcd", progress: Any = None, **params: Any) -> FitResult:
    from solvers.train import fit as _fit

    return _fit(X, y, solver=solver, progress=progress, **params)


__all__ = ["fit"]
