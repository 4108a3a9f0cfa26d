"""/v1/imports: datasets read by workers from part files in S3 or under
HINGE_IMPORT_ROOTS (app.domain.services.imports): create, list, show, cancel (DELETE),
progress events.

Creating and cancelling need the `train` scope (it runs work on the workers, as a job
does); the rest `read`. Another tenant's import is a 404."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session
from sse_starlette import EventSourceResponse

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.api.routes.events import state_stream
from app.domain.import_schemas import ImportCreate, ImportPublic, ImportsPublic
from app.domain.orm import Import
from app.domain.services import imports as service
from app.infra.db import read_sessionmaker_for

router = APIRouter(prefix="/v1/imports", tags=["imports"])


def _public(session: Session, item: Import) -> ImportPublic:
    done = service.progress(session, [item.id]).get(item.id)
    return ImportPublic.model_validate(service.public(item, done))


@router.post("", status_code=202, response_model=ImportPublic,
             responses={413: {"description": "the source is larger than the tenant's "
                                             "quota can hold; nothing was read"},
                        422: {"description": "a source refused: malformed, matching "
                                             "nothing, or outside HINGE_IMPORT_ROOTS"}})
def create_import(spec: ImportCreate, request: Request, session: WriteSessionDep,
                  settings: SettingsDep, principal: TrainAuth) -> ImportPublic | Response:
    """Import a dataset from `source` (S3 URLs or globs, or file:/// paths under
    HINGE_IMPORT_ROOTS): 202 with the `queued` import; follow it with GET or its `events`,
    and once it has succeeded use its `dataset_id`. An `Idempotency-Key` header works as
    for POST /v1/jobs."""
    tenant = principal.tenant_id
    with idempotency.Write(request, settings, tenant, "POST /v1/imports", session) as write:
        # (a key's hash from before `dtype` was taken stays the same for auto)
        asked = spec.model_dump_json(exclude={"dtype"} if spec.dtype == service.AUTO
                                     else None)
        return write.run(
            idempotency.request_hash(asked),
            lambda: (202, _public(session, service.create_import(
                session, settings, tenant, spec.sources(), spec.name, spec.format,
                spec.task, spec.dtype))))


@router.get("", response_model=ImportsPublic)
def list_imports(session: SessionDep, principal: ReadAuth, page: PageDep) -> ImportsPublic:
    rows, count = service.list_imports(session, principal.tenant_id, limit=page.limit,
                                       offset=page.offset)
    done = service.progress(session, [r.id for r in rows])
    return ImportsPublic(data=[ImportPublic.model_validate(service.public(r, done.get(r.id)))
                               for r in rows], count=count)


@router.get("/{import_id}", response_model=ImportPublic)
def get_import(import_id: str, session: SessionDep, principal: ReadAuth) -> ImportPublic:
    import_id = ids.resolve(session, "import", principal.tenant_id, import_id)
    return _public(session, service.get_import(session, principal.tenant_id, import_id))


@router.delete("/{import_id}", status_code=202, response_model=ImportPublic)
def cancel_import(import_id: str, session: WriteSessionDep, settings: SettingsDep,
                  principal: TrainAuth) -> ImportPublic:
    """Cancel an import: a queued one at once, a running one at its next check (within a
    progress interval); its shards are deleted and no dataset is made. 409 once finished."""
    import_id = ids.resolve(session, "import", principal.tenant_id, import_id)
    item = service.cancel(session, settings, principal.tenant_id, import_id)
    return _public(session, item)


def _state(database_url: str, import_id: str) -> dict[str, Any]:
    with read_sessionmaker_for(database_url)() as session:
        row = session.get(Import, import_id)
        assert row is not None
        public = service.public(row, service.progress(session, [import_id]).get(import_id))
        return {key: (value.value if hasattr(value, "value") else value)
                for key, value in public.items()
                if key in ("status", "parts_done", "parts_total", "bytes_done", "bytes_total",
                           "rows_done", "nnz_done", "dataset_id", "error", "error_detail")}


@router.get("/{import_id}/events", response_class=EventSourceResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "SSE stream of `progress` and `status` events"}})
async def import_events(import_id: str, request: Request, settings: SettingsDep,
                        principal: ReadAuth) -> EventSourceResponse:
    """`progress` events ({status, parts_done, parts_total, bytes_done, bytes_total,
    rows_done, nnz_done}) as the workers parse, then one terminal `status` event (with
    `dataset_id` on success, `error` on failure), after which the stream ends."""
    tenant = principal.tenant_id
    import_id = await ids.owned_off_loop(settings.database_url, "import", tenant, import_id)
    return state_stream(request, settings, import_id,
                        lambda: _state(settings.database_url, import_id))
