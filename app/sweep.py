"""The recovery sweep: no accepted job is left behind by a dead worker or a lost message.

- A `running` job whose heartbeat is older than the lease lost its worker (SIGKILL, OOM,
  a machine gone): it goes back to `queued` and is enqueued again, or, once it has used
  `max_attempts`, it fails with "worker lost".
- A `queued` job that no worker claimed for `requeue_after_seconds` may have lost its
  message (a broker that keeps nothing on disk was restarted): it is enqueued again. A
  duplicate message is harmless: the claim is a conditional update.
- Evaluations run by workers get the same two rules (app/services/evaluations.py), and so
  do search tasks (app/leases.py; a task failed after the cap fails its search).
- Blob files with no dataset row, and temporary blob files, older than
  `orphan_blob_grace_seconds` (an API process died between the file and the commit) are
  removed; stored idempotent answers older than `idempotency_hours` are dropped.

The API process runs the sweep every `sweep_interval_seconds`; several API processes may
sweep at once, since every change is a conditional transition.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import timedelta

import anyio.to_thread
from sqlalchemy import delete, select, update

from app.db import read_sessionmaker_for, session_scope
from app.job_status import JobStatus
from app.orm import Dataset, IdempotencyRecord, Job, utcnow
from app.queue import enqueue_evaluation, enqueue_search_task, enqueue_training
from app.services.evaluations import sweep_evaluations
from app.services.jobs import transition
from app.services.searches import sweep_search_tasks
from app.settings import Settings
from app.storage import remove_orphan_blobs

log = logging.getLogger("hinge.sweep")

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING


def sweep(settings: Settings) -> dict[str, int]:
    now = utcnow()
    stale_before = now - timedelta(seconds=settings.job_lease_seconds)
    counts = {"requeued": 0, "failed": 0, "cancelled": 0, "reenqueued": 0}
    to_enqueue: list[str] = []
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
                to_enqueue.append(job.id)
        waiting_since = now - timedelta(seconds=settings.requeue_after_seconds)
        waiting = session.scalars(
            select(Job.id).where(Job.status == QUEUED, Job.queued_at < waiting_since)
        ).all()
        for job_id in waiting:
            session.execute(update(Job).where(Job.id == job_id, Job.status == QUEUED)
                            .values(queued_at=now))
            counts["reenqueued"] += 1
            to_enqueue.append(job_id)
        evaluations_to_enqueue = sweep_evaluations(session, settings, now)
        search_tasks_to_enqueue = sweep_search_tasks(session, settings, now)
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
    if any(counts.values()):
        log.info("sweep: %s", counts)
    return counts


def sweep_storage(settings: Settings) -> list[str]:
    """Remove orphan blobs and expired idempotency records; the removed blobs' names."""
    def known(ids: Iterable[str]) -> set[str]:
        wanted = list(ids)
        with read_sessionmaker_for(settings.database_url)() as session:
            return set(session.scalars(select(Dataset.id).where(Dataset.id.in_(wanted))))

    removed = remove_orphan_blobs(settings.datasets_dir, settings.orphan_blob_grace_seconds,
                                  known)
    expired = utcnow() - timedelta(hours=settings.idempotency_hours)
    with session_scope(settings.database_url) as session:
        session.execute(delete(IdempotencyRecord).where(IdempotencyRecord.created_at < expired))
    return [path.name for path in removed]


async def sweep_forever(settings: Settings) -> None:
    while True:
        await asyncio.sleep(settings.sweep_interval_seconds)
        try:
            await anyio.to_thread.run_sync(sweep, settings)
        except Exception:
            log.exception("sweep failed; trying again in %s s", settings.sweep_interval_seconds)
