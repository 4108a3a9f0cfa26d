"""The servable models: what a fit produces, the worker stores and the API predicts with.

- `LinearModel`: decision values X @ coef.T + intercept (a dot product; no compiled code).
- `KernelModel` (defined in solvers/kernels.py, beside its compiled decision function):
  support vectors, dual coefficients and intercepts in LIBSVM's layout.

- `Pipeline`: one of those with what travels with it: an optional fitted `Scaler`
  (solvers/scaling.py), applied to the rows before the estimator sees them, and optional
  `Calibration` (Platt sigmoids, LIBSVM's `-b 1`), which turns decision values into
  probabilities (solvers/probability.py).

All have `kind`, `classes`, `n_features`, `predict(X) -> (labels, decision values)`,
`decision_function(X)`; `model_to_bytes` and `model_from_bytes` store them as an .npz of
plain numeric arrays (no pickle): a Pipeline's scaler and sigmoids are arrays prefixed
`scaler_` and `probability_` beside the estimator's. This module imports no training code:
the API may import it.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from solvers.kernels import KernelModel
from solvers.probability import (
    one_class_probability,
    ovo_probabilities,
    ovr_probabilities,
)
from solvers.scaling import METHODS as SCALING_METHODS
from solvers.scaling import Scaler


@dataclass(frozen=True)
class LinearModel:
    """A linear SVM: one output (positive for classes[1]) for two classes, else one
    "class k vs the rest" output per class, in the order of `classes`."""

    classes: np.ndarray  # sorted class values
    coef: np.ndarray  # (n_outputs, n_features)
    intercept: np.ndarray  # (n_outputs,)
    # "classification"; "regression" (linear SVR: the value itself, classes empty) or
    # "outlier" (one-class: +1 when the value is > 0, else -1; classes [-1, 1])
    task: str = "classification"
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
        if self.task == "regression":
            return scores[:, 0].copy(), scores[:, 0]
        if self.task == "outlier":
            return np.where(scores[:, 0] > 0, 1.0, -1.0), scores[:, 0]
        if self.coef.shape[0] == 1:
            values = scores[:, 0]
            return np.where(values > 0, self.classes[1], self.classes[0]), values
        return self.classes[np.argmax(scores, axis=1)], scores

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"classes": self.classes, "coef": self.coef, "intercept": self.intercept}
        if self.task != "classification":
            arrays["task"] = np.array(LINEAR_TASKS.index(self.task))
        return arrays

    @classmethod
    def from_arrays(cls, arrays: Any) -> LinearModel:
        task = LINEAR_TASKS[int(arrays["task"])] if "task" in arrays else "classification"
        return cls(classes=np.array(arrays["classes"]), coef=np.array(arrays["coef"]),
                   intercept=np.array(arrays["intercept"]), task=task)


LINEAR_TASKS = ("classification", "regression", "outlier")  # codes of a stored model


Estimator = LinearModel | KernelModel
MODEL_KINDS: dict[str, type[LinearModel] | type[KernelModel]] = {
    "linear": LinearModel, "kernel": KernelModel,
}
PROBABILITY_LAYOUTS = ("pairwise", "ovr", "laplace", "density")


@dataclass(frozen=True, eq=False)
class Calibration:
    """Platt sigmoids P = 1 / (1 + exp(A f + B)), one per decision function.

    layout "pairwise": every two-class model and one-vs-one kernel models. One sigmoid per
    class pair in LIBSVM's order (0,1), (0,2), ..., fitted on decision values oriented as
    LIBSVM's (positive for the pair's first, smaller class; for two classes that is minus
    Hinge's decision value); probabilities by pairwise coupling (Wu, Lin & Weng 2004,
    method 2), the sigmoid itself for two classes. A and B are LIBSVM's probA and probB.
    layout "ovr": one-vs-rest models of k > 2 classes. Sigmoid c estimates P(class c | x)
    from the "c vs the rest" value alone; the k estimates are divided by their sum.
    layout "laplace" (epsilon_svr, nu_svr; LIBSVM's `-b 1` for regression): A = [sigma],
    B empty: the target is the predicted value plus Laplace noise of density
    exp(-|z| / sigma) / (2 sigma) (LIBSVM's probA); there are no class probabilities.
    layout "density" (one_class; LIBSVM 3.35+ `-b 1`): A = the ten prob_density_marks, B
    empty: P(inlier) by the bin of the decision value (solvers.calibration.
    one_class_probability); columns [P(-1 outlier), P(+1 inlier)] in class order.
    """

    layout: str
    A: np.ndarray
    B: np.ndarray
    # pairwise, k > 2: the class order of the coupling (None: the sorted order); a model
    # imported from a LIBSVM file keeps the file's label order (solvers/model_import.py)
    order: np.ndarray | None = None

    @property
    def sigma(self) -> float | None:
        """The Laplace noise width of a regression model (layout "laplace"), else None."""
        return float(self.A[0]) if self.layout == "laplace" else None

    def probabilities(self, values: np.ndarray) -> np.ndarray:
        """(n, k) probabilities, columns in class order, from public decision values."""
        if self.layout == "laplace":
            raise ValueError("a regression model has no class probabilities; its "
                             "calibration is the Laplace noise width `sigma`")
        if self.layout == "ovr":
            return ovr_probabilities(values, self.A, self.B)
        if self.layout == "density":
            inlier = one_class_probability(self.A, values)
            return np.column_stack([1.0 - inlier, inlier])
        pairwise = -values.reshape(-1, 1) if values.ndim == 1 else values
        return ovo_probabilities(pairwise, self.A, self.B, order=self.order)


@dataclass(frozen=True, eq=False)
class Pipeline:
    """An estimator with the scaler it was trained behind and its probability sigmoids.

    predict / decision_function take raw rows (the model's feature space before scaling);
    the scaler (fitted on the training rows only) maps them first. Decision values are the
    estimator's on the scaled rows."""

    estimator: Estimator
    scaler: Scaler | None = None
    calibration: Calibration | None = None

    @property
    def kind(self) -> str:
        return self.estimator.kind

    @property
    def classes(self) -> np.ndarray:
        return self.estimator.classes

    @property
    def n_features(self) -> int:
        return self.estimator.n_features

    @property
    def intercept(self) -> np.ndarray:
        return self.estimator.intercept

    def transform(self, X: Any) -> Any:
        return X if self.scaler is None else self.scaler.transform(X)

    def decision_function(self, X: Any) -> np.ndarray:
        return self.estimator.decision_function(self.transform(X))

    def predict(self, X: Any, threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        scaled = self.transform(X)
        if isinstance(self.estimator, KernelModel):
            return self.estimator.predict(scaled, threads=threads)
        return self.estimator.predict(scaled)

    def predict_with_probabilities(self, X: Any) -> tuple[np.ndarray, np.ndarray,
                                                          np.ndarray | None]:
        """Labels, decision values and (with a calibration) probabilities, (n, k)."""
        labels, values = self.predict(X)
        if self.calibration is None or self.calibration.layout == "laplace":
            return labels, values, None
        return labels, values, self.calibration.probabilities(values)

    def to_arrays(self) -> dict[str, np.ndarray]:
        arrays = dict(self.estimator.to_arrays())
        if self.scaler is not None:
            scaler_arrays, meta = self.scaler.to_arrays()
            arrays.update({f"scaler_{name}": value for name, value in scaler_arrays.items()})
            arrays["scaler_format_version"] = np.array(meta["format_version"], dtype=np.int64)
            arrays["scaler_method"] = np.array(SCALING_METHODS.index(meta["method"]),
                                               dtype=np.uint8)
            arrays["scaler_range"] = np.array(
                [np.nan if meta["lower"] is None else meta["lower"],
                 np.nan if meta["upper"] is None else meta["upper"]], dtype=np.float64)
        if self.calibration is not None:
            arrays["probability_layout"] = np.array(
                PROBABILITY_LAYOUTS.index(self.calibration.layout), dtype=np.uint8)
            arrays["probability_A"] = np.asarray(self.calibration.A, dtype=np.float64)
            arrays["probability_B"] = np.asarray(self.calibration.B, dtype=np.float64)
            if self.calibration.order is not None:
                arrays["probability_order"] = np.asarray(self.calibration.order,
                                                         dtype=np.int64)
        return arrays

    @classmethod
    def from_arrays(cls, estimator: Estimator, arrays: dict[str, np.ndarray]) -> Pipeline:
        scaler = None
        if "scaler_method" in arrays:
            method = SCALING_METHODS[int(arrays["scaler_method"])]
            lower, upper = (float(v) for v in arrays["scaler_range"])
            meta = {"format_version": int(arrays["scaler_format_version"]), "method": method,
                    "lower": None if np.isnan(lower) else lower,
                    "upper": None if np.isnan(upper) else upper,
                    "n_features": int(arrays["scaler_feature_min"].shape[0])}
            scaler = Scaler.from_arrays(
                {name[len("scaler_"):]: value for name, value in arrays.items()
                 if name.startswith("scaler_") and value.ndim == 1 and name != "scaler_range"},
                meta)
        calibration = None
        if "probability_layout" in arrays:
            calibration = Calibration(PROBABILITY_LAYOUTS[int(arrays["probability_layout"])],
                                      np.array(arrays["probability_A"], dtype=np.float64),
                                      np.array(arrays["probability_B"], dtype=np.float64),
                                      np.array(arrays["probability_order"], dtype=np.int64)
                                      if "probability_order" in arrays else None)
        return cls(estimator, scaler, calibration)


ServableModel = LinearModel | KernelModel | Pipeline


def predictions(model: Any, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Labels, decision values and, for a calibrated Pipeline, probabilities (else None), of
    any servable model (a LinearModel, a KernelModel or a Pipeline)."""
    if isinstance(model, Pipeline):
        return model.predict_with_probabilities(X)
    labels, values = model.predict(X)
    return labels, values, None


def estimator_of(model: ServableModel) -> Estimator:
    """The bare LinearModel or KernelModel (inside a Pipeline, or the model itself)."""
    return model.estimator if isinstance(model, Pipeline) else model


def model_to_bytes(model: ServableModel) -> bytes:
    """The model's arrays as .npz bytes (store `model.kind` beside them)."""
    buffer = io.BytesIO()
    # np.ascontiguousarray would turn 0-d scalars into 1-d arrays; keep their shape
    np.savez(buffer, allow_pickle=False,
             **{k: np.asarray(v) if np.ndim(v) == 0 else np.ascontiguousarray(v)
                for k, v in model.to_arrays().items()})
    return buffer.getvalue()


def model_from_bytes(kind: str, payload: bytes) -> ServableModel:
    """The inverse of model_to_bytes; `kind` is the stored model's `kind`. A Pipeline when
    the arrays hold a scaler or sigmoids, else the bare estimator."""
    if kind not in MODEL_KINDS:
        raise ValueError(f"unknown model kind {kind!r}; known: {', '.join(MODEL_KINDS)}")
    with np.load(io.BytesIO(payload), allow_pickle=False) as blob:
        arrays = {name: blob[name] for name in blob.files}
    extras = {name: arrays.pop(name) for name in list(arrays)
              if name.startswith(("scaler_", "probability_"))}
    estimator = MODEL_KINDS[kind].from_arrays(arrays)
    return Pipeline.from_arrays(estimator, extras) if extras else estimator


__all__ = ["Calibration", "KernelModel", "LinearModel", "Pipeline", "ServableModel",
           "estimator_of", "model_from_bytes", "model_to_bytes"]
