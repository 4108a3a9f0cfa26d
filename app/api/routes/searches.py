"""/v1/searches: submit a cross-validated parameter search, list, show (with its table of
points), cancel, and stream its finished points as Server-Sent Events."""

from __future__ import annotations

import json
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Header, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session
from sse_starlette import EventSourceResponse

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.api.routes.events import Round, live_stream, parse_last_event_id
from app.domain.job_status import TERMINAL_STATUSES
from app.domain.orm import Search
from app.domain.search_schemas import (
    Holdout,
    SearchCreate,
    SearchesPublic,
    SearchPoint,
    SearchPublic,
    SearchRound,
)
from app.domain.services import searches as service
from app.infra.db import read_sessionmaker_for

router = APIRouter(prefix="/v1/searches", tags=["searches"])


def public(session: Session, search: Search, with_points: bool) -> SearchPublic:
    body = SearchPublic.model_validate(search)
    body.model_id = service.refit_model_id(session, search)
    if with_points:
        body.points = [SearchPoint.model_validate(p)
                       for p in service.point_table(session, search)]
    rounds = service.round_table(search)
    if rounds is not None:
        body.rounds = [SearchRound.model_validate(r) for r in rounds]
    return body


@router.post("", status_code=202, response_model=SearchPublic)
def create_search(spec: SearchCreate, request: Request, session: WriteSessionDep,
                  settings: SettingsDep, principal: TrainAuth) -> SearchPublic | Response:
    """Submit a search: every point is validated as a job spec (422 names the point and
    the parameter), a search of more fits than HINGE_MAX_SEARCH_FITS is a 413 that gives
    the number of fits. An `Idempotency-Key` header works as for POST /v1/jobs."""
    tenant = principal.tenant_id
    spec.dataset_id = ids.resolve_field(session, "dataset", tenant, spec.dataset_id,
                                        "dataset_id")
    if isinstance(spec.cv, Holdout):
        spec.cv.dataset_id = ids.resolve_field(session, "dataset", tenant,
                                               spec.cv.dataset_id, "cv.dataset_id")
    # the search, its tasks, their messages (app.domain.outbox) and the stored answer of
    # an idempotent request commit in one transaction, the last thing before the answer
    with idempotency.Write(request, settings, principal.tenant_id, "POST /v1/searches",
                           session) as write:
        return write.run(idempotency.request_hash(spec.model_dump_json()), lambda: (
            202, public(session, service.submit(session, settings, principal.tenant_id, spec),
                        False)))


@router.get("", response_model=SearchesPublic)
def list_searches(session: SessionDep, principal: ReadAuth, page: PageDep) -> SearchesPublic:
    tenant = principal.tenant_id
    rows = service.list_searches(session, tenant, limit=page.limit, offset=page.offset)
    return SearchesPublic(data=[public(session, s, False) for s in rows],
                          count=service.count_searches(session, principal.tenant_id))


@router.get("/{search_id}", response_model=SearchPublic)
def get_search(search_id: str, session: SessionDep, principal: ReadAuth) -> SearchPublic:
    """Status, done/total, the best point, the refit job and model, and the table of
    points (mean and std of the metric over the folds, fit time, convergence)."""
    search_id = ids.resolve(session, "search", principal.tenant_id, search_id)
    return public(session, service.get_search(session, principal.tenant_id, search_id), True)


@router.post("/{search_id}/cancel", status_code=202, response_model=SearchPublic)
def cancel_search(search_id: str, session: WriteSessionDep, settings: SettingsDep,
                  principal: TrainAuth) -> SearchPublic:
    """Stops every task: queued ones at once, running ones within a progress interval;
    a finished search is a 409."""
    search_id = ids.resolve(session, "search", principal.tenant_id, search_id)
    search = service.cancel(session, principal.tenant_id, search_id)
    return public(session, search, False)


# -- events ------------------------------------------------------------------------------

def _snapshot(database_url: str, search_id: str, known_done: int
              ) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """The search's status fields, and its point table when `done` moved."""
    with read_sessionmaker_for(database_url)() as session:
        search = session.get(Search, search_id)
        assert search is not None
        state = {"status": search.status.value, "done": search.done, "total": search.total,
                 "best": search.best, "refit_job_id": search.refit_job_id,
                 "error": search.error}
        table = service.point_table(session, search) if search.done != known_done else None
        session.commit()
        return state, table


def _point_message(point: dict[str, Any]) -> dict[str, Any]:
    fields = {k: point[k] for k in ("index", "values", "mean", "std", "scores",
                                    "fit_seconds", "converged", "exit_reasons", "round",
                                    "n_rows", "nonzero_weights")}
    return {"id": str(point["completed_seq"]), "event": "point",
            "data": json.dumps({"seq": point["completed_seq"], **fields})}


@router.get(
    "/{search_id}/events",
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": {}},
                     "description": "SSE stream of `point`, `progress` and `status` events"}},
)
async def search_events(
    search_id: str,
    request: Request,
    settings: SettingsDep,
    principal: ReadAuth,
    last_event_id: str | None = Header(None, alias="Last-Event-ID"),
) -> EventSourceResponse:
    """One `point` event per finished point (every fold in; its id is the sequence number
    of its last fit, so `Last-Event-ID` resumes without gaps), `progress` events with
    done/total, and a final `status` event, after which the stream ends."""
    after = parse_last_event_id(last_event_id)
    search_id = await ids.owned_off_loop(settings.database_url, "search",
                                         principal.tenant_id, search_id)

    seq, known_done = after, -1

    async def read_round() -> Round:
        nonlocal seq, known_done
        state, table = await anyio.to_thread.run_sync(
            _snapshot, settings.database_url, search_id, known_done)
        messages = []
        if table is not None:
            known_done = state["done"]
            finished = sorted((p for p in table if p["completed_seq"] is not None
                               and p["completed_seq"] > seq),
                              key=lambda p: p["completed_seq"])
            for point in finished:
                seq = point["completed_seq"]
                messages.append(_point_message(point))
            messages.append({"event": "progress", "data": json.dumps(
                {"done": state["done"], "total": state["total"]})})
        if state["status"] in TERMINAL_STATUSES:
            messages.append({"event": "status", "data": json.dumps(state)})
            return messages, True, False
        return messages, False, False

    return live_stream(request, settings, search_id, read_round)
