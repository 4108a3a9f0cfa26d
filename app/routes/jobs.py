"""/v1/jobs: submit a training job, list, show, cancel."""

from __future__ import annotations

from fastapi import APIRouter, Query

from app.auth import ReadAuth, TrainAuth
from app.deps import SessionDep, SettingsDep, WriteSessionDep
from app.job_status import JobStatus
from app.schemas import JobCreate, JobPublic, JobsPublic
from app.services import jobs as service

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post("", status_code=202, response_model=JobPublic)
def create_job(spec: JobCreate, session: WriteSessionDep, settings: SettingsDep,
               principal: TrainAuth) -> JobPublic:
    return JobPublic.model_validate(service.submit(session, settings, principal.tenant_id,
                                                   spec))


@router.get("", response_model=JobsPublic)
def list_jobs(
    session: SessionDep,
    principal: ReadAuth,
    status: JobStatus | None = None,
    dataset_id: str | None = None,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> JobsPublic:
    tenant = principal.tenant_id
    rows = service.list_jobs(session, tenant, status=status, dataset_id=dataset_id,
                             limit=limit, offset=offset)
    return JobsPublic(data=[JobPublic.model_validate(j) for j in rows],
                      count=service.count_jobs(session, tenant, status=status,
                                               dataset_id=dataset_id))


@router.get("/{job_id}", response_model=JobPublic)
def get_job(job_id: str, session: SessionDep, principal: ReadAuth) -> JobPublic:
    return JobPublic.model_validate(service.get_job(session, principal.tenant_id, job_id))


@router.post("/{job_id}/cancel", status_code=202, response_model=JobPublic)
def cancel_job(job_id: str, session: WriteSessionDep, settings: SettingsDep,
               principal: TrainAuth) -> JobPublic:
    """A queued job is cancelled at once; a running one stops at its next progress check."""
    return JobPublic.model_validate(service.cancel(session, settings, principal.tenant_id,
                                                   job_id))
