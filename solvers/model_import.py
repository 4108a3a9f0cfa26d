"""Model files trained elsewhere, read strictly: LIBSVM's (`svm_save_model`) and LIBLINEAR's
(`save_model`) text formats, checked field by field, as servable models (solvers.models).

`read_model_file(text, limits)` tells the two formats apart by their first keyword
(`svm_type` or `solver_type`), checks every header field, count and support-vector or
weight line against the header, and returns an `ImportedModel`. Anything wrong raises
`ModelFormatError` naming the 1-based line; a formulation that parses but that Hinge does
not serve (a precomputed kernel, LIBLINEAR's regression and one-class solvers) raises
`NotServable`, a ModelFormatError that says "not supported yet".

What is served, and how it maps to Hinge's layout (classes sorted; see solvers/formats.py
and KernelModel's docstring):
- LIBSVM c_svc and nu_svc (the same decision function: sum coef K - rho per pair and
  one-vs-one votes), kernels linear, polynomial, rbf, sigmoid, with or without probA /
  probB (a "pairwise" Calibration; a pair whose classes swap places in the sorted order
  keeps A and negates B, since 1 - sigmoid(A f + B) = sigmoid(-A f - B) and f changes sign).
- LIBSVM one_class, epsilon_svr and nu_svr (one decision function sum coef K - rho:
  the regression value, or +1 inlier / -1 outlier), with a regression model's Laplace
  width (`probA`, a "laplace" Calibration) or a one-class model's ten
  `prob_density_marks` (LIBSVM 3.35+ -b 1, a "density" Calibration).
- LIBLINEAR's classification solvers (0-7: the logistic-regression and SVM ones, whose
  predict is sign / argmax of w.x + b) with one weight column per class, or one for two
  classes; Crammer-Singer (4) for more than two classes. With `bias` >= 0 the last weight
  row times `bias` is the intercept (LIBLINEAR's bias feature).

Feature counts: a LIBLINEAR file states `nr_feature`; a LIBSVM file does not, so its width
is the largest support-vector index unless the caller gives a larger one (an svm-scale range
file's, or an explicit n_features). Rows are cut to the width on predict, as for every
Hinge model; for rbf that differs from svm-predict on features past every support vector
(they add to ||x - sv||^2 there), so give the width of the data.

Label order: the engines list labels as they first appear in the training data; Hinge
sorts them (pairs re-oriented, sigmoids too). What depends on the order is kept: a
one-vs-one vote tie goes to the label listed first in the file (KernelModel.vote_order) and
the probability coupling runs in the file's order (Calibration.order). Left: LIBLINEAR gives
label[1] to a two-class decision value of exactly 0 and LIBSVM the second label to a
two-class value of exactly 0; Hinge gives the smaller class (they agree when the file lists
the smaller class second, as LIBLINEAR does for -1 / +1 data).

This module reads LIBLINEAR's files and the range file; LIBSVM's are read by
solvers/model_import_libsvm.py, with the header fields, numbers and errors of
solvers/model_file.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from solvers import model_file as fields
from solvers.formats import ModelFormatError
from solvers.kernels import KernelModel
from solvers.model_file import ImportedModel, ImportLimits, ModelFileError, NotServable, OverLimit
from solvers.model_import_libsvm import read_libsvm
from solvers.models import LinearModel, Pipeline
from solvers.scaling import Scaler, ScalingError, scaler_from_range_text


def read_model_file(text: str, limits: ImportLimits = ImportLimits(), *,
                    range_text: str | None = None,
                    n_features: int | None = None) -> ImportedModel:
    """The model in `text` (LIBSVM or LIBLINEAR), with the minmax scaler of the svm-scale
    range file `range_text` in front of it if given. n_features widens a LIBSVM model (and
    must not be below the largest index it uses)."""
    lines = text.splitlines()
    first = next((line.split()[0] for line in lines if line.split()), None)
    if first == "svm_type":
        imported = read_libsvm(lines, limits, n_features)
    elif first == "solver_type":
        if n_features is not None and n_features != _liblinear_width_hint(lines):
            raise ModelFileError("n_features is given by the LIBLINEAR file's nr_feature; "
                                 "leave it out")
        imported = _read_liblinear(lines, limits)
    else:
        raise ModelFileError(
            "not a LIBSVM or LIBLINEAR model file: the first field must be svm_type "
            f"(LIBSVM) or solver_type (LIBLINEAR), found {first!r}", 1 if lines else None)
    if range_text is None:
        return imported
    return _with_scaler(imported, range_text, limits)


# -- LIBLINEAR ---------------------------------------------------------------------------

# solver_type -> LIBLINEAR's number; the classification ones are served
_LIBLINEAR_CLASSIFIERS = {
    "L2R_LR": 0, "L2R_L2LOSS_SVC_DUAL": 1, "L2R_L2LOSS_SVC": 2, "L2R_L1LOSS_SVC_DUAL": 3,
    "MCSVM_CS": 4, "L1R_L2LOSS_SVC": 5, "L1R_LR": 6, "L2R_LR_DUAL": 7,
}
_LIBLINEAR_NOT_YET = {"L2R_L2LOSS_SVR": 11, "L2R_L2LOSS_SVR_DUAL": 12,
                      "L2R_L1LOSS_SVR_DUAL": 13, "ONECLASS_SVM": 21}
_LIBLINEAR_FIELDS = ("solver_type", "nr_class", "label", "nr_feature", "bias", "rho")
# Hinge's own names (app/domain/export.py writes them back)
_LIBLINEAR_LOSS = {"L2R_L1LOSS_SVC_DUAL": "l1", "L2R_L2LOSS_SVC_DUAL": "l2",
                   "L2R_L2LOSS_SVC": "l2", "L1R_L2LOSS_SVC": "l2"}


def _liblinear_width_hint(lines: list[str]) -> int | None:
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0] == "nr_feature":
            try:
                return int(parts[1])
            except ValueError:
                return None
    return None


def _read_liblinear(lines: list[str], limits: ImportLimits) -> ImportedModel:
    header, w_line = fields.read_header(lines, "LIBLINEAR", _LIBLINEAR_FIELDS, "w", "weights")

    def one(key: str) -> tuple[int, str]:
        return fields.one_value(header, key, "LIBLINEAR", w_line)

    solver_type = fields.model_kind(
        one, "solver_type", _LIBLINEAR_CLASSIFIERS, _LIBLINEAR_NOT_YET,
        "(regression or one-class) is not supported yet: Hinge serves LIBLINEAR's "
        "classification solvers")
    line, text = one("nr_class")
    k = fields.parse_integer(text, "nr_class", line, low=2)
    if k > limits.max_classes:
        raise OverLimit(f"nr_class {k} exceeds the limit of {limits.max_classes} "
                        "classes", line)
    if k == 2 and solver_type == "MCSVM_CS":
        raise NotServable("a two-class MCSVM_CS (Crammer-Singer) model is not supported "
                          "yet: it has two weight columns where Hinge's two-class models "
                          "have one", line)
    if "rho" in header:
        raise ModelFileError("rho belongs to one-class models", header["rho"][0])
    if "label" not in header:
        raise ModelFileError("LIBLINEAR header lacks label", w_line)
    label_line, values = header["label"]
    if len(values) != k:
        raise ModelFileError(f"label has {len(values)} values; nr_class {k} needs {k}",
                             label_line)
    labels = np.array([float(fields.parse_integer(v, "label", label_line)) for v in values])
    if len(set(labels.tolist())) != k:
        raise ModelFileError("labels must be distinct", label_line)
    line, text = one("nr_feature")
    n_features = fields.parse_integer(text, "nr_feature", line, low=0)
    if n_features > limits.max_features:
        raise OverLimit(f"nr_feature {n_features} exceeds the limit of "
                        f"{limits.max_features} features", line)
    if n_features == 0:
        raise ModelFileError("nr_feature 0: a model of no features", line)
    line, text = one("bias")
    bias = fields.parse_number(text, "bias", line)
    n_outputs = 1 if k == 2 else k
    n_rows = n_features + (1 if bias >= 0 else 0)
    remaining = sum(1 for text in lines[w_line:] if text.strip())
    if n_rows > remaining:  # before allocating what the header claims
        raise ModelFileError(f"nr_feature{' + 1 (bias)' if bias >= 0 else ''} = {n_rows} "
                             f"weight rows, but the file has {remaining} lines after 'w'",
                             len(lines))
    weights = np.empty((n_rows, n_outputs))
    for row, (number, parts) in enumerate(fields.body_lines(lines, w_line)):
        if row == n_rows:
            bias_row = " + 1 (bias)" if bias >= 0 else ""
            raise ModelFileError(f"more weight rows than nr_feature{bias_row} = {n_rows}",
                                 number)
        if len(parts) != n_outputs:
            raise ModelFileError(f"a weight row has {n_outputs} value(s) "
                                 f"({'one per class' if n_outputs > 1 else 'two classes'});"
                                 f" this one has {len(parts)}", number)
        for c, value in enumerate(parts):
            weights[row, c] = fields.parse_number(value, "weight", number, node=value)
    coef = weights[:n_features].T.copy()
    intercept = weights[n_features] * bias if bias >= 0 else np.zeros(n_outputs)
    if k == 2:  # LIBLINEAR: a positive value predicts label[0]; Hinge's: classes[1]
        classes = np.sort(labels)
        sign = 1.0 if labels[0] == classes[1] else -1.0
        model = LinearModel(classes=classes, coef=sign * coef, intercept=sign * intercept)
    else:
        order = np.argsort(labels, kind="stable")
        model = LinearModel(classes=labels[order], coef=coef[order].copy(),
                            intercept=intercept[order].copy())
    params: dict[str, Any] = {"solver_type": solver_type,
                              "bias": "augment" if bias > 0 else "none"}
    if bias > 0:
        params["bias_scale"] = bias
    if solver_type in _LIBLINEAR_LOSS:
        params["loss"] = _LIBLINEAR_LOSS[solver_type]
    return ImportedModel(
        model=model, format="liblinear", kind="linear", solver=solver_type,
        classes=[float(v) for v in model.classes], n_features=n_features, params=params,
        summary={"label_order": [float(v) for v in labels], "bias": bias})


# -- the svm-scale range file ------------------------------------------------------------

def _with_scaler(imported: ImportedModel, range_text: str, limits: ImportLimits
                 ) -> ImportedModel:
    try:
        scaler = scaler_from_range_text(range_text)
    except ScalingError as exc:
        raise ModelFileError(f"range file: {str(exc).removeprefix('range file: ')}") from None
    if scaler.n_features > limits.max_features:
        raise OverLimit(f"range file: feature {scaler.n_features} exceeds the limit of "
                        f"{limits.max_features} features")
    model = imported.model
    estimator = model.estimator if isinstance(model, Pipeline) else model
    calibration = model.calibration if isinstance(model, Pipeline) else None
    width = imported.n_features
    if isinstance(estimator, KernelModel) and scaler.n_features > width:
        # the range file knows features past every support vector: they count in the
        # kernel (||x - sv||^2), so the model takes them
        width = scaler.n_features
        estimator = KernelModel(**{**_kernel_fields(estimator), "n_features": width})
    # features past the model's are 0 after scaling (svm-scale) or cut (predict): the
    # scaler covers exactly the model's width
    feature_min = np.zeros(width)
    feature_max = np.zeros(width)
    shared = min(width, scaler.n_features)
    feature_min[:shared] = scaler.feature_min[:shared]
    feature_max[:shared] = scaler.feature_max[:shared]
    fitted = Scaler("minmax", scaler.lower, scaler.upper, feature_min, feature_max)
    return ImportedModel(
        model=Pipeline(estimator, fitted, calibration), format=imported.format,
        kind=imported.kind, solver=imported.solver, classes=imported.classes,
        n_features=width, params={**imported.params, "scale": "minmax",
                                  "scale_range": [scaler.lower, scaler.upper]},
        summary=imported.summary)


def _kernel_fields(model: KernelModel) -> dict[str, Any]:
    return {name: getattr(model, name) for name in (
        "classes", "kernel", "gamma", "degree", "coef0", "multiclass", "n_features",
        "sv_data", "sv_indices", "sv_indptr", "sv_coef", "rho", "n_sv", "sv_rows",
        "vote_order")}


__all__ = ["ImportLimits", "ImportedModel", "ModelFileError", "ModelFormatError",
           "NotServable", "OverLimit", "read_model_file"]
