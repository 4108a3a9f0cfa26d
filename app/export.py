"""Model files in the formats of the reference engines (LIBLINEAR's `predict` loads them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.errors import ApiError
from app.predict import LinearModel

LIBLINEAR_SOLVER_TYPES = {"l1": "L2R_L1LOSS_SVC_DUAL", "l2": "L2R_L2LOSS_SVC_DUAL"}


def _integer_labels(classes: np.ndarray) -> list[int]:
    if not np.all(np.equal(np.mod(classes, 1), 0)):
        raise ApiError(422, "LIBLINEAR model files need integer class labels; this model's "
                            f"labels are {classes.tolist()}")
    return [int(v) for v in classes]


def liblinear_model_text(model: LinearModel, params: dict[str, Any]) -> str:
    """LIBLINEAR's model file: `w` rows per feature (then the bias row), one column per class.

    LIBLINEAR predicts label[0] for a positive binary decision value, so a binary model lists
    classes[1] (our positive class) first. With `bias` > 0 LIBLINEAR adds w_bias * bias.
    """
    labels = _integer_labels(model.classes)
    loss = params.get("loss", "l1")
    solver_type = LIBLINEAR_SOLVER_TYPES.get(loss, "L2R_L1LOSS_SVC_DUAL")
    augment = params.get("bias", "augment") == "augment"
    bias_scale = float(params.get("bias_scale", 1.0)) if augment else -1.0
    if model.coef.shape[0] == 1:
        weights = model.coef.T  # (n_features, 1)
        bias_row = model.intercept
        label_order = [labels[1], labels[0]]
    else:
        weights = model.coef.T  # (n_features, n_classes)
        bias_row = model.intercept
        label_order = labels
    if not augment and np.any(bias_row != 0):
        raise ApiError(422, "this model has a free intercept, which LIBLINEAR files cannot hold")
    lines = [
        f"solver_type {solver_type}",
        f"nr_class {len(labels)}",
        "label " + " ".join(str(v) for v in label_order),
        f"nr_feature {model.n_features}",
        f"bias {bias_scale:.17g}",
        "w",
    ]
    lines += [" ".join(f"{v:.17g}" for v in row) + " " for row in weights]
    if augment:
        lines.append(" ".join(f"{v / bias_scale:.17g}" for v in bias_row) + " ")
    return "\n".join(lines) + "\n"
