"""datasets, jobs and models: the task (classification, regression, outlier); datasets:
the label statistics of a regression dataset

Revision ID: 0010_h26svc
Revises: 0008_h28data
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_h26svc"
down_revision: str | None = "0008_h28data"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TASK_TABLES = ("datasets", "jobs", "models")


def upgrade() -> None:
    for table in TASK_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(
                sa.Column(
                    "task", sa.String(length=16), nullable=False, server_default="classification"
                )
            )
    with op.batch_alter_table("datasets") as batch:
        batch.add_column(sa.Column("label_stats", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("datasets") as batch:
        batch.drop_column("label_stats")
    for table in reversed(TASK_TABLES):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("task")
