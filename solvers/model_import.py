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
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers.formats import ModelFormatError
from solvers.kernels import KernelModel, pair_classes
from solvers.models import Calibration, LinearModel, Pipeline, ServableModel
from solvers.scaling import Scaler, ScalingError, scaler_from_range_text


class ModelFileError(ModelFormatError):
    """A model file that does not parse; `line` is the 1-based line (None: the file)."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line is not None else message)
        self.line = line
        self.reason = message


class NotServable(ModelFileError):
    """A well-formed model of a formulation Hinge does not serve yet."""


class OverLimit(ModelFileError):
    """A model larger than a limit allows (support vectors, features, classes)."""


@dataclass(frozen=True)
class ImportLimits:
    max_support_vectors: int = 1_000_000
    max_features: int = 10_000_000
    max_classes: int = 1000


@dataclass(frozen=True)
class ImportedModel:
    """A model read from a file: the servable model and what the file said about itself."""

    model: ServableModel
    format: str  # "libsvm" | "liblinear"
    kind: str  # "kernel" | "linear"
    solver: str  # LIBSVM's svm_type or LIBLINEAR's solver_type, as written
    classes: list[float]
    n_features: int
    params: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


def read_model_file(text: str, limits: ImportLimits = ImportLimits(), *,
                    range_text: str | None = None,
                    n_features: int | None = None) -> ImportedModel:
    """The model in `text` (LIBSVM or LIBLINEAR), with the minmax scaler of the svm-scale
    range file `range_text` in front of it if given. n_features widens a LIBSVM model (and
    must not be below the largest index it uses)."""
    lines = text.splitlines()
    first = next((line.split()[0] for line in lines if line.split()), None)
    if first == "svm_type":
        imported = _read_libsvm(lines, limits, n_features)
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


# -- the header and body lines both formats share --------------------------------------

_Header = dict[str, tuple[int, list[str]]]


def _read_header(lines: list[str], program: str, fields: tuple[str, ...], marker: str,
                 what: str) -> tuple[_Header, int]:
    """The fields before the line `marker` (alone on its line), as {key: (line, values)},
    and the 1-based number of the marker line; `what` names what follows the marker."""
    header: _Header = {}
    position = 0
    while position < len(lines):
        parts = lines[position].split()
        position += 1
        if not parts:
            continue
        if parts == [marker]:
            return header, position
        key = parts[0]
        if key not in fields:
            raise ModelFileError(f"unknown {program} header field {key!r} (known: "
                               f"{', '.join(fields)}, then {marker})", position)
        if key in header:
            raise ModelFileError(f"{key} is given twice", position)
        header[key] = (position, parts[1:])
    raise ModelFileError(f"{program} model file has no '{marker}' line (the {what} follow "
                       "it)", len(lines) or None)


def _one_value(header: _Header, key: str, program: str, marker_line: int) -> tuple[int, str]:
    """(line, value) of a field that takes exactly one value."""
    if key not in header:
        raise ModelFileError(f"{program} header lacks {key}", marker_line)
    line, values = header[key]
    if len(values) != 1:
        raise ModelFileError(f"{key} takes one value, has {len(values)}", line)
    return line, values[0]


def _model_kind(one: Callable[[str], tuple[int, str]], key: str, served: Container[str],
                not_yet: Container[str], not_yet_why: str) -> str:
    """The value of the field that names the model's type: one Hinge serves, or
    NotServable (a known type not served yet, `not_yet_why` says so) or ModelFileError."""
    line, kind = one(key)
    if kind in not_yet:
        raise NotServable(f"{key} {kind} {not_yet_why}", line)
    if kind not in served:
        raise ModelFileError(f"unknown {key} {kind!r}", line)
    return kind


def _body_lines(lines: list[str], marker_line: int) -> Iterator[tuple[int, list[str]]]:
    """(1-based line number, fields) of every non-blank line after the marker line."""
    for number in range(marker_line + 1, len(lines) + 1):
        parts = lines[number - 1].split()
        if parts:
            yield number, parts


# -- LIBSVM ------------------------------------------------------------------------------

_LIBSVM_SERVED = ("c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr")
_LIBSVM_NOT_YET: tuple[str, ...] = ()
_LIBSVM_SINGLE = ("one_class", "epsilon_svr", "nu_svr")  # one decision function
_KERNELS = {"linear": "linear", "polynomial": "poly", "rbf": "rbf", "sigmoid": "sigmoid"}
_LIBSVM_FIELDS = ("svm_type", "kernel_type", "degree", "gamma", "coef0", "nr_class",
                  "total_sv", "rho", "label", "probA", "probB", "prob_density_marks",
                  "nr_sv")


def _read_libsvm(lines: list[str], limits: ImportLimits, n_features: int | None
                 ) -> ImportedModel:
    header, sv_line = _read_header(lines, "LIBSVM", _LIBSVM_FIELDS, "SV", "support vectors")

    def one(key: str) -> tuple[int, str]:
        return _one_value(header, key, "LIBSVM", sv_line)

    svm_type = _model_kind(one, "svm_type", _LIBSVM_SERVED, _LIBSVM_NOT_YET,
                           f"is not supported yet (Hinge serves "
                           f"{' and '.join(_LIBSVM_SERVED)} models)")
    line, kernel_type = one("kernel_type")
    if kernel_type == "precomputed":
        raise NotServable("kernel_type precomputed is not supported yet (the model holds "
                          "indices into a kernel matrix, not support vectors)", line)
    kernel = _KERNELS.get(kernel_type)
    if kernel is None:
        raise ModelFileError(f"unknown kernel_type {kernel_type!r} (one of "
                           f"{', '.join(_KERNELS)})", line)
    degree, gamma, coef0 = 3, 0.0, 0.0
    if kernel == "poly":
        line, text = one("degree")
        degree = _integer(text, "degree", line, low=0)
    if kernel != "linear":
        line, text = one("gamma")
        gamma = _number(text, "gamma", line)
    if kernel in ("poly", "sigmoid"):
        line, text = one("coef0")
        coef0 = _number(text, "coef0", line)
    if svm_type in _LIBSVM_SINGLE:
        return _read_libsvm_single(lines, header, sv_line, svm_type, limits, n_features,
                                   (kernel, gamma, degree, coef0))
    line, text = one("nr_class")
    k = _integer(text, "nr_class", line, low=2)
    if k > limits.max_classes:
        raise OverLimit(f"nr_class {k} exceeds the limit of {limits.max_classes} "
                           "classes", line)
    line, text = one("total_sv")
    total_sv = _integer(text, "total_sv", line, low=1)
    if total_sv > limits.max_support_vectors:
        raise OverLimit(f"total_sv {total_sv} exceeds the limit of "
                           f"{limits.max_support_vectors} support vectors", line)
    n_pairs = k * (k - 1) // 2
    rho = _numbers(header, "rho", n_pairs, f"nr_class {k} needs one per class pair",
                   sv_line)
    labels = _labels(header, k, sv_line)
    if "prob_density_marks" in header:
        raise ModelFileError("prob_density_marks belongs to one-class models",
                           header["prob_density_marks"][0])
    prob_a = prob_b = None
    if ("probA" in header) != ("probB" in header):
        given = "probA" if "probA" in header else "probB"
        raise ModelFileError(f"{given} without {'probB' if given == 'probA' else 'probA'}",
                           header[given][0])
    if "probA" in header:
        prob_a = _numbers(header, "probA", n_pairs, "one per class pair", sv_line)
        prob_b = _numbers(header, "probB", n_pairs, "one per class pair", sv_line)
    if "nr_sv" not in header:
        raise ModelFileError("LIBSVM header lacks nr_sv", sv_line)
    line, values = header["nr_sv"]
    if len(values) != k:
        raise ModelFileError(f"nr_sv has {len(values)} values; nr_class {k} needs {k}", line)
    n_sv = np.array([_integer(v, "nr_sv", line, low=0) for v in values], dtype=np.int64)
    if int(n_sv.sum()) != total_sv:
        raise ModelFileError(f"nr_sv sums to {int(n_sv.sum())}, total_sv says {total_sv}",
                           line)

    coef, data, indices, indptr = _support_vectors(lines, sv_line, total_sv, k - 1, limits)
    width = _width(indices, n_features, limits)

    order = np.argsort(labels, kind="stable")
    model = _sorted_kernel_model(labels, order, kernel, gamma, degree, coef0, width,
                                 data, indices, indptr, coef, rho, n_sv)
    served: ServableModel = model
    if prob_a is not None and prob_b is not None:
        signs = _pair_signs(order)
        by_sorted = _file_pair_of_sorted(order)
        calibration = Calibration("pairwise", prob_a[by_sorted].copy(),
                                  signs * prob_b[by_sorted], _file_order(order, k))
        served = Pipeline(model, None, calibration)
    params = _kernel_params(svm_type, kernel, gamma, degree, coef0, prob_a is not None)
    return ImportedModel(
        model=served, format="libsvm", kind="kernel", solver=svm_type,
        classes=[float(v) for v in model.classes], n_features=width, params=params,
        summary={"n_support": total_sv, "n_sv": [int(v) for v in model.n_sv],
                 "label_order": [float(v) for v in labels]})


def _kernel_params(svm_type: str, kernel: str, gamma: float, degree: int, coef0: float,
                   probability: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"svm_type": svm_type, "kernel": kernel,
                              "probability": probability}
    if kernel != "linear":
        params["gamma"] = gamma
    if kernel == "poly":
        params["degree"] = degree
    if kernel in ("poly", "sigmoid"):
        params["coef0"] = coef0
    return params


def _read_libsvm_single(lines: list[str], header: _Header, sv_line: int, svm_type: str,
                        limits: ImportLimits, n_features: int | None,
                        kernel_fields: tuple[str, float, int, float]) -> ImportedModel:
    """A one_class, epsilon_svr or nu_svr file (svm_save_model with model->label and
    model->nSV NULL): nr_class 2, one rho, one coefficient per support vector (training
    order), and `probA <sigma>` (regression, -b 1) or ten `prob_density_marks`
    (one-class, -b 1, LIBSVM 3.35+)."""
    kernel, gamma, degree, coef0 = kernel_fields
    line, text = _one_value(header, "nr_class", "LIBSVM", sv_line)
    if _integer(text, "nr_class", line) != 2:
        raise ModelFileError(f"nr_class of a {svm_type} model is 2 (LIBSVM writes 2), "
                             f"not {text}", line)
    for key in ("label", "nr_sv", "probB"):
        if key in header:
            raise ModelFileError(f"{key} does not belong to a {svm_type} model",
                                 header[key][0])
    regression = svm_type != "one_class"
    misplaced = "prob_density_marks" if regression else "probA"
    if misplaced in header:
        raise ModelFileError(f"{misplaced} does not belong to a {svm_type} model",
                             header[misplaced][0])
    line, text = _one_value(header, "total_sv", "LIBSVM", sv_line)
    total_sv = _integer(text, "total_sv", line, low=1)
    if total_sv > limits.max_support_vectors:
        raise OverLimit(f"total_sv {total_sv} exceeds the limit of "
                        f"{limits.max_support_vectors} support vectors", line)
    rho = _numbers(header, "rho", 1, "one for a single decision function", sv_line)
    calibration = None
    if regression and "probA" in header:
        sigma = _numbers(header, "probA", 1, "the Laplace width sigma", sv_line)
        calibration = Calibration("laplace", sigma, np.zeros(0))
    if not regression and "prob_density_marks" in header:
        marks = _numbers(header, "prob_density_marks", 10, "ten marks", sv_line)
        if np.any(np.diff(marks) < 0):
            raise ModelFileError("prob_density_marks must not decrease",
                                 header["prob_density_marks"][0])
        calibration = Calibration("density", marks, np.zeros(0))
    coef, data, indices, indptr = _support_vectors(lines, sv_line, total_sv, 1, limits)
    width = _width(indices, n_features, limits)
    model = KernelModel(
        classes=np.empty(0) if regression else np.array([-1.0, 1.0]), kernel=kernel,
        gamma=gamma, degree=degree, coef0=coef0, multiclass="ovo", n_features=width,
        sv_data=data, sv_indices=indices, sv_indptr=indptr, sv_coef=coef, rho=rho,
        n_sv=np.array([total_sv]), sv_rows=np.full(total_sv, -1, dtype=np.int64),
        svm_type=svm_type)
    served: ServableModel = model if calibration is None else Pipeline(model, None,
                                                                       calibration)
    return ImportedModel(
        model=served, format="libsvm", kind="kernel", solver=svm_type,
        classes=[float(v) for v in model.classes], n_features=width,
        params=_kernel_params(svm_type, kernel, gamma, degree, coef0, calibration is not None),
        summary={"n_support": total_sv})


def _support_vectors(lines: list[str], sv_line: int, total_sv: int, n_coef: int,
                     limits: ImportLimits
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The lines after 'SV': (coef (n_coef, total_sv), data, 0-based indices, indptr)."""
    remaining = sum(1 for text in lines[sv_line:] if text.strip())
    if total_sv > remaining:  # before allocating what the header claims
        raise ModelFileError(f"total_sv {total_sv}, but the file has {remaining} lines "
                             "after 'SV'", len(lines))
    if n_coef * total_sv > sum(len(text) for text in lines[sv_line:]) // 2 + 1:
        raise ModelFileError(f"{total_sv} support vectors of {n_coef} coefficient(s) each "
                             "do not fit in the lines after 'SV'", len(lines))
    coef = np.empty((n_coef, total_sv))
    data: list[float] = []
    indices: list[int] = []
    indptr = [0]
    count = 0
    for s, (number, parts) in enumerate(_body_lines(lines, sv_line)):
        if s == total_sv:
            raise ModelFileError(f"more support vectors than total_sv {total_sv}", number)
        if len(parts) < n_coef:
            raise ModelFileError(f"a support vector line starts with {n_coef} "
                                 f"coefficient(s); this one has {len(parts)} fields", number)
        for c in range(n_coef):
            coef[c, s] = _number(parts[c], "coefficient", number, node=parts[c])
        previous = 0
        for node in parts[n_coef:]:
            index_text, colon, value_text = node.partition(":")
            if not colon:
                raise ModelFileError(f"expected index:value, found {node!r}", number)
            index = _integer(index_text, "feature index", number, low=1, node=node)
            if index <= previous:
                raise ModelFileError(f"feature indices must increase ({index} after "
                                     f"{previous})", number)
            if index > limits.max_features:
                raise OverLimit(f"feature index {index} exceeds the limit of "
                                f"{limits.max_features} features", number)
            previous = index
            indices.append(index - 1)
            data.append(_number(value_text, "feature value", number, node=node))
        indptr.append(len(indices))
        count = s + 1
    if count < total_sv:
        raise ModelFileError(f"{count} support vectors, total_sv says {total_sv}", len(lines))
    return (coef, np.array(data, dtype=np.float64), np.array(indices, dtype=np.int32),
            np.array(indptr, dtype=np.int64))


