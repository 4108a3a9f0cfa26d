"""/v1/datasets: upload (streamed through the parser), list, show, delete, split."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Query, Request

from app.deps import SessionDep, SettingsDep, WriteSessionDep
from app.ingest import receive_dataset
from app.orm import Dataset
from app.schemas import DatasetPublic, DatasetsPublic, SplitCreate, SplitPublic
from app.services import datasets as service
from app.services import splits

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
    name: str | None = Query(None, max_length=255),
) -> Dataset:
    parsed, form_name = await receive_dataset(
        request.stream(),
        request.headers.get("content-type", ""),
        request.headers.get("content-length"),
        settings,
    )
    return await anyio.to_thread.run_sync(
        service.create_dataset, session, settings, parsed, name or form_name or "dataset")


@router.get("", response_model=DatasetsPublic)
def list_datasets(
    session: SessionDep,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> DatasetsPublic:
    rows = service.list_datasets(session, limit=limit, offset=offset)
    return DatasetsPublic(data=[DatasetPublic.model_validate(r) for r in rows],
                          count=service.count_datasets(session))


@router.get("/{dataset_id}", response_model=DatasetPublic)
def get_dataset(dataset_id: str, session: SessionDep) -> Dataset:
    return service.get_dataset(session, dataset_id)


@router.delete("/{dataset_id}", status_code=204)
def delete_dataset(dataset_id: str, session: WriteSessionDep) -> None:
    service.delete_dataset(session, dataset_id)


@router.post("/{dataset_id}/split", status_code=201, response_model=SplitPublic)
def split_dataset(dataset_id: str, spec: SplitCreate, reader: SessionDep,
                  session: WriteSessionDep, settings: SettingsDep) -> SplitPublic:
    """Two new datasets, train and test, from this one's rows: `test_fraction` of the rows
    (of each class with `stratify`, the default) go to test, chosen by a shuffle seeded by
    `seed` (the same seed gives the same split). Each part records its parent, the seed and
    the fraction, and keeps the parent's feature count."""
    train, test = splits.split_dataset(reader, session, settings, dataset_id, spec)
    return SplitPublic(train=DatasetPublic.model_validate(train),
                       test=DatasetPublic.model_validate(test))
