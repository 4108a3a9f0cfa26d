"""The servable models: what a fit produces, the worker stores and the API predicts with.

- `LinearModel`: decision values X @ coef.T + intercept (a dot product; no compiled code).
- `KernelModel` (defined in solvers/kernels.py, beside its compiled decision function):
  support vectors, dual coefficients and intercepts in LIBSVM's layout.

Both have `kind`, `classes`, `n_features`, `predict(X) -> (labels, decision values)`,
`decision_function(X)` and `to_arrays()` / `from_arrays()`; `model_to_bytes` and
`model_from_bytes` store them as an .npz of plain numeric arrays (no pickle). This module
imports no training code: the API may import it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from solvers.kernels import KernelModel


@dataclass(frozen=True)
class LinearModel:
    """A linear SVM: one output (positive for classes[1]) for two classes, else one
    "class k vs the rest" output per class, in the order of `classes`."""

    classes: np.ndarray  # sorted class values
    coef: np.ndarray  # (n_outputs, n_features)
    intercept: np.ndarray  # (n_outputs,)
    kind: ClassVar[str] = "linear"

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[1])

    def decision_function(self, X: Any) -> np.ndarray:
        """(n_rows, n_outputs) float64: X @ coef.T + intercept."""
        scores = np.asarray(X @ self.coef.T) + self.intercept
        return np.asarray(scores, dtype=np.float64)

    def predict(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """Labels and decision values: one value per row for two classes, one per class else."""
        scores = self.decision_function(X)
        if self.coef.shape[0] == 1:
            values = scores[:, 0]
            return np.where(values > 0, self.classes[1], self.classes[0]), values
        return self.classes[np.argmax(scores, axis=1)], scores

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"classes": self.classes, "coef": self.coef, "intercept": self.intercept}

    @classmethod
    def from_arrays(cls, arrays: Any) -> LinearModel:
        return cls(classes=np.array(arrays["classes"]), coef=np.array(arrays["coef"]),
                   intercept=np.array(arrays["intercept"]))


ServableModel = LinearModel | KernelModel
MODEL_KINDS: dict[str, type[LinearModel] | type[KernelModel]] = {
    "linear": LinearModel, "kernel": KernelModel,
}


def model_to_bytes(model: ServableModel) -> bytes:
    """The model's arrays as .npz bytes (store `model.kind` beside them)."""
    buffer = io.BytesIO()
    # np.ascontiguousarray would turn 0-d scalars into 1-d arrays; keep their shape
    np.savez(buffer, allow_pickle=False,
             **{k: np.asarray(v) if np.ndim(v) == 0 else np.ascontiguousarray(v)
                for k, v in model.to_arrays().items()})
    return buffer.getvalue()


def model_from_bytes(kind: str, payload: bytes) -> ServableModel:
    """The inverse of model_to_bytes; `kind` is the stored model's `kind`."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; known: {', '.join(MODEL_KINDS)}")
    with np.load(io.BytesIO(payload), allow_pickle=False) as blob:
        arrays = {name: blob[name] for name in blob.files}
    return MODEL_KINDS[kind].from_arrays(arrays)


__all__ = ["KernelModel", "LinearModel", "ServableModel", "model_from_bytes", "model_to_bytes"]
