"""Registered models: a tenant's names for the models it serves.

A name (`churn`) has versions 1, 2, 3, ...: each registers one stored model, with a
description and tags, and never changes (a deleted version's number is not reused).
Aliases (`production`, `staging`, any name) point at one version; moving one is one UPDATE
of its row (the row locked first, so concurrent moves are serialised and each move's
history names the version it replaced). A foreign key from the alias to its version makes
deleting a version that an alias points at fail (409), whatever the race.

Predict, evaluations, export and the other `/v1/models/{model_id}` routes take a reference
in place of the id: `name@alias` or `name/versions/n` (resolve). Every API process keeps
what its references resolved to; moving an alias or deleting a version drops the name's
entries here when the transaction commits and, through the bus (app.infra.bus, kind
`registry`), in every other API process; a check every HINGE_MODEL_CACHE_CHECK_SECONDS
is the backstop where there is no bus. A reference resolves to a model id only: the model
is then loaded whole (app.domain.services.models) before it predicts, so no request is
ever served by a half-loaded model.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio.to_thread
from sqlalchemy import and_, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain.errors import Conflict, Invalid, NotFound
from app.domain.orm import (
    AliasMove,
    Model,
    ModelAlias,
    ModelVersion,
    RegisteredModel,
    utcnow,
)
from app.infra.bus import announce
from app.infra.db import after_commit, read_sessionmaker_for
from app.settings import Settings

log = logging.getLogger("hinge.registry")

_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
_ALIAS = r"[A-Za-z][A-Za-z0-9._-]{0,63}"  # never a number: a version is one
NAME_PATTERN = f"^{_NAME}$"
ALIAS_PATTERN = f"^{_ALIAS}$"
_REFERENCE = re.compile(rf"(?P<name>{_NAME})(?:@(?P<alias>{_ALIAS})"
                        r"|/versions/(?P<version>[0-9]{1,9}))")
KIND = "registered model"
BUS_KIND = "registry"  # app.infra.bus: "registry:<tenant id>/<name>"


@dataclass(frozen=True)
class Served:
    """What a reference resolved to: the model and the version (and alias) it stands for."""

    model_id: str
    name: str
    version: int
    alias: str | None

    @property
    def header(self) -> str:
        """The Hinge-Model-Version header: `name/versions/n`."""
        return f"{self.name}/versions/{self.version}"


def is_reference(ident: str) -> bool:
    return "@" in ident or "/" in ident


# -- names ---------------------------------------------------------------------------

def create(session: Session, tenant_id: str, name: str, description: str
           ) -> RegisteredModel:
    """A new name; 409 if the tenant has it already."""
    if _find(session, tenant_id, name) is not None:
        raise _taken(name)
    registered = RegisteredModel(tenant_id=tenant_id, name=name, description=description,
                                 last_version=0)
    try:
        with session.begin_nested():
            session.add(registered)
    except IntegrityError:  # a concurrent request made it first
        raise _taken(name) from None
    return registered


def _taken(name: str) -> Conflict:
    return Conflict(f"a registered model named {name!r} exists already",
                    {"field": "name"})


def _find(session: Session, tenant_id: str, name: str) -> RegisteredModel | None:
    return session.scalar(select(RegisteredModel).where(
        RegisteredModel.tenant_id == tenant_id, RegisteredModel.name == name))


def get(session: Session, tenant_id: str, name: str) -> RegisteredModel:
    registered = _find(session, tenant_id, name)
    if registered is None:
        raise NotFound(KIND, name)
    return registered


def list_names(session: Session, tenant_id: str, *, limit: int = 100, offset: int = 0
               ) -> list[RegisteredModel]:
    return list(session.scalars(
        select(RegisteredModel).where(RegisteredModel.tenant_id == tenant_id)
        .order_by(RegisteredModel.name).limit(limit).offset(offset)))


def count_names(session: Session, tenant_id: str) -> int:
    return session.scalar(select(func.count()).select_from(RegisteredModel)
                          .where(RegisteredModel.tenant_id == tenant_id)) or 0


def aliases_of(session: Session, registered: RegisteredModel) -> list[ModelAlias]:
    return list(session.scalars(select(ModelAlias).where(
        ModelAlias.registered_model_id == registered.id).order_by(ModelAlias.alias)))


# -- versions ------------------------------------------------------------------------

def register_version(session: Session, tenant_id: str, name: str, model_id: str,
                     description: str, tags: dict[str, str], key_id: str | None
                     ) -> ModelVersion:
    """Register the tenant's model `model_id` as the name's next version (422 when the
    tenant has no such model). The number comes from one UPDATE of the name's counter,
    which holds the name's row until the commit: concurrent registrations queue."""
    registered = get(session, tenant_id, name)
    if session.scalar(select(Model.id).where(Model.id == model_id,
                                             Model.tenant_id == tenant_id)) is None:
        raise Invalid(f"model_id: no model {model_id!r}", field="model_id")
    session.execute(update(RegisteredModel).where(RegisteredModel.id == registered.id)
                    .values(last_version=RegisteredModel.last_version + 1)
                    .execution_options(synchronize_session=False))
    number = session.scalar(select(RegisteredModel.last_version)
                            .where(RegisteredModel.id == registered.id))
    assert number is not None
    version = ModelVersion(registered_model_id=registered.id, version=number,
                           model_id=model_id, description=description, tags=tags,
                           created_by=key_id)
    session.add(version)
    session.flush()
    return version


