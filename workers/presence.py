"""A worker process's presence in the `workers` table (app/domain/services/workers.py): `warming`
while it loads the solver kernels, `ready` after, a heartbeat from a thread, its row
removed when it stops.

Celery's signals drive it (workers/celery_app.py): the node's main process remembers its
concurrency (`worker_init`) and clears the rows of its node name when it starts and stops
(a pool process killed with SIGKILL leaves a row behind); each pool process registers
itself (`worker_process_init`), warms up, reports ready, and removes its row on exit
(`worker_process_shutdown`). Presence is best effort: a database that does not answer
never keeps a worker from running jobs, it only makes the worker look stale.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from app.domain.services import workers
from app.infra.db import make_engine, session_scope
from app.settings import Settings

log = logging.getLogger("hinge.worker")


class Presence:
    """This process's row: register (warming), ready(), a heartbeat thread, stop()."""

    def __init__(self, settings: Settings, hostname: str, concurrency: int) -> None:
        self.settings = settings
        self.hostname = hostname
        self.concurrency = concurrency
        self.interval = max(0.2, settings.worker_stale_seconds / 3)
        self.worker_id: str | None = None
        self.is_ready = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-presence",
                                        daemon=True)

    def start(self) -> Presence:
        self._register()
        self._thread.start()
        return self

    def _register(self) -> None:
        try:
            with session_scope(self.settings.database_url) as session:
                self.worker_id = workers.register_worker(session, self.hostname, os.getpid(),
                                                         self.concurrency)
                if self.is_ready:
                    workers.mark_ready(session, self.worker_id)
        except Exception:
            log.warning("could not record this worker's presence", exc_info=True)

    def ready(self) -> None:
        self.is_ready = True
        self._record(workers.mark_ready, "record that this worker is ready")

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.worker_id is None:
                    self._register()
                    continue
                with session_scope(self.settings.database_url) as session:
                    alive = workers.beat(session, self.worker_id)
                if not alive:  # forgotten by the sweep after a long stall: come back
                    self._register()
            except Exception:  # a database blip: the next beat tries again
                log.warning("worker heartbeat failed", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._record(workers.remove_worker, "remove this worker's presence")

    def _record(self, change: Callable[[Session, str], Any], what: str) -> None:
        """Apply `change` to this worker's row, if it has one; a failure is logged (the
        next beat or the sweep puts things right), never raised."""
        if self.worker_id is None:
            return
        try:
            with session_scope(self.settings.database_url) as session:
                change(session, self.worker_id)
        except Exception:
            log.warning("could not %s", what, exc_info=True)


def clear_node(settings: Settings, hostname: str) -> None:
    """Remove the rows of a node name, from the node's main process.

    A throwaway engine, disposed at once: the main process forks the pool processes, which
    must not inherit open database connections."""
    engine = make_engine(settings.database_url)
    try:
        with Session(engine) as session, session.begin():
            workers.remove_node(session, hostname)
    except Exception:
        log.warning("could not clear the presence rows of %s", hostname, exc_info=True)
    finally:
        engine.dispose()
