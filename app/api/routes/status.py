"""/v1/status: the workers (warming, ready or stale, with their heartbeat) and the queue.

/healthz stays a cheap liveness check of the API and its database; this says whether
anything will run a job, and how soon.

What a key sees depends on its scope: an admin key (the operator's) sees every worker
process (host name, PID, state) and the service's queue, every tenant's jobs; any other
key sees how many workers are ready or warming and its own tenant's queue, and nothing
about the other tenants or the hosts (`scope` says which of the two an answer is).
"""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from app.api.auth import ReadAuth
from app.api.deps import SessionDep, SettingsDep
from app.domain.schemas import QueuePublic, StatusPublic, WorkerPublic
from app.domain.services import workers as service

router = APIRouter(prefix="/v1/status", tags=["meta"])


@router.get("", response_model=StatusPublic)
def status(session: SessionDep, settings: SettingsDep, principal: ReadAuth) -> StatusPublic:
    """The workers (states and counts) and the queue depth. A worker is `warming` while
    it compiles or loads the solver kernels (seconds with a warm cache, about a minute on
    a new machine), then `ready`.

    With an admin key: every worker process (host name, PID, state, heartbeat age,
    seconds spent warming up) and the service's queue (every tenant's jobs), `scope`
    "service". With any other key: the counts of ready and warming workers and the
    caller's own tenant's queued and running jobs, `workers` null, `scope` "tenant"."""
    if principal.allows("admin"):
        fleet = service.read_fleet(session, settings)
        return StatusPublic(
            scope="service",
            workers=[WorkerPublic(**asdict(w)) for w in fleet.workers],
            ready_workers=len(fleet.ready), warming_workers=len(fleet.warming),
            queue=QueuePublic(queued=len(fleet.queued_at), running=fleet.running),
            worker_stale_seconds=settings.worker_stale_seconds,
        )
    shown = service.read_workers(session, settings)
    queued, running = service.tenant_queue(session, principal.tenant_id)
    return StatusPublic(
        scope="tenant",
        workers=None,
        ready_workers=sum(w.state == service.READY for w in shown),
        warming_workers=sum(w.state == service.WARMING for w in shown),
        queue=QueuePublic(queued=queued, running=running),
        worker_stale_seconds=settings.worker_stale_seconds,
    )
