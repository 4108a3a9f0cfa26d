"""/v1/admin: tenants and API keys (admin scope: an admin key administers the service, not
only its own tenant). The CLI `python -m app.admin` does the same from a shell."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter

from app.api.auth import AdminAuth
from app.api.deps import SessionDep, SettingsDep, WriteSessionDep
from app.domain.orm import ApiKey, Tenant
from app.domain.schemas import (
    KeyCreate,
    KeyCreated,
    KeyPublic,
    KeysPublic,
    TenantCreate,
    TenantLimits,
    TenantPublic,
    TenantsPublic,
)
from app.domain.services import tenants as service
from app.infra.bus import announce
from app.infra.db import after_commit

router = APIRouter(prefix="/v1/admin", tags=["admin"])


@router.post("/tenants", status_code=201, response_model=TenantPublic)
def create_tenant(spec: TenantCreate, session: WriteSessionDep, _admin: AdminAuth) -> Tenant:
    return service.create_tenant(session, spec.name,
                                 **spec.model_dump(exclude={"name"}))


@router.get("/tenants", response_model=TenantsPublic)
def list_tenants(session: SessionDep, _admin: AdminAuth) -> TenantsPublic:
    rows = service.list_tenants(session)
    return TenantsPublic(data=[TenantPublic.model_validate(t) for t in rows], count=len(rows))


@router.put("/tenants/{tenant_id}/limits", response_model=TenantPublic)
def set_tenant_limits(tenant_id: str, limits: TenantLimits, session: WriteSessionDep,
                      _admin: AdminAuth) -> Tenant:
    """Replace the tenant's own limits (null: the service's default)."""
    return service.update_limits(session, tenant_id, **limits.model_dump())


@router.post("/keys", status_code=201, response_model=KeyCreated)
def create_key(spec: KeyCreate, session: WriteSessionDep, settings: SettingsDep,
               _admin: AdminAuth) -> KeyCreated:
    """A new key; the full key is in this answer only."""
    expires = timedelta(days=spec.expires_in_days) if spec.expires_in_days else None
    key, full = service.create_key(session, settings.hmac_key(), spec.tenant_id,
                                   list(spec.scopes), name=spec.name, expires_in=expires)
    return KeyCreated(**KeyPublic.model_validate(key).model_dump(), key=full)


@router.get("/keys", response_model=KeysPublic)
def list_keys(session: SessionDep, _admin: AdminAuth, tenant_id: str | None = None
              ) -> KeysPublic:
    rows = service.list_keys(session, tenant_id)
    return KeysPublic(data=[KeyPublic.model_validate(k) for k in rows], count=len(rows))


@router.post("/keys/{key_id}/revoke", response_model=KeyPublic)
def revoke_key(key_id: str, session: WriteSessionDep, settings: SettingsDep,
               _admin: AdminAuth) -> ApiKey:
    """Revoke a key at once (its dashboard sessions end too); revoking twice is harmless."""
    key = service.revoke_key(session, key_id)
    after_commit(session, lambda: announce(settings, "key", key_id))
    return key
