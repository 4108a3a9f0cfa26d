"""Model files in the formats of the reference engines, read and write: LIBLINEAR (linear
models; its `predict` loads them) and LIBSVM (kernel models). Errors are
`ModelFormatError` (a ValueError) with a message that says what cannot be written or read.

LIBLINEAR: `solver_type`, `nr_class`, `label`, `nr_feature`, `bias`, then `w`: one row per
feature (then the bias row when bias > 0), one column per output. LIBLINEAR predicts
label[0] for a positive binary decision value, so a binary model lists classes[1] (our
positive class) first; with bias B > 0 it adds w_bias * B to every decision value.

LIBSVM:
The text is what LIBSVM 3.37's `svm_save_model` writes for a C-SVC model, so that
`svm_load_model` reads it and `svm_predict` predicts exactly what `KernelModel.predict`
does (labels equal; decision values equal, with the sign of two-class models flipped:
LIBSVM's value is positive for the first label of the file, ours for classes[1]):

    svm_type c_svc
    kernel_type rbf            (linear | polynomial | rbf | sigmoid)
    degree 3                   (polynomial only)
    gamma 0.0769               (all but linear)
    coef0 0                    (polynomial and sigmoid)
    nr_class 2
    total_sv 132
    rho 0.4244                 (one per pair, LIBSVM's pair order)
    label -1 1                 (the sorted classes: LIBSVM labels are integers)
    probA -1.79                (probability models only: one sigmoid per pair)
    probB 0.0556
    nr_sv 64 68
    SV
    <coef_1> ... <coef_{k-1}> <index>:<value> ...     (1-based feature indices)

The other svm_types (KernelModel.svm_type) are written as LIBSVM writes them: `nu_svc`
like c_svc (the model already rescaled by 1/r, as LIBSVM stores it); `one_class`,
`epsilon_svr` and `nu_svr` with `nr_class 2`, one rho, no `label` / `nr_sv`, one
coefficient per support vector, and for regression with a Laplace width `probA <sigma>`
(`-b 1`). svm_predict then gives the regression value, or +1 / -1 (inlier / outlier).

Numbers are written with 17 significant digits (round-trip exact; LIBSVM writes support
vector values with %.8g, which would lose bits). One-vs-rest models have no LIBSVM
equivalent and are refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from solvers.kernels import SINGLE_OUTPUT_TYPES, SVM_TYPE_CODES, KernelModel, pair_classes
from solvers.models import LinearModel
from solvers.params import SOLVERS

LIBLINEAR_SOLVER_TYPES = {"l1": "L2R_L1LOSS_SVC_DUAL", "l2": "L2R_L2LOSS_SVC_DUAL",
                          "logistic": "L2R_LR"}
# penalty "l1" (solvers/l1_linear.py): LIBLINEAR -s 5, -s 6
LIBLINEAR_L1R_SOLVER_TYPES = {"l2": "L1R_L2LOSS_SVC", "logistic": "L1R_LR"}
# the formulations of solvers/linear_tasks.py: (formulation, loss, method) -> solver_type
LIBLINEAR_TASK_TYPES = {
    ("crammer_singer", "l1", None): "MCSVM_CS",
    ("epsilon_svr", "l2", "primal"): "L2R_L2LOSS_SVR",
    ("epsilon_svr", "l2", "dual"): "L2R_L2LOSS_SVR_DUAL",
    ("epsilon_svr", "l1", "dual"): "L2R_L1LOSS_SVR_DUAL",
    ("one_class", "l1", None): "ONECLASS_SVM",
}
# formulations with a loss of their own (whatever loss the params carry: auto's default)
LIBLINEAR_FORMULATION_TYPES = {"crammer_singer": "MCSVM_CS", "one_class": "ONECLASS_SVM"}


class ModelFormatError(ValueError):
    """A model that a file format cannot hold, or a file that is not a model of it."""


# --------------------------------------------------------------------------------------
# LIBLINEAR


def liblinear_model_text(model: LinearModel, params: dict[str, Any]) -> str:
    """LIBLINEAR's model file of a linear model trained with `params` (loss, bias,
    bias_scale as applied)."""
    classified = model.task == "classification"
    labels = _integer_labels(model.classes, "LIBLINEAR") if classified else []
    # an imported model keeps the solver_type of its file (solvers/model_import.py)
    solver_type = params.get("solver_type") or liblinear_solver_type(params)
    outlier = model.task == "outlier"  # LIBLINEAR's one-class has rho, never a bias
    augment = params.get("bias", "augment") == "augment" and not outlier
    bias_scale = float(params.get("bias_scale", 1.0)) if augment else -1.0
    binary = model.coef.shape[0] == 1 and classified
    label_order = [labels[1], labels[0]] if binary else labels
    if not augment and not outlier and np.any(model.intercept != 0):
        raise ModelFormatError("this model has a free intercept, which LIBLINEAR files "
                               "cannot hold")
    lines = [f"solver_type {solver_type}", f"nr_class {max(len(labels), 2)}"]
    if classified:
        lines.append("label " + " ".join(str(v) for v in label_order))
    lines += [f"nr_feature {model.n_features}", f"bias {bias_scale:.17g}"]
    if outlier:
        lines.append(f"rho {-float(model.intercept[0]):.17g}")
    lines.append("w")
    lines += [" ".join(f"{v:.17g}" for v in row) + " " for row in model.coef.T]
    if augment:
        lines.append(" ".join(f"{v / bias_scale:.17g}" for v in model.intercept) + " ")
    return "\n".join(lines) + "\n"


def liblinear_solver_type(params: dict[str, Any]) -> str:
    """LIBLINEAR's solver_type of a model trained with `params` (loss, penalty and, when
    the caller knows it, the solver). Logistic types make LIBLINEAR's predict -b 1 give
    the model's probabilities."""
    loss = params.get("loss", "l1")
    formulation = str(params.get("formulation"))
    task_type = LIBLINEAR_TASK_TYPES.get((formulation, str(loss), params.get("method")),
                                         LIBLINEAR_FORMULATION_TYPES.get(formulation))
    if task_type is not None:
        return task_type
    if params.get("penalty") == "l1":
        return LIBLINEAR_L1R_SOLVER_TYPES[loss]
    spec = SOLVERS.get(str(params.get("solver")))
    own = dict(spec.liblinear_types) if spec is not None else {}  # logistic_dcd: -s 7
    return own.get(loss) or LIBLINEAR_SOLVER_TYPES.get(loss, "L2R_L1LOSS_SVC_DUAL")


