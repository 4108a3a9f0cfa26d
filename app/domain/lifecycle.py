"""The durable work item: one lifecycle for every kind of work a worker takes from the
queue by id (training jobs, evaluations, search tasks, and the kinds to come).

A kind of work is a `WorkKind`: its table (a row with `id`, `status`, `attempt`,
`worker`, `heartbeat_at`, `queued_at`, `finished_at` and `error`), its Celery task name,
and hooks for what differs (the jobs' history and events, the tenant's running limit, a
search task's failure failing its search). Every kind follows the same rules:

- the claim is a conditional UPDATE `queued -> running` on the attempt it read (attempt
  + 1, the worker, the first heartbeat), so a duplicate delivery does nothing; what the
  worker holds then is a `Claim`, the same type for every kind (the kind, the item's id,
  the attempt, and the kind's own `work`: what to train, score, predict, fit or import).
  A kind
  with `admission` adds its condition to that UPDATE (jobs: the tenant runs fewer jobs
  than its limit): an item refused there stays queued (`NotAdmitted`) and its worker
  sends it round again with a countdown (workers.runner) instead of waiting for it;
- the heartbeat (`renew`) and the final write (`finish`) succeed only while this attempt
  holds the item (status running, same attempt): an item re-queued by the sweep and
  claimed again cannot be finished by the old attempt;
- `cancel` ends a queued item at once;
- the sweep (`sweep`, run for every kind by app.domain.sweep) re-queues a running item whose
  heartbeat is older than the lease (cancels it if it was asked to stop, fails it once it
  has used `max_attempts`), and finds the queued items whose message may be lost: those
  nobody claimed for `requeue_after_seconds` (or the kind's own rule, `waiting`). The
  caller sends them again after its commit, unless the broker still holds their
  messages (app.domain.sweep);
- what an item's `error` says about an exception is `public_error`'s: never a path of
  this server.

Callers pass a write session and own its transaction.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Generic, Literal, TypeVar

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from app.domain.errors import Conflict
from app.domain.job_status import ACTIVE_STATUSES, TERMINAL_STATUSES, JobStatus, already
from app.domain.orm import utcnow
from app.settings import Settings

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING
FAILED, CANCELLED = JobStatus.FAILED, JobStatus.CANCELLED
MAX_ERROR = 2000  # characters of an item's `error`


# A kind's status change: (session, item id, from_statuses, to_status, *, expect_attempt,
# where, **values) -> whether it happened: from one of `from_statuses` to `to_status` with
# `values`, only on `expect_attempt` (if given) and under the extra conditions `where`.
Mover = Callable[..., bool]


@dataclass(frozen=True)
class WorkKind:
    """One kind of durable work item and what differs from the others."""

    name: str  # in logs and errors: "job", "evaluation", "search task"
    plural: str  # in the sweep's counts: "jobs", "evaluations", "search_tasks"
    table: Any  # the ORM class of its rows
    task: str  # the Celery task that runs one (app.infra.queue)
    # its messages wait in the jobs' queue (HINGE_QUEUE), so the sweep compares them with
    # what the broker holds there; False: a queue of its own (search tasks)
    in_main_queue: bool = True
    # a column set at each claim besides the lifecycle's own (jobs: started_at)
    started_column: str | None = None
    # a column that asks a running item to stop (jobs: cancel_requested): the sweep
    # cancels such an item when its worker is lost instead of re-queueing it
    cancel_flag: str | None = None
    # the status change (jobs: with the status history and a `status` event); None: a
    # conditional UPDATE of the row (`update_status`)
    mover: Mover | None = None
    # an extra condition of the claim's UPDATE (jobs: the tenant's running limit), given
    # the session, the settings and the item id; None: any queued item may be claimed
    admission: Callable[[Session, Settings, str], ColumnElement[bool]] | None = None
    # the queued items whose message may be lost, oldest first; None: those nobody
    # claimed for requeue_after_seconds (`waiting_items`)
    waiting: Callable[[Session, Settings, datetime], list[str]] | None = None
    # what follows the sweep failing an item for lost workers (a search task: its search)
    on_lost: Callable[[Session, Settings, str], None] | None = None


W = TypeVar("W")


@dataclass(frozen=True)
class Claim(Generic[W]):
    """What a worker holds once it has claimed an item: its kind and id, this attempt (every
    later write of the attempt is conditional on it holding the item) and what the kind's
    worker needs (`work`, the kind's own: a job's solver and dataset, a search task's
    points, ...). The writes of the attempt, the same for every kind, are its methods."""

    kind: WorkKind
    id: str
    attempt: int
    work: W

    def progress(self, session: Session, **values: Any) -> Answer:
        """`progress`: "go", "stop" or "lost"."""
        return progress(session, self.kind, self.id, self.attempt, **values)

    def finish(self, session: Session, to_status: JobStatus, **values: Any) -> bool:
        """`finish`: running -> to_status while this attempt holds the item."""
        return finish(session, self.kind, self.id, self.attempt, to_status, **values)

    def fail(self, session: Session, error: str) -> bool:
        """`fail`: running -> failed with `error` while this attempt holds the item."""
        return fail(session, self.kind, self.id, self.attempt, error)

    def leased(self) -> tuple[ColumnElement[bool], ...]:
        """`leased`: the WHERE clause of 'this attempt still holds the item'."""
        return leased(self.kind, self.id, self.attempt)


class NotAdmitted(Exception):
    """The claim's admission refused the item (its tenant runs as many as it may); it
    stays queued."""


# -- status changes ----------------------------------------------------------------------

def update_status(table: Any) -> Mover:
    """The plain status change of a table: one conditional UPDATE (`finished_at` set on
    reaching a terminal status)."""
    def move(session: Session, item_id: str, from_statuses: tuple[JobStatus, ...],
             to_status: JobStatus, *, expect_attempt: int | None = None,
             where: Sequence[ColumnElement[bool]] = (), **values: Any) -> bool:
        conditions = [table.id == item_id, table.status.in_(from_statuses), *where]
        if expect_attempt is not None:
            conditions.append(table.attempt == expect_attempt)
        if to_status in TERMINAL_STATUSES:
            values.setdefault("finished_at", utcnow())
        result = session.execute(update(table).where(*conditions)
                                 .values(status=to_status, **values)
                                 .execution_options(synchronize_session=False))
        return result.rowcount == 1  # type: ignore[attr-defined]

    return move


def move(session: Session, kind: WorkKind, item_id: str,
         from_statuses: tuple[JobStatus, ...], to_status: JobStatus, *,
         expect_attempt: int | None = None, where: Sequence[ColumnElement[bool]] = (),
         **values: Any) -> bool:
    mover = kind.mover or update_status(kind.table)
    return mover(session, item_id, from_statuses, to_status, expect_attempt=expect_attempt,
                 where=where, **values)


# -- the worker's side: claim, lease, finish ---------------------------------------------

def claim(session: Session, kind: WorkKind, item_id: str, worker: str,
          settings: Settings | None = None) -> int | None:
    """queued -> running on the next attempt; that attempt, or None if the item is not
    queued (any more). With `settings`, the kind's admission is part of the UPDATE:
    NotAdmitted when it refuses (the item stays queued)."""
    table = kind.table
    row = session.execute(select(table.status, table.attempt).where(table.id == item_id)
                          ).first()
    if row is None or row.status != QUEUED:
        return None
    where = []
    if settings is not None and kind.admission is not None:
        where.append(kind.admission(session, settings, item_id))
    attempt = row.attempt + 1
    now = utcnow()
    values: dict[str, Any] = {"attempt": attempt, "worker": worker, "heartbeat_at": now}
    if kind.started_column is not None:
        values[kind.started_column] = now
    if move(session, kind, item_id, (QUEUED,), RUNNING, expect_attempt=row.attempt,
            where=where, **values):
        return attempt
    if where and session.execute(select(table.id).where(
            table.id == item_id, table.status == QUEUED, table.attempt == row.attempt)
    ).first() is not None:
        raise NotAdmitted(item_id)
    return None


def claim_as(session: Session, kind: WorkKind, item_id: str, worker: str,
             work: Callable[[Any], W], settings: Settings | None = None) -> Claim[W] | None:
    """`claim`, then what the worker holds: the Claim, its work made by `work` from the
    claimed row; None if the item is not queued (any more)."""
    attempt = claim(session, kind, item_id, worker, settings)
    if attempt is None:
        return None
    row = session.get(kind.table, item_id)
    assert row is not None
    return Claim(kind, item_id, attempt, work(row))


def leased(kind: WorkKind, item_id: str, attempt: int) -> tuple[ColumnElement[bool], ...]:
    """The WHERE clause of 'this attempt still holds the item'."""
    table = kind.table
    return (table.id == item_id, table.attempt == attempt, table.status == RUNNING)


def renew(session: Session, kind: WorkKind, item_id: str, attempt: int) -> bool:
    """Refresh the heartbeat while this attempt holds the item; False if it does not."""
    result = session.execute(update(kind.table).where(*leased(kind, item_id, attempt))
                             .values(heartbeat_at=utcnow())
                             .execution_options(synchronize_session=False))
    return bool(result.rowcount)  # type: ignore[attr-defined]


Answer = Literal["go", "stop", "lost"]


def progress(session: Session, kind: WorkKind, item_id: str, attempt: int,
             **values: Any) -> Answer:
    """Record `values` (the item's progress columns) and the heartbeat while this attempt
    holds the item. The same answer for every kind: "go" on, "stop" when it was asked to
    (its cancel flag), "lost" when this attempt no longer holds it (another attempt or
    the sweep owns it: nothing was written)."""
    table = kind.table
    held = session.execute(update(table).where(*leased(kind, item_id, attempt))
                           .values(heartbeat_at=utcnow(), **values)
                           .execution_options(synchronize_session=False)).rowcount  # type: ignore[attr-defined]
    if not held:
        return "lost"
    if kind.cancel_flag is None:
        return "go"
    asked = session.scalar(select(getattr(table, kind.cancel_flag)).where(table.id == item_id))
    return "stop" if asked else "go"


def finish(session: Session, kind: WorkKind, item_id: str, attempt: int | None,
           to_status: JobStatus, **values: Any) -> bool:
    """running -> to_status (succeeded, failed, cancelled), only while `attempt` holds the
    item (None: any attempt); False when it does not."""
    return move(session, kind, item_id, (RUNNING,), to_status, expect_attempt=attempt,
                **values)


def fail(session: Session, kind: WorkKind, item_id: str, attempt: int | None, error: str,
         from_statuses: tuple[JobStatus, ...] = (RUNNING,)) -> bool:
    """-> failed with `error` (cut to MAX_ERROR characters); see `finish`."""
    return move(session, kind, item_id, from_statuses, FAILED, expect_attempt=attempt,
                error=error[:MAX_ERROR])


def cancel(session: Session, kind: WorkKind, item_id: str, **values: Any) -> bool:
    """queued -> cancelled; False if the item is not queued (a running one is asked to stop
    by its kind's own means: jobs' cancel_requested, a search's status)."""
    return move(session, kind, item_id, (QUEUED,), CANCELLED, **values)


def request_cancel(session: Session, kind: WorkKind, item: Any) -> None:
    """Cancel `item` of a kind with a `cancel_flag`: a queued one at once, a running one is
    asked to stop (the flag, which its worker reads at its next check); a finished one is
    a Conflict (409)."""
    flag = kind.cancel_flag
    assert flag is not None, kind.name
    if item.status == QUEUED and cancel(session, kind, item.id, **{flag: True}):
        pass
    elif item.status in ACTIVE_STATUSES:  # (a failed transition has re-read the status)
        setattr(item, flag, True)
    else:
        raise Conflict(f"{kind.name} {item.id!r} {already(item.status)}: only a queued or "
                       f"running {kind.name} can be cancelled", {"status": item.status.value})
    session.flush()
    session.refresh(item)


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][\w.\-]+){2,}")


