"""scikit-learn estimators on Hinge's solvers: `HingeLinearSVC` and `HingeSVC`.

    from hinge.sklearn import HingeLinearSVC, HingeSVC

    clf = HingeSVC(C=10, gamma="scale").fit(X, y)              # in this process
    clf = HingeLinearSVC(server="http://hinge:8000", api_key=key).fit(X, y)   # remote

They follow scikit-learn's conventions: constructor parameters are stored as given and
validated in `fit`; fitted attributes end in `_` and have the shapes and signs of
`sklearn.svm.LinearSVC` (`coef_`, `intercept_`, `classes_`, `n_iter_`) and
`sklearn.svm.SVC` (`support_`, `support_vectors_`, `dual_coef_`, `n_support_`,
`intercept_`, `coef_` for the linear kernel, `probA_`, `probB_`), plus Hinge's certificate:
`converged_` (the solver's claim, backed by a certificate: the relative duality gap for
linear models, LIBSVM's stop rule on the dual for kernel ones), `relative_gap_` (linear:
(P(w) - L) / P(w), L a proven lower bound of the optimum; None for kernel models),
`primal_objective_`, `dual_objective_` and `solver_` (what ran: `auto`'s choice).

Training in this process calls `solvers.fit`. Given `server` (and `api_key`), `fit`
uploads X and y as svmlight, submits a job, waits for it, and downloads the model file
(LIBLINEAR or LIBSVM format, 17 significant digits): predictions are then computed here
from that file, or, with `remote_predict=True`, by the service's predict route. The
remote objects are recorded as `dataset_id_`, `job_id_` and `model_id_`.

Labels may be anything scikit-learn accepts (strings too): Hinge sees class indices
0..k-1 and `classes_` maps them back. `tol` means what it means in Hinge: for
`HingeLinearSVC` the relative duality gap at which the model counts as converged (not
LIBLINEAR's `tol`); for `HingeSVC` LIBSVM's `eps` (the maximal violating pair), as
scikit-learn's SVC.

scikit-learn is an optional extra (`pip install hinge[sklearn]`); the Hinge server never
imports this module (import-linter contracts in pyproject.toml).
"""

from __future__ import annotations

import io
import math
import numbers
import os
import re
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.class_weight import compute_class_weight
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, validate_data

from solvers.params import SOLVERS, ParamError, validate_params

__all__ = ["HingeLinearSVC", "HingeSVC"]

LINEAR_SOLVERS = tuple(name for name, spec in SOLVERS.items() if spec.kind == "linear")
_LOSSES = {"hinge": "l1", "squared_hinge": "l2"}
_KERNELS = ("linear", "poly", "rbf", "sigmoid")
_PREDICT_BATCH = 1000  # rows per remote predict request


# --------------------------------------------------------------------------------------
# shared machinery


