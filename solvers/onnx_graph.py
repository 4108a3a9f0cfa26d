"""A servable model (solvers/models.py) as an ONNX graph: the same arithmetic as Hinge's
predict, in standard ONNX operators (opset 17, default domain only), in float64.

Built with the `onnx` package (an optional extra, imported when a graph is built: the
server starts without it). No ai.onnx.ml operator is used: SVMClassifier's one-vs-one vote
and its probability coupling do not follow LIBSVM's rules exactly (its ties, its
sigmoid clipping, and the coupling iteration that stops at a tolerance), so the graph spells
Hinge's predict out step by step:

- input `input`: tensor(double) [N, n_features], dense rows in the model's feature space
  (before scaling); column j is feature j + 1;
- the scaler, when the model has one: minmax as svm-scale's `output()` (min -> lower,
  max -> upper, else lower + (upper - lower) * (x - min) / (max - min); a constant feature
  -> 0), maxabs x / max|x|, standard (x - mean) / std (constant -> 0);
- linear: X W^T + b; kernel: K(X, SV) (linear x.z, poly (gamma x.z + coef0)^degree, rbf
  exp(-gamma (|x|^2 + |z|^2 - 2 x.z)), sigmoid tanh(gamma x.z + coef0)) times the dual
  coefficients, minus rho;
- output `label`: tensor(double) [N], the class values (two classes: the value's sign;
  one-vs-rest: the first largest value; one-vs-one: the most votes, ties to the smallest
  class, LIBSVM's rule);
- output `decision_values`: tensor(double) [N] for two classes (positive for classes[1]),
  else [N, m] (one-vs-rest: one per class; one-vs-one: one per pair in LIBSVM's order,
  positive for the pair's first class) - exactly predict's `decision_values`;
- output `probabilities` (calibrated models only): tensor(double) [N, n_classes], in the
  order of the classes: pairwise Platt sigmoids clipped to [1e-7, 1 - 1e-7] and coupled by
  LIBSVM's fixed-point iteration (an ONNX Loop of at most max(100, k) sweeps; a row stops
  when its error is below 0.005 / k, as in LIBSVM), or, one-vs-rest, per-class sigmoids
  divided by their sum.

The model's metadata_props record the classes and the layout.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from solvers.kernels import KernelModel, pair_classes
from solvers.models import Calibration, LinearModel, Pipeline, ServableModel
from solvers.scaling import Scaler

OPSET = 17
MAX_DENSE_VALUES = 64_000_000  # support vectors x features (or weights) in the graph
INPUT = "input"


class OnnxUnavailable(RuntimeError):
    """The `onnx` package is not installed."""


class OnnxTooLarge(ValueError):
    """The model's dense arrays would not fit a graph of reasonable size."""


def onnx_model_bytes(model: ServableModel, producer_version: str = "") -> bytes:
    """The serialised ONNX model (ModelProto) of a servable model."""
    return build(model, producer_version).SerializeToString()


def build(model: ServableModel, producer_version: str = "") -> Any:
    try:
        import onnx  # noqa: F401
    except ImportError:
        raise OnnxUnavailable("ONNX export needs the onnx package: install Hinge with the "
                              "'onnx' extra (pip install 'hinge[onnx]')") from None
    pipeline = model if isinstance(model, Pipeline) else Pipeline(model)
    return _Builder(pipeline, producer_version).model()


