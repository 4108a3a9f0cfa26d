"""The practical workflow around a solver's fit: scale, fit, calibrate (LIBSVM's guide).

`fit_workflow` is what `solvers.train.fit` runs when a spec asks for `scale` other than
"none" or for `probability: true`:

1. Scaling (`scale`: minmax / maxabs / standard, solvers/scaling.py) is fitted on the
   training rows only, and the solver trains on the scaled rows. The model becomes a
   `Pipeline` (solvers/models.py) that carries the scaler and applies it in predict.
2. The fit itself, with the job's progress callback (its convergence plot, cancellation).
3. Probabilities (`probability: true`) as LIBSVM's `svm_train` with `-b 1`: decision
   values from an internal 5-fold cross-validation (`cv_decision_values`: rows shuffled by
   `seed`, contiguous folds, libsvm's special cases), then Platt's sigmoid by the robust
   Newton method of Lin, Lin & Weng 2007 (`platt_fit`):
   - two classes and one-vs-one kernel models: one sigmoid per class pair, fitted on the
     rows of the pair's two classes with the pair's own cross-validation (libsvm's
     `svm_binary_svc_probability` per pair); decision values oriented as LIBSVM's
     (positive for the pair's first class), so A and B are LIBSVM's probA / probB;
     prediction couples the pairs (Wu, Lin & Weng 2004, method 2);
   - one-vs-rest models of k > 2 classes (every linear solver; smo with
     multiclass='ovr'): one 5-fold cross-validation of the whole multi-class fit gives
     out-of-fold values of every "class c vs the rest" output (a fold whose training part
     lacks class c gives -1, "all negative", as libsvm does for a one-class fold); one
     sigmoid per output; prediction divides the k sigmoids by their sum.
   LIBSVM fits the sigmoids before the final model; we fit the final model first, so that a
   cancelled job stops before the extra fits start. The fits of the cross-validation run
   with the job's parameters and the time left of its `max_seconds`; they report progress
   as `phase: "calibration"` events (class_index / n_classes count the fits; elapsed_s
   counts from the calibration's start, which `phase_start_s` places on the fit's clock,
   the seconds since the fit started, so that a plot can show the two phases in turn).

A scale-sensitive solver (smo with rbf/poly/sigmoid, pegasos, the dual CD solvers dcd and
acf) trained without scaling on features whose value ranges differ by more than
`RANGE_RATIO_WARNING` gets a warning in `FitResult.warnings` that names the fix; so does
a kernel model for which at least 90% of the rows became support vectors on unscaled
features wider than [-1, 1] (pendigits with the default gamma: every row).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

from solvers.backbone import CsrArrays, ProgressCallback
from solvers.calibration import (
    CV_FOLDS,
    cv_decision_values,
    one_class_density_marks,
    platt_fit,
)
from solvers.models import Calibration, KernelModel, Pipeline, estimator_of
from solvers.params import SOLVERS, label_key
from solvers.result import FitResult
from solvers.scaling import Scaler, fit_scaler

RANGE_RATIO_WARNING = 100.0
SUPPORT_FRACTION_WARNING = 0.9  # kernel models, unscaled rows wider than [-1, 1]
_INNER = {"scale": "none", "probability": False, "scale_target": False}

FitFunction = Callable[..., FitResult]


def requested(applied: dict[str, Any]) -> bool:
    """Whether a spec (as applied) asks for anything beyond the plain fit."""
    return (applied.get("scale", "none") != "none" or bool(applied.get("probability"))
            or bool(applied.get("scale_target")))


def fit_workflow(X: Any, y: Any, solver: str, progress: ProgressCallback | None,
                 applied: dict[str, Any], fit: FitFunction) -> FitResult:
    """Scale, fit with `fit` (solvers.train.fit), calibrate; see the module docstring."""
    started = time.perf_counter()
    matrix = sp.csr_matrix(X, dtype=np.float64)
    labels = np.asarray(y, dtype=np.float64).reshape(-1)
    target = _target_scale(labels) if applied.get("scale_target") else None
    if target is not None:
        labels = (labels - target[0]) / target[1]
    inner = {**applied, **_INNER}
    if not SOLVERS[solver].randomized:  # its seed only shuffles the cross-validation
        inner["seed"] = None
    warnings: list[str] = []
    scaler = _fit_scaler(matrix, applied)
    scaled = matrix if scaler is None else scaler.transform(matrix)
    scale_s = time.perf_counter() - started
    fit_started = time.perf_counter()
    result = fit(scaled, labels, solver=solver, progress=progress, applied=inner)
    calibration = None
    calibration_s = 0.0
    exit_reason = result.exit_reason
    if applied.get("probability"):
        if result.exit_reason in ("cancelled", "max_seconds", "numerical_error"):
            warnings.append(f"probabilities were not fitted: the fit ended with "
                            f"{result.exit_reason}")
        else:
            t0 = time.perf_counter()
            deadline = _deadline(applied, started)
            try:
                calibration, notes = calibrate(scaled, labels, solver, inner, result, fit,
                                               progress, deadline, applied.get("seed"),
                                               phase_start_s=t0 - fit_started)
                warnings += notes
            except _Stopped as stopped:  # the model is kept, without probabilities
                exit_reason = stopped.exit_reason
                warnings.append(f"probabilities were not fitted: {stopped}")
            calibration_s = time.perf_counter() - t0
    if calibration is None and isinstance(result.model, Pipeline):
        calibration = result.model.calibration  # a logistic model's own sigmoid
    estimator = estimator_of(result.model)
    if target is not None:
        estimator, calibration = _target_unscaled(estimator, calibration, *target)
    model = Pipeline(estimator, scaler, calibration)
    timings = {**result.timings, "scale_s": scale_s, "calibration_s": calibration_s}
    return dataclasses.replace(result, model=model, params={**result.params, **_public(applied)},
                               timings=timings, warnings=[*result.warnings, *warnings],
                               exit_reason=exit_reason)


def _public(applied: dict[str, Any]) -> dict[str, Any]:
    return {k: applied[k] for k in ("scale", "scale_lower", "scale_target", "probability",
                                    "seed")
            if k in applied}


def _target_scale(y: np.ndarray) -> tuple[float, float]:
    """(mean, std) of a regression target (std 1 for a constant target)."""
    std = float(np.std(y))
    return float(np.mean(y)), std if std > 0 and np.isfinite(std) else 1.0


def _target_unscaled(estimator: Any, calibration: Calibration | None, mean: float,
                     std: float) -> tuple[Any, Calibration | None]:
    """A model of the standardised target made a model of the original one: f(x) * std +
    mean, folded into its coefficients and intercept (a kernel model's sv_coef * std, rho *
    std - mean; a linear one's coef * std, intercept * std + mean), and the Laplace width
    times std. The exported LIBSVM / LIBLINEAR file then predicts on the original scale."""
    if isinstance(estimator, KernelModel):
        estimator = dataclasses.replace(estimator, sv_coef=estimator.sv_coef * std,
                                        rho=estimator.rho * std - mean)
    else:
        estimator = dataclasses.replace(estimator, coef=estimator.coef * std,
                                        intercept=estimator.intercept * std + mean)
    if calibration is not None and calibration.layout == "laplace":
        calibration = dataclasses.replace(calibration, A=calibration.A * std)
    return estimator, calibration


def _fit_scaler(matrix: sp.csr_matrix, applied: dict[str, Any]) -> Scaler | None:
    method = applied.get("scale", "none")
    if method == "none":
        return None
    if method == "minmax":
        return fit_scaler(matrix, "minmax", lower=float(applied.get("scale_lower", -1.0)))
    return fit_scaler(matrix, method)


def _deadline(applied: dict[str, Any], started: float) -> float | None:
    limit = applied.get("max_seconds")
    return None if limit is None else started + float(limit)


# ---- the range warning ------------------------------------------------------------------


def scale_sensitive(solver: str, applied: dict[str, Any]) -> bool:
    """The registry's word (SolverSpec.scale_sensitive); a kernel solver with the linear
    kernel is not."""
    spec = SOLVERS[solver]
    if spec.kind == "kernel" and applied.get("kernel", "rbf") == "linear":
        return False
    return spec.scale_sensitive


def feature_ranges(X: CsrArrays) -> np.ndarray:
    """max_j - min_j of every feature over the rows (implicit zeros included)."""
    return _feature_ranges(X.data, X.indices, X.n_rows, X.n_features)


@njit(cache=True, nogil=True)
def _feature_ranges(data, indices, n_rows, n_features):
    """One pass over the stored entries (scipy's max(axis=0) converts to CSC, and
    ufunc.at casts every index: ~0.1 ms of a fit of a few milliseconds)."""
    high = np.full(n_features, -np.inf)
    low = np.full(n_features, np.inf)
    counts = np.zeros(n_features, dtype=np.int64)
    for k in range(indices.shape[0]):
        f = indices[k]
        v = data[k]
        high[f] = max(high[f], v)
        low[f] = min(low[f], v)
        counts[f] += 1
    out = np.zeros(n_features)
    if n_rows == 0:
        return out
    for f in range(n_features):
        if counts[f] < n_rows:  # an implicit zero
            high[f] = max(high[f], 0.0)
            low[f] = min(low[f], 0.0)
        out[f] = high[f] - low[f]
    return out


def fit_warnings(X: CsrArrays, solver: str, applied: dict[str, Any],
                 result: FitResult) -> list[str]:
    """What solvers.train.fit attaches to every plain fit (the rows it trained on): the
    range warning, and for kernel models where (nearly) every row became a support vector
    on unscaled rows, a warning that says so."""
    warnings = range_warnings(X, solver, applied)
    n_support = result.n_support
    if (not warnings and n_support is not None and scale_sensitive(solver, applied)
            and X.n_rows >= 50 and n_support >= SUPPORT_FRACTION_WARNING * X.n_rows
            and float(feature_ranges(X).max(initial=0.0)) > 2.0):
        warnings.append(
            f"{n_support} of {X.n_rows} training rows are support vectors, and the features "
            f"span up to {float(feature_ranges(X).max()):.3g} in value: with this gamma "
            "the kernel sees every row as far from every other; train with \"scale\": "
            "\"minmax\" (or choose a smaller gamma)")
    return warnings


def range_warnings(X: CsrArrays, solver: str, applied: dict[str, Any]) -> list[str]:
    """One warning when a scale-sensitive solver sees feature ranges differing > 100x."""
    if not scale_sensitive(solver, applied):
        return []
    ranges = feature_ranges(X)
    varying = ranges[ranges > 0]
    if varying.shape[0] < 2:
        return []
    ratio = float(varying.max() / varying.min())
    if ratio <= RANGE_RATIO_WARNING:
        return []
    kernel = SOLVERS[solver].kind == "kernel"
    what = f"{solver} with the {applied.get('kernel', 'rbf')} kernel" if kernel else solver
    return [f"unscaled features: their value ranges differ by {ratio:.3g}x (from "
            f"{varying.min():.3g} to {varying.max():.3g}), and {what} is sensitive to scale "
            "(slow convergence or a poor model); train with \"scale\": \"minmax\" (or "
            "\"maxabs\" for sparse data)"]


# ---- probabilities ----------------------------------------------------------------------


def calibrate(X: sp.csr_matrix, y: np.ndarray, solver: str, inner: dict[str, Any],
              result: FitResult, fit: FitFunction, progress: ProgressCallback | None,
              deadline: float | None, seed: int | None, phase_start_s: float = 0.0
              ) -> tuple[Calibration, list[str]]:
    """Platt sigmoids for the model of `result` (trained on X, y); see the docstring.
    `seed` shuffles the rows (null: 0). Raises _Stopped when cancelled or out of time."""
    classes = result.classes
    estimator = estimator_of(result.model)
    if isinstance(estimator, KernelModel) and estimator.svm_type == "one_class":
        marks = one_class_density_marks(estimator.decision_function(X))
        if marks is None:  # LIBSVM warns and keeps the model without probabilities
            raise _Stopped("fewer than 5 training rows have a negative or fewer than 5 a "
                           "non-negative decision value: too few to bin (LIBSVM's "
                           "svm_one_class_probability)", result.exit_reason)
        return Calibration("density", marks, np.zeros(0)), []
    if estimator.task == "regression":  # kernel or linear SVR: the Laplace width
        runner = _FoldRunner(X, solver, inner, fit, progress, deadline, CV_FOLDS,
                             phase_start_s)
        rng = np.random.default_rng(0 if seed is None else int(seed))
        sigma = laplace_sigma(y, _cv_predictions(X, y, runner, rng))
        return Calibration("laplace", np.array([sigma]), np.zeros(0)), []
    pairwise = classes.shape[0] == 2 or (isinstance(estimator, KernelModel)
                                         and estimator.multiclass == "ovo")
    rng = np.random.default_rng(0 if seed is None else int(seed))
    k = classes.shape[0]
    n_fits = CV_FOLDS * (k * (k - 1) // 2 if pairwise else 1)
    runner = _FoldRunner(X, solver, inner, fit, progress, deadline, n_fits, phase_start_s)
    if pairwise:
        decision, targets = _pairwise_values(X, y, classes, runner, rng)
    else:
        decision, targets = _one_vs_rest_values(X, y, classes, runner, rng)
    fits = [platt_fit(d, t) for d, t in zip(decision, targets, strict=True)]
    notes = [f"Platt fit of output {i} ended with {f.exit_reason} after {f.n_iter} "
             "iterations" for i, f in enumerate(fits) if f.exit_reason != "converged"]
    layout = "pairwise" if pairwise else "ovr"
    return Calibration(layout, np.array([f.A for f in fits]), np.array([f.B for f in fits])), \
        notes


class _Stopped(Exception):
    """The cross-validation was cancelled or ran out of time (`exit_reason` of the fit)."""

    def __init__(self, message: str, exit_reason: str) -> None:
        super().__init__(message)
        self.exit_reason = exit_reason


class _FoldRunner:
    """Trains the cross-validation's fits with the job's parameters, the time left, and a
    progress callback that counts fits and passes cancellation through."""

    def __init__(self, X: sp.csr_matrix, solver: str, inner: dict[str, Any], fit: FitFunction,
                 progress: ProgressCallback | None, deadline: float | None, n_fits: int,
                 phase_start_s: float = 0.0) -> None:
        self.X, self.solver, self.inner, self.fit = X, solver, inner, fit
        self.progress, self.deadline, self.n_fits = progress, deadline, n_fits
        self.phase_start_s = phase_start_s
        self.done = 0
        self.started = time.perf_counter()

    def _progress(self, event: dict[str, Any]) -> bool:
        if self.progress is None:
            return False
        return bool(self.progress({
            "phase": "calibration", "iteration": self.done,
            "elapsed_s": time.perf_counter() - self.started,
            "class_index": self.done, "n_classes": self.n_fits,
            "phase_start_s": self.phase_start_s,
        }))

    def train(self, X: Any, y: np.ndarray) -> FitResult:
        params = dict(self.inner)
        if params.get("class_weight"):  # a pair's or a fold's rows: the weights of its classes
            present = {label_key(float(c)) for c in np.unique(y)}
            params["class_weight"] = {label: weight for label, weight
                                      in params["class_weight"].items() if label in present}
        if self.deadline is not None:
            left = self.deadline - time.perf_counter()
            if left <= 0:
                raise _Stopped("max_seconds ran out during the cross-validation",
                               "max_seconds")
            params["max_seconds"] = left
        if self._progress({}):
            raise _Stopped("cancelled during the cross-validation", "cancelled")
        result = self.fit(X, y, solver=self.solver, progress=self._progress, applied=params)
        self.done += 1
        if result.exit_reason in ("cancelled", "max_seconds"):
            raise _Stopped(f"a cross-validation fit ended with {result.exit_reason}",
                           result.exit_reason)
        return result


def _pairwise_values(X: sp.csr_matrix, y: np.ndarray, classes: np.ndarray,
                     runner: _FoldRunner, rng: np.random.Generator
                     ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per pair (i, j), i < j: out-of-fold values on the pair's rows, positive for i."""
    decision: list[np.ndarray] = []
    targets: list[np.ndarray] = []
    for i in range(classes.shape[0]):
        for j in range(i + 1, classes.shape[0]):
            rows = np.flatnonzero((y == classes[i]) | (y == classes[j]))
            signs = np.where(y[rows] == classes[i], 1.0, -1.0)
            first, second = classes[i], classes[j]

            def fit_pair(X_train: Any, signs_train: np.ndarray,
                         first: float = first, second: float = second) -> Any:
                model = runner.train(X_train, np.where(signs_train > 0, first, second)).model
                return lambda X_held: -model.predict(X_held)[1]  # LIBSVM's sign: + for first

            decision.append(cv_decision_values(X[rows], signs, fit_pair, rng=rng))
            targets.append(signs)
    return decision, targets


def _one_vs_rest_values(X: sp.csr_matrix, y: np.ndarray, classes: np.ndarray,
                        runner: _FoldRunner, rng: np.random.Generator
                        ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Out-of-fold values of every "class c vs the rest" output, one CV of the whole fit."""
    n, k = y.shape[0], classes.shape[0]
    order = rng.permutation(n)
    values = np.full((n, k), -1.0)  # a class absent from a fold's training part: "negative"
    for fold in range(CV_FOLDS):
        begin, end = fold * n // CV_FOLDS, (fold + 1) * n // CV_FOLDS
        held_out = order[begin:end]
        train = np.concatenate([order[:begin], order[end:]])
        present = np.unique(y[train])
        if held_out.shape[0] == 0 or present.shape[0] < 2:
            continue
        model = runner.train(X[train], y[train]).model
        scores = model.predict(X[held_out])[1]
        columns = np.searchsorted(classes, present)
        if present.shape[0] == 2:  # a two-class fold: one value, positive for present[1]
            values[np.ix_(held_out, columns)] = np.column_stack([-scores, scores])
        else:
            values[np.ix_(held_out, columns)] = scores
    return ([values[:, c] for c in range(k)],
            [np.where(y == classes[c], 1.0, -1.0) for c in range(k)])


def _cv_predictions(X: sp.csr_matrix, y: np.ndarray, runner: _FoldRunner,
                    rng: np.random.Generator) -> np.ndarray:
    """Out-of-fold predicted values of a regression fit (LIBSVM's 5-fold
    svm_cross_validation over a random permutation; here a seeded one)."""
    n = y.shape[0]
    order = rng.permutation(n)
    predicted = np.zeros(n)
    for fold in range(CV_FOLDS):
        begin, end = fold * n // CV_FOLDS, (fold + 1) * n // CV_FOLDS
        held_out = order[begin:end]
        if held_out.shape[0] == 0:
            continue
        train = np.concatenate([order[:begin], order[end:]])
        predicted[held_out] = runner.train(X[train], y[train]).model.predict(X[held_out])[1]
    return predicted


def laplace_sigma(y: np.ndarray, predicted: np.ndarray) -> float:
    """LIBSVM's svm_svr_probability: the mean absolute residual of the cross-validated
    predictions, recomputed without the residuals beyond 5 std (std = sqrt(2) * mean)."""
    residual = np.abs(np.asarray(y, dtype=np.float64) - predicted)
    mae = float(residual.mean())
    std = float(np.sqrt(2 * mae * mae))
    kept = residual[~(residual > 5 * std)]
    return float(kept.mean())


def warmup() -> None:
    """Compile the scaling and calibration kernels (the worker calls this at start)."""
    rng = np.random.default_rng(0)
    X = sp.csr_matrix(np.round(rng.normal(size=(20, 3)), 2))
    scaler = fit_scaler(X, "minmax")
    scaler.transform(X)
    fit_scaler(X, "maxabs").transform(X)
    fit_scaler(X, "standard").transform(X)
    platt_fit(np.linspace(-1, 1, 20), np.where(np.arange(20) % 2 == 0, 1, -1))
    Calibration("pairwise", np.ones(3), np.zeros(3)).probabilities(rng.normal(size=(4, 3)))
    Calibration("ovr", np.ones(3), np.zeros(3)).probabilities(rng.normal(size=(4, 3)))