def read_liblinear_model_text(text: str) -> LinearModel:
    """A LIBLINEAR model file (two or more classes, one weight column per output) as a
    LinearModel with sorted classes."""
    lines = text.splitlines()
    try:
        w_line = [line.strip() for line in lines].index("w")
    except ValueError:
        raise ModelFormatError("not a LIBLINEAR model file: no 'w' line") from None
    header = {parts[0]: parts[1:] for parts in (line.split() for line in lines[:w_line])
              if parts}
    try:
        labels = np.array([float(v) for v in header["label"]])
        n_features = int(header["nr_feature"][0])
        bias = float(header["bias"][0])
    except (KeyError, IndexError, ValueError):
        raise ModelFormatError("LIBLINEAR model header needs label, nr_feature and bias") \
            from None
    rows = [[float(v) for v in line.split()] for line in lines[w_line + 1:] if line.strip()]
    n_rows = n_features + (1 if bias > 0 else 0)
    weights = np.array(rows, dtype=np.float64).reshape(len(rows), -1)
    if weights.shape[0] != n_rows or labels.shape[0] < 2:
        raise ModelFormatError(f"LIBLINEAR model has {weights.shape[0]} weight rows; its "
                               f"header says {n_rows} and at least two labels")
    intercept = weights[n_features] * bias if bias > 0 else np.zeros(weights.shape[1])
    coef = weights[:n_features].T
    if labels.shape[0] == 2:  # the file's first label is the positive side
        classes = np.sort(labels)
        sign = 1.0 if labels[0] == classes[1] else -1.0
        return LinearModel(classes=classes, coef=sign * coef, intercept=sign * intercept)
    order = np.argsort(labels, kind="stable")
    return LinearModel(classes=labels[order], coef=coef[order], intercept=intercept[order])


def _integer_labels(classes: np.ndarray, engine: str) -> list[int]:
    labels = []
    for value in classes:
        if not (float(value).is_integer() and abs(value) < 2**31):
            raise ModelFormatError(
                f"class label {value!r} cannot be written in {engine}'s format, whose labels "
                "are 32-bit integers; relabel the classes as integers")
        labels.append(int(value))
    return labels


# --------------------------------------------------------------------------------------
# LIBSVM


_KERNEL_TYPE = {"linear": "linear", "poly": "polynomial", "rbf": "rbf", "sigmoid": "sigmoid"}
_KERNEL_FROM_TYPE = {text: name for name, text in _KERNEL_TYPE.items()}


