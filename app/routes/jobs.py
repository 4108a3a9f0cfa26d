"""/v1/jobs: submit a training job, list, show, cancel."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Query
from sqlalchemy import func, select

from app import jobs as job_states
from app.bus import notify
from app.deps import SessionDep, SettingsDep, WriteSessionDep
from app.errors import ApiError, not_found
from app.orm import Dataset, Job, new_id, utcnow
from app.queue import enqueue_training
from app.routes.datasets import label_key
from app.schemas import JobCreate, JobPublic, JobsPublic, JobStatus
from solvers.params import ParamError, validate_params

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])
log = logging.getLogger("hinge.api")


def job_public(job: Job) -> JobPublic:
    public = JobPublic.model_validate(job)
    progress = job.progress or {}
    if job.status == "succeeded":
        public.progress_fraction = 1.0
    elif isinstance(progress.get("fraction"), int | float):
        public.progress_fraction = float(progress["fraction"])
    return public


def _check_spec(spec: JobCreate, dataset: Dataset | None) -> dict[str, Any]:
    try:
        applied = validate_params(spec.solver, spec.params)
    except ParamError as exc:
        field = "solver" if exc.field == "solver" else f"params.{exc.field}"
        raise ApiError(422, str(exc), {"field": field}) from None
    if dataset is None:
        raise ApiError(422, f"dataset_id: no dataset {spec.dataset_id!r}",
                       {"field": "dataset_id"})
    if len(dataset.labels) < 2:
        raise ApiError(
            422,
            f"dataset {dataset.id!r} has only one class ({dataset.labels[0]:g}); an SVM needs "
            "at least two",
            {"field": "dataset_id"},
        )
    weights = applied.get("class_weight") or {}
    known = {label_key(v) for v in dataset.labels}
    unknown = sorted(set(weights) - known)
    if unknown:
        raise ApiError(422, f"params.class_weight: label(s) {', '.join(unknown)} not in the "
                            f"dataset (labels: {', '.join(sorted(known))})",
                       {"field": "params.class_weight"})
    return applied


@router.post("", status_code=202, response_model=JobPublic)
def create_job(spec: JobCreate, session: WriteSessionDep, settings: SettingsDep) -> JobPublic:
    dataset = session.get(Dataset, spec.dataset_id)
    applied = _check_spec(spec, dataset)
    queued = session.scalar(select(func.count()).select_from(Job).where(Job.status == "queued"))
    if (queued or 0) >= settings.max_queued_jobs:
        raise ApiError(429, f"{queued} jobs are already queued (HINGE_MAX_QUEUED_JOBS); "
                            "try again later")
    now = utcnow()
    job = Job(
        id=new_id(), dataset_id=spec.dataset_id, solver=spec.solver, params=applied,
        status="queued", attempt=0, cancel_requested=False, created_at=now, queued_at=now,
        status_history=[job_states.history_entry("queued", now)],
    )
    session.add(job)
    job_states.add_event(session, job.id, "status", {"status": "queued", "at": now.isoformat()})
    session.commit()  # the row exists before the message does
    try:
        enqueue_training(settings.broker_url, settings.queue, job.id)
    except Exception as exc:
        log.exception("could not enqueue job %s", job.id)
        job_states.transition(session, job.id, ("queued",), "failed",
                              error=f"could not enqueue: {type(exc).__name__}")
        session.commit()
        raise ApiError(503, "the job queue is unavailable; the job was not started",
                       {"job_id": job.id}) from None
    session.refresh(job)
    session.commit()  # end the transaction now, not in the teardown after the response
    return job_public(job)


@router.get("", response_model=JobsPublic)
def list_jobs(
    session: SessionDep,
    status: JobStatus | None = None,
    dataset_id: str | None = None,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> JobsPublic:
    query = select(Job)
    if status is not None:
        query = query.where(Job.status == status)
    if dataset_id is not None:
        query = query.where(Job.dataset_id == dataset_id)
    count = session.scalar(select(func.count()).select_from(query.subquery())) or 0
    rows = session.scalars(query.order_by(Job.created_at.desc()).limit(limit).offset(offset))
    return JobsPublic(data=[job_public(j) for j in rows], count=count)


@router.get("/{job_id}", response_model=JobPublic)
def get_job(job_id: str, session: SessionDep) -> JobPublic:
    job = session.get(Job, job_id)
    if job is None:
        raise not_found("job", job_id)
    return job_public(job)


@router.post("/{job_id}/cancel", status_code=202, response_model=JobPublic)
def cancel_job(job_id: str, session: WriteSessionDep, settings: SettingsDep) -> JobPublic:
    """A queued job is cancelled at once; a running one stops at its next progress check."""
    job = session.get(Job, job_id)
    if job is None:
        raise not_found("job", job_id)
    if job.status == "queued" and job_states.transition(
        session, job_id, ("queued",), "cancelled", cancel_requested=True
    ):
        session.commit()
    elif job.status == "running":
        job.cancel_requested = True
        session.commit()
    else:
        session.rollback()
        session.refresh(job)
        if job.status not in job_states.ACTIVE:
            raise ApiError(409, f"job {job_id!r} is already {job.status}",
                           {"status": job.status})
        job.cancel_requested = True
        session.commit()
    notify(settings, job_id)
    session.refresh(job)
    session.commit()  # end the transaction now, not in the teardown after the response
    return job_public(job)
