"""Engine and sessions. SQLite gets WAL, a busy timeout and foreign keys on every connection.

Two kinds of session. A write session (`session_scope`, `write_sessionmaker_for`) begins
with BEGIN IMMEDIATE on SQLite, so concurrent writers queue for the write lock. A read
session (`read_sessionmaker_for`) begins a deferred transaction: under WAL it reads a
snapshot without taking the write lock, so it never waits for the worker and never makes
the worker wait, however long the request holding it lasts. A read session refuses to
flush changes, so a handler that writes through one fails loudly in the tests.

A write session is a unit of work: `session_scope` commits when its block ends and rolls
back when it raises; the API's write dependency (app.api.deps) is the same scope around a
handler. Work outside the database that must follow the transaction's outcome (deleting a
dataset's file once its row is gone, removing a stored file whose row was never written)
is registered with `after_commit` / `after_rollback`.

SQLite's writers wait in line, for a bounded time. Within a process they queue first on
the database's `WriteGate`, first come first served, and only the one at its head waits
for SQLite's own lock (held at most by one writer of each other process: the worker, a
second API process). SQLite's busy handler polls with growing sleeps and favours no one,
so 40 request threads polling it made some wait past any bound while others went
through; in line, a writer waits for those ahead of it only. A writer that cannot begin
within `sqlite_write_wait_seconds` (gate and lock together) gets `DatabaseBusy`, which the
API answers with 503 and Retry-After: its transaction never began, so nothing was written.
The pool holds enough connections for every thread of the process (a request waiting in
line holds one), so it is never the pool that times out.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 30_000  # for statements outside a write transaction's BEGIN
PG_POOL_MAX = 40  # PostgreSQL: connections at most per process (10 kept open)
SQLITE_POOL_SIZE = 20  # kept open; more are opened while threads need them (no limit)
READ_ONLY = "hinge_read_only"  # execution option and Session.info key of read sessions
AFTER_COMMIT = "hinge_after_commit"  # Session.info keys of the actions that follow
AFTER_ROLLBACK = "hinge_after_rollback"  # the transaction's outcome

log = logging.getLogger("hinge.db")


class DatabaseBusy(Exception):
    """A write transaction could not begin in time: SQLite's write lock stayed taken."""

    def __init__(self, waited: float) -> None:
        super().__init__(f"the database is busy: no write lock within {waited:.1f} s")
        self.waited = waited


class WriteGate:
    """The line of one process's writers to one SQLite file: first come, first served.

    `acquire` hands the gate to one owner (a connection) at a time; `release` by its owner
    hands it straight to the next in line, so a writer never loses its turn to one that
    came later."""

    def __init__(self) -> None:
        self._reset()
        _GATES.add(self)

    def _reset(self) -> None:
        self._mutex = threading.Lock()
        self._owner: object | None = None
        self._line: deque[tuple[threading.Event, object]] = deque()

    def acquire(self, owner: object, timeout: float) -> bool:
        with self._mutex:
            if self._owner is None and not self._line:
                self._owner = owner
                return True
            turn = threading.Event()
            self._line.append((turn, owner))
        if turn.wait(timeout):
            return True
        with self._mutex:
            if turn.is_set():  # handed over just as the wait ended
                return True
            self._line.remove((turn, owner))
            return False

    def release(self, owner: object) -> None:
        with self._mutex:
            if self._owner is not owner:
                return
            if self._line:
                turn, self._owner = self._line.popleft()
                turn.set()
            else:
                self._owner = None

    def holds(self, owner: object) -> bool:
        return self._owner is owner


_GATES: weakref.WeakSet[WriteGate] = weakref.WeakSet()


def _free_gates_in_child() -> None:
    # A forked process (a Celery pool process) has none of its parent's threads: a gate
    # its parent held, or a line it had, would never move in the child.
    for gate in list(_GATES):
        gate._reset()


os.register_at_fork(after_in_child=_free_gates_in_child)


