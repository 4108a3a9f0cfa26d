"""One training job, start to finish: claim, load, fit with progress, store the model.

The database is the truth about the job. The claim is a conditional update (a duplicate
delivery does nothing); the model row and the `succeeded` status are written in one
transaction; a cancelled job leaves no model.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from app.domain.job_result import JobResult
from app.domain.job_status import JobStatus
from app.domain.lifecycle import Claim, Failed
from app.domain.orm import Model, new_id
from app.domain.services import jobs
from app.domain.services.jobs import JobWork
from app.domain.services.lineage import code_version
from app.domain.tasks import model_task, outlier_report, regression_report
from app.infra.bus import notify
from app.infra.db import session_scope
from app.infra.storage import (
    blob_store,
    csr_from_arrays,
    dataset_arrays,
    dataset_shards,
    model_key,
    store_model_arrays,
)
from app.settings import Settings
from solvers.models import model_to_bytes
from workers import dask_fit, runner
from workers.runner import Heartbeat, Lost, Work
from workers.warmup import (  # re-exported: the warm-up moved to workers/warmup.py
    compiler_count as compiler_count,
)
from workers.warmup import kernel_compiler as kernel_compiler
from workers.warmup import start_kernel_compilers as start_kernel_compilers
from workers.warmup import stop_kernel_compilers as stop_kernel_compilers
from workers.warmup import warm_up as warm_up

if TYPE_CHECKING:
    from solvers.result import FitResult

log = logging.getLogger("hinge.worker")


class ProgressRecorder:
    """The solver's progress callback: persists a throttled history, sees cancellation.

    The solver calls at most every `progress_interval_seconds` (0.2 s). Each call updates
    the job's latest progress and heartbeat; the history keeps a point when the time since
    the last kept point exceeds max(that interval, elapsed/100), so a job keeps a few
    hundred points however long it runs.
    With the attempt's `heartbeat`, a call also stops the fit once the heartbeat says the
    lease is lost (`lease_lost` then says why the fit stopped), and a recorded event counts
    as a renewal.
    """

    # A job with probabilities spends this share of its fraction on the fit and the rest on
    # the calibration's cross-validation (5 folds of 4/5 of the rows: about four fits' work)
    FIT_SHARE = 0.2

    def __init__(self, settings: Settings, job_id: str, attempt: int, eps: float | None,
                 heartbeat: Heartbeat | None = None, calibrated: bool = False) -> None:
        self.settings = settings
        self.calibrated = calibrated  # a calibration phase follows the fit
        self.job_id = job_id
        self.attempt = attempt
        self.eps = eps
        self.heartbeat = heartbeat
        self.lease_lost = False  # the fit was stopped because this attempt lost the job
        self.class_index = 0
        self.first_violation: float | None = None
        self.within = 0.0  # progress within the current binary problem, never backwards
        self.first_violators = 0  # SMO: KKT violators at the problem's first event
        self.last_kept = -math.inf
        self.started = time.monotonic()

    def fraction(self, event: dict[str, Any]) -> float | None:
        """How far the job is, 0 to 1, never backwards from one phase to the next: with a
        calibration (probabilities), the fit's fraction fills the first FIT_SHARE and the
        calibration's (fits done / fits) the rest, so the job's one fraction does not fall
        back to 0 when the calibration starts."""
        within_phase = self._phase_fraction(event)
        if not self.calibrated or within_phase is None:
            return within_phase
        if event.get("phase") == "calibration":
            return self.FIT_SHARE + (1.0 - self.FIT_SHARE) * within_phase
        return self.FIT_SHARE * within_phase

    def _phase_fraction(self, event: dict[str, Any]) -> float | None:
        """(binary problems done + progress within the current one) / binary problems.

        Within a problem: how far the stop-rule violation has come down from the largest
        value seen in this problem towards eps, on a log scale; for SMO, whose violation
        m - M stays near its start for most of a run (and may rise first), also the share
        of variables that no longer break the KKT conditions (kkt_violators); the larger
        of the two, never backwards."""
        n_classes = int(event.get("n_classes") or 1)
        class_index = int(event.get("class_index") or 0)
        if class_index != self.class_index:  # the next binary problem
            self.class_index, self.first_violation, self.within = class_index, None, 0.0
            self.first_violators = 0
        violation = event.get("violation")
        measured = False
        if isinstance(violation, int | float) and self.eps and violation > 0:
            if self.first_violation is None or event.get("iteration", 0) <= 1:
                self.first_violation = max(float(violation), self.eps * 1.0001)
            self.first_violation = max(self.first_violation, float(violation))
            span = math.log(self.first_violation / self.eps)
            now = math.log(self.first_violation / violation) / span
            self.within = max(self.within, min(1.0, max(0.0, now)))
            measured = True
        violators = event.get("kkt_violators")
        if isinstance(violators, int) and violators >= 0:
            # SMO: the share of variables that have come to satisfy the KKT conditions
            # moves through the long stretch in which m - M barely falls
            self.first_violators = max(self.first_violators, violators)
            if self.first_violators:
                share = 1.0 - violators / self.first_violators
                self.within = max(self.within, min(1.0, share))
                measured = True
        if not measured and n_classes == 1:
            return None
        return (class_index + self.within) / n_classes

    def __call__(self, event: dict[str, Any]) -> bool:
        if self.heartbeat is not None and self.heartbeat.lost:
            self.lease_lost = True  # stop: the sweep may have given the job to another
            return True
        payload = {k: _plain(v) for k, v in event.items()}
        payload["at"] = time.time()  # wall clock, so a client can measure event latency
        fraction = self.fraction(event)
        if fraction is not None:
            payload["fraction"] = round(fraction, 4)
        now = time.monotonic()
        elapsed = now - self.started
        keep = now - self.last_kept >= max(self.settings.progress_interval_seconds,
                                           elapsed / 100.0)
        with session_scope(self.settings.database_url) as session:
            answer = jobs.record_progress(session, self.job_id, self.attempt, payload,
                                          keep=keep)
        if answer == "lost":  # stop: another attempt owns the job
            self.lease_lost = True
            if self.heartbeat is not None:
                self.heartbeat.lose()
            return True
        if self.heartbeat is not None:
            self.heartbeat.renewed(now)
        if keep:
            self.last_kept = now
        notify(self.settings, self.job_id)
        return answer == "stop"


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def job_threads(settings: Settings, params: dict[str, Any]) -> int:
    """The Numba threads a job gets: what it asked for (`threads`, default 1), capped by
    this worker's budget (HINGE_SOLVER_THREADS, by default cores // concurrency), so a job
    never oversubscribes the host's cores, whatever its spec says."""
    asked = params.get("threads")
    wanted = int(asked) if isinstance(asked, int | float) and asked >= 1 else 1
    return min(wanted, settings.solver_thread_budget())


