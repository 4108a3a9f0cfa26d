"""What every estimator of hinge.sklearn shares: its Hinge-only constructor parameters,
training in this process (`solvers.fit`) or through a running Hinge service (`server=`),
and reading a service's model file back.

A fit through the service uploads X and the labels as svmlight text (an exact round
trip), submits a job with the same solver parameters and the instance weights, waits for
it, and downloads the model file (LIBSVM or LIBLINEAR format, 17 significant digits).
"""

from __future__ import annotations

import io
import numbers
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers.params import ParamError, validate_params

_PREDICT_BATCH = 1000  # rows per remote predict request

# the constructor parameters every Hinge estimator adds to scikit-learn's
HINGE_PARAMS: dict[str, Any] = {"n_jobs": None, "server": None, "api_key": None,
                                "remote_predict": False, "timeout": 600.0}
HINGE_CONSTRAINTS: dict[str, list[Any]] = {
    "n_jobs": [numbers.Integral, None],
    "server": [str, None],
    "api_key": [str, None],
    "remote_predict": ["boolean"],
    "timeout": [numbers.Real, None],
}


@dataclass
class Trained:
    """A Hinge fit, in process or remote: the servable model and its certificate."""

    model: Any
    solver: str
    converged: bool
    relative_gap: float | None
    primal_objective: float | None
    dual_objective: float | None
    iterations: list[int]  # per binary problem
    exit_reasons: list[str]
    sv_rows_known: bool = True
    remote: dict[str, str] = field(default_factory=dict)  # dataset_id, job_id, model_id


def threads(n_jobs: Any) -> int:
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None, -1 or a positive integer, got {n_jobs!r}")
    return (os.cpu_count() or 1) if n_jobs < 0 else int(n_jobs)


