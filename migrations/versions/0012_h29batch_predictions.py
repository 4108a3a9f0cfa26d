"""predictions: batch predictions of a model over a stored dataset, as durable work items

Revision ID: 0012_h29batch
Revises: 0011_h29reg
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_h29batch"
down_revision: str | None = "0011_h29reg"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "predictions",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("tenant_id", sa.String(length=32), sa.ForeignKey("tenants.id"),
                  nullable=False),
        sa.Column("model_id", sa.String(length=32),
                  sa.ForeignKey("models.id", ondelete="CASCADE"), nullable=False),
        sa.Column("dataset_id", sa.String(length=32),
                  sa.ForeignKey("datasets.id", ondelete="SET NULL"), nullable=True),
        sa.Column("dataset_name", sa.String(length=255), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("outputs", sa.JSON(), nullable=False),
        sa.Column("rows_done", sa.BigInteger(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("output_path", sa.String(length=512), nullable=True),
        sa.Column("output_bytes", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    for column in ("tenant_id", "model_id", "dataset_id", "status"):
        op.create_index(f"ix_predictions_{column}", "predictions", [column])


def downgrade() -> None:
    for column in ("status", "dataset_id", "model_id", "tenant_id"):
        op.drop_index(f"ix_predictions_{column}", table_name="predictions")
    op.drop_table("predictions")
