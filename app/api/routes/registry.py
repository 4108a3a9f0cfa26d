"""/v1/registry/models: names for models, their immutable versions, and movable aliases.

Registering, moving and deleting need the `train` scope; reading needs `read`. Another
tenant's name is a 404, the same answer as a name that does not exist. Predict, evaluate
and export a registered model by `/v1/models/{name}@{alias}/...` or
`/v1/models/{name}/versions/{n}/...` (app/api/routes/models.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.domain.orm import ModelVersion, RegisteredModel
from app.domain.registry_schemas import (
    AliasHistoryPublic,
    AliasMovePublic,
    AliasMoveRequest,
    AliasPublic,
    ModelVersionCreate,
    ModelVersionPublic,
    ModelVersionsPublic,
    RegisteredModelCreate,
    RegisteredModelPublic,
    RegisteredModelsPublic,
)
from app.domain.services import registry as service

router = APIRouter(prefix="/v1/registry/models", tags=["registry"])

Name = Annotated[str, Path(max_length=64)]
Version = Annotated[int, Path(ge=1, le=999_999_999)]
Alias = Annotated[str, Path(pattern=service.ALIAS_PATTERN)]


def public_name(session: Session, registered: RegisteredModel) -> RegisteredModelPublic:
    versions = service.list_versions(session, registered)
    return RegisteredModelPublic(
        name=registered.name, description=registered.description,
        latest_version=versions[0].version if versions else None,
        aliases={a.alias: a.version for a in service.aliases_of(session, registered)},
        created_at=registered.created_at)


def public_version(session: Session, registered: RegisteredModel, version: ModelVersion
                   ) -> ModelVersionPublic:
    return ModelVersionPublic(
        name=registered.name, version=version.version, model_id=version.model_id,
        description=version.description, tags=version.tags,
        aliases=[a.alias for a in service.aliases_of(session, registered)
                 if a.version == version.version],
        created_by=version.created_by, created_at=version.created_at)


@router.post("", status_code=201, response_model=RegisteredModelPublic)
def create_registered_model(spec: RegisteredModelCreate, request: Request,
                            session: WriteSessionDep, settings: SettingsDep,
                            principal: TrainAuth) -> Response:
    """Make a name to register models under (409 if the tenant has it already). An
    `Idempotency-Key` header works as for POST /v1/jobs."""
    with idempotency.Write(request, settings, principal.tenant_id,
                           "POST /v1/registry/models", session) as write:
        return write.run(idempotency.request_hash(spec.model_dump_json()), lambda: (
            201, public_name(session, service.create(session, principal.tenant_id,
                                                     spec.name, spec.description))))


@router.get("", response_model=RegisteredModelsPublic)
def list_registered_models(session: SessionDep, principal: ReadAuth, page: PageDep
                           ) -> RegisteredModelsPublic:
    tenant = principal.tenant_id
    rows = service.list_names(session, tenant, limit=page.limit, offset=page.offset)
    return RegisteredModelsPublic(data=[public_name(session, r) for r in rows],
                                  count=service.count_names(session, principal.tenant_id))


@router.get("/{name}", response_model=RegisteredModelPublic)
def get_registered_model(name: Name, session: SessionDep, principal: ReadAuth
                         ) -> RegisteredModelPublic:
    return public_name(session, service.get(session, principal.tenant_id, name))


@router.post("/{name}/versions", status_code=201, response_model=ModelVersionPublic)
def register_version(name: Name, spec: ModelVersionCreate, request: Request,
                     reader: SessionDep, session: WriteSessionDep, settings: SettingsDep,
                     principal: TrainAuth) -> Response:
    """Register one of the tenant's models (`model_id`: an id or a unique prefix) as the
    name's next version (1, 2, 3, ...), with a description and tags; a version never
    changes. 422 for a model the tenant does not have."""
    tenant = principal.tenant_id
    service.get(reader, tenant, name)  # (another tenant's name: 404 before the body's 422)
    spec.model_id = ids.resolve_field(reader, "model", tenant, spec.model_id, "model_id")
    route = f"POST /v1/registry/models/{name}/versions"
    with idempotency.Write(request, settings, tenant, route, session) as write:
        def work() -> tuple[int, ModelVersionPublic]:
            version = service.register_version(
                session, tenant, name, spec.model_id, spec.description, spec.tags,
                principal.key_id)
            return 201, public_version(session, service.get(session, tenant, name), version)

        return write.run(idempotency.request_hash(spec.model_dump_json()), work)


@router.get("/{name}/versions", response_model=ModelVersionsPublic)
def list_versions(name: Name, session: SessionDep, principal: ReadAuth
                  ) -> ModelVersionsPublic:
    """Newest first."""
    registered = service.get(session, principal.tenant_id, name)
    versions = service.list_versions(session, registered)
    return ModelVersionsPublic(data=[public_version(session, registered, v)
                                     for v in versions], count=len(versions))


@router.get("/{name}/versions/{version}", response_model=ModelVersionPublic)
def get_version(name: Name, version: Version, session: SessionDep, principal: ReadAuth
                ) -> ModelVersionPublic:
    found = service.get_version(session, principal.tenant_id, name, version)
    return public_version(session, service.get(session, principal.tenant_id, name), found)


@router.delete("/{name}/versions/{version}", status_code=204)
def delete_version(name: Name, version: Version, session: WriteSessionDep,
                   settings: SettingsDep, principal: TrainAuth) -> None:
    """Delete a version (its model stays); 409 while an alias points at it. Its number is
    not given again."""
    service.delete_version(session, settings, principal.tenant_id, name, version)


@router.put("/{name}/aliases/{alias}", response_model=AliasPublic)
def move_alias(name: Name, alias: Alias, spec: AliasMoveRequest, session: WriteSessionDep,
               settings: SettingsDep, principal: TrainAuth) -> AliasPublic:
    """Point the alias at `version` (making the alias if it is new). The move is one
    UPDATE: a predict of `{name}@{alias}` is answered by the old version or the new one,
    never by neither, and every API process follows the move as soon as it commits
    (through the bus; within HINGE_MODEL_CACHE_CHECK_SECONDS without one). Rolling back is
    moving it back. Recorded in the alias history with the key that moved it."""
    moved = service.move_alias(session, settings, principal.tenant_id, name, alias,
                               spec.version, principal.key_id)
    return AliasPublic.model_validate(
        service.public_alias(service.get(session, principal.tenant_id, name), moved))


@router.delete("/{name}/aliases/{alias}", status_code=204)
def delete_alias(name: Name, alias: Alias, session: WriteSessionDep, settings: SettingsDep,
                 principal: TrainAuth) -> None:
    service.delete_alias(session, settings, principal.tenant_id, name, alias,
                         principal.key_id)


@router.get("/{name}/history", response_model=AliasHistoryPublic)
def alias_history(
    name: Name,
    session: SessionDep,
    principal: ReadAuth,
    page: PageDep,
) -> AliasHistoryPublic:
    """Every move of the name's aliases, newest first: from which version to which
    (None: created, or deleted), by which API key, when."""
    registered = service.get(session, principal.tenant_id, name)
    return AliasHistoryPublic(data=[
        AliasMovePublic.model_validate(m)
        for m in service.alias_history(session, registered, limit=page.limit, offset=page.offset)])
