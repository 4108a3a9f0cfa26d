"""/v1/uploads: resumable uploads. A session is made for a file of a declared size
(POST), its bytes sent in parts (PATCH with `Upload-Offset`, each part acknowledged with
the new offset), the offset asked again after a dropped connection (HEAD or GET), and the
staged file parsed into a dataset (POST .../complete) through the same streaming path as
POST /v1/datasets, read from the disk a megabyte at a time. DELETE aborts a session and
removes its staged bytes. The limits and the ordering rule: app.domain.services.uploads.

Making, sending, completing and deleting need the `train` scope, as an upload does;
asking the offset `read`. Another tenant's session is a 404."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Header, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session
from starlette.requests import ClientDisconnect

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import SettingsDep, WriteSessionDep
from app.api.routes.datasets import Body, _upload
from app.domain.errors import Conflict, Invalid, TooLarge, no_space, not_found
from app.domain.ingest import DISPATCH_BYTES
from app.domain.orm import Dataset, Upload
from app.domain.schemas import DatasetPublic
from app.domain.services import uploads as service
from app.domain.upload_schemas import UploadCreate, UploadPublic
from app.infra.staging import Busy, StagedFile, check_room, remove_staged
from app.settings import Settings

router = APIRouter(prefix="/v1/uploads", tags=["uploads"])

OFFSET = "Upload-Offset"
OffsetHeader = Annotated[str | None, Header(
    alias=OFFSET, description="Where this part starts: the session's offset")]


def _answer(settings: Settings, row: Upload, offset: int | None = None) -> Response:
    public = UploadPublic.model_validate(service.public(settings, row, offset))
    return Response(public.model_dump_json(), status_code=200,
                    media_type="application/json", headers=_headers(public))


def _headers(public: UploadPublic) -> dict[str, str]:
    return {OFFSET: str(public.offset), "Upload-Length": str(public.size),
            "Cache-Control": "no-store"}


@router.post("", status_code=201, response_model=UploadPublic,
             responses={413: {"description": "the declared size is more than the tenant's "
                                             "stored bytes (or HINGE_MAX_UPLOAD_BYTES) "
                                             "can hold"},
                        429: {"description": "HINGE_TENANT_MAX_OPEN_UPLOADS sessions open"},
                        507: {"description": "the staging disk cannot hold the size"}})
def create_upload(spec: UploadCreate, request: Request, session: WriteSessionDep,
                  settings: SettingsDep, principal: TrainAuth) -> UploadPublic | Response:
    """Open a session for a file of `size` bytes, read as a dataset with the options
    given (those of POST /v1/datasets): 201 with its `id` and `offset` 0. An
    `Idempotency-Key` makes a retried creation the same session."""
    tenant = principal.tenant_id
    with idempotency.Write(request, settings, tenant, "POST /v1/uploads", session) as write:
        return write.run(idempotency.request_hash(spec.model_dump_json()), lambda: (
            201, UploadPublic.model_validate(service.public(
                settings, service.create_upload(session, settings, tenant, spec), 0))))


async def _find(settings: Settings, tenant_id: str, upload_id: str) -> Upload:
    upload_id = await ids.resolve_off_loop(settings.database_url, "upload", tenant_id,
                                           upload_id)
    return await anyio.to_thread.run_sync(service.find_upload, settings, tenant_id, upload_id)


@router.get("/{upload_id}", response_model=UploadPublic)
async def get_upload(upload_id: str, settings: SettingsDep, principal: ReadAuth) -> Response:
    """The session: its `offset` (also the `Upload-Offset` header), parts, expiry and,
    once completed, `dataset_id`."""
    row = await _find(settings, principal.tenant_id, upload_id)
    return await anyio.to_thread.run_sync(_answer, settings, row)


@router.head("/{upload_id}", status_code=200,
             responses={200: {"description": "`Upload-Offset`: the bytes staged; "
                                             "`Upload-Length`: the declared size"}})
async def upload_offset(upload_id: str, settings: SettingsDep, principal: ReadAuth
                        ) -> Response:
    """The offset to resume from, in the `Upload-Offset` header (no body)."""
    row = await _find(settings, principal.tenant_id, upload_id)
    public = UploadPublic.model_validate(
        await anyio.to_thread.run_sync(service.public, settings, row))
    return Response(status_code=200, headers=_headers(public))


@router.patch("/{upload_id}", response_model=UploadPublic,
              openapi_extra={"requestBody": {"content": {"application/octet-stream": {
                  "schema": {"type": "string", "format": "binary"}}}, "required": True}},
              responses={409: {"description": "the part does not start at the offset "
                                              "(`detail.offset`), the session is busy, or "
                                              "it is completed"},
                         413: {"description": "the part goes past the declared size or "
                                              "HINGE_UPLOAD_MAX_PART_BYTES"},
                         507: {"description": "the staging disk is full"}})
async def append_part(upload_id: str, request: Request, settings: SettingsDep,
                      principal: TrainAuth, upload_offset: OffsetHeader = None) -> Response:
    """Append a part: the body's bytes at `Upload-Offset`, which must be the session's
    offset (409 with `detail.offset` otherwise: a retried part whose bytes arrived is
    written nowhere). 200 once the part is on disk, with the new offset; a connection
    dropped mid-part keeps the bytes that arrived (HEAD says how many)."""
    row = await _find(settings, principal.tenant_id, upload_id)
    if row.status != service.OPEN:
        raise Conflict(f"upload {row.id!r} is completed (dataset {row.dataset_id!r})")
    if upload_offset is None or not upload_offset.isdigit():
        raise Invalid(f"a part needs the {OFFSET} header: the offset it starts at (HEAD "
                      "gives the session's)", field=OFFSET)
    staged = await _hold(settings, row)
    try:
        return await _take_part(request, settings, row, staged, int(upload_offset))
    finally:
        staged.close()


async def _hold(settings: Settings, row: Upload) -> StagedFile:
    """The session's staged file, locked for this request (409 while another holds it)."""
    try:
        return await anyio.to_thread.run_sync(StagedFile, settings.home, row.id)
    except Busy:
        raise Conflict(f"another request is writing or completing upload {row.id!r}; ask "
                       "its offset again (HEAD) once it is done", {"reason": "busy"}
                       ) from None


