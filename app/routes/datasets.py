"""/v1/datasets: upload (streamed through the parser), list, show, delete."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio.to_thread
import numpy as np
from fastapi import APIRouter, Query, Request
from sqlalchemy import func, select

from app.deps import SessionDep, SettingsDep, WriteSessionDep
from app.errors import ApiError, not_found
from app.ingest import receive_dataset
from app.orm import Dataset, Job, new_id
from app.schemas import DatasetPublic, DatasetsPublic
from app.storage import save_dataset_arrays

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])
log = logging.getLogger("hinge.api")

UPLOAD_DOC = """Upload an svmlight/LIBSVM file, plain or gzip/bz2/xz (detected by magic bytes).

Send it as multipart form data (field `file`, optional field `name`) or as the raw request
body (optional query parameter `name`). Bad input gets 422 naming the line and the
problem; an upload over HINGE_MAX_UPLOAD_BYTES (compressed or decompressed) gets 413.
"""


def label_key(label: float) -> str:
    return str(int(label)) if float(label).is_integer() else repr(float(label))


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
    labels, counts = np.unique(parsed.y, return_counts=True)
    dataset_id = new_id()
    path = await anyio.to_thread.run_sync(
        lambda: save_dataset_arrays(
            settings.datasets_dir,
            dataset_id,
            {"data": parsed.data, "indices": parsed.indices, "indptr": parsed.indptr,
             "y": parsed.y},
        )
    )
    dataset = Dataset(
        id=dataset_id,
        name=(name or form_name or "dataset")[:255],
        rows=len(parsed.y),
        features=int(parsed.n_features),
        nnz=len(parsed.data),
        labels=[float(v) for v in labels],
        class_counts={label_key(v): int(c) for v, c in zip(labels, counts, strict=True)},
        sha256=parsed.sha256,
        size_bytes=int(parsed.bytes_read),
        blob_path=str(path),
    )

    def insert() -> None:
        try:
            session.add(dataset)
            session.commit()
        except BaseException:
            session.rollback()
            Path(path).unlink(missing_ok=True)
            raise

    await anyio.to_thread.run_sync(insert)
    return dataset


@router.get("", response_model=DatasetsPublic)
def list_datasets(
    session: SessionDep,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> DatasetsPublic:
    count = session.scalar(select(func.count()).select_from(Dataset)) or 0
    rows = session.scalars(
        select(Dataset).order_by(Dataset.created_at.desc()).limit(limit).offset(offset)
    ).all()
    return DatasetsPublic(data=[DatasetPublic.model_validate(r) for r in rows], count=count)


@router.get("/{dataset_id}", response_model=DatasetPublic)
def get_dataset(dataset_id: str, session: SessionDep) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None:
        raise not_found("dataset", dataset_id)
    return dataset


@router.delete("/{dataset_id}", status_code=204)
def delete_dataset(dataset_id: str, session: WriteSessionDep) -> None:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None:
        raise not_found("dataset", dataset_id)
    active = session.scalar(
        select(func.count()).select_from(Job).where(
            Job.dataset_id == dataset_id, Job.status.in_(("queued", "running"))
        )
    )
    if active:
        raise ApiError(409, f"dataset {dataset_id!r} has {active} queued or running job(s); "
                            "cancel them or wait for them to finish first")
    blob = Path(dataset.blob_path)
    session.delete(dataset)
    session.commit()
    blob.unlink(missing_ok=True)
