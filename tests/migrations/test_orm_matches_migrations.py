"""The ORM (app/domain/orm.py) and the Alembic migrations describe the same schema.

`alembic upgrade head` builds the database, then Alembic's autogenerate comparison looks
for anything the ORM declares that the migrations did not create (or the reverse): tables,
columns, types, nullability, indexes, unique constraints, foreign keys. An ORM change
without its migration fails here, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from app.domain.orm import Base
from tests.support import migrate, postgres_schema


def _differences(url: str, metadata: sa.MetaData) -> list[Any]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"compare_type": True, "compare_server_default": False}
            )
            return list(compare_metadata(context, metadata))
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def migrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'schema.sqlite'}"
        migrate(url)
        yield url
    else:
        with postgres_schema() as url:
            migrate(url)
            yield url


def test_orm_and_migrations_agree(migrated_url: str) -> None:
    assert _differences(migrated_url, Base.metadata) == []


def test_the_comparison_sees_a_column_the_migrations_lack(migrated_url: str) -> None:
    # The check above is only worth something if a drift shows up: declare one more column
    # on a copy of the ORM's metadata and expect exactly that difference.
    drifted = sa.MetaData()
    for table in Base.metadata.sorted_tables:
        table.to_metadata(drifted)
    drifted.tables["jobs"].append_column(sa.Column("drift_check", sa.Integer, nullable=True))
    differences = _differences(migrated_url, drifted)
    assert [(d[0], d[3].name) for d in differences if d[0] == "add_column"] == [
        ("add_column", "drift_check")
    ]
    assert len(differences) == 1