def claim(settings: Settings, job_id: str, worker: str) -> Claim[JobWork] | None:
    """Claim a queued job for this process (None: not queued, e.g. a duplicate delivery);
    app.domain.lifecycle.NotAdmitted when its tenant runs as many jobs as it may."""
    with session_scope(settings.database_url) as session:
        return jobs.claim_job(session, job_id, worker, settings)


def _fail(settings: Settings, claimed: Claim[JobWork], error: str) -> None:
    with session_scope(settings.database_url) as session:
        claimed.fail(session, error)


@dataclass(frozen=True)
class Fitted:
    result: FitResult
    X: Any  # None: trained out of core or on Dask (the figures came with the fit)
    y: np.ndarray | None
    figures: tuple[float | None, dict[str, Any] | None] | None = None


def _shard_source(settings: Settings, claimed: Claim[JobWork]) -> Any:
    """The dataset's rows as a ShardSource (solvers/shards.py): its shards, or its one
    blob."""
    from solvers.shards import ShardInfo

    store, job = blob_store(settings), claimed.work
    if not job.shards:
        return dataset_shards(store, [cast(str, job.blob_path)], job.features)
    return dataset_shards(store, [s["blob_path"] for s in job.shards], job.features,
                          [ShardInfo(int(s["rows"]), int(s["nnz"]), int(s["nbytes"]))
                           for s in job.shards])


def _figures(source: Any) -> tuple[int, int, int]:
    """(rows, bytes of the arrays, non-zeros) of a ShardSource: a sharded dataset's from
    its manifest, without reading a shard (on S3 the plan comes before any fetch)."""
    infos = [source.info(index) for index in range(len(source))]
    return (sum(i.rows for i in infos), sum(i.nbytes for i in infos),
            sum(i.nnz for i in infos))


