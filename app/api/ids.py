"""Ids the API takes: in a path, the whole id or a unique prefix of one of the caller's own
(app.domain.services.owned.resolve_id: 1 to 31 hex digits; several matches are a 422
`ambiguous_id` listing them); in a request body (a job's, a search's or an evaluation's
`dataset_id`) the same, an unknown one a 422 like an unknown whole id there. A model may
also be named by a registry reference, `name@alias` or `name/versions/n`
(app.domain.services.registry)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from sqlalchemy.orm import Session

from app.domain.errors import Invalid, NotFound
from app.domain.orm import (
    Dataset,
    Evaluation,
    Import,
    Job,
    Model,
    Prediction,
    Search,
    Upload,
)
from app.domain.services import owned, registry
from app.infra.db import read_sessionmaker_for

TABLES: dict[str, type[Any]] = {"dataset": Dataset, "job": Job, "model": Model,
                                "search": Search, "evaluation": Evaluation,
                                "prediction": Prediction, "import": Import,
                                "upload": Upload}


def resolve(session: Session, kind: str, tenant_id: str, ident: str) -> str:
    """The whole id `ident` stands for (a whole id as it is, with no query)."""
    if kind == "model" and registry.is_reference(ident):
        return registry.resolve(session, tenant_id, ident).model_id
    return owned.resolve_id(session, TABLES[kind], kind, tenant_id, ident)


async def resolve_off_loop(database_url: str, kind: str, tenant_id: str, ident: str) -> str:
    """resolve() for an async route: a whole id (or a reference resolved in this
    process's memory) at once, else in a worker thread."""
    if owned.is_full_id(ident):
        return ident
    if kind == "model" and (served := registry.cached(tenant_id, ident)) is not None:
        return served.model_id

    def lookup() -> str:
        with read_sessionmaker_for(database_url)() as session:
            return resolve(session, kind, tenant_id, ident)

    return await anyio.to_thread.run_sync(lookup)


async def owned_off_loop(database_url: str, kind: str, tenant_id: str, ident: str) -> str:
    """resolve_off_loop(), then a 404 unless the tenant holds that row (a whole id is taken
    as it is there: the event streams look it up before they start)."""
    item_id = await resolve_off_loop(database_url, kind, tenant_id, ident)

    def exists() -> bool:
        with read_sessionmaker_for(database_url)() as session:
            return owned.owned_exists(session, TABLES[kind], tenant_id, item_id)

    if not await anyio.to_thread.run_sync(exists):
        raise NotFound(kind, item_id)
    return item_id


def resolve_model(session: Session, tenant_id: str, ident: str
                  ) -> tuple[str, registry.Served | None]:
    """The model's whole id, and the version a registry reference resolved to (None for
    an id)."""
    if registry.is_reference(ident):
        served = registry.resolve(session, tenant_id, ident)
        return served.model_id, served
    return resolve(session, "model", tenant_id, ident), None


def resolve_field(session: Session, kind: str, tenant_id: str, ident: str, field: str
                  ) -> str:
    """resolve() for an id in a request body: one that matches nothing is a 422 naming
    `field`, as the services answer for an unknown whole id there."""
    try:
        return owned.resolve_id(session, TABLES[kind], kind, tenant_id, ident, field=field)
    except NotFound:
        raise Invalid(f"{field}: no {kind} {ident!r}", field=field) from None
