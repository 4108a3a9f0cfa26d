"""datasets: the source format of the upload and the feature names the file gave

Revision ID: 0008_h28data
Revises: 0008_h28onnx
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_h28data"
down_revision: str | None = "0008_h28onnx"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("source_format", sa.String(length=16), nullable=False,
                                   server_default="svmlight"))
        batch.add_column(sa.Column("feature_names", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("feature_names")
        batch.drop_column("source_format")
