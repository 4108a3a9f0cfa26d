"""The recovery sweep: no accepted job is left behind by a dead worker or a lost message.

- A message still owed in the outbox (app.domain.outbox) some seconds after its row was
  committed (the broker was down, or the API process died between its commit and the
  send) is sent now, and again at every sweep until the broker takes it.
- A `running` job whose heartbeat is older than the lease lost its worker (SIGKILL, OOM,
  a machine gone): it goes back to `queued` and is enqueued again, or, once it has used
  `max_attempts`, it fails with "worker lost".
- A `queued` job that no worker claimed for `requeue_after_seconds` may have lost its
  message (a Redis that keeps nothing on disk was restarted): it is enqueued again, but
  only if the broker no longer holds its message (app.infra.queue.broker_holding). Redis and the
  embedded broker show their messages, so the sweep matches job ids; RabbitMQ shows only a
  count, so the sweep re-sends as many of the longest-waiting jobs as messages are missing
  (queued jobs and evaluations minus messages ready in the jobs' queue; search tasks wait
  in a queue of their own, app.infra.queue.search_queue, so they are not counted). A job that
  merely waits behind a long one is never sent twice (it used to be: 200 waiting jobs
  became 400 messages after 120 s). A duplicate message would still be harmless: the
  claim is a conditional update.
- A stale job put back to `queued` is sent again unless its message is visibly back in
  the queue (a worker process killed mid-job has its message rejected back to it).
- Evaluations run by workers get the same two rules (app/domain/services/evaluations.py), and so
  do search tasks (app/domain/leases.py; a task failed after the cap fails its search; a queued
  task is re-sent only when its search shows no activity for `requeue_after_seconds`).
- Blobs with no dataset (or model) row, and temporary blob files, older than
  `orphan_blob_grace_seconds` (a process died between the blob and the commit) are
  removed, in whichever blob store is configured; stored idempotent answers older than
  `idempotency_hours` are dropped.
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
from sqlalchemy import delete, func, select, update

from app.domain import outbox
from app.domain.job_status import JobStatus
from app.domain.orm import Dataset, Evaluation, IdempotencyRecord, Job, Model, utcnow
from app.domain.services import workers
from app.domain.services.evaluations import sweep_evaluations
from app.domain.services.jobs import transition
from app.domain.services.searches import sweep_search_tasks
from app.infra.db import read_sessionmaker_for, session_scope
from app.infra.queue import (
    broker_holding,
    enqueue_evaluation,
    enqueue_search_task,
    enqueue_training,
)
from app.infra.storage import DATASETS, MODELS, blob_store, remove_orphan_blobs
from app.settings import Settings

log = logging.getLogger("hinge.sweep")

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING


def sweep(settings: Settings) -> dict[str, int]:
    now = utcnow()
    stale_before = now - timedelta(seconds=settings.job_lease_seconds)
    counts = {"requeued": 0, "failed": 0, "cancelled": 0, "reenqueued": 0,
              "outbox_sent": len(outbox.sweep_outbox(settings))}
    stale_requeued: list[str] = []
    with session_scope(settings.database_url) as session:
        stale = session.scalars(
            select(Job).where(Job.status == RUNNING, Job.heartbeat_at < stale_before)
        ).all()
        for job in stale:
            if job.attempt >= settings.max_attempts:
                if transition(
                    session, job.id, (RUNNING,), JobStatus.FAILED, expect_attempt=job.attempt,
                    error=f"worker lost: {job.attempt} attempt(s) ended without a heartbeat",
                ):
                    counts["failed"] += 1
            elif job.cancel_requested:
                if transition(session, job.id, (RUNNING,), JobStatus.CANCELLED,
                              expect_attempt=job.attempt):
                    counts["cancelled"] += 1
            elif transition(session, job.id, (RUNNING,), QUEUED, expect_attempt=job.attempt,
                            queued_at=now):
                counts["requeued"] += 1
                stale_requeued.append(job.id)
        waiting_since = now - timedelta(seconds=settings.requeue_after_seconds)
        waiting = list(session.scalars(
            select(Job.id).where(Job.status == QUEUED, Job.queued_at < waiting_since)
            .order_by(Job.queued_at, Job.id)))
        evaluations_to_enqueue = sweep_evaluations(session, settings, now)
        search_tasks_to_enqueue = sweep_search_tasks(session, settings, now)
    to_enqueue, evaluations_to_enqueue = _without_held(
        settings, stale_requeued, waiting, evaluations_to_enqueue)
    if waiting:
        resent = set(to_enqueue) - set(stale_requeued)
        with session_scope(settings.database_url) as session:
            for job_id in waiting:
                if job_id in resent and session.execute(
                        update(Job).where(Job.id == job_id, Job.status == QUEUED)
                        .values(queued_at=now)).rowcount:  # type: ignore[attr-defined]
                    counts["reenqueued"] += 1
                elif job_id in resent:
                    to_enqueue.remove(job_id)  # claimed meanwhile: its message arrived
    counts["evaluations_enqueued"] = len(evaluations_to_enqueue)
    counts["search_tasks_enqueued"] = len(search_tasks_to_enqueue)
    for task_id in search_tasks_to_enqueue:
        try:
            enqueue_search_task(settings.broker_url, settings.queue, task_id)
        except Exception:
            log.warning("could not enqueue search task %s; the next sweep tries again",
                        task_id, exc_info=True)
    for evaluation_id in evaluations_to_enqueue:
        try:
            enqueue_evaluation(settings.broker_url, settings.queue, evaluation_id)
        except Exception:
            log.warning("could not enqueue evaluation %s; the next sweep tries again",
                        evaluation_id, exc_info=True)
    for job_id in to_enqueue:
        try:
            enqueue_training(settings.broker_url, settings.queue, job_id)
        except Exception:
            log.warning("could not enqueue job %s; the next sweep tries again", job_id,
                        exc_info=True)
    counts["orphan_blobs"] = len(sweep_storage(settings))
    with session_scope(settings.database_url) as session:
        counts["workers_forgotten"] = workers.forget_stale(session)
    if any(counts.values()):
        log.info("sweep: %s", counts)
    return counts


def _without_held(settings: Settings, stale: list[str], waiting: list[str],
                  evaluations: list[str]) -> tuple[list[str], list[str]]:
    """The jobs and evaluations to send again: those whose message the broker no longer
    holds (see the module doc). `waiting` is oldest first."""
    if not (stale or waiting or evaluations):
        return [], []
    try:
        held = broker_holding(settings.broker_url, settings.queue)
    except Exception as exc:  # sending would fail too; the next sweep looks again
        log.warning("the broker cannot be read (%s); nothing is re-sent this time", exc)
        return list(stale), list(evaluations)
    if held.ids is not None:  # the broker shows its messages: match them by id
        return ([i for i in [*stale, *waiting] if i not in held.ids],
                [i for i in evaluations if i not in held.ids])
    # RabbitMQ shows only a count. Every queued job and queued evaluation should have a
    # message waiting in this queue (search tasks wait in their own, so they are not
    # counted); fewer messages than that means some are gone: send that many of
    # the longest-waiting jobs again. (If duplicates hide a loss, it shows once the queue
    # has drained below the number of queued jobs.)
    with read_sessionmaker_for(settings.database_url)() as session:
        expected = (session.scalar(select(func.count()).select_from(Job)
                                   .where(Job.status == QUEUED)) or 0) + \
            (session.scalar(select(func.count()).select_from(Evaluation)
                            .where(Evaluation.status == QUEUED)) or 0)
    missing = max(0, expected - held.ready - len(stale))
    return [*stale, *waiting[:missing]], list(evaluations)


def sweep_storage(settings: Settings) -> list[str]:
    """Remove orphan blobs (datasets and model arrays) and expired idempotency records;
    the removed blobs' names."""
    def known(table: type[Dataset] | type[Model]) -> Callable[[Iterable[str]], set[str]]:
        def existing(ids: Iterable[str]) -> set[str]:
            wanted = list(ids)
            with read_sessionmaker_for(settings.database_url)() as session:
                return set(session.scalars(select(table.id).where(table.id.in_(wanted))))
        return existing

    store = blob_store(settings)
    removed = [*remove_orphan_blobs(store, DATASETS, settings.orphan_blob_grace_seconds,
                                    known(Dataset)),
               *remove_orphan_blobs(store, MODELS, settings.orphan_blob_grace_seconds,
                                    known(Model))]
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
