"""datasets: the summary of a dataset's instance weights (its blob holds them as `w`)

Revision ID: 0014_h26svc3
Revises: 0013_h27svc
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_h26svc3"
down_revision: str | None = "0013_h27svc"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("weight_stats", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("weight_stats")
