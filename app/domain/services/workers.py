"""Workers: each worker process's readiness and heartbeat (the `workers` table), what
GET /v1/status shows (to an admin key: every worker and the service's queue; to any
other key: how many workers are ready or warming and its own tenant's queue), and why a
queued job waits (`waiting_for`).

A worker process registers as `warming` when it starts (it compiles or loads the solver
kernels: seconds with a warm on-disk cache, a minute or more on a new machine), becomes
`ready` once they are loaded, refreshes its heartbeat every
HINGE_WORKER_STALE_SECONDS / 3, and removes its row when it stops. A row whose heartbeat
is older than HINGE_WORKER_STALE_SECONDS is a worker presumed gone (killed, its machine
lost): shown as `stale`, never counted as able to run a job, and forgotten by the sweep
after FORGET_AFTER_SECONDS.

The worker's writes (register, ready, beat, remove) and the API's reads live here, as
jobs.py holds both sides of the job state machine; callers own the transaction.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from app.domain.job_status import JobStatus
from app.domain.orm import Job, Tenant, WorkerProcess, new_id, utcnow
from app.domain.services.limits import tenant_limit
from app.settings import Settings

WARMING, READY, STALE = "warming", "ready", "stale"
FORGET_AFTER_SECONDS = 3600.0  # the sweep drops rows stale for this long


# -- the worker's side ---------------------------------------------------------------

def register_worker(session: Session, hostname: str, pid: int, concurrency: int) -> str:
    """A new row in state `warming`; returns its id."""
    now = utcnow()
    worker_id = new_id()
    session.add(WorkerProcess(id=worker_id, hostname=hostname[:255], pid=pid,
                              concurrency=concurrency, state=WARMING, state_since=now,
                              started_at=now, heartbeat_at=now))
    return worker_id


def mark_ready(session: Session, worker_id: str) -> None:
    now = utcnow()
    session.execute(update(WorkerProcess).where(WorkerProcess.id == worker_id)
                    .values(state=READY, state_since=now, heartbeat_at=now))


def beat(session: Session, worker_id: str) -> bool:
    """Refresh the heartbeat; False if the row is gone (the sweep forgot a worker that
    stalled for an hour): the caller registers again."""
    result = session.execute(update(WorkerProcess).where(WorkerProcess.id == worker_id)
                             .values(heartbeat_at=utcnow()))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def remove_worker(session: Session, worker_id: str) -> None:
    session.execute(delete(WorkerProcess).where(WorkerProcess.id == worker_id))


def remove_node(session: Session, hostname: str) -> int:
    """Remove every row of a Celery node (its main process starts or stops: rows left by
    pool processes that were killed are gone with it)."""
    result = session.execute(delete(WorkerProcess).where(WorkerProcess.hostname == hostname))
    return int(result.rowcount)  # type: ignore[attr-defined]


def forget_stale(session: Session, now: datetime | None = None) -> int:
    """The sweep: drop rows whose heartbeat is older than FORGET_AFTER_SECONDS."""
    before = (now or utcnow()) - timedelta(seconds=FORGET_AFTER_SECONDS)
    result = session.execute(delete(WorkerProcess).where(WorkerProcess.heartbeat_at < before))
    return int(result.rowcount)  # type: ignore[attr-defined]


# -- the API's side ------------------------------------------------------------------

@dataclass(frozen=True)
class WorkerView:
    """One worker process as GET /v1/status shows it."""

    hostname: str
    pid: int
    concurrency: int
    state: str  # warming | ready | stale
    state_since: datetime
    started_at: datetime
    heartbeat_age_s: float
    warming_s: float  # warming: seconds so far; ready: how long its warm-up took


def _view(row: WorkerProcess, now: datetime, stale_seconds: float) -> WorkerView:
    age = max(0.0, (now - row.heartbeat_at).total_seconds())
    state = STALE if age > stale_seconds else row.state
    if row.state == WARMING:
        warming = (min(now, row.heartbeat_at if state == STALE else now)
                   - row.started_at).total_seconds()
    else:
        warming = (row.state_since - row.started_at).total_seconds()
    return WorkerView(row.hostname, row.pid, row.concurrency, state, row.state_since,
                      row.started_at, round(age, 3), round(max(0.0, warming), 3))


@dataclass(frozen=True)
class Fleet:
    """The workers and the jobs in flight, read once per request."""

    workers: list[WorkerView]
    running: int  # running jobs, every tenant's
    queued_at: list[datetime]  # of every queued job, sorted (the queue's order)
    now: datetime

    @property
    def ready(self) -> list[WorkerView]:
        return [w for w in self.workers if w.state == READY]

    @property
    def warming(self) -> list[WorkerView]:
        return [w for w in self.workers if w.state == WARMING]

    @property
    def stale(self) -> list[WorkerView]:
        return [w for w in self.workers if w.state == STALE]

    def ahead_of(self, queued_at: datetime | None) -> int:
        """Queued jobs that were queued before one queued at `queued_at`."""
        return 0 if queued_at is None else bisect.bisect_left(self.queued_at, queued_at)


def read_workers(session: Session, settings: Settings, now: datetime | None = None
                 ) -> list[WorkerView]:
    now = now or utcnow()
    rows = session.scalars(select(WorkerProcess).order_by(WorkerProcess.started_at,
                                                          WorkerProcess.hostname,
                                                          WorkerProcess.pid)).all()
    return [_view(r, now, settings.worker_stale_seconds) for r in rows]


def read_fleet(session: Session, settings: Settings) -> Fleet:
    now = utcnow()
    running = session.scalar(select(func.count()).select_from(Job)
                             .where(Job.status == JobStatus.RUNNING)) or 0
    queued_at = sorted(at for at in session.scalars(
        select(Job.queued_at).where(Job.status == JobStatus.QUEUED)) if at is not None)
    return Fleet(read_workers(session, settings, now), int(running), queued_at, now)


def tenant_queue(session: Session, tenant_id: str) -> tuple[int, int]:
    """(queued, running) jobs of one tenant: what GET /v1/status shows a tenant's key
    (the service-wide figures, like the workers' names, are for admin keys)."""
    counts = {status: count for status, count in session.execute(
        select(Job.status, func.count()).where(
            Job.tenant_id == tenant_id,
            Job.status.in_([JobStatus.QUEUED, JobStatus.RUNNING])).group_by(Job.status))}
    return int(counts.get(JobStatus.QUEUED, 0)), int(counts.get(JobStatus.RUNNING, 0))


def _ago(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def waiting_for(fleet: Fleet, queued_at: datetime | None, tenant_running: int,
                tenant_max_running: int, service_view: bool = True) -> str:
    """Why a queued job has not started, in a few words (computed when it is read).
    Without `service_view` (a key that is not an admin's) it names no count of other
    tenants' jobs: how many run or wait ahead is the service's business."""
    if tenant_running >= tenant_max_running:
        return (f"one of its tenant's running jobs to end ({tenant_running} running, the "
                f"tenant's limit is {tenant_max_running})")
    if not fleet.ready and not fleet.warming:
        if fleet.stale:
            last = min(w.heartbeat_age_s for w in fleet.stale)
            return (f"a worker: none is running (the last one stopped answering "
                    f"{_ago(last)} ago; `make run` starts one)")
        return ("a worker: no worker is running (`make run` starts one, or "
                "`celery -A workers.celery_app worker`)")
    if not fleet.ready:
        longest = max(w.warming_s for w in fleet.warming)
        return f"a worker (warming up, {_ago(longest)})"
    slots = len(fleet.ready)
    ahead = fleet.ahead_of(queued_at)
    if fleet.running >= slots:
        if not service_view:
            return f"a free worker (all {slots} busy)"
        queue = f", {ahead} queued ahead" if ahead else ""
        return f"a free worker ({fleet.running} running{queue})"
    if ahead:
        return f"its turn in the queue ({ahead} queued ahead)" if service_view else \
            "its turn in the queue"
    return f"a worker to pick it up ({slots - fleet.running} of {slots} free)"


class WaitExplainer:
    """`waiting_for` of queued jobs, with the fleet and each tenant's count read once."""

    def __init__(self, session: Session, settings: Settings, service_view: bool = False
                 ) -> None:
        self.session = session
        self.settings = settings
        self.service_view = service_view  # an admin key's: the service-wide counts
        self._fleet: Fleet | None = None
        self._tenants: dict[str, tuple[int, int]] = {}

    def _tenant(self, tenant_id: str) -> tuple[int, int]:
        if tenant_id not in self._tenants:
            running = self.session.scalar(select(func.count()).select_from(Job).where(
                Job.tenant_id == tenant_id, Job.status == JobStatus.RUNNING)) or 0
            tenant = self.session.get(Tenant, tenant_id)
            limit = (tenant_limit(tenant, self.settings, "max_running_jobs")
                     if tenant is not None else self.settings.tenant_max_running_jobs)
            self._tenants[tenant_id] = (int(running), int(limit))
        return self._tenants[tenant_id]

    def prefetch(self, tenant_id: str) -> None:
        """Read now what `explain` needs for a job of `tenant_id`, so that the session can
        be closed (its connection back in the pool) before a write transaction begins."""
        if self._fleet is None:
            self._fleet = read_fleet(self.session, self.settings)
        self._tenant(tenant_id)

    def explain(self, job: Job) -> str | None:
        if job.status != JobStatus.QUEUED:
            return None
        if self._fleet is None:
            self._fleet = read_fleet(self.session, self.settings)
        running, limit = self._tenant(job.tenant_id)
        return waiting_for(self._fleet, job.queued_at, running, limit, self.service_view)
