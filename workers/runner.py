"""One worker runner for every kind of durable work item (app.domain.lifecycle): claim ->
heartbeat -> run -> finish.

A kind's worker gives a `Work`: how to claim an item (an app.domain.lifecycle.Claim, the
same type for every kind), how to run it under the heartbeat, how to store its result and,
where the kind does more than `Claim.fail`, how to store a failure.
The runner does the rest, the same for every kind:

- a duplicate delivery (the item is not queued any more) is "skipped";
- an item its kind does not admit now (a tenant at its running-jobs limit:
  app.domain.lifecycle.NotAdmitted) stays queued and goes round again with a Celery countdown
  ("deferred"): no worker waits for it;
- a `Heartbeat` thread holds the lease from the claim to the final write;
- an attempt that loses its lease (`Lost`, or the heartbeat found it gone) writes nothing
  and ends "lost";
- an exception fails the item with app.domain.lifecycle.public_error (never a server path);
- else the kind's `finish` stores the result ("succeeded", or what it says).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from sqlalchemy.orm import Session

from app.domain.lifecycle import Claim, Failed, NotAdmitted, WorkKind, public_error, renew
from app.infra.bus import notify
from app.infra.db import session_scope
from app.infra.queue import enqueue
from app.settings import Settings

log = logging.getLogger("hinge.worker")

DEFER_SECONDS = 1.0  # an item not admitted now is delivered again after this long


W = TypeVar("W")  # a kind's work (Claim.work)
R = TypeVar("R")


class Lost(Exception):
    """This attempt no longer holds its item: it stops and writes nothing."""


def worker_name(hostname: str) -> str:
    """How an item names the process that runs it: `celery@host pid 4242`."""
    return f"{hostname} pid {os.getpid()}"


class Heartbeat:
    """Holds an attempt's lease from a thread of the worker's pool process, from the claim
    to the final write: through the data load, the run, and the storing of its result (a
    kernel model predicts every training row for its training accuracy: on a9a that
    takes longer than the fit, and it used to run after the heartbeat had stopped, so a
    job with a short lease was re-queued by the sweep while it was storing its model, on
    every attempt).

    The sweep (app/domain/sweep.py) takes back an item whose heartbeat is older than the lease;
    this thread renews every quarter of the lease, so two renewals can fail or come late
    before that happens. The thread is not starved of the GIL: the SMO step kernel
    releases it (nogil) and the solvers return to Python between bounded calls
    (solvers.backbone.Budget); on a 2-core machine at load 15-20 the thread waited at most
    0.6 s for the GIL during an SMO fit of a9a, 0.13 s during its prediction.

    `lost` turns True when a renewal finds that this attempt no longer holds the item (the
    sweep re-queued it, another attempt claimed it, it was finished), or when no renewal
    has succeeded for a whole lease (the database unreachable or locked: the sweep may
    have taken the item meanwhile). The attempt checks it (a progress callback, before
    storing a result) and stops cleanly: it writes nothing and ends `lost`; the
    conditional final write would refuse it anyway.
    """

    def __init__(self, settings: Settings, kind: WorkKind, item_id: str, attempt: int) -> None:
        self.settings = settings
        self.kind = kind
        self.item_id = item_id
        self.attempt = attempt
        self.lease = settings.job_lease_seconds
        self.interval = max(0.05, self.lease / 4)
        self.renewed_at = time.monotonic()  # the claim wrote the first heartbeat
        self.gone = False  # a renewal found that this attempt no longer holds the item
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{item_id}",
                                        daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()
        self._thread.join(timeout=5)

    def stop(self) -> None:
        """No more renewals (before the final write: a renewal racing it would only find
        the item finished)."""
        self._stop.set()

    @property
    def expired(self) -> bool:
        """No renewal has succeeded for a whole lease."""
        return time.monotonic() - self.renewed_at > self.lease

    @property
    def lost(self) -> bool:
        return self.gone or self.expired

    def lose(self) -> None:
        """Another write found the lease gone (e.g. a progress callback)."""
        self.gone = True
        self._stop.set()

    def renewed(self, at: float) -> None:
        """A write that refreshed the heartbeat started at monotonic time `at`."""
        self.renewed_at = max(self.renewed_at, at)

    def renew(self) -> bool:
        """Refresh the heartbeat while this attempt holds the item; False if it does not."""
        with session_scope(self.settings.database_url) as session:
            return renew(session, self.kind, self.item_id, self.attempt)

    def check(self) -> bool:
        """Renew now (not waiting for the thread); whether this attempt still holds the
        item."""
        started = time.monotonic()
        if self.renew():
            self.renewed(started)
        else:
            self.lose()
        return not self.lost

    def _run(self) -> None:
        expired_logged = False
        name = self.kind.name
        while not self._stop.wait(self.interval):
            started = time.monotonic()
            try:
                held = self.renew()
            except Exception:  # a database blip: the next beat tries again
                log.warning("%s %s: heartbeat failed, %.1f s after the last renewal (lease "
                            "%g s)", name, self.item_id, started - self.renewed_at,
                            self.lease, exc_info=True)
                if self.expired and not expired_logged:
                    expired_logged = True
                    log.error("%s %s attempt %d: no renewal for a whole lease; stopping",
                              name, self.item_id, self.attempt)
                continue
            if not held:
                if not self._stop.is_set():  # (after stop(): the final write won the race)
                    log.warning("%s %s attempt %d: the lease is lost (re-queued or finished "
                                "elsewhere); stopping", name, self.item_id, self.attempt)
                    self.gone = True
                return
            late = started - self.renewed_at
            if late > self.lease / 2:
                log.warning("%s %s: heartbeat renewed %.1f s after the previous one (lease "
                            "%g s)", name, self.item_id, late, self.lease)
            self.renewed(started)


@dataclass(frozen=True)
class Work(Generic[W, R]):
    """What one kind's worker gives the runner."""

    kind: WorkKind
    # queued -> running in the session (None: not queued any more); may raise
    # app.domain.lifecycle.NotAdmitted
    claim: Callable[[Session, Settings, str, str], Claim[W] | None]
    # the work of a claimed attempt, under its heartbeat; raises Lost when the lease is
    # lost, Failed (stored as it is) or any exception (stored as public_error) to fail
    run: Callable[[Settings, Claim[W], Heartbeat], R]
    # store the result while the attempt holds the item: "succeeded" (or "cancelled",
    # "failed"), "lost" if it does not; it stops the heartbeat before its final write
    finish: Callable[[Settings, Claim[W], R, Heartbeat], str]
    # running -> failed with this error while the attempt holds the item; None: Claim.fail
    fail: Callable[[Session, Claim[W], str], bool] | None = None
    # the id whose listeners hear of the attempt's start and end (app.infra.bus); None: none
    subject: Callable[[Claim[W]], str] | None = None


