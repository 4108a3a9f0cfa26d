"""Ids the API takes: in a path, the whole id or a unique prefix of one of the caller's own
(app.domain.services.owned.resolve_id: 1 to 31 hex digits; several matches are a 422
`ambiguous_id` listing them); in a request body (a job's, a search's or an evaluation's
`dataset_id`) the same, an unknown one a 422 like an unknown whole id there."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from sqlalchemy.orm import Session

from app.domain.errors import Invalid, NotFound
from app.domain.orm import Dataset, Evaluation, Job, Model, Search
from app.domain.services import owned
from app.infra.db import read_sessionmaker_for

TABLES: dict[str, type[Any]] = {"dataset": Dataset, "job": Job, "model": Model,
                                "search": Search, "evaluation": Evaluation}


def resolve(session: Session, kind: str, tenant_id: str, ident: str) -> str:
    """The whole id `ident` stands for (a whole id as it is, with no query)."""
    return owned.resolve_id(session, TABLES[kind], kind, tenant_id, ident)


async def resolve_off_loop(database_url: str, kind: str, tenant_id: str, ident: str) -> str:
    """resolve() for an async route: a whole id at once, a prefix in a worker thread."""
    if owned.is_full_id(ident):
        return ident

    def lookup() -> str:
        with read_sessionmaker_for(database_url)() as session:
            return resolve(session, kind, tenant_id, ident)

    return await anyio.to_thread.run_sync(lookup)


def resolve_field(session: Session, kind: str, tenant_id: str, ident: str, field: str
                  ) -> str:
    """resolve() for an id in a request body: one that matches nothing is a 422 naming
    `field`, as the services answer for an unknown whole id there."""
    try:
        return owned.resolve_id(session, TABLES[kind], kind, tenant_id, ident, field=field)
    except NotFound:
        raise Invalid(f"{field}: no {kind} {ident!r}", field=field) from None
