"""Engine and sessions. SQLite gets WAL, a busy timeout and foreign keys on every connection.

Two kinds of session. A write session (`session_scope`, `write_sessionmaker_for`) begins
with BEGIN IMMEDIATE on SQLite, so concurrent writers queue on the busy timeout. A read
session (`read_sessionmaker_for`) begins a deferred transaction: under WAL it reads a
snapshot without taking the write lock, so it never waits for the worker and never makes
the worker wait, however long the request holding it lasts. A read session refuses to
flush changes, so a handler that writes through one fails loudly in the tests.

A write session is a unit of work: `session_scope` commits when its block ends and rolls
back when it raises; the API's write dependency (app.deps) is the same scope around a
handler. Work outside the database that must follow the transaction's outcome (deleting a
dataset's file once its row is gone, removing a stored file whose row was never written)
is registered with `after_commit` / `after_rollback`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

SQLITE_BUSY_TIMEOUT_MS = 30_000
READ_ONLY = "hinge_read_only"  # execution option and Session.info key of read sessions
AFTER_COMMIT = "hinge_after_commit"  # Session.info keys of the actions that follow
AFTER_ROLLBACK = "hinge_after_rollback"  # the transaction's outcome

log = logging.getLogger("hinge.db")


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
    # on the busy timeout instead of failing with "database is locked" when a deferred
    # read transaction tries to upgrade to a write. Readers: a deferred BEGIN, which under
    # WAL never takes (or waits for) the write lock.
    if connection.get_execution_options().get(READ_ONLY):
        connection.exec_driver_sql("BEGIN")
    else:
        connection.exec_driver_sql("BEGIN IMMEDIATE")


def _refuse_writes(session: Session, _context: Any, _instances: Any) -> None:
    if session.info.get(READ_ONLY) and (session.new or session.dirty or session.deleted):
        raise RuntimeError("a read session cannot write: use a write session "
                           "(app.deps.WriteSessionDep or app.db.session_scope)")


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


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000},
            pool_pre_ping=True,
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


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
