"""models.origin: where a model came from ({"source": "imported", "format", "file_name",
"sha256", ...} for an uploaded LIBSVM or LIBLINEAR file; NULL for a trained model)

Revision ID: 0008_h28onnx
Revises: 0007o
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_h28onnx"
down_revision: str | None = "0007o"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.add_column(sa.Column("origin", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_column("origin")
