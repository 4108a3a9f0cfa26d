"""A tenant's own rows: another tenant's row is not found, exactly like a missing one.

Ids are 32 lowercase hex digits (uuid4); wherever the API takes an id in its path, a unique
prefix of them stands for the whole id (resolve_id), looked up among
the tenant's own rows only: another tenant's ids are neither matched nor listed."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.domain.errors import AmbiguousId, not_found

Row = TypeVar("Row")

ID_LENGTH = 32
MIN_PREFIX = 1  # any unique prefix resolves (as docker's ids)
MAX_CANDIDATES = 10  # an ambiguous prefix lists at most this many matches
_PREFIX = re.compile(rf"[0-9a-f]{{{MIN_PREFIX},{ID_LENGTH - 1}}}")


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


def is_full_id(ident: str) -> bool:
    return len(ident) == ID_LENGTH


def resolve_id(session: Session, table: type[Any], kind: str, tenant_id: str, ident: str,
               *, field: str | None = None) -> str:
    """The whole id of the tenant's row of `table` whose id starts with `ident`.

    A whole id (32 characters) is returned as it is, with no query: the caller's own
    lookup says whether it exists. A prefix (1 to 31 hex digits, any case) that matches
    one row gives that row's id; none is NotFound; several an AmbiguousId (422) listing
    them, newest first where the table has a created_at."""
    if is_full_id(ident):
        return ident
    prefix = ident.lower()
    if not _PREFIX.fullmatch(prefix):  # not hex, or too long: no id starts so
        raise not_found(kind, ident)
    query = select(_id(table)).where(_tenant(table) == tenant_id,
                                     _id(table).like(prefix + "%"))
    if hasattr(table, "created_at"):
        query = query.order_by(table.created_at.desc())
    found = list(session.scalars(query.limit(MAX_CANDIDATES + 1)))
    if not found:
        raise not_found(kind, ident)
    if len(found) == 1:
        return str(found[0])
    shown = found[:MAX_CANDIDATES]
    raise AmbiguousId(
        f"{kind} id prefix {ident!r} matches {'more than ' if len(found) > len(shown) else ''}"
        f"{len(shown)} {kind}s ({', '.join(shown)}): give more of the id",
        {"candidates": shown, "more": len(found) > len(shown)},
        field=field or f"{kind}_id")


def _id(table: type[Any]) -> Any:
    return table.id


def _tenant(table: type[Any]) -> Any:
    return table.tenant_id