class Failed(Exception):
    """An attempt's own failure: its message is the item's `error` as it is."""


def public_error(exc: BaseException, noun: str = "job") -> str:
    """What an item's `error` says about an exception: its type and message, with no file
    system path of this server (an OSError says only what failed)."""
    if isinstance(exc, Failed):
        return str(exc)
    if isinstance(exc, OSError):
        return f"{type(exc).__name__}: the {noun}'s stored data could not be read"
    return _PATH.sub("<path>", f"{type(exc).__name__}: {exc}")


# -- the sweep ---------------------------------------------------------------------------

@dataclass
class Swept:
    """What one sweep of a kind did; the ids in `requeued` and `waiting` are to be sent
    again after the commit (app.domain.sweep decides which)."""

    requeued: list[str] = field(default_factory=list)  # lost workers: queued again
    failed: list[str] = field(default_factory=list)  # lost workers max_attempts times
    cancelled: list[str] = field(default_factory=list)  # lost workers, asked to stop
    waiting: list[str] = field(default_factory=list)  # queued: the message may be lost


def sweep(session: Session, kind: WorkKind, settings: Settings, now: datetime) -> Swept:
    """Re-queue, cancel or fail (after max_attempts) the running items whose heartbeat is
    older than the lease; list the queued items whose message may be lost."""
    table = kind.table
    swept = Swept()
    stale_before = now - timedelta(seconds=settings.job_lease_seconds)
    flag = getattr(table, kind.cancel_flag) if kind.cancel_flag else None
    columns = [table.id, table.attempt] + ([flag] if flag is not None else [])
    stale = session.execute(select(*columns).where(
        table.status == RUNNING, table.heartbeat_at < stale_before)).all()
    for row in stale:
        item_id, attempt = row[0], row[1]
        if attempt >= settings.max_attempts:
            if fail(session, kind, item_id, attempt,
                    f"worker lost: {attempt} attempt(s) ended without a heartbeat"):
                swept.failed.append(item_id)
                if kind.on_lost is not None:
                    kind.on_lost(session, settings, item_id)
        elif flag is not None and row[2]:
            if finish(session, kind, item_id, attempt, CANCELLED):
                swept.cancelled.append(item_id)
        elif move(session, kind, item_id, (RUNNING,), QUEUED, expect_attempt=attempt,
                  queued_at=now):
            swept.requeued.append(item_id)
    swept.waiting = (kind.waiting or waiting_items(kind))(session, settings, now)
    return swept


def waiting_items(kind: WorkKind) -> Callable[[Session, Settings, datetime], list[str]]:
    """The queued items nobody claimed for requeue_after_seconds, oldest first."""
    table = kind.table

    def waiting(session: Session, settings: Settings, now: datetime) -> list[str]:
        since = now - timedelta(seconds=settings.requeue_after_seconds)
        return list(session.scalars(select(table.id).where(
            table.status == QUEUED, table.queued_at < since
        ).order_by(table.queued_at, table.id)))

    return waiting


def resent(session: Session, kind: WorkKind, item_ids: list[str], now: datetime
           ) -> list[str]:
    """Mark waiting items as sent again (queued_at = now, so the next sweeps wait again);
    those still queued (the others were claimed meanwhile: their message arrived)."""
    table = kind.table
    return [item_id for item_id in item_ids if session.execute(
        update(table).where(table.id == item_id, table.status == QUEUED)
        .values(queued_at=now).execution_options(synchronize_session=False)
    ).rowcount]  # type: ignore[attr-defined]