def _fit(settings: Settings, claimed: Claim[JobWork], heartbeat: Heartbeat) -> Fitted:
    """Plan how the data is read (workers.dask_fit.plan_job: app.domain.memory.plan_fit's
    in memory, out of core in blocks, or on the Dask cluster), load it and fit, under the
    attempt's heartbeat."""
    if claimed.work.blob_path is None:
        raise Failed("the dataset was deleted before the job started")
    source = _shard_source(settings, claimed)
    params = dict(claimed.work.params)
    rows, dataset_bytes, nnz = _figures(source)
    plan = dask_fit.plan_job(settings, claimed, params, rows, dataset_bytes,
                             claimed.work.classes, nnz)
    params.pop("engine", None)
    if plan["mode"] == "distributed":
        return _fit_on_dask(settings, claimed, heartbeat, params, plan)
    weights = params.pop("sample_weight", None)  # app.domain.weights: "dataset" or a list
    if plan["mode"] == "refused":
        raise Failed(plan.pop("error"))
    if "threads" in params:
        params["threads"] = job_threads(settings, params)
    if params.get("max_seconds") is None:
        params["max_seconds"] = settings.job_max_seconds
    recorder = ProgressRecorder(settings, claimed.id, claimed.attempt,
                                params.get("eps"), heartbeat=heartbeat,
                                calibrated=bool(params.get("probability")))
    # the stored spec, validated once at the API (POST /v1/jobs): not validated again
    if plan["mode"] == "blocks":
        return _fit_blocks(settings, claimed, source, plan, params, weights, recorder)
    # mapped, read once; a sharded dataset's shards in one set (as every other reader)
    arrays = dataset_arrays(blob_store(settings), cast(str, claimed.work.blob_path),
                            claimed.work.shards)
    X, y = csr_from_arrays(arrays, claimed.work.features), arrays["y"]
    if weights == "dataset":
        weights = arrays.get("w")  # None: the dataset has no weights
    from solvers import fit

    result = fit(X, y, solver=claimed.work.solver, progress=recorder,
                 progress_interval=settings.progress_interval_seconds,
                 sample_weight=None if weights is None else np.asarray(weights, np.float64),
                 applied=params)
    if recorder.lease_lost:
        raise Lost
    # the values the solver read: the stored float32 ones, or float64 (solvers.fit)
    read = {o.get("value_dtype", "float64") for o in result.per_output} or {"float64"}
    result.data_plan = {**plan, "passes": 1, "bytes_read": dataset_bytes,
                        "value_dtype": "float32" if read == {"float32"} else "float64"}
    return Fitted(result, X, y)


def _fit_on_dask(settings: Settings, claimed: Claim[JobWork], heartbeat: Heartbeat,
                 params: dict[str, Any], plan: dict[str, Any]) -> Fitted:
    from solvers.distributed import DistributedFitError

    weights = params.pop("sample_weight", None)
    if weights is not None and weights != "dataset":
        raise Failed("engine 'dask' trains with the dataset's own instance weights or none; "
                     "this job gives a list")
    params["weighted"] = weights == "dataset"
    if "threads" in params:
        params["threads"] = job_threads(settings, params)
    if params.get("max_seconds") is None:
        params["max_seconds"] = settings.job_max_seconds
    recorder = ProgressRecorder(settings, claimed.id, claimed.attempt,
                                params.get("eps"), heartbeat=heartbeat)
    try:
        result = dask_fit.fit_on_cluster(settings, claimed, params, recorder)
    except DistributedFitError as exc:
        raise Failed(f"the fit on the Dask cluster failed: {exc}") from exc
    if recorder.lease_lost:
        raise Lost
    result.data_plan = {**plan, **(result.data_plan or {})}
    accuracy = dask_fit.streamed_accuracy(result, dask_fit.job_source(settings, claimed))
    return Fitted(result, None, None, (accuracy, None))


