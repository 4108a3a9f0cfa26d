"""Alembic upgrade/downgrade round-trips on SQLite and PostgreSQL, and upgrades of a
database with rows in it."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.support import downgrade, migrate, postgres_schema

TABLES = {"datasets", "jobs", "job_events", "models", "evaluations", "tenants", "api_keys",
          "idempotency_keys", "workers", "searches", "search_tasks", "search_results",
          "outbox", "registered_models", "model_versions", "model_aliases",
          "model_alias_moves", "predictions", "imports", "import_parts", "uploads"}


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


ROWS = {  # the rows of every table of 0003w: (revision that has the table, insert)
    "datasets": ("0002", "INSERT INTO datasets (id, name, rows, features, nnz, labels, "
                 "class_counts, sha256, size_bytes, blob_path, created_at) VALUES ('d1', "
                 "'old', 1, 1, 1, '[1]', '{}', 'x', 1, '/x', CURRENT_TIMESTAMP)"),
    "jobs": ("0002", "INSERT INTO jobs (id, dataset_id, solver, params, status, "
             "status_history, attempt, cancel_requested, created_at) VALUES ('j1', 'd1', "
             "'dcd', '{}', 'succeeded', '[]', 1, false, CURRENT_TIMESTAMP)"),
    "job_events": ("0002", "INSERT INTO job_events (job_id, seq, kind, payload, created_at) "
                   "VALUES ('j1', 1, 'status', '{}', CURRENT_TIMESTAMP)"),
    "models": ("0002", "INSERT INTO models (id, job_id, dataset_id, kind, solver, params, "
               "labels, n_features, result, converged, arrays, size_bytes, created_at) "
               "VALUES ('m1', 'j1', 'd1', 'linear', 'dcd', '{}', '[1]', 1, '{}', true, "
               ":arrays, 1, CURRENT_TIMESTAMP)"),
    "split": ("0003w", "INSERT INTO datasets (id, name, rows, features, nnz, labels, "
              "class_counts, sha256, size_bytes, blob_path, created_at, parent_id, "
              "split_part) VALUES ('d2', 'old (test)', 1, 1, 1, '[1]', '{}', 'x', 1, '/y', "
              "CURRENT_TIMESTAMP, 'd1', 'test')"),
    "evaluations": ("0003w", "INSERT INTO evaluations (id, model_id, dataset_id, "
                    "dataset_name, rows, status, attempt, created_at) VALUES ('e1', 'm1', "
                    "'d2', 'old (test)', 1, 'succeeded', 1, CURRENT_TIMESTAMP)"),
}
REFERENCES = ("SELECT j.dataset_id, m.job_id, d.parent_id, e.model_id, e.dataset_id, "
              "(SELECT COUNT(*) FROM job_events) FROM jobs j, models m, datasets d, "
              "evaluations e WHERE d.id = 'd2'")
KEPT = ("d1", "j1", "d1", "m1", "d2", 1)


def _upgrade_with_rows(url: str) -> None:
    engine = sa.create_engine(url)
    try:
        for revision in ("0002", "0003w"):
            migrate(url, revision)
            with engine.begin() as connection:
                for start, insert in ROWS.values():
                    if start == revision:
                        connection.execute(sa.text(insert).bindparams(
                            *[sa.bindparam("arrays", b"\x00", sa.LargeBinary)]
                            if ":arrays" in insert else []))
        migrate(url)
        with engine.connect() as connection:
            assert tuple(connection.execute(sa.text(REFERENCES)).one()) == KEPT
            for table in ("datasets", "jobs", "models", "evaluations"):
                owners = connection.execute(sa.text(
                    f"SELECT DISTINCT t.name FROM {table} x JOIN tenants t "
                    "ON t.id = x.tenant_id")).scalars().all()
                assert owners == ["default"], table
        downgrade(url, "0003w")
        with engine.connect() as connection:
            assert tuple(connection.execute(sa.text(REFERENCES)).one()) == KEPT
    finally:
        engine.dispose()


def test_sqlite_upgrade_keeps_every_row_and_reference(tmp_path: Path) -> None:
    """Rows made before tenants existed go to tenant "default", and no rebuilt table (SQLite
    batch mode copies and drops tables) takes a job's events, a model's job, a split's
    parent or an evaluation with it."""
    _upgrade_with_rows(f"sqlite:///{tmp_path / 'old.sqlite'}")


@pytest.mark.postgres
def test_postgres_upgrade_keeps_every_row_and_reference() -> None:
    with postgres_schema() as url:
        _upgrade_with_rows(url)
