"""uploads: resumable upload sessions (POST /v1/uploads): the declared size, the
dataset's options, the bytes received, and the dataset the session completed into; the
staged bytes themselves are a file under HINGE_HOME/uploads

Revision ID: 0017_h43up
Revises: 0016_h43imp
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017_h43up"
down_revision: str | None = "0016_h43imp"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "uploads",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("tenant_id", sa.String(length=32), sa.ForeignKey("tenants.id"),
                  nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("options", sa.JSON(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("staged", sa.BigInteger(), nullable=False),
        sa.Column("bytes_received", sa.BigInteger(), nullable=False),
        sa.Column("parts", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("dataset_id", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    )
    for column in ("tenant_id", "expires_at"):
        op.create_index(f"ix_uploads_{column}", "uploads", [column])


def downgrade() -> None:
    for column in ("expires_at", "tenant_id"):
        op.drop_index(f"ix_uploads_{column}", table_name="uploads")
    op.drop_table("uploads")
