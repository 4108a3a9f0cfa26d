"""LIBSVM model files (`svm_save_model`), read strictly as KernelModels in Hinge's layout
(see solvers/model_import.py): c_svc and nu_svc with their pairs and probA / probB, and
the single decision function of one_class, epsilon_svr and nu_svr."""

from __future__ import annotations

from typing import Any

import numpy as np

from solvers.kernels import KernelModel, pair_classes
from solvers.model_file import (
    Header,
    ImportedModel,
    ImportLimits,
    ModelFileError,
    NotServable,
    OverLimit,
    body_lines,
    model_kind,
    one_value,
    parse_integer,
    parse_number,
    read_header,
)
from solvers.models import Calibration, Pipeline, ServableModel

_LIBSVM_SERVED = ("c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr")
_LIBSVM_NOT_YET: tuple[str, ...] = ()
_LIBSVM_SINGLE = ("one_class", "epsilon_svr", "nu_svr")  # one decision function
_KERNELS = {"linear": "linear", "polynomial": "poly", "rbf": "rbf", "sigmoid": "sigmoid"}
_LIBSVM_FIELDS = ("svm_type", "kernel_type", "degree", "gamma", "coef0", "nr_class",
                  "total_sv", "rho", "label", "probA", "probB", "prob_density_marks",
                  "nr_sv")


def read_libsvm(lines: list[str], limits: ImportLimits, n_features: int | None
                 ) -> ImportedModel:
    header, sv_line = read_header(lines, "LIBSVM", _LIBSVM_FIELDS, "SV", "support vectors")

    def one(key: str) -> tuple[int, str]:
        return one_value(header, key, "LIBSVM", sv_line)

    svm_type = model_kind(one, "svm_type", _LIBSVM_SERVED, _LIBSVM_NOT_YET,
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
        degree = parse_integer(text, "degree", line, low=0)
    if kernel != "linear":
        line, text = one("gamma")
        gamma = parse_number(text, "gamma", line)
    if kernel in ("poly", "sigmoid"):
        line, text = one("coef0")
        coef0 = parse_number(text, "coef0", line)
    if svm_type in _LIBSVM_SINGLE:
        return _read_libsvm_single(lines, header, sv_line, svm_type, limits, n_features,
                                   (kernel, gamma, degree, coef0))
    line, text = one("nr_class")
    k = parse_integer(text, "nr_class", line, low=2)
    if k > limits.max_classes:
        raise OverLimit(f"nr_class {k} exceeds the limit of {limits.max_classes} "
                        "classes", line)
    line, text = one("total_sv")
    total_sv = parse_integer(text, "total_sv", line, low=1)
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
    n_sv = np.array([parse_integer(v, "nr_sv", line, low=0) for v in values], dtype=np.int64)
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


def _read_libsvm_single(lines: list[str], header: Header, sv_line: int, svm_type: str,
                        limits: ImportLimits, n_features: int | None,
                        kernel_fields: tuple[str, float, int, float]) -> ImportedModel:
    """A one_class, epsilon_svr or nu_svr file (svm_save_model with model->label and
    model->nSV NULL): nr_class 2, one rho, one coefficient per support vector (training
    order), and `probA <sigma>` (regression, -b 1) or ten `prob_density_marks`
    (one-class, -b 1, LIBSVM 3.35+)."""
    kernel, gamma, degree, coef0 = kernel_fields
    line, text = one_value(header, "nr_class", "LIBSVM", sv_line)
    if parse_integer(text, "nr_class", line) != 2:
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
    line, text = one_value(header, "total_sv", "LIBSVM", sv_line)
    total_sv = parse_integer(text, "total_sv", line, low=1)
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
    for s, (number, parts) in enumerate(body_lines(lines, sv_line)):
        if s == total_sv:
            raise ModelFileError(f"more support vectors than total_sv {total_sv}", number)
        if len(parts) < n_coef:
            raise ModelFileError(f"a support vector line starts with {n_coef} "
                                 f"coefficient(s); this one has {len(parts)} fields", number)
        for c in range(n_coef):
            coef[c, s] = parse_number(parts[c], "coefficient", number, node=parts[c])
        previous = 0
        for node in parts[n_coef:]:
            index_text, colon, value_text = node.partition(":")
            if not colon:
                raise ModelFileError(f"expected index:value, found {node!r}", number)
            index = parse_integer(index_text, "feature index", number, low=1, node=node)
            if index <= previous:
                raise ModelFileError(f"feature indices must increase ({index} after "
                                     f"{previous})", number)
            if index > limits.max_features:
                raise OverLimit(f"feature index {index} exceeds the limit of "
                                f"{limits.max_features} features", number)
            previous = index
            indices.append(index - 1)
            data.append(parse_number(value_text, "feature value", number, node=node))
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


def _labels(header: Header, k: int, sv_line: int) -> np.ndarray:
    if "label" not in header:
        raise ModelFileError("LIBSVM header lacks label", sv_line)
    line, values = header["label"]
    if len(values) != k:
        raise ModelFileError(f"label has {len(values)} values; nr_class {k} needs {k}", line)
    labels = np.array([float(parse_integer(v, "label", line)) for v in values])
    if len(set(labels.tolist())) != k:
        raise ModelFileError("labels must be distinct", line)
    return labels




def _numbers(header: Header, key: str, count: int, why: str,
             sv_line: int) -> np.ndarray:
    if key not in header:
        raise ModelFileError(f"LIBSVM header lacks {key}", sv_line)
    line, values = header[key]
    if len(values) != count:
        raise ModelFileError(f"{key} has {len(values)} values; {why} ({count})", line)
    return np.array([parse_number(v, key, line) for v in values])