def _width(indices: np.ndarray, n_features: int | None, limits: ImportLimits) -> int:
    """The model's feature count: the largest support-vector index, or `n_features`."""
    largest = int(indices.max()) + 1 if indices.size else 0
    if n_features is None:
        return max(largest, 1)
    if n_features < largest:
        raise ModelFileError(f"n_features {n_features} is below the largest support-vector "
                             f"index {largest}")
    if n_features > limits.max_features:
        raise OverLimit(f"n_features {n_features} exceeds the limit of "
                        f"{limits.max_features} features")
    return n_features


def _sorted_kernel_model(labels: np.ndarray, order: np.ndarray, kernel: str, gamma: float,
                         degree: int, coef0: float, width: int, data: np.ndarray,
                         indices: np.ndarray, indptr: np.ndarray, coef: np.ndarray,
                         rho: np.ndarray, n_sv: np.ndarray) -> KernelModel:
    from solvers.formats import _sorted_layout

    sv_data, sv_indices, sv_indptr, sv_coef, sorted_rho = _sorted_layout(
        data, indices, indptr, coef, rho, n_sv, order)
    return KernelModel(
        classes=labels[order], kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
        multiclass="ovo", n_features=width, sv_data=sv_data, sv_indices=sv_indices,
        sv_indptr=sv_indptr, sv_coef=sv_coef, rho=sorted_rho, n_sv=n_sv[order],
        sv_rows=np.full(sv_indptr.shape[0] - 1, -1, dtype=np.int64),
        vote_order=_file_order(order, labels.shape[0]))


