"""idempotency_keys: the process that holds a key in progress and its lease, so that a
key whose holder died is free again (issue 24, item 3)

Revision ID: 0006i
Revises: 0004s
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006i"
down_revision: str | None = "0004s"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.add_column(sa.Column("holder", sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column("lease_until", sa.DateTime(timezone=True),
                                      nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_column("lease_until")
        batch_op.drop_column("holder")
