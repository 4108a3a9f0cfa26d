"""imports: the values' layout an import was asked for (`dtype`: auto, float32 or
float64, as an upload's) and the layout its parts write (`value_dtype`: float32 or
float64 once known; an auto import's turns float64 at the first value of any part that is
not a float32); each part's own layout (`import_parts.value_dtype`), so that the dataset
ends in one

Revision ID: 0018_h43f32
Revises: 0017_h43up
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018_h43f32"
down_revision: str | None = "0017_h43up"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # an import made before this one wrote float64: it goes on doing so
    with op.batch_alter_table("imports") as batch:
        batch.add_column(sa.Column("dtype", sa.String(8), nullable=False,
                                   server_default="float64"))
        batch.add_column(sa.Column("value_dtype", sa.String(8), nullable=True))
    with op.batch_alter_table("import_parts") as batch:
        batch.add_column(sa.Column("value_dtype", sa.String(8), nullable=True))
    op.execute("UPDATE imports SET value_dtype = 'float64'")


def downgrade() -> None:
    with op.batch_alter_table("import_parts") as batch:
        batch.drop_column("value_dtype")
    with op.batch_alter_table("imports") as batch:
        batch.drop_column("value_dtype")
        batch.drop_column("dtype")