def checked(solver: str, params: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """Hinge's own validation of the parameters, its messages in scikit-learn's names."""
    try:
        return validate_params(solver, params)
    except ParamError as exc:
        message = str(exc)
        if exc.field and exc.field in names:
            message = message.replace(exc.field, names[exc.field], 1)
        raise ValueError(message) from None


def train(estimator: Any, X: Any, y: Any, solver: str, params: dict[str, Any],
          sample_weight: np.ndarray | None, names: dict[str, str],
          task: str | None = None) -> Trained:
    """Fit in this process, or through the service when the estimator has a `server`."""
    checked(solver, params, names)
    if estimator.server is None:
        from solvers import fit

        result = fit(X, y, solver=solver, sample_weight=sample_weight, **params)
        outputs = result.per_output or [{"iterations": result.iterations,
                                         "exit_reason": result.exit_reason}]
        return Trained(result.model, result.solver, bool(result.converged),
                       result.relative_gap, result.primal_objective, result.dual_objective,
                       [int(o.get("iterations", 0)) for o in outputs],
                       [str(o.get("exit_reason", "")) for o in outputs])
    return _remote_train(estimator, X, y, solver, params, sample_weight, task)


def client(estimator: Any) -> Any:
    from app.client import HingeClient  # the client alone: it imports no server code

    if not isinstance(estimator.server, str) or not estimator.server:
        raise ValueError(f"server must be the service's URL, got {estimator.server!r}")
    return HingeClient(estimator.server, estimator.api_key)


def _remote_train(estimator: Any, X: Any, y: Any, solver: str, params: dict[str, Any],
                  sample_weight: np.ndarray | None, task: str | None) -> Trained:
    from solvers.model_import import read_model_file

    labels = np.zeros(X.shape[0]) if y is None else np.asarray(y, dtype=np.float64)
    with client(estimator) as service:
        dataset = service.upload(io.BytesIO(svmlight_bytes(X, labels)),
                                 name=f"{type(estimator).__name__}.svm", task=task)
        weights = None if sample_weight is None else [float(w) for w in sample_weight]
        job = service.train(dataset["id"], solver, params,
                            sample_weight=weights if weights is not None else "none")
        job = service.wait(job["id"], timeout=estimator.timeout)
        if job.get("status") != "succeeded":
            raise RuntimeError(f"Hinge job {job.get('id')} ended {job.get('status')}: "
                               f"{job.get('error')}")
        model_id = str(job["model_id"])
        text = service.export(model_id)
    result = job.get("result") or {}
    if text.lstrip().startswith("solver_type"):
        model = _liblinear_model(text, X.shape[1])
    else:
        model = read_model_file(text, n_features=X.shape[1]).model
    outputs = result.get("per_output") or [{"iterations": result.get("iterations") or 0,
                                            "exit_reason": result.get("exit_reason") or ""}]
    return Trained(model, (result.get("auto") or {}).get("chosen") or solver,
                   bool(result.get("converged")), result.get("relative_gap"),
                   result.get("primal_objective"), result.get("dual_objective"),
                   [int(o.get("iterations") or 0) for o in outputs],
                   [str(o.get("exit_reason") or "") for o in outputs],
                   sv_rows_known=False,
                   remote={"dataset_id": dataset["id"], "job_id": job["id"],
                           "model_id": model_id})


def _liblinear_model(text: str, n_features: int) -> Any:
    """A LIBLINEAR file's model (classification, regression, one-class), widened to the
    training set's features (the file ends at the last non-zero weight)."""
    import dataclasses

    from solvers.model_import import read_model_file
    from solvers.models import estimator_of

    if "_SVR" in text.split("\n", 1)[0]:  # served by solvers.models, not imported yet
        return _liblinear_regression(text, n_features)
    model: Any = estimator_of(read_model_file(text).model)
    coef = np.zeros((model.coef.shape[0], n_features))
    coef[:, :model.coef.shape[1]] = model.coef  # trailing all-zero features
    return dataclasses.replace(model, coef=coef)


def _liblinear_regression(text: str, n_features: int) -> Any:
    """A LIBLINEAR SVR file (solver_type L2R_*_SVR*: nr_feature, bias, then one weight per
    line, the bias feature's last) as a regression LinearModel."""
    from solvers.models import LinearModel

    lines = text.splitlines()
    marker = [line.strip() for line in lines].index("w")
    header = {parts[0]: parts[1:] for parts in (line.split() for line in lines[:marker])
              if parts}
    width, bias = int(header["nr_feature"][0]), float(header["bias"][0])
    weights = np.array([float(line.split()[0]) for line in lines[marker + 1:] if line.split()])
    coef = np.zeros((1, n_features))
    coef[0, :width] = weights[:width]
    intercept = np.array([weights[width] * bias if bias > 0 else 0.0])
    return LinearModel(classes=np.empty(0), coef=coef, intercept=intercept,
                       task="regression")


def remote_predict(estimator: Any, X: Any) -> tuple[np.ndarray, np.ndarray,
                                                    np.ndarray | None]:
    """(labels, decision values, probabilities or None) from the service's predict route
    for the model this estimator trained there."""
    rows = sp.csr_matrix(X, dtype=np.float64)
    rows.eliminate_zeros()
    labels: list[float] = []
    values: list[Any] = []
    probabilities: list[Any] = []
    with client(estimator) as service:
        for start in range(0, rows.shape[0], _PREDICT_BATCH):
            block = rows[start:start + _PREDICT_BATCH]
            instances = [{"indices": [int(j) + 1 for j in block.indices[a:b]],
                          "values": [float(v) for v in block.data[a:b]]}
                         for a, b in zip(block.indptr[:-1], block.indptr[1:], strict=True)]
            answer = service.predict(str(estimator.model_id_), instances)
            labels += answer["labels"]
            values += answer["decision_values"]
            probabilities += answer.get("probabilities") or []
    return (np.asarray(labels, dtype=np.float64), np.asarray(values, dtype=np.float64),
            np.asarray(probabilities, dtype=np.float64) if probabilities else None)


def uses_service(estimator: Any) -> bool:
    return bool(estimator.remote_predict) and getattr(estimator, "model_id_", None) is not None


def record(estimator: Any, trained: Trained) -> None:
    """The certificate and the remote objects as fitted attributes."""
    estimator.solver_ = trained.solver
    estimator.converged_ = trained.converged
    estimator.relative_gap_ = trained.relative_gap
    estimator.primal_objective_ = trained.primal_objective
    estimator.dual_objective_ = trained.dual_objective
    for key in ("dataset_id", "job_id", "model_id"):
        if key in trained.remote:
            setattr(estimator, f"{key}_", trained.remote[key])
        elif hasattr(estimator, f"{key}_"):
            delattr(estimator, f"{key}_")


def svmlight_bytes(X: Any, y: np.ndarray) -> bytes:
    """X (CSR or dense) and numeric labels as svmlight text (solvers.svmlight's writer:
    repr() floats, an exact round trip), explicit zeros left out."""
    from solvers.svmlight import dump_svmlight

    rows = sp.csr_matrix(X, dtype=np.float64, copy=True)
    rows.eliminate_zeros()
    out = io.BytesIO()
    dump_svmlight(rows, y, out)
    return out.getvalue()


def match_rows(X: Any, groups: np.ndarray, vectors: sp.csr_matrix,
               vector_groups: np.ndarray) -> np.ndarray:
    """The training row of every support vector of a model read from a file (which does
    not say): the first unused row of the vector's group (class; one group for
    regression) with exactly its entries (the file holds 17 significant digits); -1
    where none matches."""
    rows = sp.csr_matrix(X, dtype=np.float64)
    rows.sum_duplicates()
    rows.eliminate_zeros()

    def key(matrix: sp.csr_matrix, i: int) -> bytes:
        a, b = matrix.indptr[i], matrix.indptr[i + 1]
        return (matrix.indices[a:b].astype(np.int64).tobytes() + b"|"
                + matrix.data[a:b].tobytes())

    free: dict[tuple[int, bytes], list[int]] = {}
    for i in range(rows.shape[0] - 1, -1, -1):  # popped from the end: the first row first
        free.setdefault((int(groups[i]), key(rows, i)), []).append(i)
    vectors = sp.csr_matrix(vectors, copy=True)
    vectors.eliminate_zeros()
    out = np.full(vectors.shape[0], -1, dtype=np.int64)
    for s in range(vectors.shape[0]):
        candidates = free.get((int(vector_groups[s]), key(vectors, s)))
        if candidates:
            out[s] = candidates.pop()
    return out
