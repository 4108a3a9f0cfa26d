"""Read and write sessions on a real SQLite file (and the read-only guard on PostgreSQL too).

A read session must not take SQLite's write lock: an API request's session is closed only
after its response is sent, and a read that held the lock until then made the worker (and
any other writer) wait for it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.domain.orm import Dataset, Tenant
from app.infra.db import read_sessionmaker_for, session_scope, write_sessionmaker_for
from tests.support import migrate, postgres_schema, sqlite_write_lock_error

TENANT = "t" * 32


def _dataset(name: str) -> Dataset:
    return Dataset(name=name, tenant_id=TENANT, rows=1, features=1, nnz=1, labels=[1.0],
                   class_counts={"1": 1}, sha256="0" * 64, size_bytes=1, blob_path="/none")


def _migrate_with_tenant(url: str) -> None:
    migrate(url)
    with session_scope(url) as session:
        session.add(Tenant(id=TENANT, name="test"))


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'hinge.sqlite'}"
    _migrate_with_tenant(url)
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, sqlite_url: str) -> Iterator[str]:
    if request.param == "sqlite":
        yield sqlite_url
        return
    with postgres_schema() as url:
        _migrate_with_tenant(url)
        yield url




def test_an_open_read_session_leaves_the_write_lock_free(sqlite_url: str) -> None:
    with session_scope(sqlite_url) as session:
        session.add(_dataset("one"))
    with read_sessionmaker_for(sqlite_url)() as session:
        assert session.scalar(select(func.count()).select_from(Dataset)) == 1
        assert session.in_transaction()
        assert sqlite_write_lock_error(sqlite_url) is None


def test_an_open_write_session_holds_the_write_lock(sqlite_url: str) -> None:
    with write_sessionmaker_for(sqlite_url)() as session:
        session.scalar(select(func.count()).select_from(Dataset))
        assert sqlite_write_lock_error(sqlite_url) == "database is locked"
        session.commit()
        assert sqlite_write_lock_error(sqlite_url) is None


def test_a_read_session_reads_while_another_connection_writes(sqlite_url: str) -> None:
    writer = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        writer.execute("UPDATE datasets SET name = name")
        with read_sessionmaker_for(sqlite_url)() as session:
            assert session.scalar(select(func.count()).select_from(Dataset)) == 0
    finally:
        writer.execute("ROLLBACK")
        writer.close()


def test_a_read_session_refuses_to_write(database_url: str) -> None:
    with read_sessionmaker_for(database_url)() as session:
        session.add(_dataset("sneaky"))
        with pytest.raises(RuntimeError, match="a read session cannot write"):
            session.commit()
    with read_sessionmaker_for(database_url)() as session:
        assert session.scalar(select(func.count()).select_from(Dataset)) == 0
    with session_scope(database_url) as session:
        session.add(_dataset("allowed"))
    with read_sessionmaker_for(database_url)() as session:
        assert session.scalars(select(Dataset.name)).all() == ["allowed"]


def test_actions_follow_the_outcome_of_the_transaction(database_url: str) -> None:
    from app.infra.db import after_commit, after_rollback

    ran: list[str] = []
    with session_scope(database_url) as session:
        session.add(_dataset("kept"))
        after_commit(session, lambda: ran.append("committed"))
        after_rollback(session, lambda: ran.append("rolled back"))
    assert ran == ["committed"]

    ran.clear()
    with pytest.raises(ValueError), session_scope(database_url) as session:
        session.add(_dataset("dropped"))
        session.flush()
        after_commit(session, lambda: ran.append("committed"))
        after_rollback(session, lambda: ran.append("rolled back"))
        raise ValueError("the handler failed")
    assert ran == ["rolled back"]

    ran.clear()
    with pytest.raises(ValueError), session_scope(database_url) as session:
        after_rollback(session, lambda: ran.append("rolled back"))  # before any statement
        raise ValueError("the handler failed")
    assert ran == ["rolled back"]
    with read_sessionmaker_for(database_url)() as session:
        assert session.scalars(select(Dataset.name)).all() == ["kept"]
