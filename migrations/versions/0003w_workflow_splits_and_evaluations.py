"""workflow: dataset splits (parent, part, seed) and model evaluations

Revision ID: 0003w
Revises: 0002
Create Date: 2026-11-30 09:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003w"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("parent_id", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("split_part", sa.String(length=8), nullable=True))
        batch_op.add_column(sa.Column("split_seed", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("split_test_fraction", sa.Float(), nullable=True))
        batch_op.add_column(sa.Column("split_stratified", sa.Boolean(), nullable=True))
        batch_op.create_index(batch_op.f("ix_datasets_parent_id"), ["parent_id"], unique=False)
        batch_op.create_foreign_key("fk_datasets_parent_id_datasets", "datasets",
                                    ["parent_id"], ["id"], ondelete="SET NULL")
    op.create_table(
        "evaluations",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("model_id", sa.String(length=32), nullable=False),
        sa.Column("dataset_id", sa.String(length=32), nullable=True),
        sa.Column("dataset_name", sa.String(length=255), nullable=False),
        sa.Column("rows", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["dataset_id"], ["datasets.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["model_id"], ["models.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_evaluations_dataset_id"), ["dataset_id"],
                              unique=False)
        batch_op.create_index(batch_op.f("ix_evaluations_model_id"), ["model_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_evaluations_status"), ["status"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("evaluations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_evaluations_status"))
        batch_op.drop_index(batch_op.f("ix_evaluations_model_id"))
        batch_op.drop_index(batch_op.f("ix_evaluations_dataset_id"))
    op.drop_table("evaluations")
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_constraint("fk_datasets_parent_id_datasets", type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_datasets_parent_id"))
        batch_op.drop_column("split_stratified")
        batch_op.drop_column("split_test_fraction")
        batch_op.drop_column("split_seed")
        batch_op.drop_column("split_part")
        batch_op.drop_column("parent_id")
