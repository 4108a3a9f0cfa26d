"""imports: datasets read by workers from part files in S3 or under HINGE_IMPORT_ROOTS
(POST /v1/imports), a durable work item, and its parts (each parsed by whichever worker
takes it; a part done keeps its shards across attempts)

Revision ID: 0016_h43imp
Revises: 0015_h43shards
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_h43imp"
down_revision: str | None = "0015_h43shards"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "imports",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("tenant_id", sa.String(length=32), sa.ForeignKey("tenants.id"),
                  nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("task", sa.String(length=16), nullable=False,
                  server_default="classification"),
        sa.Column("source", sa.JSON(), nullable=False),
        sa.Column("dataset_id", sa.String(length=32), nullable=False),
        sa.Column("parts_total", sa.Integer(), nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("error_detail", sa.JSON(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("queued_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    for column in ("tenant_id", "dataset_id", "status"):
        op.create_index(f"ix_imports_{column}", "imports", [column])
    op.create_table(
        "import_parts",
        sa.Column("import_id", sa.String(length=32),
                  sa.ForeignKey("imports.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("part", sa.Integer(), primary_key=True),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("bytes_done", sa.BigInteger(), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("nnz", sa.BigInteger(), nullable=False),
        sa.Column("features", sa.Integer(), nullable=False),
        sa.Column("text_bytes", sa.BigInteger(), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=True),
        sa.Column("class_counts", sa.JSON(), nullable=True),
        sa.Column("shards", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_line", sa.Integer(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("import_parts")
    for column in ("status", "dataset_id", "tenant_id"):
        op.drop_index(f"ix_imports_{column}", table_name="imports")
    op.drop_table("imports")
