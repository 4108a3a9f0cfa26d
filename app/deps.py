"""Typed FastAPI dependencies."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.db import read_sessionmaker_for, write_sessionmaker_for
from app.settings import Settings


def get_settings_dep(request: Request) -> Settings:
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
    """A write session. Handlers commit before they return: the teardown runs only after
    the response is sent, and until then an open SQLite write transaction blocks every
    other writer."""
    session = write_sessionmaker_for(settings.database_url)()
    try:
        yield session
    finally:
        session.close()


SessionDep = Annotated[Session, Depends(get_session)]
WriteSessionDep = Annotated[Session, Depends(get_write_session)]
