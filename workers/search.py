"""One task of a search on a worker: claim, fit its points on its folds, record each fit.

A task is a C path within one fold: its points in increasing C, each fit warm-started
from the previous one's solution (linear solvers: the dual solution, as LIBLINEAR -C;
smo: the points of one gamma, each binary problem continuing from the previous fit's
alphas, kernel-column cache and row layout - fit(keep_solver_state=True)); scaling is
fitted once on the fold's training rows. Probabilities (a workflow with its own inner
folds) start every fit cold.

Guarantees as for jobs (the one runner, workers.runner, on app.domain.lifecycle): the claim is a
conditional update, a heartbeat thread renews the lease, every fit's result is recorded
only while this attempt holds the task and at most once per (point, fold), and the fit's
progress callback stops the solver within a progress interval once the lease is lost (the
search was cancelled, or the sweep re-queued the task).

A halving round's task first takes the round's subsample of the rows (`subsample_rows`),
then cuts it into folds as below.

Folds (`fold_of_rows`): rows shuffled with the search's seed; stratified folds deal each
class's shuffled rows round-robin over the folds (every fold gets its share of every
class), plain folds cut the shuffled rows into contiguous parts of sizes differing by at
most one. Scores: solvers.metrics.evaluate on the held-out rows (roc_auc from the decision
values of a two-class model, log_loss from its probabilities); regression metrics
(neg_mse, r2): app.domain.tasks on the predicted values. A regression search's folds and
subsamples are never stratified.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from app.domain.lifecycle import Claim, Failed
from app.domain.search_space import stratified_counts
from app.domain.services import searches
from app.domain.services.searches import FitOutcome, TaskWork
from app.domain.tasks import REGRESSION_METRICS, regression_score
from app.infra.bus import notify
from app.infra.db import session_scope
from app.infra.storage import blob_store, load_dataset
from app.settings import Settings
from solvers.params import SOLVERS
from workers import runner
from workers.runner import Heartbeat, Lost, Work
from workers.training import job_threads, nonzero_weights

log = logging.getLogger("hinge.worker")

CHECK_SECONDS = 0.5  # how often a fit's progress callback checks the lease
RECORD_SECONDS = 0.5  # how often finished fits are written


def fold_of_rows(y: np.ndarray, folds: int, stratified: bool, seed: int) -> np.ndarray:
    """The fold (0..folds-1) of every row (see the module docstring)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(y.shape[0], dtype=np.int64)
    if not stratified:
        order = rng.permutation(y.shape[0])
        for k, part in enumerate(np.array_split(order, folds)):
            fold[part] = k
        return fold
    offset = 0
    for label in np.unique(y):
        rows = rng.permutation(np.flatnonzero(y == label))
        fold[rows] = (offset + np.arange(rows.shape[0])) % folds
        offset += rows.shape[0]  # the next class continues the deal where this one ended
    return fold


def subsample_rows(y: np.ndarray, n_rows: int, folds: int, seed: int) -> np.ndarray:
    """A halving round's rows (ascending): from each class (in label order) the first
    app.domain.search_space.stratified_counts of its rows shuffled by `seed`. The shuffles do not
    depend on n_rows, so a larger subsample contains a smaller one; n_rows >= every row
    takes them all, in order."""
    labels, counts = np.unique(y, return_counts=True)
    take = stratified_counts([int(c) for c in counts], n_rows, folds)
    rng = np.random.default_rng(seed)
    parts = [rng.permutation(np.flatnonzero(y == label))[:k]
             for label, k in zip(labels, take, strict=True)]
    return np.sort(np.concatenate(parts))


def score(model: Any, X: Any, y: np.ndarray, metric: str) -> float | None:
    """The metric of `model` on (X, y); None when it is not finite."""
    from solvers.metrics import evaluate
    from solvers.models import predictions

    labels, values, probabilities = predictions(model, X)
    classes = np.asarray(model.classes)
    if metric in REGRESSION_METRICS:
        value = regression_score(y, labels, metric)
    elif metric == "accuracy":
        value = float(np.mean(labels == y))
    elif metric == "roc_auc":
        value = evaluate(y, labels, classes, scores=np.asarray(values).reshape(-1))["roc_auc"]
    elif metric == "log_loss":
        value = evaluate(y, labels, classes, probabilities=probabilities)["log_loss"]
    else:
        value = evaluate(y, labels, classes)[metric]
    return float(value) if value is not None and np.isfinite(value) else None


class LeaseCheck:
    """A fit's progress callback: True (stop) once the task's lease is lost (seen by the
    heartbeat, or checked now if not for CHECK_SECONDS)."""

    def __init__(self, heartbeat: Heartbeat) -> None:
        self.heartbeat = heartbeat
        self.checked = time.monotonic()

    def lost(self) -> bool:
        held = self.heartbeat.check()
        self.checked = time.monotonic()
        return not held

    def __call__(self, _event: dict[str, Any] | None) -> bool:
        if self.heartbeat.lost:
            return True
        return time.monotonic() - self.checked >= CHECK_SECONDS and self.lost()


class Recorder:
    """Writes the task's fits in batches: at most every RECORD_SECONDS (and at the end),
    so that fits of milliseconds do not each wait for a commit; a killed worker loses at
    most that much work, which its task's next attempt redoes."""

    def __init__(self, settings: Settings, claim: Claim[TaskWork]) -> None:
        self.settings = settings
        self.claim = claim
        self.pending: list[FitOutcome] = []
        self.flushed = time.monotonic()

    def add(self, outcome: FitOutcome) -> None:
        self.pending.append(outcome)
        if time.monotonic() - self.flushed >= RECORD_SECONDS:
            self.flush()

    def flush(self) -> None:
        self.flushed = time.monotonic()
        if not self.pending:
            return
        with session_scope(self.settings.database_url) as session:
            recorded = searches.record(session, self.settings, self.claim, self.pending)
        self.pending = []
        if not recorded.held:
            raise Lost
        notify(self.settings, self.claim.work.search_id)


