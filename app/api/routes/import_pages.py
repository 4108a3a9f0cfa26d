"""Dashboard pages of imports: `/imports` (list, each with its progress) and
`/imports/{id}` (progress, the dataset once made, the error of a failed one); both
reload every 2 s while an import runs. The datasets page lists the running imports and
links here."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.api.deps import SessionDep
from app.api.routes.dashboard import LIST_LIMIT, DashboardRoute, PageAuth, _page
from app.domain.import_schemas import ImportPublic
from app.domain.job_status import ACTIVE_STATUSES
from app.domain.services import imports

router = APIRouter(include_in_schema=False, route_class=DashboardRoute,
                   default_response_class=HTMLResponse)


@router.get("/imports")
def imports_page(request: Request, session: SessionDep, principal: PageAuth) -> HTMLResponse:
    rows, count = imports.list_imports(session, principal.tenant_id, limit=LIST_LIMIT)
    done = imports.progress(session, [r.id for r in rows])
    shown = [ImportPublic.model_validate(imports.public(r, done.get(r.id))) for r in rows]
    return _page(request, "imports.html", nav="datasets", imports=shown, count=count,
                 limit=LIST_LIMIT, refresh=any(i.status in ACTIVE_STATUSES for i in shown))


@router.get("/imports/{import_id}")
def import_page(request: Request, import_id: str, session: SessionDep, principal: PageAuth
                ) -> HTMLResponse:
    row = imports.get_import(session, principal.tenant_id, import_id)
    item = ImportPublic.model_validate(
        imports.public(row, imports.progress(session, [row.id]).get(row.id)))
    return _page(request, "import.html", nav="datasets", item=item,
                 refresh=item.status in ACTIVE_STATUSES)