def list_versions(session: Session, registered: RegisteredModel) -> list[ModelVersion]:
    """Newest first."""
    return list(session.scalars(select(ModelVersion).where(
        ModelVersion.registered_model_id == registered.id)
        .order_by(ModelVersion.version.desc())))


def get_version(session: Session, tenant_id: str, name: str, version: int) -> ModelVersion:
    registered = get(session, tenant_id, name)
    found = _version(session, registered, version)
    if found is None:
        raise NotFound("model version", f"{name}/versions/{version}")
    return found


def _version(session: Session, registered: RegisteredModel, version: int
             ) -> ModelVersion | None:
    return session.scalar(select(ModelVersion).where(
        ModelVersion.registered_model_id == registered.id, ModelVersion.version == version))


def delete_version(session: Session, settings: Settings, tenant_id: str, name: str,
                   version: int) -> None:
    """Delete a version; 409 naming the aliases that point at it."""
    found = get_version(session, tenant_id, name, version)
    pointing = list(session.scalars(select(ModelAlias.alias).where(
        ModelAlias.registered_model_id == found.registered_model_id,
        ModelAlias.version == version)))
    if pointing:
        raise _aliased(name, version, pointing)
    try:
        with session.begin_nested():
            session.delete(found)
    except IntegrityError:  # an alias was moved onto it meanwhile
        raise _aliased(name, version, []) from None
    _announce_after_commit(session, settings, tenant_id, name)


def _aliased(name: str, version: int, aliases: list[str]) -> Conflict:
    said = f" ({', '.join(aliases)})" if aliases else ""
    return Conflict(f"{name} version {version} is what an alias points at{said}: move the "
                    "alias first", {"aliases": aliases})


def versions_of_model(session: Session, tenant_id: str, model_id: str
                      ) -> list[tuple[str, int]]:
    """(name, version) of every registration of the tenant's model."""
    rows = session.execute(
        select(RegisteredModel.name, ModelVersion.version)
        .join(RegisteredModel, RegisteredModel.id == ModelVersion.registered_model_id)
        .where(RegisteredModel.tenant_id == tenant_id, ModelVersion.model_id == model_id)
        .order_by(RegisteredModel.name, ModelVersion.version))
    return [(row.name, row.version) for row in rows]


# -- aliases -------------------------------------------------------------------------

def move_alias(session: Session, settings: Settings, tenant_id: str, name: str, alias: str,
               version: int, key_id: str | None) -> ModelAlias:
    """Point `alias` at `version` (made if new): the alias's row is locked, then moved by
    one UPDATE, and the move recorded, in the caller's transaction. 422 for a version the
    name does not have."""
    registered = get(session, tenant_id, name)
    if _version(session, registered, version) is None:
        raise Invalid(f"version: {name} has no version {version}", field="version")
    now = utcnow()
    current = _locked_alias(session, registered, alias)
    if current is None:
        made = ModelAlias(registered_model_id=registered.id, alias=alias, version=version,
                          moved_by=key_id, moved_at=now)
        try:
            with session.begin_nested():
                session.add(made)
        except IntegrityError:  # a concurrent request made it first: move that one
            current = _locked_alias(session, registered, alias)
            if current is None:
                raise
        else:
            _record_move(session, settings, tenant_id, registered, alias, None, version,
                         key_id, now)
            return made
    previous = current.version
    if previous == version:
        return current
    session.execute(update(ModelAlias).where(ModelAlias.id == current.id)
                    .values(version=version, moved_by=key_id, moved_at=now)
                    .execution_options(synchronize_session=False))
    session.refresh(current)
    _record_move(session, settings, tenant_id, registered, alias, previous, version, key_id,
                 now)
    return current


