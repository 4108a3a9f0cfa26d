"""outbox: messages owed to the broker, committed with the row they name

Revision ID: 0007o
Revises: 0006i
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007o"
down_revision: str | None = "0006i"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("ref_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_outbox_created_at", "outbox", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_outbox_created_at", table_name="outbox")
    op.drop_table("outbox")
