"""Alembic upgrade/downgrade round-trips on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support import downgrade, migrate, postgres_schema

TABLES = {"datasets", "jobs", "job_events", "models", "evaluations", "tenants", "api_keys",
          "idempotency_keys"}


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


def _round_trip(url: str) -> None:
    migrate(url)
    assert _tables(url) == TABLES
    downgrade(url, "base")
    assert _tables(url) == set()
    migrate(url)
    assert _tables(url) == TABLES


def test_sqlite_round_trip(tmp_path: Path) -> None:
    _round_trip(f"sqlite:///{tmp_path / 'm.sqlite'}")


@pytest.mark.postgres
def test_postgres_round_trip() -> None:
    with postgres_schema() as url:
        _round_trip(url)

