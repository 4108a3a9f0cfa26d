"""Alembic environment: URL from the Hinge settings unless the caller set one."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from app.domain.orm import Base
from app.infra.db import make_engine
from app.settings import Settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = config.get_main_option("sqlalchemy.url")
    if url:
        return url
    settings = Settings()
    settings.ensure_dirs()
    return settings.database_url


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def _sqlite_foreign_keys(connection: Connection, on: bool) -> None:
    """SQLite's foreign keys, switched outside any transaction (inside one the pragma does
    nothing). Batch mode rebuilds a table by copying it and dropping the old one, and with
    foreign keys on, that drop runs the children's ON DELETE actions: every job's events and
    evaluations would be deleted and every job's dataset set to NULL."""
    raw = connection.connection.dbapi_connection
    assert raw is not None
    raw.execute(f"PRAGMA foreign_keys={'ON' if on else 'OFF'}")


def run_migrations_online() -> None:
    engine = make_engine(_url())
    with engine.connect() as connection:
        sqlite = connection.dialect.name == "sqlite"
        if sqlite:
            _sqlite_foreign_keys(connection, False)
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=True)
        try:
            with context.begin_transaction():
                context.run_migrations()
                if sqlite:  # what the switched-off checks would have refused
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").all()
                    if broken:
                        raise RuntimeError(f"the migration broke foreign keys: {broken[:10]}")
        finally:
            if sqlite:
                _sqlite_foreign_keys(connection, True)
    engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
