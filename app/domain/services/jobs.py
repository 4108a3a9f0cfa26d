"""Jobs: the state machine (shared by the API, the sweep and the workers) and the API's
workflows on jobs (submit, list, show, cancel).

Every transition is a conditional UPDATE on the current status, so two processes racing on
the same job (a duplicate delivery, a cancel during a claim) cannot both win. Callers pass
a write session and own its transaction (the API's request scope, a worker's
`session_scope`). A submitted job's message goes through the outbox (app.domain.outbox): it is
sent once the job's transaction has committed, never before and never without it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, func, select, update
from sqlalchemy.orm import Session

from app.domain import lifecycle, outbox
from app.domain.errors import Invalid, OverLimit
from app.domain.job_status import TERMINAL_STATUSES, JobStatus
from app.domain.lifecycle import Claim
from app.domain.memory import ENGINE_AUTO
from app.domain.orm import Dataset, Job, JobEvent, Model, new_id, utcnow
from app.domain.schemas import JobCreate
from app.domain.services.limits import (
    below_running_limit,
    lock_dataset,
    lock_submissions,
    lock_tenant,
    tenant_limit,
)
from app.domain.services.owned import get_owned
from app.domain.tasks import check_task
from app.domain.weights import DATASET, job_weights
from app.infra.bus import notify
from app.infra.db import after_commit
from app.infra.queue import TRAIN_TASK
from app.settings import Settings
from solvers.params import (
    SOLVERS,
    ParamError,
    check_scale_for_data,
    label_key,
    task_of,
    validate_params,
)

log = logging.getLogger("hinge.jobs")

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING


# -- the state machine ---------------------------------------------------------------

def history_entry(status: JobStatus, at: datetime, **extra: Any) -> dict[str, Any]:
    return {"status": status.value, "at": at.isoformat(), **extra}


def transition(
    session: Session, job_id: str, from_statuses: tuple[JobStatus, ...], to_status: JobStatus,
    *, expect_attempt: int | None = None, where: Sequence[ColumnElement[bool]] = (),
    **fields: Any,
) -> bool:
    """Move a job from one of `from_statuses` to `to_status`; False if it was not there.

    With `expect_attempt`, only while the job is still on that attempt (the worker's lease: a job
    re-queued by the sweep and claimed again cannot be finished by the old attempt); with
    `where`, only under those conditions too (the claim's admission). The caller commits;
    the history entry and a `status` event are in the same transaction. (The jobs'
    `mover` in app.domain.lifecycle.)
    """
    job = session.get(Job, job_id, populate_existing=True)
    if job is None or job.status not in from_statuses:
        return False
    if expect_attempt is not None and job.attempt != expect_attempt:
        return False
    now = utcnow()
    values: dict[str, Any] = {"status": to_status, **fields}
    if to_status in TERMINAL_STATUSES:
        values.setdefault("finished_at", now)
    extra = {k: fields[k] for k in ("worker", "attempt", "error", "model_id", "result")
             if fields.get(k) is not None}
    brief = {k: v for k, v in extra.items() if k != "result"}
    values["status_history"] = [*job.status_history, history_entry(to_status, now, **brief)]
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == job.status, Job.attempt == job.attempt,
               *where)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    add_event(session, job_id, "status",
              {"status": to_status.value, "at": now.isoformat(), **extra})
    session.expire(job)
    return True


def add_event(session: Session, job_id: str, kind: str, payload: dict[str, Any]) -> int:
    last = session.scalar(select(func.max(JobEvent.seq)).where(JobEvent.job_id == job_id))
    seq = (last or 0) + 1
    session.add(JobEvent(job_id=job_id, seq=seq, kind=kind, payload=payload))
    return seq


# -- the worker's side: claim, lease, finish -------------------------------------------

@dataclass(frozen=True)
class JobWork:
    """What a claimed job trains (its `lifecycle.Claim`'s work)."""

    tenant_id: str
    solver: str
    params: dict[str, Any]
    dataset_id: str | None
    dataset_name: str | None
    blob_path: str | None  # None: the dataset was deleted before the job started
    features: int
    shards: list[dict[str, Any]] | None = None  # the dataset's row shards (None: one blob)
    classes: int = 0  # the dataset's distinct labels (0: a regression set's targets)
    value_dtype: str = "float64"  # the dataset's stored values: float64, or float32


JOBS = lifecycle.WorkKind(
    name="job", plural="jobs", table=Job, task=TRAIN_TASK, started_column="started_at",
    cancel_flag="cancel_requested", mover=transition, admission=below_running_limit(Job))


def claim_job(session: Session, job_id: str, worker: str,
              settings: Settings | None = None) -> Claim[JobWork] | None:
    """queued -> running on the next attempt; None if the job is not queued (any more).

    With `settings`, only while its tenant runs fewer jobs than its limit
    (lifecycle.NotAdmitted if not: the job stays queued)."""
    def work(job: Job) -> JobWork:
        dataset = session.get(Dataset, job.dataset_id) if job.dataset_id else None
        return JobWork(
            tenant_id=job.tenant_id, solver=job.solver, params=dict(job.params),
            dataset_id=job.dataset_id, dataset_name=dataset.name if dataset else None,
            blob_path=dataset.blob_path if dataset else None,
            features=dataset.features if dataset else 0,
            shards=dataset.shards if dataset else None,
            classes=len(dataset.labels or []) if dataset else 0,
            value_dtype=dataset.value_dtype if dataset else "float64")

    return lifecycle.claim_as(session, JOBS, job_id, worker, work, settings)


def renew_lease(session: Session, job_id: str, attempt: int) -> bool:
    """Refresh the heartbeat while this attempt still holds the job."""
    return lifecycle.renew(session, JOBS, job_id, attempt)


def record_progress(session: Session, job_id: str, attempt: int, payload: dict[str, Any],
                    *, keep: bool) -> lifecycle.Answer:
    """Latest progress and heartbeat (and a history point if `keep`) while this attempt
    holds the job: lifecycle.progress's "go", "stop" (a cancel was requested) or "lost"."""
    answer = lifecycle.progress(session, JOBS, job_id, attempt, progress=payload)
    if keep and answer != "lost":
        add_event(session, job_id, "progress", payload)
    return answer


def succeed(session: Session, claim: Claim[JobWork], summary: dict[str, Any], model: Model
            ) -> bool:
    """running -> succeeded with its model, in one transaction; False if the lease is lost
    (then nothing is added)."""
    if not claim.finish(session, JobStatus.SUCCEEDED, result=summary, model_id=model.id):
        return False
    session.add(model)
    return True


# -- the API's workflows -------------------------------------------------------------

# Settings that cap what a spec may ask of a worker: parameter -> setting.
PARAM_CAPS = {"max_seconds": "max_job_seconds", "cache_mb": "max_cache_mb",
              "threads": "max_threads"}


def _check_caps(applied: dict[str, Any], settings: Settings) -> None:
    for param, setting in PARAM_CAPS.items():
        value, cap = applied.get(param), getattr(settings, setting)
        if isinstance(value, int | float) and value > cap:
            raise Invalid(f"params.{param}: {value:g} exceeds this service's limit of "
                          f"{cap:g} (HINGE_{setting.upper()})",
                          {"limit": cap}, field=f"params.{param}")


def validated_params(spec: JobCreate, settings: Settings) -> dict[str, Any]:
    """The solver's parameters with defaults filled in; 422 for a spec it cannot take."""
    try:
        applied = validate_params(spec.solver, spec.params)
    except ParamError as exc:
        field = "solver" if exc.field == "solver" else f"params.{exc.field}"
        raise Invalid(str(exc), field=field) from None
    _check_caps(applied, settings)
    return applied


def check_dataset(spec: JobCreate, applied: dict[str, Any], dataset: Dataset | None
                   ) -> None:
    """422 for a dataset the job cannot train on (app.domain.tasks.check_task: a task of
    its own; one_class trains on any dataset)."""
    if dataset is None:
        raise Invalid(f"dataset_id: no dataset {spec.dataset_id!r}",
                      field="dataset_id")
    task = task_of(spec.solver, applied)
    check_task(task, dataset.task, dataset.id,
               f"formulation {applied.get('formulation', 'c_svc')!r} trains")
    if task == "classification" and len(dataset.labels) < 2:
        raise Invalid(
            f"dataset {dataset.id!r} has only one class ({dataset.labels[0]:g}); an SVM needs "
            "at least two",
            field="dataset_id",
        )
    try:
        check_scale_for_data(applied, dataset.rows, dataset.features, dataset.nnz)
    except ParamError as exc:
        raise Invalid(str(exc), field=f"params.{exc.field}") from None
    weights = applied.get("class_weight") or {}
    known = {label_key(v) for v in dataset.labels}
    unknown = sorted(set(weights) - known)
    if unknown:
        raise Invalid(f"params.class_weight: label(s) {', '.join(unknown)} not in the "
                      f"dataset (labels: {', '.join(sorted(known))})",
                      field="params.class_weight")


def _check_weights(spec: JobCreate, applied: dict[str, Any], dataset: Dataset) -> None:
    """Put the job's instance weights (app.domain.weights) in `applied` as
    `sample_weight` ("dataset" or a list; absent: unweighted); 422 for weights the job
    cannot take."""
    stats = dataset.weight_stats
    weights = job_weights(spec.sample_weight, dataset.rows, stats is not None)
    if weights is None:
        return
    if weights == DATASET and stats is not None and stats["zeros"] == dataset.rows:
        raise Invalid(f"dataset {dataset.id!r}: every row has weight 0; train with "
                      "sample_weight 'none' or give weights", field="sample_weight")
    if not SOLVERS[spec.solver].sample_weights:
        weighted = ", ".join(n for n, s in SOLVERS.items() if s.sample_weights)
        raise Invalid(f"solver {spec.solver!r} takes no instance weights (sample_weight: "
                      f"{'the dataset has weights' if weights == DATASET else 'a list'}); "
                      f"these do: {weighted}; or send sample_weight 'none'",
                      field="sample_weight")
    if applied.get("probability"):
        raise Invalid("probability with instance weights is not supported; send "
                      "sample_weight 'none' or probability false", field="sample_weight")
    applied["sample_weight"] = weights


# What solvers.distributed trains (solver -> losses, SolverSpec.distributed_losses);
# tests/app/test_jobs_engine.py checks that this is its SOLVERS.
DISTRIBUTED_SOLVERS = {name: spec.distributed_losses for name, spec in SOLVERS.items()
                       if spec.distributed_losses}


def cluster_refusal(solver: str, applied: Mapping[str, Any], classes: int) -> str | None:
    """Why the Dask cluster cannot train a job of `solver` with the params `applied` on a
    dataset of `classes` labels (None: it can): engine "dask"'s 422 here, and what keeps
    engine "auto" on one host in the worker (workers/dask_fit.py)."""
    losses = DISTRIBUTED_SOLVERS.get(solver)
    # a solver of one loss (ocas: the hinge) has no loss param
    only = SOLVERS[solver].losses if solver in SOLVERS else ()
    loss = applied.get("loss", only[0] if len(only) == 1 else None)
    if losses is None or loss not in losses:
        known = "; ".join(f"{name} with loss {' or '.join(ls)}"
                          for name, ls in DISTRIBUTED_SOLVERS.items())
        return (f"engine 'dask' trains {known}; this job is solver {solver!r}"
                + (f" with loss {applied['loss']!r}" if "loss" in applied else ""))
    if classes != 2:
        return f"engine 'dask' trains binary problems; the dataset has {classes} classes"
    unsupported = [name for name in ("class_weight", "probability", "w0", "alpha0")
                   if applied.get(name)]
    if applied.get("eps_abs") is not None:  # ocas's absolute stop: the cluster's is tol
        unsupported.append("eps_abs")
    if applied.get("method", "line_search") != "line_search":
        unsupported.append("method")
    if applied.get("scale", "none") != "none":
        unsupported.append("scale")
    if isinstance(applied.get("sample_weight"), list):
        unsupported.append("sample_weight (a list: the dataset's own weights or none)")
    if unsupported:
        return f"engine 'dask' does not take params {', '.join(unsupported)}"
    return None


def _check_engine(spec: JobCreate, applied: dict[str, Any], dataset: Dataset,
                  settings: Settings) -> None:
    """Put a job's engine in `applied` ("local" or "dask"; absent: auto); 422 for "dask"
    without a scheduler or for a job the distributed solvers cannot train."""
    if spec.engine == ENGINE_AUTO:
        return
    applied["engine"] = spec.engine
    if spec.engine == "local":
        return
    if not settings.dask_scheduler:
        raise Invalid("engine 'dask' needs a Dask scheduler, and this service has none "
                      "(HINGE_DASK_SCHEDULER); send engine 'local' or 'auto'", field="engine")
    refusal = cluster_refusal(spec.solver, applied, len(dataset.labels))
    if refusal is not None:
        raise Invalid(f"{refusal} (dataset {dataset.id!r})", field="engine")


def check_queue_caps(session: Session, settings: Settings, tenant_id: str) -> None:
    """429 when the service's or the tenant's queue is full (run under the locks)."""
    tenant = lock_tenant(session, tenant_id)
    queued = session.scalar(select(func.count()).select_from(Job)
                            .where(Job.status == QUEUED)) or 0
    if queued >= settings.max_queued_jobs:
        raise OverLimit(f"{queued} jobs are already queued (HINGE_MAX_QUEUED_JOBS); "
                        "try again later", retry_after=10)
    mine = session.scalar(select(func.count()).select_from(Job)
                          .where(Job.status == QUEUED, Job.tenant_id == tenant_id)) or 0
    limit = tenant_limit(tenant, settings, "max_queued_jobs")
    if mine >= limit:
        raise OverLimit(f"the tenant has {mine} queued jobs, its limit "
                        "(HINGE_TENANT_MAX_QUEUED_JOBS or the tenant's own); try again later",
                        {"limit": limit}, retry_after=10)


def submit(session: Session, settings: Settings, tenant_id: str, spec: JobCreate) -> Job:
    """Validate and add a queued job with its message in the outbox; the caller commits
    (then the message is sent: app.domain.outbox). Nothing here commits, so whatever fails
    before the caller's commit leaves neither the job nor its message.

    Under the submission lock, the tenant's row lock and the dataset's row lock (see
    app.domain.services.limits): the queue caps hold exactly, and a dataset deleted meanwhile
    is a 422, never a foreign-key error."""
    applied = validated_params(spec, settings)
    lock_submissions(session)
    check_queue_caps(session, settings, tenant_id)
    dataset = lock_dataset(session, tenant_id, spec.dataset_id)
    check_dataset(spec, applied, dataset)
    assert dataset is not None  # check_dataset refused a missing one
    _check_weights(spec, applied, dataset)  # a job's own: searches train unweighted
    _check_engine(spec, applied, dataset, settings)
    return queue(session, settings, tenant_id, spec.dataset_id, spec.solver, applied)


def queue(session: Session, settings: Settings, tenant_id: str, dataset_id: str,
          solver: str, applied: dict[str, Any], **origin: Any) -> Job:
    """Add a queued job of validated `applied` parameters, its first status and event and
    its message in the outbox; the caller commits. Every job enters the queue here (a
    submitted one, a search's refit), through the service's parameter caps (422 beyond
    them). `origin`: what the first status entry and event also say (search_id)."""
    _check_caps(applied, settings)
    now = utcnow()
    job = Job(
        id=new_id(), tenant_id=tenant_id, dataset_id=dataset_id, solver=solver,
        params=applied, task=task_of(solver, applied),
        status=QUEUED, attempt=0, cancel_requested=False, created_at=now, queued_at=now,
        status_history=[history_entry(QUEUED, now, **origin)],
    )
    session.add(job)
    session.flush()
    add_event(session, job.id, "status", {"status": QUEUED.value, "at": now.isoformat(),
                                          **origin})
    outbox.post(session, settings, TRAIN_TASK, job.id)
    session.flush()
    return job


def cancel(session: Session, settings: Settings, tenant_id: str, job_id: str) -> Job:
    """A queued job is cancelled at once; a running one stops at its next progress check;
    a finished one is a 409."""
    job = get_job(session, tenant_id, job_id)
    lifecycle.request_cancel(session, JOBS, job)
    after_commit(session, lambda: notify(settings, job_id))
    return job


def get_job(session: Session, tenant_id: str, job_id: str) -> Job:
    return get_owned(session, Job, "job", tenant_id, job_id)



def events_after(session: Session, job_id: str, after: int, limit: int
                 ) -> tuple[list[JobEvent], dict[str, Any] | None]:
    """The job's stored events after sequence number `after` (at most `limit`), and its
    latest progress."""
    events = list(session.scalars(
        select(JobEvent).where(JobEvent.job_id == job_id, JobEvent.seq > after)
        .order_by(JobEvent.seq).limit(limit)
    ))
    return events, session.scalar(select(Job.progress).where(Job.id == job_id))


def _jobs(tenant_id: str, status: JobStatus | None, dataset_id: str | None) -> Select[Job]:
    query = select(Job).where(Job.tenant_id == tenant_id)
    if status is not None:
        query = query.where(Job.status == status)
    if dataset_id is not None:
        query = query.where(Job.dataset_id == dataset_id)
    return query


def list_jobs(session: Session, tenant_id: str, *, status: JobStatus | None = None,
              dataset_id: str | None = None, limit: int = 100, offset: int = 0
              ) -> list[Job]:
    """Newest first."""
    query = _jobs(tenant_id, status, dataset_id).order_by(Job.created_at.desc())
    return list(session.scalars(query.limit(limit).offset(offset)))


def count_jobs(session: Session, tenant_id: str, *, status: JobStatus | None = None,
               dataset_id: str | None = None) -> int:
    query = _jobs(tenant_id, status, dataset_id)
    return session.scalar(select(func.count()).select_from(query.subquery())) or 0


def status_counts(session: Session, tenant_id: str) -> dict[JobStatus, int]:
    rows = session.execute(select(Job.status, func.count())
                           .where(Job.tenant_id == tenant_id).group_by(Job.status))
    return {status: count for status, count in rows}