class _HingeClassifier(ClassifierMixin, BaseEstimator):
    """What both estimators share: label encoding, class weights, the in-process and the
    remote fit, and local or remote prediction."""

    # the sklearn names of Hinge's parameters, for error messages
    _PARAM_NAMES: ClassVar[dict[str, str]] = {}
    # constructor parameters both estimators have (set in their __init__)
    class_weight: Any
    random_state: Any
    n_jobs: int | None
    server: str | None
    api_key: str | None
    remote_predict: bool
    timeout: float | None

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    # -- fit -----------------------------------------------------------------------

    def _prepare(self, X: Any, y: Any) -> tuple[Any, np.ndarray]:
        X, y = validate_data(self, X, y, accept_sparse="csr", dtype=np.float64,
                             order="C")
        check_classification_targets(y)
        self.classes_, y_index = np.unique(y, return_inverse=True)
        if self.classes_.shape[0] < 2:
            raise ValueError(
                f"{type(self).__name__} needs samples of at least 2 classes in the data, "
                f"but the data contains only one class: {self.classes_[0]!r}")
        return X, y_index.astype(np.float64)

    def _class_weight(self, y_index: np.ndarray) -> dict[str, float] | None:
        """Hinge's class_weight (keys: class indices as label_key text) from sklearn's
        class_weight (None, 'balanced' or a dict keyed by the original labels)."""
        if self.class_weight is None:
            return None
        if not (self.class_weight == "balanced" or isinstance(self.class_weight, dict)):
            raise ValueError("class_weight must be None, 'balanced' or a dict mapping class "
                             f"labels to weights, got {self.class_weight!r}")
        labels = self.classes_[y_index.astype(np.int64)]
        weights = compute_class_weight(self.class_weight, classes=self.classes_, y=labels)
        return {str(k): float(w) for k, w in enumerate(weights)}

    def _seed(self) -> int:
        if self.random_state is None:
            return 0
        if isinstance(self.random_state, numbers.Integral):
            if self.random_state < 0:
                raise ValueError(f"random_state must be >= 0, got {self.random_state}")
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(2**31 - 1))

    def _threads(self) -> int:
        if self.n_jobs is None:
            return 1
        if isinstance(self.n_jobs, bool) or not isinstance(self.n_jobs, numbers.Integral) \
                or self.n_jobs == 0:
            raise ValueError(f"n_jobs must be None, -1 or a positive integer, got "
                             f"{self.n_jobs!r}")
        return (os.cpu_count() or 1) if self.n_jobs < 0 else int(self.n_jobs)

    def _validated(self, solver: str, params: dict[str, Any]) -> dict[str, Any]:
        """Hinge's own validation of the parameters, its messages in sklearn's names."""
        try:
            return validate_params(solver, params)
        except ParamError as exc:
            name = self._PARAM_NAMES.get(exc.field or "", exc.field)
            message = str(exc)
            if exc.field and name != exc.field:
                message = re.sub(rf"\b{re.escape(exc.field)}\b", str(name), message)
            raise ValueError(message) from None

    def _train(self, X: Any, y_index: np.ndarray, solver: str, params: dict[str, Any]
               ) -> None:
        """Fit in this process or through the service; sets the model and what the
        certificate says."""
        self._validated(solver, params)
        if self.server is None:
            from solvers import fit

            result = fit(X, y_index, solver=solver, **params)
            self._model: Any = result.model
            self._remote_model_id: str | None = None
            self.solver_ = result.solver
            self.converged_ = bool(result.converged)
            self.relative_gap_ = result.relative_gap
            self.primal_objective_ = result.primal_objective
            self.dual_objective_ = result.dual_objective
            self._iterations = [int(o.get("iterations", 0)) for o in result.per_output] \
                or [int(result.iterations)]
            self._sv_rows_known = True
            return
        self._remote_train(X, y_index, solver, params)

    def _client(self) -> Any:
        from app.client import HingeClient  # the client alone: it imports no server code

        return HingeClient(self.server, self.api_key)

    def _remote_train(self, X: Any, y_index: np.ndarray, solver: str,
                      params: dict[str, Any]) -> None:
        if not isinstance(self.server, str) or not self.server:
            raise ValueError(f"server must be the service's URL, got {self.server!r}")
        with self._client() as client:
            dataset = client.upload(io.BytesIO(svmlight_bytes(X, y_index)),
                                    name=f"{type(self).__name__}.svm")
            job = client.train(dataset["id"], solver, params)
            job = client.wait(job["id"], timeout=self.timeout)
            if job.get("status") != "succeeded":
                raise RuntimeError(f"Hinge job {job.get('id')} ended {job.get('status')}: "
                                   f"{job.get('error')}")
            model_id = str(job["model_id"])
            text = client.export(model_id)
        result = job.get("result") or {}
        self.dataset_id_, self.job_id_, self.model_id_ = dataset["id"], job["id"], model_id
        self._model = self._read_model_file(text, X.shape[1])
        self._remote_model_id = model_id
        self.solver_ = (result.get("auto") or {}).get("chosen") or solver
        self.converged_ = bool(result.get("converged"))
        self.relative_gap_ = result.get("relative_gap")
        self.primal_objective_ = result.get("primal_objective")
        self.dual_objective_ = result.get("dual_objective")
        self._iterations = [int(result.get("iterations") or 0)]
        self._sv_rows_known = False

    def _read_model_file(self, text: str, n_features: int) -> Any:
        raise NotImplementedError

    # -- predict -------------------------------------------------------------------

    def _rows(self, X: Any) -> Any:
        check_is_fitted(self)
        return validate_data(self, X, accept_sparse="csr", dtype=np.float64, order="C",
                             reset=False)

    def _local_or_remote(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        """(labels as class indices, Hinge's decision values) of validated rows."""
        if self.remote_predict and self._remote_model_id is not None:
            labels, values, _ = self._remote_predict(X)
            return labels, values
        labels, values = self._model.predict(X)
        return np.asarray(labels), np.asarray(values)

    def _remote_predict(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        rows = sp.csr_matrix(X)
        rows.eliminate_zeros()
        labels: list[float] = []
        values: list[Any] = []
        probabilities: list[Any] = []
        with self._client() as client:
            for start in range(0, rows.shape[0], _PREDICT_BATCH):
                block = rows[start:start + _PREDICT_BATCH]
                instances = [{"indices": [int(j) + 1 for j in block.indices[a:b]],
                              "values": [float(v) for v in block.data[a:b]]}
                             for a, b in zip(block.indptr[:-1], block.indptr[1:], strict=True)]
                answer = client.predict(str(self._remote_model_id), instances)
                labels += answer["labels"]
                values += answer["decision_values"]
                probabilities += answer.get("probabilities") or []
        return (np.asarray(labels, dtype=np.float64), np.asarray(values, dtype=np.float64),
                np.asarray(probabilities, dtype=np.float64) if probabilities else None)

    def _labels(self, index: np.ndarray) -> np.ndarray:
        return self.classes_[np.asarray(index).astype(np.int64)]


def svmlight_bytes(X: Any, y: np.ndarray) -> bytes:
    """X (CSR or dense) and numeric labels as svmlight text (solvers.svmlight's writer:
    repr() floats, an exact round trip), explicit zeros left out."""
    from solvers.svmlight import dump_svmlight

    rows = sp.csr_matrix(X, dtype=np.float64, copy=True)
    rows.eliminate_zeros()
    out = io.BytesIO()
    dump_svmlight(rows, y, out)
    return out.getvalue()


# --------------------------------------------------------------------------------------
# linear


class HingeLinearSVC(_HingeClassifier):
    """Linear SVM (L1- or L2-loss, L2-regularised) on Hinge's linear solvers, as
    scikit-learn's LinearSVC.

    Parameters
    ----------
    C : float, cost of a margin violation.
    loss : 'squared_hinge' (L2 loss, default) or 'hinge' (L1 loss).
    solver : 'auto' (default: chosen from the data), 'dcd', 'acf', 'tron' (L2 loss),
        'ocas' (L1 loss), 'alm' (free intercept), 'newton', 'gram' or 'pegasos'.
    tol : relative duality gap at which the model counts as converged (Hinge's `tol`).
    fit_intercept : fit an intercept: LIBLINEAR's regularised bias feature of value
        `intercept_scaling` (free, unregularised with 'alm'); False: none.
    intercept_scaling : value of the bias feature (LIBLINEAR's -B).
    class_weight : None, 'balanced' or {label: weight}; multiplies C per class.
    max_iter : the solver's iteration limit in its own unit (None: its default).
    random_state : seed of the randomized solvers (None: 0, so fits are reproducible).
    n_jobs : Numba threads of the data-parallel kernels (None: 1; -1: all cores).
    server, api_key : train through the Hinge service at this URL (None: in process).
    remote_predict : predict through the service's predict route instead of locally
        from the exported model (server mode only).
    timeout : longest silence, in seconds, tolerated while waiting for a remote job
        (None: wait as long as it runs).

    More than two classes: one-vs-rest, as Hinge (and LinearSVC) train them.
    """

    _PARAM_NAMES: ClassVar[dict[str, str]] = {
        "max_iter": "max_iter", "C": "C", "tol": "tol", "bias_scale": "intercept_scaling",
        "threads": "n_jobs", "seed": "random_state", "class_weight": "class_weight"}

    def __init__(self, *, C: float = 1.0, loss: str = "squared_hinge", solver: str = "auto",
                 tol: float = 1e-3, fit_intercept: bool = True,
                 intercept_scaling: float = 1.0, class_weight: Any = None,
                 max_iter: int | None = None, random_state: Any = None,
                 n_jobs: int | None = None, server: str | None = None,
                 api_key: str | None = None, remote_predict: bool = False,
                 timeout: float | None = 600.0) -> None:
        self.C = C
        self.loss = loss
        self.solver = solver
        self.tol = tol
        self.fit_intercept = fit_intercept
        self.intercept_scaling = intercept_scaling
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.server = server
        self.api_key = api_key
        self.remote_predict = remote_predict
        self.timeout = timeout

    def _hinge_params(self, y_index: np.ndarray) -> tuple[str, dict[str, Any]]:
        if self.solver not in LINEAR_SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(LINEAR_SOLVERS)}, got "
                             f"{self.solver!r}")
        if self.loss not in _LOSSES:
            raise ValueError(f"loss must be 'hinge' or 'squared_hinge', got {self.loss!r}")
        spec = SOLVERS[self.solver]
        names = {p.name: p for p in spec.params}
        loss = _LOSSES[self.loss]
        params: dict[str, Any] = {"C": self.C, "tol": self.tol}
        if "loss" in names:
            choices = names["loss"].choices or ()
            if loss not in choices:
                raise ValueError(f"solver {self.solver!r} does not fit loss={self.loss!r}")
            params["loss"] = loss
        elif "p" in names:
            params["p"] = 1.0 if loss == "l1" else 2.0
        elif loss not in spec.losses:
            raise ValueError(f"solver {self.solver!r} does not fit loss={self.loss!r}")
        bias_choices = names["bias"].choices or ()
        if self.fit_intercept:
            params["bias"] = "augment" if "augment" in bias_choices else "free"
            if params["bias"] == "augment":
                params["bias_scale"] = self.intercept_scaling
        else:
            params["bias"] = "none"
        if self.max_iter is not None:
            params["max_iter"] = self.max_iter
        weights = self._class_weight(y_index)
        if weights is not None:
            params["class_weight"] = weights
        if spec.randomized:
            params["seed"] = self._seed()
        if "threads" in names:
            params["threads"] = self._threads()
        return self.solver, params

    def fit(self, X: Any, y: Any) -> HingeLinearSVC:
        X, y_index = self._prepare(X, y)
        solver, params = self._hinge_params(y_index)
        if self.server is not None and params["bias"] == "free":
            raise ValueError("a free intercept (solver 'alm') cannot be exported as a "
                             "LIBLINEAR model file, which remote mode reads back: train "
                             "it in process, with fit_intercept=False, or another solver")
        self._train(X, y_index, solver, params)
        model = self._model
        self.coef_ = np.array(model.coef, dtype=np.float64)
        self.intercept_ = (np.array(model.intercept, dtype=np.float64)
                           if self.fit_intercept else 0.0)
        self.n_iter_ = max(self._iterations)
        return self

    def _read_model_file(self, text: str, n_features: int) -> Any:
        from solvers.formats import read_liblinear_model_text
        from solvers.models import LinearModel

        model = read_liblinear_model_text(text)
        coef = np.zeros((model.coef.shape[0], n_features))
        coef[:, :model.coef.shape[1]] = model.coef  # trailing all-zero features
        return LinearModel(classes=model.classes, coef=coef, intercept=model.intercept)

    def decision_function(self, X: Any) -> np.ndarray:
        """Signed distances: (n,) for two classes (positive for classes_[1]), else
        (n, n_classes), "class k vs the rest"."""
        rows = self._rows(X)
        _, values = self._local_or_remote(rows)
        return values[:, 0] if values.ndim == 2 and values.shape[1] == 1 else values

    def predict(self, X: Any) -> np.ndarray:
        labels, _ = self._local_or_remote(self._rows(X))
        return self._labels(labels)


