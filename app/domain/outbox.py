"""The outbox: a row and its message are committed together, or not at all.

A message the broker must carry ("run task T on row X": a training job, an evaluation, a
search task, a batch prediction) is first a row of the `outbox` table, added in the
transaction that makes row X (`post`). Once that transaction commits, the relay sends it
(`relay`, run right after the commit in the same thread); if the broker cannot be reached,
or the process dies first, the recovery sweep sends what is still owed (`sweep_outbox`,
from app.domain.sweep). So an answer that reports an error made nothing (its transaction
rolled back, with the message in it), and an accepted row always gets its message, also
when the broker is down at the time: it is sent once the broker is back.

Clearing a sent message's row is a write, and on SQLite every write waits in one line
(app.infra.db): a transaction of its own per message would double the line under a burst of
submissions. So the process remembers what it sent, and the next transaction that posts
a message deletes those rows in passing; the sweep clears the rest. A row is therefore
owed only once it is older than `grace_seconds` (longer than a sweep interval, by which
time every process has cleared what it sent).

A message may be sent twice (a process died between the send and the clearing, or the
broker lost track): that is harmless, the worker's claim is a conditional update.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.domain.job_status import JobStatus
from app.domain.orm import (
    OutboxMessage,
    new_id,
    utcnow,
)
from app.infra.db import after_commit, after_rollback, read_sessionmaker_for, session_scope
from app.infra.queue import enqueue
from app.settings import Settings

log = logging.getLogger("hinge.outbox")

MIN_GRACE_SECONDS = 5.0
CLEAR_BATCH = 500  # outbox rows deleted by one statement

_sent: dict[str, set[str]] = {}  # database URL -> ids of outbox rows sent, not yet deleted
_sent_lock = threading.Lock()


def grace_seconds(settings: Settings) -> float:
    """How old an outbox row must be before the sweep sends it: by then the relay of the
    request that wrote it has sent it and its process's sweep has cleared it."""
    return max(MIN_GRACE_SECONDS, 1.5 * settings.sweep_interval_seconds)


def _remember_sent(database_url: str, ids: Iterable[str]) -> None:
    with _sent_lock:
        _sent.setdefault(database_url, set()).update(ids)


def _take_sent(database_url: str) -> list[str]:
    """Up to CLEAR_BATCH ids of rows sent and not yet deleted (now the caller's to
    delete)."""
    with _sent_lock:
        waiting = _sent.get(database_url)
        if not waiting:
            return []
        return [waiting.pop() for _ in range(min(CLEAR_BATCH, len(waiting)))]


def post(session: Session, settings: Settings, task: str, ref_id: str) -> OutboxMessage:
    """Owe the broker task `task` on row `ref_id`, in the session's transaction; the
    message is sent once that transaction commits (never if it rolls back). The same
    transaction deletes the rows of messages this process sent before."""
    message = OutboxMessage(id=new_id(), task=task, ref_id=ref_id, created_at=utcnow())
    session.add(message)
    database_url = settings.database_url
    cleared = _take_sent(database_url)
    if cleared:
        session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_(cleared)))
        after_rollback(session, lambda: _remember_sent(database_url, cleared))
    owed = (message.id, task, ref_id)

    def send() -> None:
        relay(settings, [owed])

    after_commit(session, send)
    return message


def relay(settings: Settings, messages: Iterable[tuple[str, str, str]]) -> list[str]:
    """Send each (outbox id, task, ref id) to the broker, in order; the ref ids sent. At
    the first one that cannot be sent (the broker is down, most likely) it stops: that one
    and the rest stay owed, for the sweep. The rows of those sent are deleted later
    (`post`, `clear_sent`)."""
    sent: list[tuple[str, str]] = []
    for message_id, task, ref_id in messages:
        try:
            enqueue(settings.broker_url, settings.queue, task, ref_id)
        except Exception:
            log.warning("could not send %s %s; it stays in the outbox for the sweep", task,
                        ref_id, exc_info=True)
            break
        sent.append((message_id, ref_id))
    _remember_sent(settings.database_url, [message_id for message_id, _ in sent])
    return [ref_id for _, ref_id in sent]


def clear_sent(settings: Settings) -> int:
    """Delete the outbox rows of the messages this process has sent; how many."""
    total = 0
    while cleared := _take_sent(settings.database_url):
        try:
            with session_scope(settings.database_url) as session:
                session.execute(delete(OutboxMessage).where(OutboxMessage.id.in_(cleared)))
        except BaseException:
            _remember_sent(settings.database_url, cleared)
            raise
        total += len(cleared)
    return total


def owed(settings: Settings, before: datetime | None = None
         ) -> Sequence[tuple[str, str, str]]:
    """The messages not known to be sent, oldest first (only those posted before `before`
    if given)."""
    query = select(OutboxMessage.id, OutboxMessage.task, OutboxMessage.ref_id)
    if before is not None:
        query = query.where(OutboxMessage.created_at < before)
    with read_sessionmaker_for(settings.database_url)() as session:
        rows = session.execute(query.order_by(OutboxMessage.created_at, OutboxMessage.id))
        return [(row.id, row.task, row.ref_id) for row in rows]


def _no_longer_queued(settings: Settings, messages: Sequence[tuple[str, str, str]],
                      rows_of_task: dict[str, Any]) -> set[str]:
    """The outbox ids of messages whose row (in the table `rows_of_task` gives for its
    task) is no longer queued: a worker has claimed it (so its message arrived) or it
    ended; sending it again would do nothing."""
    done: set[str] = set()
    if not messages:  # (the sweep's usual case: no read session for nothing)
        return done
    with read_sessionmaker_for(settings.database_url)() as session:
        for task, table in rows_of_task.items():
            refs = {ref_id for _, t, ref_id in messages if t == task}
            if not refs:
                continue
            queued = set(session.scalars(select(table.id).where(
                table.id.in_(refs), table.status == JobStatus.QUEUED)))
            done |= {message_id for message_id, t, ref_id in messages
                     if t == task and ref_id not in queued}
    return done


def sweep_outbox(settings: Settings, rows_of_task: dict[str, Any]) -> list[str]:
    """The sweep's part: clear what this process sent, then send every message still owed
    after the grace period, but for those whose row is no longer queued (`rows_of_task`:
    the ORM table of each task's rows, from the sweep's work kinds); the ref ids sent."""
    clear_sent(settings)
    late = owed(settings, utcnow() - timedelta(seconds=grace_seconds(settings)))
    done = _no_longer_queued(settings, late, rows_of_task)
    _remember_sent(settings.database_url, done)
    sent = relay(settings, [message for message in late if message[0] not in done])
    clear_sent(settings)
    return sent
