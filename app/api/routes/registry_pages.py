"""Dashboard pages of the model registry: `/registry` (the names, their latest version
and aliases) and `/registry/{name}` (versions, aliases, and the history of their moves).
Same page machinery as app/api/routes/dashboard.py."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.api.deps import SessionDep
from app.api.routes.dashboard import LIST_LIMIT, DashboardRoute, PageAuth, _page
from app.api.routes.registry import public_name, public_version
from app.domain.registry_schemas import AliasMovePublic
from app.domain.services import registry

router = APIRouter(include_in_schema=False, route_class=DashboardRoute,
                   default_response_class=HTMLResponse)


@router.get("/registry")
def registry_page(request: Request, session: SessionDep, principal: PageAuth) -> HTMLResponse:
    tenant = principal.tenant_id
    names = [public_name(session, r)
             for r in registry.list_names(session, tenant, limit=LIST_LIMIT)]
    return _page(request, "registry.html", nav="registry", names=names,
                 count=registry.count_names(session, tenant), limit=LIST_LIMIT)


@router.get("/registry/{name}")
def registered_model_page(request: Request, name: str, session: SessionDep,
                          principal: PageAuth) -> HTMLResponse:
    registered = registry.get(session, principal.tenant_id, name)
    return _page(request, "registered_model.html", nav="registry",
                 registered=public_name(session, registered),
                 versions=[public_version(session, registered, v)
                           for v in registry.list_versions(session, registered)],
                 aliases=registry.aliases_of(session, registered),
                 history=[AliasMovePublic.model_validate(m) for m in
                          registry.alias_history(session, registered, limit=LIST_LIMIT)])