def _fit_blocks(settings: Settings, claimed: Claim[JobWork], source: Any, plan: dict[str, Any],
                params: dict[str, Any], weights: Any, recorder: ProgressRecorder) -> Fitted:
    """The out-of-core fit (solvers/out_of_core.py) and its training accuracy (one more
    pass)."""
    from solvers.out_of_core import accuracy_pass, fit_blocks

    if weights not in (None, "dataset"):
        raise Failed("out of core, sample_weight may only be \"dataset\" (the weights "
                     "stored with the rows)")
    block = int(plan["max_block_bytes"])
    result = fit_blocks(source, claimed.work.solver, max_block_bytes=block, progress=recorder,
                        progress_interval=settings.progress_interval_seconds,
                        use_weights=weights == "dataset", **params)
    if recorder.lease_lost:
        raise Lost
    fitted = result.data_plan or {}
    accuracy, read = (None, 0) if result.exit_reason == "cancelled" else accuracy_pass(
        result, source, block)
    result.data_plan = {**plan, **fitted,
                        "passes": int(fitted.get("passes", 0)) + (read > 0),
                        "bytes_read": int(fitted.get("bytes_read", 0)) + read}
    return Fitted(result, None, None, (accuracy, None))


TRAINING: Work[JobWork, Fitted] = Work(
    kind=jobs.JOBS,
    claim=lambda session, settings, job_id, worker: jobs.claim_job(session, job_id, worker,
                                                                   settings),
    run=_fit,
    finish=lambda settings, claimed, fitted, heartbeat: finish(
        settings, claimed, fitted.result, fitted.X, fitted.y, heartbeat=heartbeat,
        figures=fitted.figures),
    subject=lambda claimed: claimed.id)


def run_job(settings: Settings, job_id: str, hostname: str) -> str:
    """Run one delivery of a job (workers.runner); returns what happened (for logs and
    tests): succeeded, failed, cancelled, lost, skipped or deferred."""
    return runner.run(settings, TRAINING, job_id, hostname)


def run_claimed(settings: Settings, job_id: str, claimed: Claim[JobWork] | None) -> str:
    """Train a claimed job to its end: succeeded, failed, cancelled, or lost (its lease
    went to another attempt); "skipped" without a claim."""
    return runner.run_claimed(settings, TRAINING, job_id, claimed)


def finish(settings: Settings, claimed: Claim[JobWork], result: FitResult, X: Any,
           y: np.ndarray | None, heartbeat: Heartbeat | None = None,
           figures: tuple[float | None, dict[str, Any] | None] | None = None) -> str:
    """Store the outcome of a fit: cancelled, failed (non-finite iterates), or succeeded
    with its model, each only while this attempt still holds the job ("lost" if not).
    Under the attempt's `heartbeat` (stopped just before the final write), a lease found
    lost after the training accuracy skips storing the model. `figures`: the training
    figures computed already (an out-of-core fit: X and y are None)."""
    if heartbeat is not None and result.exit_reason in ("cancelled", "numerical_error"):
        heartbeat.stop()
    if result.exit_reason == "cancelled":
        with session_scope(settings.database_url) as session:
            done = claimed.finish(session, JobStatus.CANCELLED)
        return "cancelled" if done else "lost"
    if result.exit_reason == "numerical_error":
        _fail(settings, claimed, "numerical_error: the solver's iterates became "
                                 "non-finite; try a smaller C or scaled features")
        return "failed"
    task = model_task(result.model)
    summary = _summary(result, *(figures if figures is not None else _train_figures(
        task, result, X, cast(np.ndarray, y))))
    train_accuracy = summary["train_accuracy"]
    payload = model_to_bytes(result.model)
    if heartbeat is not None and heartbeat.gone:
        log.warning("job %s attempt %d: the lease was lost before the model was stored",
                    claimed.id, claimed.attempt)
        return "lost"
    model_id = new_id()
    store = blob_store(settings)
    arrays, in_blob = store_model_arrays(store, settings, model_id, payload)
    model = Model(
        id=model_id, tenant_id=claimed.work.tenant_id, job_id=claimed.id,
        dataset_id=claimed.work.dataset_id,
        kind=result.model.kind, task=task, solver=claimed.work.solver, params=claimed.work.params,
        labels=[float(v) for v in result.classes], n_features=int(result.model.n_features),
        result=summary, converged=summary["converged"], arrays=arrays,
        size_bytes=len(payload), train_accuracy=train_accuracy,
    )
    if heartbeat is not None:
        heartbeat.stop()
    try:
        with session_scope(settings.database_url) as session:
            succeeded = jobs.succeed(session, claimed, summary, model)
    except BaseException:
        if in_blob:
            store.delete(model_key(model_id))
        raise
    if not succeeded:
        if in_blob:  # another attempt holds the job: this model is not stored
            store.delete(model_key(model_id))
        return "lost"
    return "succeeded"


