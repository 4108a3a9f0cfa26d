"""A tenant's own rows: another tenant's row is not found, exactly like a missing one."""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.domain.errors import not_found

Row = TypeVar("Row")


def get_owned(session: Session, table: type[Row], kind: str, tenant_id: str,
              item_id: str) -> Row:
    """The tenant's row `item_id` of `table`, or NotFound naming `kind`."""
    row = session.scalar(select(table).where(_id(table) == item_id,
                                             _tenant(table) == tenant_id))
    if row is None:
        raise not_found(kind, item_id)
    return row


def owned_exists(session: Session, table: type[Any], tenant_id: str, item_id: str) -> bool:
    return session.scalar(select(_id(table)).where(_id(table) == item_id,
                                                   _tenant(table) == tenant_id)) is not None


def _id(table: type[Any]) -> Any:
    return table.id


def _tenant(table: type[Any]) -> Any:
    return table.tenant_id
