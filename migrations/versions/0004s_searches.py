"""searches: cross-validated parameter searches, their tasks (claimed and leased by
workers like jobs) and their per-fold results, unique per (search, point, fold)

Revision ID: 0004s
Revises: 0003t
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004s"
down_revision: str | None = "0004r"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _tenant() -> sa.Column:
    return sa.Column("tenant_id", sa.String(length=32), sa.ForeignKey("tenants.id"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "searches",
        sa.Column("id", sa.String(length=32), nullable=False),
        _tenant(),
        sa.Column("dataset_id", sa.String(length=32), nullable=True),
        sa.Column("holdout_dataset_id", sa.String(length=32), nullable=True),
        sa.Column("solver", sa.String(length=32), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("point_specs", sa.JSON(), nullable=False),
        sa.Column("folds", sa.Integer(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("done", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("best", sa.JSON(), nullable=True),
        sa.Column("refit_job_id", sa.String(length=32), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["holdout_dataset_id"], ["datasets.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["refit_job_id"], ["jobs.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_searches_tenant_id", "searches", ["tenant_id"])
    op.create_index("ix_searches_dataset_id", "searches", ["dataset_id"])
    op.create_index("ix_searches_status", "searches", ["status"])
    op.create_table(
        "search_tasks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("search_id", sa.String(length=32), nullable=False),
        _tenant(),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("point_indices", sa.JSON(), nullable=False),
        sa.Column("fold", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["search_id"], ["searches.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("search_id", "number", name="uq_search_tasks_search_number"),
    )
    op.create_index("ix_search_tasks_search_id", "search_tasks", ["search_id"])
    op.create_index("ix_search_tasks_tenant_id", "search_tasks", ["tenant_id"])
    op.create_index("ix_search_tasks_status", "search_tasks", ["status"])
    op.create_table(
        "search_results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("search_id", sa.String(length=32), nullable=False),
        sa.Column("point", sa.Integer(), nullable=False),
        sa.Column("fold", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("fit_seconds", sa.Float(), nullable=False),
        sa.Column("converged", sa.Boolean(), nullable=False),
        sa.Column("exit_reason", sa.String(length=32), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("warm_start", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["search_id"], ["searches.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("search_id", "point", "fold", name="uq_search_results_point_fold"),
    )
    op.create_index("ix_search_results_search_id", "search_results", ["search_id"])


def downgrade() -> None:
    op.drop_index("ix_search_results_search_id", table_name="search_results")
    op.drop_table("search_results")
    for column in ("status", "tenant_id", "search_id"):
        op.drop_index(f"ix_search_tasks_{column}", table_name="search_tasks")
    op.drop_table("search_tasks")
    for column in ("status", "dataset_id", "tenant_id"):
        op.drop_index(f"ix_searches_{column}", table_name="searches")
    op.drop_table("searches")
