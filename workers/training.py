"""One training job, start to finish: claim, load, fit with progress, store the model.

The database is the truth about the job. The claim is a conditional update (a duplicate
delivery does nothing); the model row and the `succeeded` status are written in one
transaction; a cancelled job leaves no model.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from typing import Any

import numpy as np
from sqlalchemy import update

from app import jobs as job_states
from app.bus import notify
from app.db import session_scope
from app.orm import Dataset, Job, Model, new_id, utcnow
from app.settings import Settings
from app.storage import arrays_to_bytes, load_dataset

log = logging.getLogger("hinge.worker")


def warm_up(settings: Settings) -> None:
    import numba

    from solvers.train import warmup

    numba.set_num_threads(min(settings.solver_threads, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    started = time.perf_counter()
    warmup()
    log.info("solver kernels ready in %.2f s", time.perf_counter() - started)


class ProgressRecorder:
    """The solver's progress callback: persists a throttled history, sees cancellation.

    The solver calls at most every 0.2 s. Each call updates the job's latest progress and
    heartbeat; the history keeps a point when the time since the last kept point exceeds
    max(0.2 s, elapsed/100), so a job keeps a few hundred points however long it runs.
    """

    def __init__(self, settings: Settings, job_id: str, attempt: int, eps: float | None
                 ) -> None:
        self.settings = settings
        self.job_id = job_id
        self.attempt = attempt
        self.eps = eps
        self.first_violation: float | None = None
        self.last_kept = -math.inf
        self.started = time.monotonic()

    def fraction(self, event: dict[str, Any]) -> float | None:
        n_classes = int(event.get("n_classes") or 1)
        class_index = int(event.get("class_index") or 0)
        violation = event.get("violation")
        within = None
        if isinstance(violation, int | float) and self.eps and violation > 0:
            if self.first_violation is None or event.get("iteration", 0) <= 1:
                self.first_violation = max(float(violation), self.eps * 1.0001)
            span = math.log(self.first_violation / self.eps)
            within = min(1.0, max(0.0, math.log(self.first_violation / violation) / span))
        if within is None:
            return class_index / n_classes if n_classes > 1 else None
        return (class_index + within) / n_classes

    def __call__(self, event: dict[str, Any]) -> bool:
        payload = {k: _plain(v) for k, v in event.items()}
        payload["at"] = time.time()  # wall clock, so a client can measure event latency
        fraction = self.fraction(event)
        if fraction is not None:
            payload["fraction"] = round(fraction, 4)
        now = time.monotonic()
        elapsed = now - self.started
        keep = now - self.last_kept >= max(0.2, elapsed / 100.0)
        with session_scope(self.settings.database_url) as session:
            job = session.get(Job, self.job_id)
            if job is None or job.attempt != self.attempt or job.status != "running":
                return True  # the lease is lost: stop, another attempt owns the job
            job.progress = payload
            job.heartbeat_at = utcnow()
            if keep:
                job_states.add_event(session, self.job_id, "progress", payload)
                self.last_kept = now
            cancel = bool(job.cancel_requested)
        notify(self.settings, self.job_id)
        return cancel


class Heartbeat:
    """Refreshes the job's heartbeat from a thread while the solver runs.

    Solver progress also refreshes it, but a long data load or a long sweep between
    progress events must not make a live job look dead to the sweep.
    """

    def __init__(self, settings: Settings, job_id: str, attempt: int) -> None:
        self.settings = settings
        self.job_id = job_id
        self.attempt = attempt
        self.interval = max(0.2, settings.job_lease_seconds / 4)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{job_id}",
                                        daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with session_scope(self.settings.database_url) as session:
                    session.execute(
                        update(Job)
                        .where(Job.id == self.job_id, Job.attempt == self.attempt,
                               Job.status == "running")
                        .values(heartbeat_at=utcnow())
                    )
            except Exception:  # a database blip: the next beat tries again
                log.warning("job %s: heartbeat failed", self.job_id, exc_info=True)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _claim(settings: Settings, job_id: str, hostname: str) -> dict[str, Any] | None:
    with session_scope(settings.database_url) as session:
        job = session.get(Job, job_id)
        if job is None or job.status != "queued":
            return None
        attempt = job.attempt + 1
        now = utcnow()
        if not job_states.transition(session, job_id, ("queued",), "running", attempt=attempt,
                                     worker=hostname, started_at=now, heartbeat_at=now):
            return None
        dataset = session.get(Dataset, job.dataset_id) if job.dataset_id else None
        return {
            "attempt": attempt,
            "dataset_name": dataset.name if dataset else None,
            "solver": job.solver,
            "params": dict(job.params),
            "blob_path": dataset.blob_path if dataset else None,
            "features": dataset.features if dataset else 0,
            "dataset_id": job.dataset_id,
        }


def _fail(settings: Settings, job_id: str, attempt: int, error: str) -> None:
    with session_scope(settings.database_url) as session:
        job_states.transition(session, job_id, ("running",), "failed", expect_attempt=attempt,
                              error=error[:2000])


def run_job(settings: Settings, job_id: str, hostname: str) -> str:
    """Run one delivery of a job; returns what happened (for logs and tests)."""
    claim = _claim(settings, job_id, f"{hostname} pid {os.getpid()}")
    if claim is None:
        log.info("job %s: not queued any more, nothing to do", job_id)
        return "skipped"
    notify(settings, job_id)
    try:
        return _run_claimed(settings, job_id, claim)
    finally:
        notify(settings, job_id)


def _run_claimed(settings: Settings, job_id: str, claim: dict[str, Any]) -> str:
    attempt = claim["attempt"]
    if settings.fault_kill_worker_on and claim["dataset_name"] == settings.fault_kill_worker_on:
        log.error("fault injection: killing this worker process on job %s", job_id)
        os.kill(os.getpid(), signal.SIGKILL)
    if claim["blob_path"] is None:
        _fail(settings, job_id, attempt, "the dataset was deleted before the job started")
        return "failed"
    try:
        with Heartbeat(settings, job_id, attempt):
            X, y = load_dataset(claim["blob_path"], claim["features"])
            params = dict(claim["params"])
            if params.get("max_seconds") is None:
                params["max_seconds"] = settings.job_max_seconds
            from solvers import fit

            recorder = ProgressRecorder(settings, job_id, attempt, params.get("eps"))
            result = fit(X, y, solver=claim["solver"], progress=recorder, **params)
    except Exception as exc:
        log.exception("job %s failed", job_id)
        _fail(settings, job_id, attempt, f"{type(exc).__name__}: {exc}")
        return "failed"
    return _finish(settings, job_id, claim, result, X, y)


def _finish(settings: Settings, job_id: str, claim: dict[str, Any], result: Any, X: Any,
            y: np.ndarray) -> str:
    attempt = claim["attempt"]
    if result.exit_reason == "cancelled":
        with session_scope(settings.database_url) as session:
            done = job_states.transition(session, job_id, ("running",), "cancelled",
                                         expect_attempt=attempt)
        return "cancelled" if done else "lost"
    if result.exit_reason == "numerical_error":
        _fail(settings, job_id, attempt, "numerical_error: the solver's iterates became "
                                         "non-finite; try a smaller C or scaled features")
        return "failed"
    train_accuracy = float(np.mean(result.predict(X) == y))
    kernel_model = getattr(result, "model", None)  # smo returns a KernelFitResult
    summary = {
        "primal_objective": _plain(getattr(result, "primal_objective", None)),
        "dual_objective": _plain(result.dual_objective),
        "duality_gap": _plain(getattr(result, "duality_gap", None)),
        "iterations": int(result.iterations),
        "train_seconds": float(result.train_seconds),
        "exit_reason": result.exit_reason,
        "converged": result.exit_reason == "converged",
        "train_accuracy": train_accuracy,
    }
    if kernel_model is not None:
        summary["n_support"] = int(result.n_support)
        kind, n_features = "kernel", int(kernel_model.n_features)
        payload = arrays_to_bytes(**kernel_model.to_arrays())
    else:
        kind, n_features = "linear", int(result.coef.shape[1])
        payload = arrays_to_bytes(classes=result.classes, coef=result.coef,
                                  intercept=result.intercept)
    with session_scope(settings.database_url) as session:
        model_id = new_id()
        if not job_states.transition(session, job_id, ("running",), "succeeded",
                                     expect_attempt=attempt, result=summary, model_id=model_id):
            session.rollback()
            return "lost"
        session.add(Model(
            id=model_id, job_id=job_id, dataset_id=claim["dataset_id"], kind=kind,
            solver=claim["solver"], params=claim["params"],
            labels=[float(v) for v in result.classes], n_features=n_features,
            result=summary, converged=summary["converged"], arrays=payload,
            size_bytes=len(payload), train_accuracy=train_accuracy,
        ))
    return "succeeded"