def libsvm_model_text(model: KernelModel, prob_a: np.ndarray | None = None,
                      prob_b: np.ndarray | None = None,
                      density_marks: np.ndarray | None = None) -> str:
    """The LIBSVM model file of a one-vs-one (or two-class), one-class or regression model;
    with `prob_a` and `prob_b` (one per pair, LIBSVM's orientation:
    solvers.models.Calibration) the file carries `probA` / `probB` and `svm-predict -b 1`
    gives probabilities; a regression model's `prob_a` = [sigma] (B empty) is its
    Laplace noise width; a one-class model's `density_marks` (its ten
    prob_density_marks, LIBSVM 3.35+) make the `prob_density_marks` line."""
    if model.multiclass == "ovr" and model.n_classes > 2:
        raise ModelFormatError(
            "a one-vs-rest model cannot be written in LIBSVM's format (LIBSVM's C-SVC is "
            "one-vs-one only); train with multiclass='ovo' to export it"
        )
    single = model.single_output
    labels = [] if single else [str(v) for v in _integer_labels(model.classes, "LIBSVM")]
    lines = [f"svm_type {model.svm_type}", f"kernel_type {_KERNEL_TYPE[model.kernel]}"]
    if model.kernel == "poly":
        lines.append(f"degree {int(model.degree)}")
    if model.kernel != "linear":
        lines.append(f"gamma {_number(model.gamma)}")
    if model.kernel in ("poly", "sigmoid"):
        lines.append(f"coef0 {_number(model.coef0)}")
    lines += [
        f"nr_class {2 if single else model.n_classes}",
        f"total_sv {model.n_support}",
        "rho " + " ".join(_number(v) for v in model.rho),
    ]
    if not single:
        lines.append("label " + " ".join(labels))
    if prob_b is not None and np.size(prob_b) == 0:
        prob_b = None  # a regression model's calibration: probA = [sigma] alone
    if prob_a is not None and (prob_b is not None or model.svm_type in ("epsilon_svr",
                                                                         "nu_svr")):
        lines.append("probA " + " ".join(_number(v) for v in np.atleast_1d(prob_a)))
        if prob_b is not None:
            lines.append("probB " + " ".join(_number(v) for v in prob_b))
    if density_marks is not None and model.svm_type == "one_class":
        lines.append("prob_density_marks " + " ".join(_number(v) for v in density_marks))
    if not single:
        lines.append("nr_sv " + " ".join(str(int(n)) for n in model.n_sv))
    lines.append("SV")
    data, indices, indptr = model.sv_data, model.sv_indices, model.sv_indptr
    for s in range(model.n_support):
        coefs = " ".join(_number(v) for v in model.sv_coef[:, s])
        nodes = " ".join(f"{int(indices[k]) + 1}:{_number(data[k])}"
                         for k in range(indptr[s], indptr[s + 1]))
        lines.append(f"{coefs} {nodes}".rstrip() + " ")
    return "\n".join(lines) + "\n"


def read_libsvm_model_text(text: str, n_features: int | None = None) -> KernelModel:
    """A LIBSVM C-SVC model file as a KernelModel (classes sorted, pairs re-oriented).

    LIBSVM orders its labels by first appearance in the training data; the model is
    converted to sorted classes: class blocks are reordered and a pair whose classes
    swap places has its coefficients and rho negated. n_features defaults to the largest
    feature index of the support vectors.
    """
    lines = text.splitlines()
    header: dict[str, list[str]] = {}
    position = 0
    while position < len(lines) and lines[position].strip() != "SV":
        parts = lines[position].split()
        if parts:
            header[parts[0]] = parts[1:]
        position += 1
    svm_type = (header.get("svm_type") or ["?"])[0]
    if svm_type not in SVM_TYPE_CODES:
        raise ModelFormatError(f"unknown svm_type {svm_type}")
    kernel = _KERNEL_FROM_TYPE.get(header["kernel_type"][0])
    if kernel is None:
        raise ModelFormatError(f"unsupported kernel_type {header['kernel_type'][0]}")
    if svm_type in SINGLE_OUTPUT_TYPES:
        return _read_single(svm_type, kernel, header, lines[position + 1:], n_features)
    k = int(header["nr_class"][0])
    labels = np.array([float(v) for v in header["label"]])
    n_sv_file = np.array([int(v) for v in header["nr_sv"]], dtype=np.int64)
    rho_file = np.array([float(v) for v in header["rho"]])
    coef_rows: list[list[float]] = []
    data: list[float] = []
    indices: list[int] = []
    indptr = [0]
    for line in lines[position + 1:]:
        parts = line.split()
        if not parts:
            continue
        coef_rows.append([float(v) for v in parts[: k - 1]])
        for node in parts[k - 1:]:
            index, value = node.split(":")
            indices.append(int(index) - 1)
            data.append(float(value))
        indptr.append(len(indices))
    coef_file = np.array(coef_rows, dtype=np.float64).reshape(-1, k - 1).T
    width = (max(indices) + 1 if indices else 1) if n_features is None else n_features
    order = np.argsort(labels, kind="stable")  # file class of each sorted class
    sv_data, sv_indices, sv_indptr, sv_coef, rho = _sorted_layout(
        np.array(data), np.array(indices, dtype=np.int32), np.array(indptr, dtype=np.int64),
        coef_file, rho_file, n_sv_file, order)
    return KernelModel(
        classes=labels[order], kernel=kernel,
        gamma=float(header.get("gamma", ["0"])[0]), degree=int(header.get("degree", ["3"])[0]),
        coef0=float(header.get("coef0", ["0"])[0]), multiclass="ovo", n_features=width,
        sv_data=sv_data, sv_indices=sv_indices, sv_indptr=sv_indptr, sv_coef=sv_coef, rho=rho,
        n_sv=n_sv_file[order], sv_rows=np.full(sv_indptr.shape[0] - 1, -1, dtype=np.int64),
        svm_type=svm_type,
    )