def _run_task(settings: Settings, claim: Claim[TaskWork], heartbeat: Heartbeat) -> None:
    _run(settings, claim, LeaseCheck(heartbeat))


SEARCH: Work[TaskWork, None] = Work(
    kind=searches.SEARCH_TASKS,
    claim=lambda session, _settings, task_id, worker: searches.claim_task(session, task_id,
                                                                          worker),
    run=_run_task,
    finish=lambda settings, claim, _none, heartbeat: runner.stop_and_finish(
        heartbeat, settings, lambda session: searches.finish_task(session, claim)),
    fail=searches.finish_task,
    subject=lambda claim: claim.work.search_id)


def run_search_task(settings: Settings, task_id: str, hostname: str) -> str:
    """Run one delivery of a search task (workers.runner): succeeded, failed, lost or
    skipped."""
    return runner.run(settings, SEARCH, task_id, hostname)


def _split(settings: Settings, task: TaskWork, X: sp.csr_matrix, y: np.ndarray, fold: int,
           rows: np.ndarray | None) -> tuple[Any, np.ndarray, Any, np.ndarray]:
    if task.holdout:
        if task.holdout_blob_path is None:
            raise Failed("the holdout dataset was deleted before the task ran")
        X_test, y_test = load_dataset(blob_store(settings), task.holdout_blob_path,
                                      X.shape[1], task.holdout_shards)
        return X, y, X_test, y_test
    assert rows is not None
    test = rows == fold
    return X[~test], y[~test], X[test], y[test]


def _run(settings: Settings, claim: Claim[TaskWork], check: LeaseCheck) -> None:
    task = claim.work
    if task.blob_path is None:
        raise Failed("the dataset was deleted before the task ran")
    X, y = load_dataset(blob_store(settings), task.blob_path, task.features, task.shards)
    # the strata of a halving round's subsample: the classes (regression: one stratum)
    strata = np.zeros_like(y) if task.metric in REGRESSION_METRICS else y
    if task.n_rows is not None and task.n_rows < y.shape[0]:  # a halving round
        keep = subsample_rows(strata, task.n_rows, task.folds, task.subsample_seed)
        X, y = X[keep], y[keep]
    rows = None
    if not task.holdout:
        rows = fold_of_rows(y, task.folds, bool(task.cv.get("stratified", True)),
                            int(task.cv.get("seed", 0)))
    folds = range(task.folds) if task.fold is None else [task.fold]
    recorder = Recorder(settings, claim)
    for fold in folds:
        todo = [(i, p) for i, p in task.points if (i, fold) not in task.done]
        if todo:
            parts = _split(settings, task, X, y, fold, rows)
            _fit_fold(settings, task, check, recorder, parts, fold, todo)
    recorder.flush()


def _warm_path(task: TaskWork, params: dict[str, Any]) -> bool:
    return SOLVERS[task.solver].continues_fits and not params.get("probability")


def _warm_started(result: Any, previous: Any) -> bool:
    if previous is None:
        return False
    if result.kernel_states or previous.kernel_states:  # smo: per binary problem
        return any(o.get("warm_start") for o in result.per_output)
    return any(a is not None for a in previous.dual_solutions)


def _nonzero_total(result: Any) -> int | None:
    """An L1 model's non-zero weights, summed over its outputs (the regularisation path's
    count); None for a model with dense weights."""
    counts = nonzero_weights(result)
    return None if counts is None else sum(counts)


def _fit_fold(settings: Settings, task: TaskWork, check: LeaseCheck, recorder: Recorder,
              parts: tuple[Any, np.ndarray, Any, np.ndarray], fold: int,
              todo: list[tuple[int, dict[str, Any]]]) -> None:
    from solvers import fit
    from solvers.scaling import fit_scaler

    X_train, y_train, X_test, y_test = parts
    warm = _warm_path(task, todo[0][1])
    if warm and todo[0][1].get("scale", "none") != "none":  # one scaler for the whole path
        method = todo[0][1]["scale"]
        lower = float(todo[0][1].get("scale_lower", -1.0)) if method == "minmax" else -1.0
        scaler = fit_scaler(X_train, method, lower=lower)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    previous = None
    for index, params in todo:
        if check(None):  # the lease (seen by the heartbeat, or checked if not lately)
            raise Lost
        params = dict(params)
        if params.get("max_seconds") is None:
            params["max_seconds"] = settings.job_max_seconds
        if "threads" in params:  # capped by this worker's budget, as for jobs
            params["threads"] = job_threads(settings, params)
        if warm:
            params["scale"] = "none"
        started = time.perf_counter()
        if warm and SOLVERS[task.solver].warm_start == "state":
            params["keep_solver_state"] = True
        result = fit(X_train, y_train, solver=task.solver, progress=check,
                     warm_start=previous if warm else None, **params)
        seconds = time.perf_counter() - started
        if result.exit_reason == "cancelled":
            raise Lost
        value = None if result.exit_reason == "numerical_error" else score(
            result.model, X_test, y_test, task.metric)
        outcome = FitOutcome(point=index, fold=fold, score=value, fit_seconds=seconds,
                             converged=bool(result.converged), exit_reason=result.exit_reason,
                             iterations=int(result.iterations),
                             warm_start=_warm_started(result, previous),
                             nonzero_weights=_nonzero_total(result))
        recorder.add(outcome)
        previous = result if warm else None
