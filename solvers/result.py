"""The result object every solver returns, and the progress-callback contract.

Pure Python + NumPy: the worker serialises it, tests inspect it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

EXIT_REASONS = ("converged", "max_iter", "max_seconds", "cancelled", "numerical_error")

# progress(event) is called between outer iterations, at most every 0.2 s; a truthy return
# value means "stop now" (exit reason "cancelled"). Event keys: iteration, elapsed_s,
# primal, dual (or None), gap (or None), violation (or None), active_size, and for a
# one-vs-rest problem also class_index and n_classes.
ProgressCallback = Callable[[dict[str, Any]], Any]


@dataclass
class FitResult:
    """A trained linear model and how the solver got there.

    decision_function(X) = X @ coef.T + intercept; one column per output. A binary problem
    has one output, positive for classes[1] (the larger class value, as in scikit-learn);
    a multi-class one-vs-rest problem has one output per class, in the order of `classes`.
    """

    solver: str
    classes: np.ndarray  # sorted class values, float64
    coef: np.ndarray  # (n_outputs, n_features) float64
    intercept: np.ndarray  # (n_outputs,) float64
    primal_objective: float  # summed over one-vs-rest subproblems
    dual_objective: float | None
    duality_gap: float | None
    iterations: int  # summed over subproblems
    exit_reason: str  # worst over subproblems: anything but "converged" wins
    train_seconds: float  # solver time only (no parsing, no compilation warm-up)
    params: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    per_output: list[dict[str, Any]] = field(default_factory=list)

    def decision_function(self, X: Any) -> np.ndarray:
        scores = np.asarray(X @ self.coef.T) + self.intercept
        return np.asarray(scores, dtype=np.float64)

    def predict(self, X: Any) -> np.ndarray:
        scores = self.decision_function(X)
        if self.coef.shape[0] == 1:
            return np.where(scores[:, 0] > 0, self.classes[1], self.classes[0])
        return self.classes[np.argmax(scores, axis=1)]