def _read_single(svm_type: str, kernel: str, header: dict[str, list[str]],
                 sv_lines: list[str], n_features: int | None) -> KernelModel:
    """A one_class / epsilon_svr / nu_svr model file: one coefficient per SV line."""
    coefs: list[float] = []
    data: list[float] = []
    indices: list[int] = []
    indptr = [0]
    for line in sv_lines:
        parts = line.split()
        if not parts:
            continue
        coefs.append(float(parts[0]))
        for node in parts[1:]:
            index, value = node.split(":")
            indices.append(int(index) - 1)
            data.append(float(value))
        indptr.append(len(indices))
    width = (max(indices) + 1 if indices else 1) if n_features is None else n_features
    n_sv = len(coefs)
    return KernelModel(
        classes=np.array([-1.0, 1.0]) if svm_type == "one_class" else np.empty(0),
        kernel=kernel, gamma=float(header.get("gamma", ["0"])[0]),
        degree=int(header.get("degree", ["3"])[0]),
        coef0=float(header.get("coef0", ["0"])[0]), multiclass="ovo", n_features=width,
        sv_data=np.array(data), sv_indices=np.array(indices, dtype=np.int32),
        sv_indptr=np.array(indptr, dtype=np.int64), sv_coef=np.array([coefs]).reshape(1, n_sv),
        rho=np.array([float(header["rho"][0])]), n_sv=np.array([n_sv]),
        sv_rows=np.full(n_sv, -1, dtype=np.int64), svm_type=svm_type)


def _sorted_layout(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, coef_file: np.ndarray,
    rho_file: np.ndarray, n_sv_file: np.ndarray, order: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Re-express LIBSVM's layout (file class order) in the sorted class order."""
    k = n_sv_file.shape[0]
    starts = np.concatenate(([0], np.cumsum(n_sv_file)))
    file_pair = {(int(a), int(b)): p for p, (a, b) in enumerate(zip(*pair_classes(k),
                                                                     strict=True))}
    # the SVs, class block by class block in sorted order
    blocks = [np.arange(starts[c], starts[c + 1]) for c in order]
    sv_order = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
    new_starts = np.concatenate(([0], np.cumsum(n_sv_file[order])))
    sv_coef = np.zeros((k - 1, sv_order.shape[0]))
    rho = np.zeros(k * (k - 1) // 2)
    for p, (a, b) in enumerate(zip(*pair_classes(k), strict=True)):
        fa, fb = int(order[a]), int(order[b])  # file classes of sorted classes a < b
        sign = 1.0 if fa < fb else -1.0
        q = file_pair[(min(fa, fb), max(fa, fb))]
        rho[p] = sign * rho_file[q]
        # file pair (f1, f2): class f1's coefficients in row f2-1, class f2's in row f1
        row_for_a = (max(fa, fb) - 1) if fa < fb else min(fa, fb)
        row_for_b = min(fa, fb) if fa < fb else (max(fa, fb) - 1)
        sv_coef[b - 1, new_starts[a]:new_starts[a + 1]] = (
            sign * coef_file[row_for_a, starts[fa]:starts[fa + 1]])
        sv_coef[a, new_starts[b]:new_starts[b + 1]] = (
            sign * coef_file[row_for_b, starts[fb]:starts[fb + 1]])
    lengths = indptr[1:] - indptr[:-1]
    new_indptr = np.concatenate(([0], np.cumsum(lengths[sv_order]))).astype(np.int64)
    take = np.concatenate([np.arange(indptr[s], indptr[s + 1]) for s in sv_order]) if (
        sv_order.shape[0]) else np.zeros(0, dtype=np.int64)
    return data[take], indices[take], new_indptr, sv_coef, rho


def _number(value: float) -> str:
    """17 significant digits, without a trailing '.0' for integers (LIBSVM's %.17g)."""
    return f"{float(value):.17g}"