MAX_PROBLEMS_LISTED = 2000  # a job's result lists its binary problems up to this many


def _problem_summary(output: dict[str, Any]) -> dict[str, Any]:
    """One binary problem of a kernel job: the pair, how it ended, and when (end_s, on the
    progress events' clock, so that the dashboard ends each problem's line there)."""
    return {"pair": [_plain(output["positive_class"]), _plain(output["negative_class"])],
            "exit_reason": output["exit_reason"], "iterations": int(output["iterations"]),
            "violation": _plain(output["violation"]),
            "dual_objective": _plain(output["dual_objective"]),
            "end_s": _plain(output.get("end_s"))}


def _train_figures(task: str, result: FitResult, X: Any, y: np.ndarray
                   ) -> tuple[float | None, dict[str, Any] | None]:
    """(accuracy on the training rows, or None: regression and outlier models; the
    figures of app.domain.tasks on the training rows for those)."""
    if task == "classification":
        return float(np.mean(result.predict(X) == y)), None
    labels, values = result.model.predict(X)
    if task == "regression":
        return None, regression_report(y, labels)
    return None, outlier_report(y, labels, values)


def nonzero_weights(result: FitResult) -> list[int] | None:
    """The non-zero weights of an L1-regularised model (l1_cd), output by output; None
    for the other models (their weights are dense)."""
    sparse = [int(o["nonzero_weights"]) for o in result.per_output if "nonzero_weights" in o]
    return sparse or None


def _summary(result: FitResult, train_accuracy: float | None,
             train_metrics: dict[str, Any] | None = None) -> dict[str, Any]:
    """The job's `result` and the model's: objectives, effort, exit reason, accuracy (or,
    for regression and outlier models, `train_metrics`)."""
    summary: dict[str, Any] = {
        "primal_objective": _plain(result.primal_objective),
        "dual_objective": _plain(result.dual_objective),
        "duality_gap": _plain(result.duality_gap),
        "iterations": int(result.iterations),
        "train_seconds": float(result.train_seconds),
        "exit_reason": result.exit_reason,
        "converged": bool(result.converged),
        "train_accuracy": train_accuracy,
        "code_version": code_version(),  # the model's lineage
    }
    if train_metrics is not None:
        summary["train_metrics"] = train_metrics
    if result.model.kind == "linear":  # the certificate (solvers/certificate.py)
        summary.update({
            "relative_gap": _plain(result.relative_gap),
            "tol": result.tol,
            "warnings": list(result.warnings),
            "path": [{key: _plain(value) for key, value in step.items()}
                     for step in result.path],
            "auto": result.auto,
        })
    sparse = nonzero_weights(result)
    if sparse is not None:  # an L1-regularised model (l1_cd): its non-zero weights
        summary["nonzero_weights"] = sparse
    threads = [int(o["threads"]) for o in result.per_output if "threads" in o]
    if threads:  # what the solver ran with (a job's `threads`, capped by the worker)
        summary["threads"] = max(threads)
    if result.n_support is not None:  # kernel models
        summary["n_support"] = int(result.n_support)
        if 1 < len(result.per_output) <= MAX_PROBLEMS_LISTED:
            summary["problems"] = [_problem_summary(o) for o in result.per_output]
        elif len(result.per_output) == 1 and "violation" in result.per_output[0]:
            # one binary problem: its final KKT violation m - M (the stop rule's figure,
            # below eps when converged), the last point of the dashboard's plot
            summary["violation"] = _plain(result.per_output[0]["violation"])
    if result.data_plan is not None:  # how the data was read (plan_fit, or on Dask)
        summary["data_plan"] = {key: _plain(value) for key, value in result.data_plan.items()}
    if result.warnings:  # e.g. unscaled features for a scale-sensitive solver
        summary["warnings"] = list(result.warnings)
    # through the API's type: what is stored is what GET /v1/jobs/{id} answers
    return JobResult.model_validate(summary).model_dump(exclude_unset=True)
