"""Dashboard pages of searches: `/searches` (list) and `/searches/{id}` (progress, a live
heatmap of the CV metric over (log2 C, log2 gamma) or a line over one dimension, the best
point, cancel). Same page machinery as app/api/routes/dashboard.py; the live parts are
app/api/static/js/search.js on the JSON API and its SSE stream."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.api.deps import SessionDep
from app.api.routes.dashboard import LIST_LIMIT, DashboardRoute, PageAuth, _page
from app.api.routes.searches import public
from app.domain.services import datasets, searches

router = APIRouter(include_in_schema=False, route_class=DashboardRoute,
                   default_response_class=HTMLResponse)


@router.get("/searches")
def searches_page(request: Request, session: SessionDep, principal: PageAuth) -> HTMLResponse:
    tenant = principal.tenant_id
    shown = [public(session, s, False)
             for s in searches.list_searches(session, tenant, limit=LIST_LIMIT)]
    names = datasets.dataset_names(session, tenant, {s.dataset_id for s in shown})
    return _page(request, "searches.html", nav="searches", searches=shown, names=names,
                 count=searches.count_searches(session, tenant), limit=LIST_LIMIT)


@router.get("/searches/{search_id}")
def search_page(request: Request, search_id: str, session: SessionDep, principal: PageAuth
                ) -> HTMLResponse:
    search = searches.get_search(session, principal.tenant_id, search_id)
    dataset = datasets.find_dataset(session, principal.tenant_id, search.dataset_id)
    return _page(request, "search.html", nav="searches", search=public(session, search, False),
                 dataset=dataset)
