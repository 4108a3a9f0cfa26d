"""search_results: the non-zero weights of each fit of an L1-regularised model (the
regularisation path of a search: the non-zero count against C)

Revision ID: 0013_h27svc
Revises: 0012_h29batch
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_h27svc"
down_revision: str | None = "0012_h29batch"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("search_results") as batch:
        batch.add_column(sa.Column("nonzero_weights", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("search_results") as batch:
        batch.drop_column("nonzero_weights")