def _file_order(order: np.ndarray, k: int) -> np.ndarray | None:
    """The sorted class index of each of the file's labels, in the file's order (None when
    the file lists them sorted, or for two classes, where there is no vote to tie)."""
    if k == 2:
        return None
    file_order = np.argsort(order, kind="stable")  # order[c] = file index of sorted c
    return None if np.array_equal(file_order, np.arange(k)) else file_order


def _file_pair_of_sorted(order: np.ndarray) -> np.ndarray:
    """For each pair of the sorted classes (LIBSVM's pair order), the file's pair."""
    k = order.shape[0]
    first, second = pair_classes(k)
    file_pair = {(int(a), int(b)): p for p, (a, b) in enumerate(zip(first, second,
                                                                     strict=True))}
    return np.array([file_pair[(min(int(order[a]), int(order[b])),
                                max(int(order[a]), int(order[b])))]
                     for a, b in zip(first, second, strict=True)], dtype=np.int64)


def _pair_signs(order: np.ndarray) -> np.ndarray:
    """+1 where a sorted pair keeps the file's orientation, -1 where its classes swap."""
    first, second = pair_classes(order.shape[0])
    return np.where(order[first] < order[second], 1.0, -1.0)


def _labels(header: _Header, k: int, sv_line: int) -> np.ndarray:
    if "label" not in header:
        raise ModelFileError("LIBSVM header lacks label", sv_line)
    line, values = header["label"]
    if len(values) != k:
        raise ModelFileError(f"label has {len(values)} values; nr_class {k} needs {k}", line)
    labels = np.array([float(_integer(v, "label", line)) for v in values])
    if len(set(labels.tolist())) != k:
        raise ModelFileError("labels must be distinct", line)
    return labels


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
    header, w_line = _read_header(lines, "LIBLINEAR", _LIBLINEAR_FIELDS, "w", "weights")

    def one(key: str) -> tuple[int, str]:
        return _one_value(header, key, "LIBLINEAR", w_line)

    solver_type = _model_kind(one, "solver_type", _LIBLINEAR_CLASSIFIERS, _LIBLINEAR_NOT_YET,
                              "(regression or one-class) is not supported yet: Hinge serves "
                              "LIBLINEAR's classification solvers")
    line, text = one("nr_class")
    k = _integer(text, "nr_class", line, low=2)
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
    labels = np.array([float(_integer(v, "label", label_line)) for v in values])
    if len(set(labels.tolist())) != k:
        raise ModelFileError("labels must be distinct", label_line)
    line, text = one("nr_feature")
    n_features = _integer(text, "nr_feature", line, low=0)
    if n_features > limits.max_features:
        raise OverLimit(f"nr_feature {n_features} exceeds the limit of "
                           f"{limits.max_features} features", line)
    if n_features == 0:
        raise ModelFileError("nr_feature 0: a model of no features", line)
    line, text = one("bias")
    bias = _number(text, "bias", line)
    n_outputs = 1 if k == 2 else k
    n_rows = n_features + (1 if bias >= 0 else 0)
    remaining = sum(1 for text in lines[w_line:] if text.strip())
    if n_rows > remaining:  # before allocating what the header claims
        raise ModelFileError(f"nr_feature{' + 1 (bias)' if bias >= 0 else ''} = {n_rows} "
                             f"weight rows, but the file has {remaining} lines after 'w'",
                             len(lines))
    weights = np.empty((n_rows, n_outputs))
    for row, (number, parts) in enumerate(_body_lines(lines, w_line)):
        if row == n_rows:
            bias_row = " + 1 (bias)" if bias >= 0 else ""
            raise ModelFileError(f"more weight rows than nr_feature{bias_row} = {n_rows}",
                                 number)
        if len(parts) != n_outputs:
            raise ModelFileError(f"a weight row has {n_outputs} value(s) "
                               f"({'one per class' if n_outputs > 1 else 'two classes'});"
                               f" this one has {len(parts)}", number)
        for c, value in enumerate(parts):
            weights[row, c] = _number(value, "weight", number, node=value)
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


# -- numbers -----------------------------------------------------------------------------

def _number(text: str, what: str, line: int, node: str | None = None) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
        where = f" in {node!r}" if node is not None and node != text else ""
        raise ModelFileError(f"{what} {text!r}{where} is not a number", line) from None
    if not math.isfinite(value):
        raise ModelFileError(f"{what} {text!r} is not finite", line)
    return value


def _integer(text: str, what: str, line: int, low: int | None = None,
             node: str | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        where = f" in {node!r}" if node is not None and node != text else ""
        raise ModelFileError(f"{what} {text!r}{where} is not an integer", line) from None
    if low is not None and value < low:
        raise ModelFileError(f"{what} {value} must be >= {low}", line)
    return value


def _numbers(header: _Header, key: str, count: int, why: str,
             sv_line: int) -> np.ndarray:
    if key not in header:
        raise ModelFileError(f"LIBSVM header lacks {key}", sv_line)
    line, values = header[key]
    if len(values) != count:
        raise ModelFileError(f"{key} has {len(values)} values; {why} ({count})", line)
    return np.array([_number(v, key, line) for v in values])


__all__ = ["ImportLimits", "ImportedModel", "ModelFileError", "ModelFormatError",
           "NotServable", "OverLimit", "read_model_file"]
