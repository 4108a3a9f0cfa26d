"""/v1/datasets: upload (streamed through the parser), list, show, delete."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app import idempotency
from app.auth import ReadAuth, TrainAuth
from app.deps import SessionDep, SettingsDep, WriteSessionDep
from app.ingest import check_name, receive_dataset, upload_gate
from app.orm import Dataset
from app.schemas import DatasetPublic, DatasetsPublic
from app.services import datasets as service

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

UPLOAD_DOC = """Upload an svmlight/LIBSVM file, plain or gzip/bz2/xz (detected by magic bytes).

Send it as multipart form data (field `file`, optional field `name`) or as the raw request
body (optional query parameter `name`). Bad input gets 422 naming the line and the
problem; an upload over HINGE_MAX_UPLOAD_BYTES (compressed or decompressed) gets 413.
"""


@router.post(
    "",
    status_code=201,
    response_model=DatasetPublic,
    description=UPLOAD_DOC,
    openapi_extra={
        "requestBody": {
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "name": {"type": "string"},
                        },
                        "required": ["file"],
                    }
                },
                "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            },
            "required": True,
        }
    },
)
async def upload_dataset(
    request: Request,
    settings: SettingsDep,
    session: WriteSessionDep,
    principal: TrainAuth,
    name: str | None = Query(None, max_length=255),
) -> Dataset | Response:
    if name is not None:
        check_name(name)
    key = idempotency.request_key(request)
    held: idempotency.Stored | idempotency.Reserved | None = None
    if key is not None:
        held = await anyio.to_thread.run_sync(
            idempotency.begin, settings, principal.tenant_id, key, "POST /v1/datasets")
    try:
        return await _upload(request, settings, session, principal.tenant_id, name, held)
    except BaseException:
        if isinstance(held, idempotency.Reserved):
            await anyio.to_thread.run_sync(session.rollback)  # free SQLite's write lock
            await anyio.to_thread.run_sync(held.abandon)
        raise


async def _upload(request: Request, settings: SettingsDep, session: WriteSessionDep,
                  tenant_id: str, name: str | None,
                  held: idempotency.Stored | idempotency.Reserved | None
                  ) -> Dataset | Response:
    remaining = await anyio.to_thread.run_sync(
        service.remaining_stored_bytes, settings, tenant_id)
    gate = upload_gate(request.app.state, settings)
    async with gate.slots:
        parsed, form_name = await receive_dataset(
            request.stream(),
            request.headers.get("content-type", ""),
            request.headers.get("content-length"),
            settings, threads=gate.threads, max_array_bytes=remaining,
        )
        final_name = name or form_name or "dataset"
        asked = idempotency.request_hash(parsed.sha256, final_name)
        if isinstance(held, idempotency.Stored):
            return held.replay(asked)
        dataset = await anyio.to_thread.run_sync(
            service.create_dataset, session, settings, tenant_id, parsed, final_name,
            limiter=gate.threads)
    if held is None:
        return dataset
    body = DatasetPublic.model_validate(dataset).model_dump_json().encode()
    # the dataset commits before its answer is stored: a crash in between leaves a
    # reservation without an answer (a retry gets 409 until it expires), never an answer
    # naming a dataset that was not committed
    await anyio.to_thread.run_sync(session.commit)
    await anyio.to_thread.run_sync(held.complete, 201, body, asked)
    return Response(body, status_code=201, media_type="application/json")


@router.get("", response_model=DatasetsPublic)
def list_datasets(
    session: SessionDep,
    principal: ReadAuth,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> DatasetsPublic:
    rows = service.list_datasets(session, principal.tenant_id, limit=limit, offset=offset)
    return DatasetsPublic(data=[DatasetPublic.model_validate(r) for r in rows],
                          count=service.count_datasets(session, principal.tenant_id))


@router.get("/{dataset_id}", response_model=DatasetPublic)
def get_dataset(dataset_id: str, session: SessionDep, principal: ReadAuth) -> Dataset:
    return service.get_dataset(session, principal.tenant_id, dataset_id)


@router.delete("/{dataset_id}", status_code=204)
def delete_dataset(dataset_id: str, session: WriteSessionDep, principal: TrainAuth) -> None:
    service.delete_dataset(session, principal.tenant_id, dataset_id)
