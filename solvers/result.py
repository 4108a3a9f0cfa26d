"""The result of every fit: the servable model and how the solver got there.

Pure Python + NumPy (plus the model classes): the worker stores `result.model`
(`solvers.models.model_to_bytes`), tests inspect the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.backbone import EXIT_REASONS, ProgressCallback
from solvers.models import LinearModel, Pipeline, ServableModel

__all__ = ["EXIT_REASONS", "FitResult", "ProgressCallback"]


@dataclass
class FitResult:
    """A trained model (`model`: LinearModel or KernelModel) and how the solver got there.

    Linear models: decision_function(X) = X @ coef.T + intercept, one column per output; a
    binary problem has one output, positive for classes[1] (the larger class value, as in
    scikit-learn); a multi-class one-vs-rest problem has one output per class, in the
    order of `classes`. Kernel models: see solvers/kernels.py; their dual_objective is in
    LIBSVM's sign convention (the minimised 1/2 a'Qa - e'a, summed; <= 0), primal_objective
    and duality_gap are None, n_support counts distinct support vectors.
    """

    solver: str
    model: ServableModel
    primal_objective: float | None  # summed over the binary problems
    dual_objective: float | None
    duality_gap: float | None
    iterations: int  # summed over the binary problems
    exit_reason: str  # worst over the binary problems: anything but "converged" wins
    train_seconds: float  # solver time only (no parsing, no compilation warm-up)
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    per_output: list[dict[str, Any]] = field(default_factory=list)
    n_support: int | None = None  # kernel models only
    # The certificate (linear models; solvers/certificate.py): converged is true only when
    # relative_gap <= tol for every output. relative_gap = sum of the outputs' certified
    # gaps / sum of their primal values (one-vs-rest: summed over the outputs).
    converged: bool = False
    relative_gap: float | None = None
    tol: float | None = None
    warnings: list[str] = field(default_factory=list)  # plain sentences, one per problem
    # what ran, in order: {"solver", "exit", "iterations", "seconds", "relative_gap",
    # "reason"} (and "output" for several outputs); see solvers/continuation.py
    path: list[dict[str, Any]] = field(default_factory=list)
    auto: dict[str, Any] | None = None  # solver "auto": {"chosen", "reason", "settings"?}
    # linear models: each output's dual solution when a dual CD solver (dcd, acf) gave
    # the returned model, else None; what fit(warm_start=...) starts from
    dual_solutions: list[np.ndarray | None] = field(default_factory=list)
    # SMO with keep_solver_state=True: each binary problem's solver state (alphas, kernel
    # cache), what fit(warm_start=...) continues from (and consumes)
    kernel_states: list[Any] = field(default_factory=list, repr=False)
    # how the fit read its data: {"mode": "in_memory" | "blocks", "blocks", "passes",
    # "bytes_read", ...} (solvers/out_of_core.py; the worker's data plan) or {"mode":
    # "distributed", "workers", "shards", "rounds", "bytes_sent", "communication_s", ...}
    # (solvers/distributed.py); None: a plain in-memory fit that nobody planned
    data_plan: dict[str, Any] | None = None

    @property
    def classes(self) -> np.ndarray:
        return self.model.classes

    @property
    def coef(self) -> np.ndarray:
        """(n_outputs, n_features) weights of a linear model."""
        return self._linear().coef

    @property
    def intercept(self) -> np.ndarray:
        return self.model.intercept

    def decision_function(self, X: Any) -> np.ndarray:
        return self.model.decision_function(X)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted labels."""
        return self.model.predict(X)[0]

    def _linear(self) -> LinearModel:
        model = self.model.estimator if isinstance(self.model, Pipeline) else self.model
        if not isinstance(model, LinearModel):
            raise AttributeError(f"a {self.model.kind} model has no coef")
        return model

