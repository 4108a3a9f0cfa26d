"""registered models: names per tenant, immutable versions, movable aliases and their moves

Revision ID: 0011_h29reg
Revises: 0010_h26svc
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_h29reg"
down_revision: str | None = "0010_h26svc"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _registered_model_column() -> sa.Column:
    return sa.Column("registered_model_id", sa.String(length=32),
                     sa.ForeignKey("registered_models.id", ondelete="CASCADE"),
                     nullable=False)


def upgrade() -> None:
    op.create_table(
        "registered_models",
        sa.Column("id", sa.String(length=32), primary_key=True),
        sa.Column("tenant_id", sa.String(length=32), sa.ForeignKey("tenants.id"),
                  nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("last_version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("tenant_id", "name", name="uq_registered_models_tenant_name"),
    )
    op.create_index("ix_registered_models_tenant_id", "registered_models", ["tenant_id"])
    op.create_table(
        "model_versions",
        sa.Column("id", sa.String(length=32), primary_key=True),
        _registered_model_column(),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.String(length=32),
                  sa.ForeignKey("models.id", ondelete="RESTRICT"), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("tags", sa.JSON(), nullable=False),
        sa.Column("created_by", sa.String(length=16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("registered_model_id", "version",
                            name="uq_model_versions_number"),
    )
    op.create_index("ix_model_versions_registered_model_id", "model_versions",
                    ["registered_model_id"])
    op.create_index("ix_model_versions_model_id", "model_versions", ["model_id"])
    op.create_table(
        "model_aliases",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        _registered_model_column(),
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("moved_by", sa.String(length=16), nullable=True),
        sa.Column("moved_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("registered_model_id", "alias", name="uq_model_aliases_alias"),
        sa.ForeignKeyConstraint(["registered_model_id", "version"],
                                ["model_versions.registered_model_id",
                                 "model_versions.version"],
                                name="fk_model_aliases_version"),
    )
    op.create_index("ix_model_aliases_registered_model_id", "model_aliases",
                    ["registered_model_id"])
    op.create_table(
        "model_alias_moves",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        _registered_model_column(),
        sa.Column("alias", sa.String(length=64), nullable=False),
        sa.Column("from_version", sa.Integer(), nullable=True),
        sa.Column("to_version", sa.Integer(), nullable=True),
        sa.Column("moved_by", sa.String(length=16), nullable=True),
        sa.Column("moved_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_model_alias_moves_registered_model_id", "model_alias_moves",
                    ["registered_model_id"])


def downgrade() -> None:
    for table in ("model_alias_moves", "model_aliases", "model_versions"):
        op.drop_index(f"ix_{table}_registered_model_id", table_name=table)
    op.drop_index("ix_model_versions_model_id", table_name="model_versions")
    op.drop_table("model_alias_moves")
    op.drop_table("model_aliases")
    op.drop_table("model_versions")
    op.drop_index("ix_registered_models_tenant_id", table_name="registered_models")
    op.drop_table("registered_models")