def _locked_alias(session: Session, registered: RegisteredModel, alias: str
                  ) -> ModelAlias | None:
    """The alias's row, locked until the commit (PostgreSQL; SQLite's write transaction
    holds the whole database already)."""
    return session.scalar(select(ModelAlias).where(
        ModelAlias.registered_model_id == registered.id, ModelAlias.alias == alias)
        .with_for_update())


def _record_move(session: Session, settings: Settings, tenant_id: str,
                 registered: RegisteredModel, alias: str, previous: int | None,
                 version: int | None, key_id: str | None, now: datetime) -> None:
    session.add(AliasMove(registered_model_id=registered.id, alias=alias,
                          from_version=previous, to_version=version, moved_by=key_id,
                          moved_at=now))
    session.flush()
    _announce_after_commit(session, settings, tenant_id, registered.name)


def delete_alias(session: Session, settings: Settings, tenant_id: str, name: str,
                 alias: str, key_id: str | None) -> None:
    registered = get(session, tenant_id, name)
    current = _locked_alias(session, registered, alias)
    if current is None:
        raise NotFound("alias", f"{name}@{alias}")
    session.delete(current)
    _record_move(session, settings, tenant_id, registered, alias, current.version, None,
                 key_id, utcnow())


def alias_history(session: Session, registered: RegisteredModel, *, limit: int = 100,
                  offset: int = 0) -> list[AliasMove]:
    """Every move of the name's aliases, newest first."""
    return list(session.scalars(select(AliasMove).where(
        AliasMove.registered_model_id == registered.id)
        .order_by(AliasMove.id.desc()).limit(limit).offset(offset)))


# -- references: name@alias, name/versions/n ----------------------------------------

class _References:
    """What this process's references resolved to, per (tenant, name, selector). The
    generation counter keeps a resolution read before an invalidation from being stored
    after it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str, str], Served] = {}
        self.generation = 0

    def get(self, key: tuple[str, str, str]) -> Served | None:
        return self._entries.get(key)

    def put(self, key: tuple[str, str, str], served: Served, generation: int) -> None:
        with self._lock:
            if generation == self.generation:
                self._entries[key] = served

    def forget(self, tenant_id: str, name: str) -> None:
        with self._lock:
            self.generation += 1
            for key in [k for k in self._entries if k[:2] == (tenant_id, name)]:
                del self._entries[key]

    def items(self) -> list[tuple[tuple[str, str, str], Served]]:
        with self._lock:
            return list(self._entries.items())


_references = _References()


def _key(tenant_id: str, ident: str) -> tuple[str, str, str] | None:
    """(tenant, name, selector), the selector `@alias` or the version's number; None for
    what is no reference."""
    match = _REFERENCE.fullmatch(ident)
    if match is None:
        return None
    alias = match.group("alias")
    return tenant_id, match.group("name"), f"@{alias}" if alias else match.group("version")


def cached(tenant_id: str, ident: str) -> Served | None:
    """The reference's resolution from this process's memory, or None."""
    key = _key(tenant_id, ident)
    return None if key is None else _references.get(key)


def resolve(session: Session, tenant_id: str, ident: str) -> Served:
    """The tenant's model that `name@alias` or `name/versions/n` stands for now (404 when
    the name, the version or the alias does not exist, or is another tenant's)."""
    key = _key(tenant_id, ident)
    if key is None:
        raise NotFound("model", ident, f"model {ident!r} not found: a model is named by its "
                       "id, `name@alias` or `name/versions/n`")
    _, name, selector = key
    found = _references.get(key)
    if found is not None:
        return found
    generation = _references.generation
    registered = get(session, tenant_id, name)
    alias = selector[1:] if selector.startswith("@") else None
    if alias is not None:
        row = session.execute(
            select(ModelVersion.version, ModelVersion.model_id)
            .join(ModelAlias, and_(ModelAlias.registered_model_id
                                   == ModelVersion.registered_model_id,
                                   ModelAlias.version == ModelVersion.version))
            .where(ModelAlias.registered_model_id == registered.id,
                   ModelAlias.alias == alias)).first()
        if row is None:
            raise NotFound("alias", f"{name}@{alias}")
    else:
        row = session.execute(select(ModelVersion.version, ModelVersion.model_id).where(
            ModelVersion.registered_model_id == registered.id,
            ModelVersion.version == int(selector))).first()
        if row is None:
            raise NotFound("model version", f"{name}/versions/{selector}")
    served = Served(model_id=row.model_id, name=name, version=row.version, alias=alias)
    _references.put(key, served, generation)
    return served


