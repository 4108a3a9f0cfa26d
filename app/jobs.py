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


def history_entry(status: str, at: datetime, **extra: Any) -> dict[str, Any]:
    return {"status": status, "at": at.isoformat(), **extra}


def transition(
    session: Session, job_id: str, from_statuses: tuple[str, ...], to_status: str,
    **fields: Any,
) -> bool:
    """Move a job from one of `from_statuses` to `to_status`; False if it was not there.

    The caller commits. The history entry and a terminal `status` event are written in the
    same transaction.
    """
    job = session.get(Job, job_id, populate_existing=True)
    if job is None or job.status not in from_statuses:
        return False
    now = utcnow()
    values: dict[str, Any] = {"status": to_status, **fields}
    if to_status in ("succeeded", "failed", "cancelled"):
        values.setdefault("finished_at", now)
    extra = {k: fields[k] for k in ("worker", "attempt", "error") if fields.get(k) is not None}
    values["status_history"] = [*job.status_history, history_entry(to_status, now, **extra)]
    result = session.execute(
        update(Job)
        .where(Job.id == job_id, Job.status == job.status)
        .values(**values)
        .execution_options(synchronize_session=False)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        return False
    add_event(session, job_id, "status", {"status": to_status, "at": now.isoformat(),
                                          **{k: v for k, v in extra.items()}})
    session.expire(job)
    return True


def add_event(session: Session, job_id: str, kind: str, payload: dict[str, Any]) -> int:
    last = session.scalar(select(func.max(JobEvent.seq)).where(JobEvent.job_id == job_id))
    seq = (last or 0) + 1
    session.add(JobEvent(job_id=job_id, seq=seq, kind=kind, payload=payload))
    return seq
