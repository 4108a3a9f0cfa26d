"""The job state machine, shared by the API and the workers.

Every transition is a conditional UPDATE on the current status, so two processes racing on
the same job (a duplicate delivery, a cancel during a claim) cannot both win.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.orm import Job, JobEvent, utcnow

ACTIVE = ("queued", "running")
TERMINAL = ("succeeded", "failed", "cancelled")


def history_entry(status: str, at: datetime, **extra: Any) -> dict[str, Any]:
    return {"status": status, "at": at.isoformat(), **extra}


def transition(
    session: Session, job_id: str, from_statuses: tuple[str, ...], to_status: str,
    *, expect_attempt: int | None = None, **fields: Any,
) -> bool:
    """Move a job from one of `from_statuses` to `to_status`; False if it was not there.

    With `expect_attempt`, only while the job is still on that attempt (the worker's lease: a job
    re-queued by the sweep and claimed again cannot be finished by the old attempt). The
    caller commits; the history entry and a `status` event are in the same transaction.
    """
    job = session.get(Job, job_id, populate_existing=True)
    if job is None or job.status not in from_statuses:
        return False
    if expect_attempt is not None and job.attempt != expect_attempt:
        return False
    now = utcnow()
    values: dict[str, Any] = {"status": to_status, **fields}
    if to_status in TERMINAL:
        values.setdefault("finished_at", now)
    extra = {k: fields[k] for k in ("worker", "attempt", "error", "model_id", "result")
             if fields.get(k) is not None}
    brief = {k: v for k, v in extra.items() if k != "result"}
    values["status_history"] = [*job.status_history, history_entry(to_status, now, **brief)]
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == job.status, Job.attempt == job.attempt)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    add_event(session, job_id, "status", {"status": to_status, "at": now.isoformat(), **extra})
    session.expire(job)
    return True


def add_event(session: Session, job_id: str, kind: str, payload: dict[str, Any]) -> int:
    last = session.scalar(select(func.max(JobEvent.seq)).where(JobEvent.job_id == job_id))
    seq = (last or 0) + 1
    session.add(JobEvent(job_id=job_id, seq=seq, kind=kind, payload=payload))
    return seq