async def _take_part(request: Request, settings: Settings, row: Upload, staged: StagedFile,
                     offset: int) -> Response:
    if offset != staged.size:
        raise Conflict(f"the part starts at {offset} but the upload's offset is "
                       f"{staged.size}: send from there", {"field": OFFSET,
                                                           "offset": staged.size})
    room = row.size - offset
    length = request.headers.get("content-length", "")
    declared = int(length) if length.isdigit() else None
    if declared is not None and declared > room:
        raise TooLarge(f"a part of {declared} bytes at offset {offset} goes past the "
                       f"declared size of {row.size} bytes", {"limit": room})
    try:  # the room for the part (a chunked one: for the most it may bring)
        check_room(settings.home, declared if declared is not None
                   else min(room, settings.upload_max_part_bytes), settings.disk_reserve_bytes)
    except OSError as exc:
        raise no_space(exc) from None
    received, pending = 0, []
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > room:
                raise TooLarge(f"the part goes past the declared size of {row.size} bytes",
                               {"limit": room})
            pending.append(chunk)
            if sum(map(len, pending)) >= DISPATCH_BYTES:
                await anyio.to_thread.run_sync(staged.append, pending)
                pending = []
        await anyio.to_thread.run_sync(staged.append, pending)
        await anyio.to_thread.run_sync(staged.fsync)
    except ClientDisconnect:  # keep what arrived: the client resumes after it
        await anyio.to_thread.run_sync(staged.append, pending)
        await anyio.to_thread.run_sync(staged.fsync)
        await anyio.to_thread.run_sync(service.record_part, settings, row.id, staged.size,
                                       received, False)
        return Response(status_code=400)  # (nobody is left to read it)
    except Exception as exc:  # refused (too long, the disk full): none of it is kept
        await anyio.to_thread.run_sync(staged.truncate)
        await anyio.to_thread.run_sync(service.record_part, settings, row.id, staged.size,
                                       received, False)
        if isinstance(exc, OSError):
            raise no_space(exc) from None
        raise
    recorded = await anyio.to_thread.run_sync(service.record_part, settings, row.id,
                                              staged.size, received, True)
    if recorded is None:
        raise not_found("upload", row.id)
    return _answer(settings, recorded, staged.size)