# --------------------------------------------------------------------------------------
# kernel


def _ovr_decision(ovo: np.ndarray, n_classes: int) -> np.ndarray:
    """scikit-learn's one-vs-rest shape of one-vs-one decision values (votes plus
    confidences scaled into (-1/3, 1/3)); pair (i, j) votes for i when its value is > 0."""
    votes = np.zeros((ovo.shape[0], n_classes))
    confidence = np.zeros((ovo.shape[0], n_classes))
    k = 0
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            confidence[:, i] += ovo[:, k]
            confidence[:, j] -= ovo[:, k]
            votes[ovo[:, k] > 0, i] += 1
            votes[ovo[:, k] <= 0, j] += 1  # LIBSVM: a value of 0 votes for j
            k += 1
    return votes + confidence / (3 * (np.abs(confidence) + 1))


class HingeSVC(_HingeClassifier):
    """Kernel SVM (C-SVC) on Hinge's SMO solver, as scikit-learn's SVC (which is LIBSVM).

    Parameters
    ----------
    C : float, cost of a margin violation.
    kernel : 'rbf' (default), 'linear', 'poly' or 'sigmoid'.
    degree, coef0 : of the poly (and sigmoid) kernels.
    gamma : 'scale' (default: 1 / (n_features * X.var())), 'auto' (1 / n_features), or a
        number > 0.
    tol : LIBSVM's eps: stop when the maximal violating pair is within tol.
    cache_size : kernel-column cache in MB.
    probability : fit Platt sigmoids on 5-fold cross-validated decision values (LIBSVM
        -b 1); enables predict_proba.
    class_weight : None, 'balanced' or {label: weight}; multiplies C per class.
    max_iter : SMO steps (-1: Hinge's limit).
    decision_function_shape : 'ovr' (default: scikit-learn's transform of the one-vs-one
        values) or 'ovo' (LIBSVM's pairwise values).
    break_ties : with 'ovr' and more than two classes, predict the argmax of
        decision_function instead of LIBSVM's vote.
    random_state : seed of the probability cross-validation (None: 0).
    n_jobs, server, api_key, remote_predict, timeout : as HingeLinearSVC.

    More than two classes: one-vs-one, as LIBSVM.
    """

    _PARAM_NAMES: ClassVar[dict[str, str]] = {
        "eps": "tol", "cache_mb": "cache_size", "threads": "n_jobs", "seed": "random_state",
        "gamma": "gamma", "degree": "degree", "coef0": "coef0", "C": "C", "max_iter": "max_iter"}

    def __init__(self, *, C: float = 1.0, kernel: str = "rbf", degree: int = 3,
                 gamma: Any = "scale", coef0: float = 0.0, tol: float = 1e-3,
                 cache_size: float = 200.0, probability: bool = False,
                 class_weight: Any = None, max_iter: int = -1,
                 decision_function_shape: str = "ovr", break_ties: bool = False,
                 random_state: Any = None, n_jobs: int | None = None,
                 server: str | None = None, api_key: str | None = None,
                 remote_predict: bool = False, timeout: float | None = 600.0) -> None:
        self.C = C
        self.kernel = kernel
        self.degree = degree
        self.gamma = gamma
        self.coef0 = coef0
        self.tol = tol
        self.cache_size = cache_size
        self.probability = probability
        self.class_weight = class_weight
        self.max_iter = max_iter
        self.decision_function_shape = decision_function_shape
        self.break_ties = break_ties
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.server = server
        self.api_key = api_key
        self.remote_predict = remote_predict
        self.timeout = timeout

    def _gamma_value(self, X: Any) -> float:
        if isinstance(self.gamma, str):
            if self.gamma == "scale":
                if sp.issparse(X):
                    variance = float(X.multiply(X).mean() - X.mean() ** 2)
                else:
                    variance = float(np.asarray(X).var())
                return 1.0 / (X.shape[1] * variance) if variance != 0 else 1.0
            if self.gamma == "auto":
                return 1.0 / X.shape[1]
        elif isinstance(self.gamma, numbers.Real) and not isinstance(self.gamma, bool):
            gamma = float(self.gamma)
            if not (math.isfinite(gamma) and gamma > 0):
                raise ValueError(f"gamma must be > 0, got {self.gamma!r}")
            return gamma
        raise ValueError(f"gamma must be 'scale', 'auto' or a number > 0, got {self.gamma!r}")

    def fit(self, X: Any, y: Any) -> HingeSVC:
        X, y_index = self._prepare(X, y)
        if self.kernel not in _KERNELS:
            raise ValueError(f"kernel must be one of {', '.join(_KERNELS)}, got "
                             f"{self.kernel!r} (precomputed and callable kernels are not "
                             "supported)")
        if self.decision_function_shape not in ("ovr", "ovo"):
            raise ValueError("decision_function_shape must be 'ovr' or 'ovo', got "
                             f"{self.decision_function_shape!r}")
        if self.break_ties and self.decision_function_shape == "ovo":
            raise ValueError("break_ties must be False when decision_function_shape is "
                             "'ovo'")
        if not isinstance(self.probability, bool | np.bool_):
            raise ValueError(f"probability must be True or False, got {self.probability!r}")
        if isinstance(self.max_iter, bool) or not isinstance(self.max_iter, numbers.Integral):
            raise ValueError(f"max_iter must be an integer (-1: no limit), got "
                             f"{self.max_iter!r}")
        self._gamma = self._gamma_value(X)
        params: dict[str, Any] = {
            "C": self.C, "kernel": self.kernel, "gamma": self._gamma, "degree": self.degree,
            "coef0": self.coef0, "eps": self.tol, "cache_mb": self.cache_size,
            "multiclass": "ovo", "threads": self._threads(),
        }
        if int(self.max_iter) > 0:
            params["max_iter"] = int(self.max_iter)
        weights = self._class_weight(y_index)
        if weights is not None:
            params["class_weight"] = weights
        if self.probability:
            params["probability"] = True
            params["seed"] = self._seed()
        self._train(X, y_index, "smo", params)
        self._set_attributes(X, y_index)
        return self

    def _read_model_file(self, text: str, n_features: int) -> Any:
        from solvers.formats import read_libsvm_model_text
        from solvers.models import Calibration, Pipeline

        model = read_libsvm_model_text(text, n_features=n_features)
        header = {parts[0]: parts[1:] for parts in (line.split() for line in
                                                    text.split("\nSV\n", 1)[0].splitlines())
                  if parts}
        if "probA" in header and "probB" in header:
            # Hinge's export lists the classes sorted: the pairs are in the model's order
            calibration = Calibration("pairwise",
                                      np.array([float(v) for v in header["probA"]]),
                                      np.array([float(v) for v in header["probB"]]))
            return Pipeline(model, None, calibration)
        return model

    def _kernel_model(self) -> Any:
        from solvers.models import estimator_of

        return estimator_of(self._model)

    def _set_attributes(self, X: Any, y_index: np.ndarray) -> None:
        model = self._kernel_model()
        binary = self.classes_.shape[0] == 2
        rows = model.sv_rows if self._sv_rows_known else _match_rows(
            X, y_index, model.support_vectors(), model.n_sv)
        self.support_ = np.asarray(rows, dtype=np.int32)
        vectors = model.support_vectors()
        self.support_vectors_ = vectors if sp.issparse(X) else vectors.toarray()
        dual = -model.sv_coef if binary else model.sv_coef.copy()
        self.dual_coef_ = sp.csr_matrix(dual) if sp.issparse(X) else dual
        self.intercept_ = model.rho.copy() if binary else -model.rho
        self.n_support_ = model.n_sv.astype(np.int32)
        self.n_iter_ = np.asarray(self._iterations, dtype=np.int32)
        self.fit_status_ = 0 if self.converged_ else 1
        self.shape_fit_ = X.shape
        calibration = getattr(self._model, "calibration", None)
        if calibration is not None:
            self.probA_, self.probB_ = calibration.A.copy(), calibration.B.copy()
        else:
            self.probA_, self.probB_ = np.empty(0), np.empty(0)

    @property
    def coef_(self) -> np.ndarray:
        """Weights in the input space (linear kernel only), one row per class pair in
        LIBSVM's order (positive for the pair's first class), as SVC's coef_; two classes:
        dual_coef_ @ support_vectors_ (positive for classes_[1])."""
        if self.kernel != "linear":
            raise AttributeError("coef_ is only available when using a linear kernel")
        check_is_fitted(self)
        dual = np.asarray(_dense(self.dual_coef_))
        vectors = sp.csr_matrix(self.support_vectors_)
        k = self.classes_.shape[0]
        if k == 2:
            return np.asarray(vectors.T @ dual[0]).reshape(1, -1)
        starts = np.concatenate(([0], np.cumsum(self.n_support_)))
        rows = []
        for i in range(k):
            for j in range(i + 1, k):
                a, b = slice(starts[i], starts[i + 1]), slice(starts[j], starts[j + 1])
                rows.append(vectors[a].T @ dual[j - 1, a] + vectors[b].T @ dual[i, b])
        return np.asarray(np.vstack(rows))

    def _ovo_values(self, X: Any) -> tuple[np.ndarray, np.ndarray]:
        labels, values = self._local_or_remote(X)
        return labels, values

    def decision_function(self, X: Any) -> np.ndarray:
        """(n,) for two classes (positive for classes_[1]); else (n, n_classes) for
        decision_function_shape 'ovr', (n, n_classes (n_classes - 1) / 2) for 'ovo'."""
        _, values = self._ovo_values(self._rows(X))
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        k = self.classes_.shape[0]
        if k > 2 and self.decision_function_shape == "ovr":
            return _ovr_decision(values, k)
        return values

    def predict(self, X: Any) -> np.ndarray:
        rows = self._rows(X)
        k = self.classes_.shape[0]
        if self.break_ties and k > 2 and self.decision_function_shape == "ovr":
            _, values = self._ovo_values(rows)
            return self.classes_[np.argmax(_ovr_decision(values, k), axis=1)]
        labels, _ = self._ovo_values(rows)
        return self._labels(labels)

    def _check_proba(self) -> bool:
        if not self.probability:
            raise AttributeError("predict_proba is not available when probability=False")
        return True

    @available_if(_check_proba)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (columns in the order of classes_), from the Platt sigmoids
        coupled pairwise as LIBSVM's -b 1."""
        rows = self._rows(X)
        if self.remote_predict and self._remote_model_id is not None:
            _, _, probabilities = self._remote_predict(rows)
            if probabilities is None:
                raise RuntimeError("the service answered no probabilities")
            return probabilities
        _, _, probabilities = self._model.predict_with_probabilities(rows)
        return np.asarray(probabilities)

    @available_if(_check_proba)
    def predict_log_proba(self, X: Any) -> np.ndarray:
        return np.log(self.predict_proba(X))