class _GatedConnection(sqlite3.Connection):
    """A SQLite connection that takes its process's place in line (`WriteGate`) before
    BEGIN IMMEDIATE and leaves it once its transaction has ended, whichever way."""

    gate: WriteGate | None = None
    write_wait: float = SQLITE_BUSY_TIMEOUT_MS / 1000

    def begin_immediate(self) -> None:
        gate = self.gate
        if gate is None:
            self.execute("BEGIN IMMEDIATE")
            return
        started = time.monotonic()
        if not gate.acquire(self, self.write_wait):
            raise DatabaseBusy(time.monotonic() - started)
        try:
            left = self.write_wait - (time.monotonic() - started)
            self.execute(f"PRAGMA busy_timeout={max(1, int(left * 1000))}")
            self.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            gate.release(self)
            if "locked" in str(exc) or "busy" in str(exc):
                raise DatabaseBusy(time.monotonic() - started) from exc
            raise
        except BaseException:
            gate.release(self)
            raise
        self.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")

    def _leave(self) -> None:
        if self.gate is not None:
            self.gate.release(self)

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self._leave()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self._leave()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._leave()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # Let SQLAlchemy emit BEGIN itself (see _sqlite_begin) instead of the driver.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    # Writers: BEGIN IMMEDIATE takes the write lock up front, so concurrent writers queue
    # (WriteGate, then the lock) instead of failing with "database is locked" when a
    # deferred read transaction tries to upgrade to a write. Readers: a deferred BEGIN,
    # which under WAL never takes (or waits for) the write lock.
    if connection.get_execution_options().get(READ_ONLY):
        connection.exec_driver_sql("BEGIN")
        return
    dbapi_connection = connection.connection.dbapi_connection
    if isinstance(dbapi_connection, _GatedConnection):
        dbapi_connection.begin_immediate()
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _refuse_writes(session: Session, _context: Any, _instances: Any) -> None:
    if session.info.get(READ_ONLY) and (session.new or session.dirty or session.deleted):
        raise RuntimeError("a read session cannot write: use a write session "
                           "(app.api.deps.WriteSessionDep or app.infra.db.session_scope)")


def after_commit(session: Session, action: Callable[[], None]) -> None:
    """Run `action` once the session's transaction has committed; never if it rolls back."""
    session.info.setdefault(AFTER_COMMIT, []).append(action)


def after_rollback(session: Session, action: Callable[[], None]) -> None:
    """Run `action` if the session's transaction rolls back; never if it commits."""
    session.info.setdefault(AFTER_ROLLBACK, []).append(action)


def _run_actions(session: Session, run: str, drop: str) -> None:
    session.info.pop(drop, None)
    for action in session.info.pop(run, []):
        try:
            action()
        except Exception:  # the transaction's outcome stands; the action only follows it
            log.exception("an action after the transaction failed")


def _on_commit(session: Session) -> None:
    _run_actions(session, AFTER_COMMIT, AFTER_ROLLBACK)


def _on_rollback(session: Session) -> None:
    _run_actions(session, AFTER_ROLLBACK, AFTER_COMMIT)


def make_engine(url: str, write_wait_seconds: float | None = None) -> Engine:
    """An engine for `url`; on SQLite, a write transaction that cannot begin within
    `write_wait_seconds` (default: the setting `sqlite_write_wait_seconds`) raises
    DatabaseBusy."""
    if url.startswith("sqlite"):
        if write_wait_seconds is None:
            from app.settings import get_settings

            write_wait_seconds = get_settings().sqlite_write_wait_seconds
        gate, wait = WriteGate(), write_wait_seconds
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "factory": _GatedConnection,
                          "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_pre_ping=True, pool_size=SQLITE_POOL_SIZE, max_overflow=-1,
        )

        def _connected(dbapi_connection: Any, record: Any) -> None:
            if isinstance(dbapi_connection, _GatedConnection):
                dbapi_connection.gate, dbapi_connection.write_wait = gate, wait
            _sqlite_pragmas(dbapi_connection, record)

        event.listen(engine, "connect", _connected)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    # A request holds at most one pooled connection at a time (app.api.deps), and the pool
    # has one for each thread of the API's thread pool (anyio's 40): a burst of submissions
    # queues on the submission lock, never on the pool's 30 s timeout (a soak on PostgreSQL
    # + RabbitMQ with a pool of 30 answered 7 requests 503 so). Mind PostgreSQL's
    # max_connections (100 by default): every API and worker process of a deployment
    # shares it (docs/operations.md).
    return create_engine(url, pool_pre_ping=True, pool_size=10,
                         max_overflow=PG_POOL_MAX - 10)


@lru_cache(maxsize=8)
def engine_for(url: str) -> Engine:
    return make_engine(url)


@lru_cache(maxsize=8)
def write_sessionmaker_for(url: str) -> sessionmaker[Session]:
    factory = sessionmaker(bind=engine_for(url), expire_on_commit=False)
    event.listen(factory, "after_commit", _on_commit)
    event.listen(factory, "after_rollback", _on_rollback)
    return factory


@lru_cache(maxsize=8)
def read_sessionmaker_for(url: str) -> sessionmaker[Session]:
    factory = sessionmaker(bind=engine_for(url).execution_options(**{READ_ONLY: True}),
                           expire_on_commit=False, info={READ_ONLY: True})
    event.listen(factory, "before_flush", _refuse_writes)
    return factory


@contextmanager
def session_scope(url: str) -> Iterator[Session]:
    """A write session that commits when the block ends and rolls back if it raises."""
    session = write_sessionmaker_for(url)()
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        _on_rollback(session)  # also when no statement had begun a transaction
        raise
    finally:
        session.close()
