"""tenants, API keys and idempotency keys; every dataset, job, model and evaluation owned
by a tenant

Rows that exist before this revision go to a tenant named "default" (created here only if
there are such rows); `make run` gives that tenant its first admin key.

This revision comes after 0003w (splits and evaluations, developed at the same time on
another branch), so the history stays linear and the evaluations table exists here.

Revision ID: 0003t
Revises: 0003w
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003t"
down_revision: str | None = "0003w"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEFAULT_TENANT_ID = "0" * 32
OWNED = ("datasets", "jobs", "models", "evaluations")


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("max_stored_bytes", sa.BigInteger(), nullable=True),
        sa.Column("max_datasets", sa.Integer(), nullable=True),
        sa.Column("max_running_jobs", sa.Integer(), nullable=True),
        sa.Column("max_queued_jobs", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(length=16), nullable=False),
        sa.Column("tenant_id", sa.String(length=32), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_tenant_id"), ["tenant_id"], unique=False)
    op.create_table(
        "idempotency_keys",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant_id", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("route", sa.String(length=255), nullable=False),
        sa.Column("request_hash", sa.String(length=64), nullable=False),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("response_body", sa.LargeBinary(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["tenant_id"], ["tenants.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant_id", "key", name="uq_idempotency_tenant_key"),
    )
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_idempotency_keys_created_at"), ["created_at"],
                              unique=False)

    connection = op.get_bind()
    existing = sum(
        connection.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar() or 0
        for table in OWNED
    )
    if existing:
        connection.execute(
            sa.text("INSERT INTO tenants (id, name, created_at) "
                    "VALUES (:id, 'default', CURRENT_TIMESTAMP)"),
            {"id": DEFAULT_TENANT_ID},
        )
    for table in OWNED:
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column("tenant_id", sa.String(length=32), nullable=True))
        connection.execute(sa.text(f"UPDATE {table} SET tenant_id = :id"),
                           {"id": DEFAULT_TENANT_ID})
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.alter_column("tenant_id", existing_type=sa.String(length=32),
                                  nullable=False)
            batch_op.create_index(batch_op.f(f"ix_{table}_tenant_id"), ["tenant_id"],
                                  unique=False)
            batch_op.create_foreign_key(f"fk_{table}_tenant_id_tenants", "tenants",
                                        ["tenant_id"], ["id"])
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stored_bytes", sa.BigInteger(), nullable=False,
                                      server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("datasets", schema=None) as batch_op:
        batch_op.drop_column("stored_bytes")
    for table in reversed(OWNED):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_constraint(f"fk_{table}_tenant_id_tenants", type_="foreignkey")
            batch_op.drop_index(batch_op.f(f"ix_{table}_tenant_id"))
            batch_op.drop_column("tenant_id")
    with op.batch_alter_table("idempotency_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_idempotency_keys_created_at"))
    op.drop_table("idempotency_keys")
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_api_keys_tenant_id"))
    op.drop_table("api_keys")
    op.drop_table("tenants")
