"""/v1/jobs: submit a training job, list, show, cancel."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.domain.job_status import JobStatus
from app.domain.orm import Job
from app.domain.schemas import JobCreate, JobPublic, JobsPublic
from app.domain.services import jobs as service
from app.domain.services.workers import WaitExplainer

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


def _public(job: Job, waits: WaitExplainer) -> JobPublic:
    """The job's answer; a queued one says what it waits for."""
    public = JobPublic.model_validate(job)
    public.waiting_for = waits.explain(job)
    return public


@router.post("", status_code=202, response_model=JobPublic,
             responses={503: {"description": "the database stayed busy with other writes "
                                             "(try again after Retry-After); nothing was "
                                             "created"}})
def create_job(spec: JobCreate, request: Request, session: WriteSessionDep,
               reads: SessionDep, settings: SettingsDep, principal: TrainAuth
               ) -> JobPublic | Response:
    """Submit a job. With an `Idempotency-Key` header, a repeat of the same request gets
    the first answer (for HINGE_IDEMPOTENCY_HOURS) and a different one a 422.

    An error answer has created nothing: a 503 with `Retry-After` when the database stays
    busy with other writes, say, may simply be sent again."""
    # The job, its message to the workers (app.domain.outbox) and the stored answer of an
    # idempotent request commit in one transaction, the last thing before the answer.
    # `waiting_for` is read through a read session, before the write transaction begins:
    # on SQLite the write transaction holds up every other writer, so it does no more
    # than it must. The read session is closed before the write one takes its connection:
    # a request never holds one pooled connection while it waits for another, so a burst
    # of submissions queued on the submission lock cannot take the whole pool while the
    # one holding the lock waits for a connection (PostgreSQL's pool timed out so).
    write = idempotency.Write(request, settings, principal.tenant_id, "POST /v1/jobs",
                              session)
    waits = WaitExplainer(reads, settings, principal.allows("admin"))
    waits.prefetch(principal.tenant_id)
    spec.dataset_id = ids.resolve_field(reads, "dataset", principal.tenant_id,
                                        spec.dataset_id, "dataset_id")
    reads.close()
    with write:
        return write.run(idempotency.request_hash(spec.model_dump_json()), lambda: (
            202, _public(service.submit(session, settings, principal.tenant_id, spec), waits)))


@router.get("", response_model=JobsPublic)
def list_jobs(
    session: SessionDep,
    settings: SettingsDep,
    principal: ReadAuth,
    page: PageDep,
    status: JobStatus | None = None,
    dataset_id: str | None = None,
) -> JobsPublic:
    tenant = principal.tenant_id
    rows = service.list_jobs(session, tenant, status=status, dataset_id=dataset_id,
                             limit=page.limit, offset=page.offset)
    waits = WaitExplainer(session, settings, principal.allows("admin"))
    return JobsPublic(data=[_public(j, waits) for j in rows],
                      count=service.count_jobs(session, tenant, status=status,
                                               dataset_id=dataset_id))


@router.get("/{job_id}", response_model=JobPublic)
def get_job(job_id: str, session: SessionDep, settings: SettingsDep, principal: ReadAuth
            ) -> JobPublic:
    job_id = ids.resolve(session, "job", principal.tenant_id, job_id)
    return _public(service.get_job(session, principal.tenant_id, job_id),
                   WaitExplainer(session, settings, principal.allows("admin")))


@router.post("/{job_id}/cancel", status_code=202, response_model=JobPublic)
def cancel_job(job_id: str, session: WriteSessionDep, settings: SettingsDep,
               principal: TrainAuth) -> JobPublic:
    """A queued job is cancelled at once; a running one stops at its next progress check."""
    job_id = ids.resolve(session, "job", principal.tenant_id, job_id)
    return JobPublic.model_validate(service.cancel(session, settings, principal.tenant_id,
                                                   job_id))
