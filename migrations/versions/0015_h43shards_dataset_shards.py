"""datasets: row shards and the value layout (solvers/shards.py)

A dataset stored as several row shards lists them in `shards` (each its blob reference,
rows, non-zeros and bytes); NULL is a dataset of one shard, its `blob_path`.
`value_dtype` is the layout of its values: float64, or float32 (the compact layout, 8
bytes a non-zero with the int32 indices).

Revision ID: 0015_h43shards
Revises: 0014_h26svc3
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015_h43shards"
down_revision: str | None = "0014_h26svc3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("shards", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("value_dtype", sa.String(8), nullable=False,
                                   server_default="float64"))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("value_dtype")
        batch.drop_column("shards")
