"""Typed FastAPI dependencies."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request
from sqlalchemy.orm import Session

from app.infra.db import read_sessionmaker_for, session_scope
from app.settings import Settings


async def get_settings_dep(request: Request) -> Settings:
    """(A coroutine, so FastAPI does not borrow a pool thread just to read app state.)"""
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def get_session(settings: SettingsDep) -> Iterator[Session]:
    """A read session: it never holds SQLite's write lock, so a request that is slow to
    finish (its teardown runs after the response is sent) holds up nobody."""
    session = read_sessionmaker_for(settings.database_url)()
    try:
        yield session
    finally:
        session.close()


def get_write_session(settings: SettingsDep) -> Iterator[Session]:
    """A write session, one unit of work per request: it commits when the handler returns
    and rolls back when it raises. Handlers and services never commit it themselves: a
    state-changing POST commits through app.api.idempotency.Write (its work together with the
    stored answer of its Idempotency-Key), and a service commits only where a row must
    exist before a side effect (an evaluation or a search task before its message).

    Registered with `scope="function"` (WriteSessionDep), so FastAPI runs the code after
    `yield` as soon as the handler has returned, BEFORE it sends the response: a client
    that got its answer sees the change, and no open SQLite write transaction (BEGIN
    IMMEDIATE) outlives the request to block the other writers. With the default
    ("request") scope the commit would run only after the response had been sent; the test
    tests/app/test_write_sessions.py fails if that happens.
    """
    with session_scope(settings.database_url) as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session, scope="function")]


@dataclass(frozen=True)
class Page:
    """A list route's window: at most `limit` rows (1 to 1,000, 100 by default) after the
    first `offset`, newest first."""

    limit: int
    offset: int


def get_page(limit: int = Query(100, ge=1, le=1000),
             offset: int = Query(0, ge=0, le=1_000_000_000)) -> Page:
    return Page(limit, offset)


PageDep = Annotated[Page, Depends(get_page)]