def run(settings: Settings, work: Work[W, R], item_id: str, hostname: str) -> str:
    """Run one delivery of an item: succeeded (or what `finish` says), failed, lost,
    skipped or deferred."""
    try:
        with session_scope(settings.database_url) as session:
            claimed = work.claim(session, settings, item_id, worker_name(hostname))
    except NotAdmitted:
        log.info("%s %s: not admitted now (its tenant's running limit); deferred",
                 work.kind.name, item_id)
        enqueue(settings.broker_url, settings.queue, work.kind.task, item_id,
                countdown=DEFER_SECONDS)
        return "deferred"
    return run_claimed(settings, work, item_id, claimed)


def run_claimed(settings: Settings, work: Work[W, R], item_id: str, claimed: Claim[W] | None
                ) -> str:
    """Run a claimed attempt to its end; "skipped" without a claim."""
    if claimed is None:
        log.info("%s %s: not queued any more, nothing to do", work.kind.name, item_id)
        return "skipped"
    subject = work.subject(claimed) if work.subject is not None else None
    if subject is not None:
        notify(settings, subject)
    try:
        # the heartbeat holds the lease from here to the final write, finish included
        with Heartbeat(settings, work.kind, item_id, claimed.attempt) as heartbeat:
            return _attempt(settings, work, item_id, claimed, heartbeat)
    finally:
        if subject is not None:
            notify(settings, subject)


def _attempt(settings: Settings, work: Work[W, R], item_id: str, claimed: Claim[W],
             heartbeat: Heartbeat) -> str:
    name = work.kind.name
    try:
        result = work.run(settings, claimed, heartbeat)
    except Lost:
        log.warning("%s %s attempt %d: the lease was lost during the run; nothing stored",
                    name, item_id, claimed.attempt)
        return "lost"
    except Exception as exc:
        if not isinstance(exc, Failed):
            log.exception("%s %s failed", name, item_id)
        heartbeat.stop()
        with session_scope(settings.database_url) as session:
            error = public_error(exc, name)
            done = (claimed.fail(session, error) if work.fail is None
                    else work.fail(session, claimed, error))
        return "failed" if done else "lost"
    if heartbeat.gone:
        # Finished without the lease: nothing is written, the item is another attempt's,
        # or the sweep's once it sees the stale heartbeat.
        log.warning("%s %s attempt %d: the lease was lost during the run; nothing stored",
                    name, item_id, claimed.attempt)
        return "lost"
    return work.finish(settings, claimed, result, heartbeat)


def stop_and_finish(heartbeat: Heartbeat, settings: Settings,
                    write: Callable[[Session], bool]) -> str:
    """The usual final write: stop the heartbeat, write in one transaction; "succeeded",
    or "lost" when the attempt no longer holds the item."""
    heartbeat.stop()
    with session_scope(settings.database_url) as session:
        done = write(session)
    return "succeeded" if done else "lost"