class _Builder:
    def __init__(self, pipeline: Pipeline, producer_version: str) -> None:
        from onnx import helper

        self.helper = helper
        self.pipeline = pipeline
        self.version = producer_version
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.count = 0

    # -- plumbing ---------------------------------------------------------------------

    def name(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def const(self, value: Any, hint: str = "c", dtype: Any = np.float64) -> str:
        from onnx import numpy_helper

        name = self.name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype),
                                                         name))
        return name

    def op(self, op_type: str, *inputs: str, hint: str | None = None,
           nodes: list[Any] | None = None, **attrs: Any) -> str:
        out = self.name(hint or op_type.lower())
        (self.nodes if nodes is None else nodes).append(
            self.helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    # -- the graph --------------------------------------------------------------------

    def model(self) -> Any:
        from onnx import TensorProto, helper

        pipeline = self.pipeline
        estimator = pipeline.estimator
        n_features = estimator.n_features
        x = INPUT
        if pipeline.scaler is not None:
            x = self.scaler(x, pipeline.scaler, n_features)
        if isinstance(estimator, LinearModel):
            labels, values, pairwise = self.linear(x, estimator)
        else:
            labels, values, pairwise = self.kernel(x, estimator)
        outputs: list[tuple[str, str, list[Any]]] = [
            ("label", labels, ["N"]),
            ("decision_values", values, ["N"] if self.binary else ["N", self.n_out])]
        # a regression model's Laplace width is no probability output (predict's sigma)
        if pipeline.calibration is not None and pipeline.calibration.layout != "laplace":
            probabilities = self.probabilities(pipeline.calibration, values, pairwise)
            outputs.append(("probabilities", probabilities,
                            ["N", int(estimator.classes.shape[0])]))
        for public, internal, _ in outputs:
            self.nodes.append(helper.make_node("Identity", [internal], [public]))
        graph = helper.make_graph(
            self.nodes, "hinge_model",
            [helper.make_tensor_value_info(INPUT, TensorProto.DOUBLE, ["N", n_features])],
            [helper.make_tensor_value_info(public, TensorProto.DOUBLE, shape)
             for public, _, shape in outputs],
            self.initializers)
        onnx_model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="hinge", producer_version=self.version)
        onnx_model.ir_version = 8  # opset 17's; readable by onnxruntime >= 1.13
        helper.set_model_props(onnx_model, {
            "classes": " ".join(repr(float(v)) for v in estimator.classes),
            "kind": estimator.kind,
            "layout": self.layout,
            "n_features": str(n_features),
        })
        return onnx_model

    def scaler(self, x: str, scaler: Scaler, n_features: int) -> str:
        width = scaler.n_features
        first, second = (scaler.feature_min, scaler.feature_max)
        if width != n_features:  # (models keep them equal; be safe) pad with constants
            pad = np.zeros(max(n_features - width, 0))
            first = np.concatenate([first[:n_features], pad])
            second = np.concatenate([second[:n_features], pad])
        if scaler.method == "minmax":
            assert scaler.lower is not None and scaler.upper is not None
            constant = first == second
            span = np.where(constant, 1.0, second - first)
            # lower + (upper - lower) * (x - min) / (max - min): svm-scale's order
            shifted = self.op("Sub", x, self.const(first, "min"))
            stretched = self.op("Mul", self.const(scaler.upper - scaler.lower, "width"),
                                shifted)
            generic = self.op("Add", self.const(scaler.lower, "lower"),
                              self.op("Div", stretched, self.const(span, "span")))
            at_max = self.op("Equal", x, self.const(second, "max"))
            value = self.op("Where", at_max, self.const(scaler.upper, "upper"), generic)
            at_min = self.op("Equal", x, self.const(first, "min"))
            value = self.op("Where", at_min, self.const(scaler.lower, "lower"), value)
        elif scaler.method == "maxabs":
            max_abs = np.maximum(-first, second)
            constant = max_abs == 0.0
            value = self.op("Div", x, self.const(np.where(constant, 1.0, max_abs), "maxabs"))
        else:
            assert scaler.mean is not None and scaler.std is not None
            mean, std = scaler.mean, scaler.std
            if std.shape[0] != n_features:
                mean = np.concatenate([mean[:n_features],
                                       np.zeros(max(n_features - mean.shape[0], 0))])
                std = np.concatenate([std[:n_features],
                                      np.zeros(max(n_features - std.shape[0], 0))])
            constant = std == 0.0
            value = self.op("Div", self.op("Sub", x, self.const(mean, "mean")),
                            self.const(np.where(constant, 1.0, std), "std"))
        if constant.any():
            value = self.op("Where", self.const(constant, "constant", dtype=np.bool_),
                            self.const(0.0, "zero"), value)
        return value

    def linear(self, x: str, model: LinearModel) -> tuple[str, str, str | None]:
        if model.coef.size > MAX_DENSE_VALUES:
            raise OnnxTooLarge(f"{model.coef.size} weights exceed the ONNX export's limit "
                               f"of {MAX_DENSE_VALUES}")
        scores = self.op("Add", self.op("MatMul", x, self.const(model.coef.T, "coef_t")),
                         self.const(model.intercept, "intercept"))
        classes = model.classes
        if model.coef.shape[0] == 1:
            self.binary, self.n_out, self.layout = True, 1, "binary"
            value = self.op("Squeeze", scores, self.const([1], "axis", np.int64))
            if model.task == "regression":  # linear SVR: the value is the prediction
                return value, value, None
            label = self.op("Where", self.op("Greater", value, self.const(0.0, "zero")),
                            self.const(classes[1], "c1"), self.const(classes[0], "c0"))
            # LIBSVM's orientation (positive for classes[0]): [N, 1]
            pairwise = self.op("Neg", scores)
            return label, value, pairwise
        self.binary, self.n_out, self.layout = False, model.coef.shape[0], "ovr"
        return self.argmax_label(scores, classes), scores, None

    def argmax_label(self, scores: str, classes: np.ndarray) -> str:
        index = self.op("ArgMax", scores, axis=1, keepdims=0, select_last_index=0)
        return self.op("Gather", self.const(classes, "classes"), index, axis=0)

    def kernel(self, x: str, model: KernelModel) -> tuple[str, str, str | None]:
        n_sv, width = model.n_support, model.n_features
        if n_sv * width > MAX_DENSE_VALUES:
            raise OnnxTooLarge(
                f"{n_sv} support vectors x {width} features = {n_sv * width} dense values "
                f"exceed the ONNX export's limit of {MAX_DENSE_VALUES}")
        sv = model.support_vectors().toarray()
        dot = self.op("MatMul", x, self.const(sv.T, "sv_t"))
        gamma = self.const(model.gamma, "gamma")
        if model.kernel == "linear":
            k_values = dot
        elif model.kernel == "rbf":
            sq_x = self.op("ReduceSum", self.op("Mul", x, x), self.const([1], "axis",
                                                                          np.int64),
                           keepdims=1)
            sq_sum = self.op("Add", sq_x, self.const(model.sv_sq_norms()[None, :],
                                                      "sv_sq"))
            distance = self.op("Sub", sq_sum, self.op("Mul", self.const(2.0, "two"), dot))
            k_values = self.op("Exp", self.op("Mul", self.op("Neg", gamma), distance))
        else:
            inner = self.op("Add", self.op("Mul", gamma, dot),
                            self.const(model.coef0, "coef0"))
            k_values = (self.op("Pow", inner, self.const(float(model.degree), "degree"))
                        if model.kernel == "poly" else self.op("Tanh", inner))
        if model.single_output:  # one_class, epsilon_svr, nu_svr: sum coef K - rho
            raw = self.op("Sub", self.op("MatMul", k_values,
                                         self.const(model.sv_coef.T, "dual_coef")),
                          self.const(model.rho, "rho"))
            self.binary, self.n_out, self.layout = True, 1, "single"
            value = self.op("Squeeze", raw, self.const([1], "axis", np.int64))
            if model.svm_type != "one_class":  # regression: the value is the prediction
                return value, value, None
            label = self.op("Where", self.op("Greater", value, self.const(0.0, "zero")),
                            self.const(1.0, "inlier"), self.const(-1.0, "outlier"))
            return label, value, None
        k = model.n_classes
        ovr = model.multiclass == "ovr" and k > 2
        weights = np.zeros((n_sv, model.n_outputs))
        starts = np.concatenate(([0], np.cumsum(model.n_sv)))
        if ovr or k == 2:
            weights[:, :] = model.sv_coef.T[:, :model.n_outputs]
        else:
            for p, (i, j) in enumerate(zip(*pair_classes(k), strict=True)):
                weights[starts[i]:starts[i + 1], p] = model.sv_coef[j - 1,
                                                                    starts[i]:starts[i + 1]]
                weights[starts[j]:starts[j + 1], p] = model.sv_coef[i,
                                                                    starts[j]:starts[j + 1]]
        raw = self.op("Sub", self.op("MatMul", k_values, self.const(weights, "dual_coef")),
                      self.const(model.rho, "rho"))
        classes = model.classes
        if k == 2:
            self.binary, self.n_out, self.layout = True, 1, "binary"
            raw0 = self.op("Squeeze", raw, self.const([1], "axis", np.int64))
            label = self.op("Where", self.op("Greater", raw0, self.const(0.0, "zero")),
                            self.const(classes[0], "c0"), self.const(classes[1], "c1"))
            return label, self.op("Neg", raw0), raw
        self.binary, self.n_out = False, model.n_outputs
        if ovr:
            self.layout = "ovr"
            return self.argmax_label(raw, classes), raw, None
        self.layout = "ovo"
        first, second = pair_classes(k)
        n_pairs = first.shape[0]
        to_first = np.zeros((n_pairs, k))
        to_first[np.arange(n_pairs), first] = 1.0
        to_second = np.zeros((n_pairs, k))
        to_second[np.arange(n_pairs), second] = 1.0
        wins = self.op("Cast", self.op("Greater", raw, self.const(0.0, "zero")), to=11)
        losses = self.op("Sub", self.const(1.0, "one"), wins)
        votes = self.op("Add", self.op("MatMul", wins, self.const(to_first, "vote_first")),
                        self.op("MatMul", losses, self.const(to_second, "vote_second")))
        if model.vote_order is not None:  # ties to the label listed first in the file
            order = model.vote_order
            in_file_order = self.op("Gather", votes, self.const(order, "vote_order",
                                                                np.int64), axis=1)
            return self.argmax_label(in_file_order, classes[order]), raw, raw
        return self.argmax_label(votes, classes), raw, raw

    # -- probabilities ----------------------------------------------------------------

    def platt(self, values: str, A: np.ndarray, B: np.ndarray) -> str:
        """libsvm's sigmoid_predict: exp(-z) / (1 + exp(-z)) for z >= 0, else
        1 / (1 + exp(z)), z = A f + B."""
        z = self.op("Add", self.op("Mul", values, self.const(A, "prob_a")),
                    self.const(B, "prob_b"))
        e = self.op("Exp", self.op("Neg", self.op("Abs", z)))
        one = self.const(1.0, "one")
        denominator = self.op("Add", one, e)
        return self.op("Where", self.op("GreaterOrEqual", z, self.const(0.0, "zero")),
                       self.op("Div", e, denominator), self.op("Div", one, denominator))

    def density(self, values: str, marks: np.ndarray) -> str:
        """One-class [P(outlier), P(inlier)] (solvers.probability.one_class_probability):
        P(inlier) = 0.001 below marks[0], 0.999 above marks[-1], else (c + 1) / 10 where c
        counts the marks[1:] <= value (0 when that reaches 10)."""
        column = self.op("Unsqueeze", values, self.const([1], "axis", np.int64))
        reached = self.op("Cast", self.op("GreaterOrEqual", column,
                                          self.const(marks[None, 1:], "marks_tail")), to=11)
        first = self.op("Add", self.op("ReduceSum", reached,
                                       self.const([1], "axis", np.int64), keepdims=0),
                        self.const(1.0, "one"))
        n_marks = self.const(float(marks.shape[0]), "n_marks")
        inner = self.op("Where", self.op("Less", first, n_marks),
                        self.op("Div", first, n_marks), self.const(0.0, "zero"))
        inlier = self.op("Where", self.op("Less", values, self.const(marks[0], "mark_first")),
                         self.const(0.001, "p_low"),
                         self.op("Where", self.op("Greater", values,
                                                  self.const(marks[-1], "mark_last")),
                                 self.const(0.999, "p_high"), inner))
        outlier = self.op("Sub", self.const(1.0, "one"), inlier)
        return self.op("Concat", self.op("Unsqueeze", outlier, self.const([1], "axis",
                                                                            np.int64)),
                       self.op("Unsqueeze", inlier, self.const([1], "axis", np.int64)),
                       axis=1)

    def probabilities(self, calibration: Calibration, values: str,
                      pairwise: str | None) -> str:
        k = int(self.pipeline.estimator.classes.shape[0])
        if calibration.layout == "density":
            return self.density(values, calibration.A)
        if calibration.layout == "ovr":
            per_class = self.platt(values, calibration.A, calibration.B)
            total = self.op("ReduceSum", per_class, self.const([1], "axis", np.int64),
                            keepdims=1)
            return self.op("Div", per_class, total)
        if pairwise is None:
            raise ValueError("a pairwise calibration needs one-vs-one decision values")
        clipped = self.op("Clip", self.platt(pairwise, calibration.A, calibration.B),
                          self.const(1e-7, "min_prob"), self.const(1 - 1e-7, "max_prob"))
        if k == 2:
            return self.op("Concat", clipped,
                           self.op("Sub", self.const(1.0, "one"), clipped), axis=1)
        return self.coupling(clipped, k, calibration.order)

    def coupling(self, pairwise: str, k: int, order: np.ndarray | None) -> str:
        """libsvm's multiclass_probability on every row (see solvers/probability.py), in
        the class order `order` (None: sorted)."""
        from onnx import TensorProto, helper

        first, second = pair_classes(k)
        n_pairs = first.shape[0]
        # position of each class in the coupling's order
        at = np.arange(k) if order is None else np.argsort(order)
        upper = np.zeros((n_pairs, k * k))
        lower = np.zeros((n_pairs, k * k))
        upper[np.arange(n_pairs), at[first] * k + at[second]] = 1.0  # r[i][j] = p
        lower[np.arange(n_pairs), at[second] * k + at[first]] = 1.0  # r[j][i] = 1 - p
        one = self.const(1.0, "one")
        flat = self.op("Add", self.op("MatMul", pairwise, self.const(upper, "r_upper")),
                       self.op("MatMul", self.op("Sub", one, pairwise),
                               self.const(lower, "r_lower")))
        r = self.op("Reshape", flat, self.const([-1, k, k], "shape", np.int64))
        r_t = self.op("Transpose", r, perm=[0, 2, 1])  # r_t[n, t, j] = r[n, j, t]
        # Q[t][t] = sum_j r[j][t]^2, Q[t][j] = -r[j][t] r[t][j]
        diagonal = self.op("ReduceSum", self.op("Mul", r_t, r_t),
                           self.const([2], "axis", np.int64), keepdims=0)  # [N, k]
        off = self.op("Mul", self.op("Neg", self.op("Mul", r_t, r)),
                      self.const(1.0 - np.eye(k), "off_diagonal"))
        q = self.op("Add", off, self.op("Mul", self.op("Unsqueeze", diagonal, self.const(
            [2], "axis", np.int64)), self.const(np.eye(k), "eye")))
        n_rows = self.op("Slice", self.op("Shape", pairwise), self.const([0], "s", np.int64),
                         self.const([1], "e", np.int64))
        start = self.op("Expand", self.const(np.full((1, k), 1.0 / k), "p0"),
                        self.op("Concat", n_rows, self.const([k], "k", np.int64), axis=0))
        eps = 0.005 / k
        max_iter = max(100, k)

        # the loop body: one of libsvm's iterations, for the rows still iterating
        body: list[Any] = []
        b = self

        def op(op_type: str, *inputs: str, **attrs: Any) -> str:
            return b.op(op_type, *inputs, nodes=body, **attrs)

        def column(matrix: str, t: int) -> str:  # [N, 1]
            return op("Slice", matrix, b.const([t], "s", np.int64),
                      b.const([t + 1], "e", np.int64), b.const([1], "ax", np.int64))

        p_in = self.name("p_in")
        qp = op("Squeeze", op("MatMul", q, op("Unsqueeze", p_in, b.const([2], "axis",
                                                                          np.int64))),
                b.const([2], "axis", np.int64))
        pqp = op("ReduceSum", op("Mul", p_in, qp), b.const([1], "axis", np.int64),
                 keepdims=1)
        error = op("ReduceMax", op("Abs", op("Sub", qp, pqp)), axes=[1], keepdims=1)
        active = op("Not", op("Less", error, b.const(eps, "eps")))  # [N, 1]
        p = p_in
        for t in range(k):
            q_tt = column(diagonal, t)
            qp_t = column(qp, t)
            diff = op("Div", op("Add", op("Neg", qp_t), pqp), q_tt)
            unit = b.const(np.eye(k)[t][None, :], "unit")
            p = op("Add", p, op("Mul", diff, unit))
            one_plus = op("Add", b.const(1.0, "one"), diff)
            pqp = op("Div", op("Div", op("Add", pqp, op("Mul", diff, op(
                "Add", op("Mul", diff, q_tt), op("Mul", b.const(2.0, "two"), qp_t)))),
                one_plus), one_plus)
            q_row = op("Squeeze", op("Slice", q, b.const([t], "s", np.int64),
                                     b.const([t + 1], "e", np.int64),
                                     b.const([1], "ax", np.int64)),
                       b.const([1], "axis", np.int64))  # [N, k]
            qp = op("Div", op("Add", qp, op("Mul", diff, q_row)), one_plus)
            p = op("Div", p, one_plus)
        p_out = op("Where", active, p, p_in)
        cond_out = op("Greater", op("ReduceSum", op("Cast", active, to=11),
                                    keepdims=0), b.const(0.0, "zero"))
        iteration = self.name("iteration")
        cond_in = self.name("cond_in")
        cond_name, p_name = self.name("cond_out"), self.name("p_out")
        body.append(helper.make_node("Identity", [cond_out], [cond_name]))
        body.append(helper.make_node("Identity", [p_out], [p_name]))
        graph = helper.make_graph(
            body, "coupling_sweep",
            [helper.make_tensor_value_info(iteration, TensorProto.INT64, []),
             helper.make_tensor_value_info(cond_in, TensorProto.BOOL, []),
             helper.make_tensor_value_info(p_in, TensorProto.DOUBLE, ["N", k])],
            [helper.make_tensor_value_info(cond_name, TensorProto.BOOL, []),
             helper.make_tensor_value_info(p_name, TensorProto.DOUBLE, ["N", k])])
        result = self.name("probabilities")
        self.nodes.append(helper.make_node(
            "Loop", [self.const(max_iter, "max_iter", np.int64),
                     self.const(True, "true", np.bool_), start], [result], body=graph))
        if order is None:
            return result
        return self.op("Gather", result, self.const(at, "class_position", np.int64), axis=1)
