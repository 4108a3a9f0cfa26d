"""The recovery sweep: no accepted job is left behind by a dead worker or a lost message.

- A message still owed in the outbox (app.domain.outbox) some seconds after its row was
  committed (the broker was down, or the API process died between its commit and the
  send) is sent now, and again at every sweep until the broker takes it.
- Every kind of durable work item (jobs, evaluations, search tasks, batch predictions:
  `KINDS`, each an
  app.domain.lifecycle.WorkKind) is swept by the one lifecycle (app.domain.lifecycle.sweep):
  - a `running` item whose heartbeat is older than the lease lost its worker (SIGKILL,
    OOM, a machine gone): it goes back to `queued` and is enqueued again, or, once it has
    used `max_attempts`, it fails with "worker lost" (a search task fails its search; a
    job that was asked to stop ends `cancelled`);
  - a `queued` item that no worker claimed for `requeue_after_seconds` may have lost its
    message (a Redis that keeps nothing on disk was restarted): it is enqueued again
    (search tasks: only when their search shows no activity for that long), but only if
    the broker no longer holds its message (app.infra.queue.broker_holding). Redis and the
    embedded broker show their messages, so the sweep matches ids; RabbitMQ shows only a
    count, so the sweep re-sends as many of the longest-waiting items as messages are
    missing (queued jobs and evaluations minus messages ready in the jobs' queue; search
    tasks wait in a queue of their own, app.infra.queue.search_queue, so they are not counted).
    A job that merely waits behind a long one is never sent twice (it used to be: 200
    waiting jobs became 400 messages after 120 s). A duplicate message would still be
    harmless: the claim is a conditional update.
  - a stale item put back to `queued` is sent again unless its message is visibly back in
    the queue (a worker process killed mid-job has its message rejected back to it).
- Blobs with no dataset (or model) row, and temporary blob files, older than
  `orphan_blob_grace_seconds` (a process died between the blob and the commit) are
  removed, in whichever blob store is configured; stored idempotent answers older than
  `idempotency_hours` are dropped.
- Resumable upload sessions past their expiry, and staged files with no session, are
  removed with their staged bytes (app.domain.services.uploads.sweep_uploads).
- Worker presence rows (app/domain/services/workers.py) without a heartbeat for an hour are
  forgotten.

The API process runs the sweep every `sweep_interval_seconds`; several API processes may
sweep at once, since every change is a conditional transition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import timedelta

import anyio.to_thread
from sqlalchemy import delete, func, select

from app.domain import lifecycle, outbox
from app.domain.job_status import JobStatus
from app.domain.lifecycle import Swept, WorkKind
from app.domain.orm import Dataset, IdempotencyRecord, Model, Prediction, utcnow
from app.domain.services import workers
from app.domain.services.evaluations import EVALUATIONS
from app.domain.services.imports import IMPORTS, reserved_dataset_ids
from app.domain.services.jobs import JOBS
from app.domain.services.predictions import PREDICTIONS, PREDICTIONS_PREFIX
from app.domain.services.searches import SEARCH_TASKS
from app.domain.services.uploads import sweep_uploads
from app.infra.db import read_sessionmaker_for, session_scope
from app.infra.queue import broker_holding, enqueue
from app.infra.storage import DATASETS, MODELS, blob_store, remove_orphan_blobs
from app.settings import Settings

log = logging.getLogger("hinge.sweep")

KINDS: tuple[WorkKind, ...] = (JOBS, EVALUATIONS, SEARCH_TASKS, PREDICTIONS, IMPORTS)
# the outbox's view of the kinds: the table of each Celery task's rows
ROWS_OF_TASK = {kind.task: kind.table for kind in KINDS}


def sweep(settings: Settings) -> dict[str, int]:
    """One sweep; what it did, in counts: `requeued`, `failed`, `cancelled` (items whose
    worker was lost), `reenqueued` (waiting items sent again), `<kind>_enqueued` (items
    of each kind sent again), `outbox_sent`, `orphan_blobs`, `uploads_swept`,
    `workers_forgotten`."""
    now = utcnow()
    counts = {"requeued": 0, "failed": 0, "cancelled": 0, "reenqueued": 0,
              "outbox_sent": len(outbox.sweep_outbox(settings, ROWS_OF_TASK))}
    with session_scope(settings.database_url) as session:
        swept = {kind: lifecycle.sweep(session, kind, settings, now) for kind in KINDS}
    to_send = _without_held(settings, swept)
    with session_scope(settings.database_url) as session:
        for kind, (stale, waiting) in to_send.items():
            to_send[kind] = (stale, lifecycle.resent(session, kind, waiting, now))
    for kind in KINDS:
        counts["requeued"] += len(swept[kind].requeued)
        counts["failed"] += len(swept[kind].failed)
        counts["cancelled"] += len(swept[kind].cancelled)
        stale, waiting = to_send[kind]
        counts["reenqueued"] += len(waiting)
        counts[f"{kind.plural}_enqueued"] = len(stale) + len(waiting)
        for item_id in [*stale, *waiting]:
            try:
                enqueue(settings.broker_url, settings.queue, kind.task, item_id)
            except Exception:
                log.warning("could not enqueue %s %s; the next sweep tries again", kind.name,
                            item_id, exc_info=True)
    counts["orphan_blobs"] = len(sweep_storage(settings))
    counts["uploads_swept"] = sweep_uploads(settings)
    with session_scope(settings.database_url) as session:
        counts["workers_forgotten"] = workers.forget_stale(session)
    if any(counts.values()):
        log.info("sweep: %s", counts)
    return counts


def _without_held(settings: Settings, swept: dict[WorkKind, Swept]
                  ) -> dict[WorkKind, tuple[list[str], list[str]]]:
    """For each kind, the stale and the waiting items to send again: those whose message
    the broker no longer holds (see the module doc; kinds outside the jobs' queue: all)."""
    to_send = {kind: (list(done.requeued), list(done.waiting)) for kind, done in swept.items()}
    main = [kind for kind in swept if kind.in_main_queue]
    if not any(swept[kind].requeued or swept[kind].waiting for kind in main):
        return to_send
    try:
        held = broker_holding(settings.broker_url, settings.queue)
    except Exception as exc:  # sending would fail too; the next sweep looks again
        log.warning("the broker cannot be read (%s); nothing is re-sent this time", exc)
        for kind in main:
            to_send[kind] = (to_send[kind][0], [])
        return to_send
    if held.ids is not None:  # the broker shows its messages: match them by id
        for kind in main:
            stale, waiting = to_send[kind]
            to_send[kind] = ([i for i in stale if i not in held.ids],
                             [i for i in waiting if i not in held.ids])
        return to_send
    # RabbitMQ shows only a count. Every queued item of these kinds should have a message
    # waiting in this queue; fewer messages than that means some are gone: send that
    # many of the longest-waiting items again (jobs first). (If duplicates hide a loss, it
    # shows once the queue has drained below the number of queued items.)
    with read_sessionmaker_for(settings.database_url)() as session:
        expected = sum(session.scalar(select(func.count()).select_from(kind.table)
                                      .where(kind.table.status == JobStatus.QUEUED)) or 0
                       for kind in main)
    missing = max(0, expected - held.ready - sum(len(swept[kind].requeued) for kind in main))
    for kind in main:
        stale, waiting = to_send[kind]
        to_send[kind] = (stale, waiting[:missing])
        missing -= len(to_send[kind][1])
    return to_send


def sweep_storage(settings: Settings) -> list[str]:
    """Remove orphan blobs (datasets, model arrays and prediction outputs whose row is
    gone) and expired idempotency records;
    the removed blobs' names."""
    def known(table: type[Dataset] | type[Model] | type[Prediction]
              ) -> Callable[[Iterable[str]], set[str]]:
        def existing(ids: Iterable[str]) -> set[str]:
            wanted = list(ids)
            with read_sessionmaker_for(settings.database_url)() as session:
                found = set(session.scalars(select(table.id).where(table.id.in_(wanted))))
                if table is Dataset:  # an import not yet finished writes its shards
                    found |= reserved_dataset_ids(session, wanted)
                return found
        return existing

    store = blob_store(settings)
    removed = [*remove_orphan_blobs(store, DATASETS, settings.orphan_blob_grace_seconds,
                                    known(Dataset)),
               *remove_orphan_blobs(store, MODELS, settings.orphan_blob_grace_seconds,
                                    known(Model)),
               *remove_orphan_blobs(store, PREDICTIONS_PREFIX,
                                    settings.orphan_blob_grace_seconds, known(Prediction))]
    expired = utcnow() - timedelta(hours=settings.idempotency_hours)
    with session_scope(settings.database_url) as session:
        session.execute(delete(IdempotencyRecord).where(IdempotencyRecord.created_at < expired))
    return removed


async def sweep_forever(settings: Settings) -> None:
    while True:
        await asyncio.sleep(settings.sweep_interval_seconds)
        try:
            await anyio.to_thread.run_sync(sweep, settings)
        except Exception:
            log.exception("sweep failed; trying again in %s s", settings.sweep_interval_seconds)