async def resolve_off_loop(database_url: str, tenant_id: str, ident: str) -> Served:
    """resolve() for an async route: from memory at once, else in a worker thread."""
    found = cached(tenant_id, ident)
    if found is not None:
        return found

    def lookup() -> Served:
        with read_sessionmaker_for(database_url)() as session:
            return resolve(session, tenant_id, ident)

    return await anyio.to_thread.run_sync(lookup)


def forget(ident: str) -> None:
    """Drop the resolutions of `<tenant id>/<name>` (the bus calls it for other processes)."""
    tenant_id, _, name = ident.partition("/")
    _references.forget(tenant_id, name)


def _announce_after_commit(session: Session, settings: Settings, tenant_id: str,
                           name: str) -> None:
    ident = f"{tenant_id}/{name}"

    def invalidate() -> None:
        forget(ident)
        announce(settings, BUS_KIND, ident)

    after_commit(session, invalidate)


def drop_stale_references(database_url: str) -> int:
    """Drop the resolutions that no longer hold (an alias moved, a version deleted, while
    the bus was down or absent); how many were dropped."""
    entries = _references.items()
    if not entries:
        return 0
    names = {(tenant, name) for (tenant, name, _), _ in entries}
    with read_sessionmaker_for(database_url)() as session:
        which = or_(*(and_(RegisteredModel.tenant_id == tenant, RegisteredModel.name == name)
                      for tenant, name in names))
        versions = {(row.tenant_id, row.name, str(row.version)): row.model_id
                    for row in session.execute(
                        select(RegisteredModel.tenant_id, RegisteredModel.name,
                               ModelVersion.version, ModelVersion.model_id)
                        .join(ModelVersion,
                              ModelVersion.registered_model_id == RegisteredModel.id)
                        .where(which))}
        aliases = {(row.tenant_id, row.name, f"@{row.alias}"): row.version
                   for row in session.execute(
                       select(RegisteredModel.tenant_id, RegisteredModel.name,
                              ModelAlias.alias, ModelAlias.version)
                       .join(ModelAlias, ModelAlias.registered_model_id == RegisteredModel.id)
                       .where(which))}
    stale = {(tenant, name) for (tenant, name, selector), served in entries
             if _holds(versions, aliases, (tenant, name, selector), served) is False}
    for tenant, name in stale:
        _references.forget(tenant, name)
    return len(stale)


def _holds(versions: dict[tuple[str, str, str], str], aliases: dict[tuple[str, str, str], int],
           key: tuple[str, str, str], served: Served) -> bool:
    tenant, name, selector = key
    if selector.startswith("@"):
        return aliases.get(key) == served.version and versions.get(
            (tenant, name, str(served.version))) == served.model_id
    return versions.get(key) == served.model_id


async def check_references_forever(settings: Settings) -> None:
    """drop_stale_references every HINGE_MODEL_CACHE_CHECK_SECONDS (nothing while no
    reference is held)."""
    while True:
        await asyncio.sleep(settings.model_cache_check_seconds)
        if _references.items():
            try:
                await anyio.to_thread.run_sync(drop_stale_references, settings.database_url)
            except Exception:
                log.warning("checking the resolved model references failed; trying again",
                            exc_info=True)


def public_alias(registered: RegisteredModel, alias: ModelAlias) -> dict[str, Any]:
    return {"name": registered.name, "alias": alias.alias, "version": alias.version,
            "moved_by": alias.moved_by, "moved_at": alias.moved_at}