async def _read_staged(staged: StagedFile, size: int) -> AsyncIterator[bytes]:
    """The staged bytes, a megabyte at a time, read in a thread."""
    position = 0
    while position < size:
        piece = await anyio.to_thread.run_sync(staged.read, position,
                                               min(DISPATCH_BYTES, size - position))
        if not piece:
            return
        position += len(piece)
        yield piece


@router.post("/{upload_id}/complete", status_code=201, response_model=DatasetPublic,
             responses={200: {"model": DatasetPublic, "description": "completed before "
                              "(or reuse: a dataset of the same content)"},
                        409: {"description": "not every byte staged yet (`detail.offset`), "
                                             "or a part is being written"}})
async def complete_upload(upload_id: str, request: Request, settings: SettingsDep,
                          session: WriteSessionDep, principal: TrainAuth) -> Response:
    """Parse the staged file into a dataset, as POST /v1/datasets would the same bytes
    with the session's options (the same answer, errors and limits: 422 naming the line,
    413, 507); the staged bytes are removed once it is stored. Completing again answers
    the dataset it made (200). A failed completion keeps the staged bytes: retry it (507),
    or DELETE the session."""
    tenant = principal.tenant_id
    row = await _find(settings, tenant, upload_id)
    if row.status == service.COMPLETED:
        return await anyio.to_thread.run_sync(_completed, session, tenant, row)
    staged = await _hold(settings, row)
    try:
        if staged.size != row.size:
            raise Conflict(f"{staged.size} of the upload's {row.size} bytes are staged: "
                           "send the rest first", {"offset": staged.size, "size": row.size})
        options = row.options
        body = Body(_read_staged(staged, row.size), "application/octet-stream", str(row.size))
        async with idempotency.Write(request, settings, tenant,
                                     "POST /v1/uploads/{id}/complete", session) as write:
            answer = await _upload(
                request, settings, write, tenant, row.name, bool(options.get("reuse")),
                options.get("format"), options.get("label_column"),
                str(options.get("task", "auto")), options.get("weight_column"),
                str(options.get("dtype", "auto")), body=body,
                stored=lambda s, dataset_id: service.mark_completed(s, row.id, dataset_id))
    finally:
        staged.close()
    if answer.status_code < 300:
        await anyio.to_thread.run_sync(remove_staged, settings.home, row.id)
    return answer


def _completed(session: Session, tenant_id: str, row: Upload) -> Response:
    dataset = session.get(Dataset, row.dataset_id) if row.dataset_id else None
    if dataset is None or dataset.tenant_id != tenant_id:
        raise Conflict(f"upload {row.id!r} was completed into dataset {row.dataset_id!r}, "
                       "since deleted")
    return Response(DatasetPublic.model_validate(dataset).model_dump_json(),
                    media_type="application/json")


@router.delete("/{upload_id}", status_code=204)
def delete_upload(upload_id: str, session: WriteSessionDep, settings: SettingsDep,
                  principal: TrainAuth) -> None:
    """Abort a session: its staged bytes are removed (a completed one is forgotten; its
    dataset stays)."""
    upload_id = ids.resolve(session, "upload", principal.tenant_id, upload_id)
    service.delete_upload(session, settings, principal.tenant_id, upload_id)
