"""SQLite's writers wait in line, for a bounded time (app.infra.db.WriteGate), on a real file.

Writers of one process take turns first come, first served; a writer that cannot begin
within the bound raises DatabaseBusy with nothing written, and the line is never left
blocked by a transaction that ended (committed, rolled back, failed)."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.domain.orm import Tenant
from app.infra.db import READ_ONLY, DatabaseBusy, WriteGate, make_engine
from tests.support import migrate

WAIT = 0.5  # the bound of the engine under test


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'gate.sqlite'}"
    migrate(url)
    return url


@pytest.fixture
def sessions(database: str) -> sessionmaker[Session]:
    return sessionmaker(bind=make_engine(database, write_wait_seconds=WAIT))


def _tenants(url: str) -> int:
    with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM tenants").fetchone()[0])


def test_the_gate_serves_writers_in_the_order_they_came() -> None:
    gate, holder = WriteGate(), object()
    assert gate.acquire(holder, timeout=1)
    served: list[int] = []

    def writer(number: int) -> None:
        owner = object()
        assert gate.acquire(owner, timeout=10)
        served.append(number)
        gate.release(owner)

    threads = []
    for number in range(8):
        thread = threading.Thread(target=writer, args=(number,))
        thread.start()
        threads.append(thread)
        time.sleep(0.05)  # each one in line before the next comes
    gate.release(holder)
    for thread in threads:
        thread.join(10)
    assert served == list(range(8))


def test_a_writer_that_waits_past_the_bound_gives_up_and_leaves_the_line() -> None:
    gate, holder, late = WriteGate(), object(), object()
    assert gate.acquire(holder, timeout=1)
    started = time.monotonic()
    assert not gate.acquire(late, timeout=0.2)
    assert 0.2 <= time.monotonic() - started < 2
    gate.release(late)  # not the owner: nothing happens
    assert gate.holds(holder)
    gate.release(holder)
    assert gate.acquire(late, timeout=0)  # the line is empty again


def test_a_forked_process_starts_with_a_free_line() -> None:
    # a Celery pool process is forked from a parent that may have used the database
    gate, holder = WriteGate(), object()
    assert gate.acquire(holder, timeout=1)
    pid = os.fork()
    if pid == 0:  # the child: its parent's holder does not exist here
        os._exit(0 if gate.acquire(object(), timeout=0.1) else 1)
    _, status = os.waitpid(pid, 0)
    assert gate.holds(holder)  # the parent's line is untouched
    gate.release(holder)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_write_blocked_past_the_bound_raises_database_busy_and_writes_nothing(
    database: str, sessions: sessionmaker[Session]
) -> None:
    other = sqlite3.connect(database.removeprefix("sqlite:///"), isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
    try:
        started = time.monotonic()
        with pytest.raises(DatabaseBusy), sessions() as session:
            session.add(Tenant(name="blocked"))
            session.commit()
        assert WAIT * 0.9 <= time.monotonic() - started < WAIT + 2
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert _tenants(database) == 0
    with sessions() as session:  # the line was left free: the next write goes through
        session.add(Tenant(name="after"))
        session.commit()
    assert _tenants(database) == 1


def test_writers_in_line_past_the_bound_give_up_while_the_first_one_holds_the_lock(
    database: str, sessions: sessionmaker[Session]
) -> None:
    first = sessions()
    first.add(Tenant(name="first"))
    first.flush()  # BEGIN IMMEDIATE: the first writer holds the gate and the lock
    try:
        with pytest.raises(DatabaseBusy), sessions() as second:
            second.add(Tenant(name="second"))
            second.commit()
    finally:
        first.commit()
        first.close()
    assert _tenants(database) == 1


@pytest.mark.parametrize("ending", ["commit", "rollback", "error"])
def test_every_way_a_transaction_ends_frees_the_line(
    database: str, sessions: sessionmaker[Session], ending: str
) -> None:
    session = sessions()
    session.add(Tenant(name=f"by-{ending}"))
    if ending == "error":
        session.add(Tenant(name=f"by-{ending}"))  # the same unique name: the flush fails
        with pytest.raises(Exception, match="UNIQUE"):
            session.flush()
    else:
        session.flush()
        getattr(session, ending)()
    session.close()
    started = time.monotonic()
    with sessions() as again:  # would wait the whole bound if the gate were still taken
        again.add(Tenant(name="next"))
        again.commit()
    assert time.monotonic() - started < WAIT / 2


def test_reads_never_wait_in_the_writers_line(
    database: str, sessions: sessionmaker[Session]
) -> None:
    writer = sessions()
    writer.add(Tenant(name="held"))
    writer.flush()
    try:
        engine = writer.get_bind()
        reader = sessionmaker(bind=engine.execution_options(**{READ_ONLY: True}))()
        started = time.monotonic()
        assert reader.scalar(select(func.count()).select_from(Tenant)) == 0
        assert time.monotonic() - started < WAIT / 2
        reader.close()
    finally:
        writer.rollback()
        writer.close()
