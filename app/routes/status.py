"""/v1/status: the workers (warming, ready or stale, with their heartbeat) and the queue.

/healthz stays a cheap liveness check of the API and its database; this says whether
anything will run a job, and how soon.
"""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from app.auth import ReadAuth
from app.deps import SessionDep, SettingsDep
from app.schemas import QueuePublic, StatusPublic, WorkerPublic
from app.services import workers as service

router = APIRouter(prefix="/v1/status", tags=["meta"])


@router.get("", response_model=StatusPublic)
def status(session: SessionDep, settings: SettingsDep, _principal: ReadAuth) -> StatusPublic:
    """Every worker process (state, heartbeat age, seconds spent warming up) and the
    service's queue depth. A worker is `warming` while it compiles or loads the solver
    kernels (seconds with a warm cache, about a minute on a new machine), then `ready`."""
    fleet = service.read_fleet(session, settings)
    return StatusPublic(
        workers=[WorkerPublic(**asdict(w)) for w in fleet.workers],
        ready_workers=len(fleet.ready), warming_workers=len(fleet.warming),
        queue=QueuePublic(queued=len(fleet.queued_at), running=fleet.running),
        worker_stale_seconds=settings.worker_stale_seconds,
    )
