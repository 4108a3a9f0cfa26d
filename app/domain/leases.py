"""Claim, lease, finish and sweep for any table of work items that workers take from the
queue by id: a row with `status`, `attempt`, `worker`, `heartbeat_at`, `queued_at` and
`finished_at` (search tasks; evaluations have the same columns and rules).

The rules are those of jobs (app/domain/services/jobs.py, app/domain/sweep.py):
- the claim is a conditional UPDATE `queued -> running` on the attempt it read, so a
  duplicate delivery does nothing;
- the heartbeat and the final write succeed only while this attempt holds the item (status
  running, same attempt): an item re-queued by the sweep and claimed again cannot be
  finished by the old attempt;
- the sweep re-queues an item whose heartbeat is older than the lease, or fails it once it
  has used `max_attempts`, and re-enqueues a queued item that nobody claimed for
  `requeue_after_seconds` (its message may be lost; a duplicate is harmless).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.domain.job_status import JobStatus
from app.domain.orm import utcnow
from app.settings import Settings

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING


def claim(session: Session, table: Any, item_id: str, worker: str) -> int | None:
    """queued -> running on the next attempt; that attempt, or None if the item is not
    queued (any more)."""
    row = session.execute(select(table.status, table.attempt).where(table.id == item_id)
                          ).first()
    if row is None or row.status != QUEUED:
        return None
    attempt = row.attempt + 1
    result = session.execute(
        update(table)
        .where(table.id == item_id, table.status == QUEUED, table.attempt == row.attempt)
        .values(status=RUNNING, attempt=attempt, worker=worker, heartbeat_at=utcnow())
        .execution_options(synchronize_session=False))
    return attempt if result.rowcount == 1 else None  # type: ignore[attr-defined]


def leased(table: Any, item_id: str, attempt: int) -> tuple[Any, ...]:
    """The WHERE clause of 'this attempt still holds the item'."""
    return (table.id == item_id, table.attempt == attempt, table.status == RUNNING)


def renew(session: Session, table: Any, item_id: str, attempt: int) -> bool:
    result = session.execute(update(table).where(*leased(table, item_id, attempt))
                             .values(heartbeat_at=utcnow())
                             .execution_options(synchronize_session=False))
    return bool(result.rowcount)  # type: ignore[attr-defined]


def finish(session: Session, table: Any, item_id: str, attempt: int | None,
           to_status: JobStatus, from_status: JobStatus = RUNNING, **values: Any) -> bool:
    """from_status -> to_status (terminal), only while `attempt` holds the item (None: any
    attempt); False when it does not."""
    conditions = [table.id == item_id, table.status == from_status]
    if attempt is not None:
        conditions.append(table.attempt == attempt)
    result = session.execute(
        update(table).where(*conditions)
        .values(status=to_status, finished_at=utcnow(), **values)
        .execution_options(synchronize_session=False))
    return result.rowcount == 1  # type: ignore[attr-defined]


@dataclass
class Swept:
    """What one sweep of a table did: ids to enqueue (after commit) and ids it failed."""

    to_enqueue: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)


def sweep(session: Session, table: Any, settings: Settings, now: datetime,
          requeue_waiting: bool = True) -> Swept:
    """Re-queue (or fail after max_attempts) running items whose heartbeat is older than the
    lease; re-enqueue queued ones nobody claimed for requeue_after_seconds (unless
    `requeue_waiting` is False: the caller has its own rule)."""
    swept = Swept()
    stale_before = now - timedelta(seconds=settings.job_lease_seconds)
    stale = session.execute(select(table.id, table.attempt).where(
        table.status == RUNNING, table.heartbeat_at < stale_before)).all()
    for item_id, attempt in stale:
        if attempt >= settings.max_attempts:
            if finish(session, table, item_id, attempt, JobStatus.FAILED,
                      error=f"worker lost: {attempt} attempt(s) ended without a heartbeat"):
                swept.failed.append(item_id)
            continue
        requeued = session.execute(
            update(table).where(*leased(table, item_id, attempt))
            .values(status=QUEUED, queued_at=now)
            .execution_options(synchronize_session=False))
        if requeued.rowcount:  # type: ignore[attr-defined]
            swept.to_enqueue.append(item_id)
    if not requeue_waiting:
        return swept
    waiting_since = now - timedelta(seconds=settings.requeue_after_seconds)
    waiting = session.scalars(select(table.id).where(
        table.status == QUEUED, table.queued_at < waiting_since)).all()
    for item_id in waiting:
        session.execute(update(table).where(table.id == item_id, table.status == QUEUED)
                        .values(queued_at=now).execution_options(synchronize_session=False))
        swept.to_enqueue.append(item_id)
    return swept