def _dense(matrix: Any) -> Any:
    return matrix.toarray() if sp.issparse(matrix) else matrix


def _match_rows(X: Any, y_index: np.ndarray, vectors: sp.csr_matrix,
                n_sv: np.ndarray) -> np.ndarray:
    """The training row of every support vector of a model read from a file (which does
    not say): the first unused row of the vector's class with exactly its entries (the
    file holds them with 17 significant digits); -1 where none matches."""
    rows = sp.csr_matrix(X, dtype=np.float64)
    rows.sum_duplicates()
    rows.eliminate_zeros()

    def key(matrix: sp.csr_matrix, i: int) -> bytes:
        a, b = matrix.indptr[i], matrix.indptr[i + 1]
        return (matrix.indices[a:b].astype(np.int64).tobytes() + b"|"
                + matrix.data[a:b].tobytes())

    free: dict[tuple[int, bytes], list[int]] = {}
    for i in range(rows.shape[0] - 1, -1, -1):  # popped from the end: the first row first
        free.setdefault((int(y_index[i]), key(rows, i)), []).append(i)
    vectors = vectors.copy()
    vectors.eliminate_zeros()
    classes = np.repeat(np.arange(n_sv.shape[0]), n_sv)
    out = np.full(vectors.shape[0], -1, dtype=np.int64)
    for s in range(vectors.shape[0]):
        candidates = free.get((int(classes[s]), key(vectors, s)))
        if candidates:
            out[s] = candidates.pop()
    return out
