"""/v1/datasets: upload (streamed through the parser), list, show, delete, split."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from sqlalchemy.orm import Session

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.domain.ingest import FORMATS, check_name, receive_dataset, upload_gate
from app.domain.label_tally import LabelTally
from app.domain.orm import Dataset
from app.domain.schemas import DatasetPublic, DatasetsPublic, SplitCreate, SplitPublic
from app.domain.services import datasets as service
from app.domain.services import splits
from app.domain.tasks import DETECT, UPLOAD_TASKS
from app.domain.weights import take_weight_column, weight_stats
from app.infra.storage import EXACT_FLOAT32, ShardWriter
from app.settings import Settings

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])

UploadFormat = Annotated[str | None, Query(
    pattern="^(" + "|".join(FORMATS) + ")$",
    description="svmlight, csv, tsv, parquet or npz (default: read from the content)")]

UploadDtype = Annotated[str, Query(
    pattern="^(auto|float32|float64)$",
    description="The stored values' layout: float32 (8 bytes a non-zero with the int32 "
    "indices; values rounded to float32), float64 (12 bytes a non-zero) or auto (the "
    "default): float32 when every value is exactly a float32 and the set streams to disk "
    "in shards (larger than HINGE_SHARD_BYTES), else float64")]

UploadTask = Annotated[str, Query(
    pattern="^(" + "|".join(UPLOAD_TASKS) + ")$",
    description="classification (class labels, at most HINGE_MAX_CLASSES distinct), "
    "regression (real-valued targets) or auto (the default): non-integer labels, or more "
    "distinct labels than HINGE_MAX_CLASSES, make a regression dataset")]

UPLOAD_DOC = """Upload a dataset: svmlight/LIBSVM, CSV or TSV with a header, Parquet, or a
NumPy .npz holding a CSR matrix; plain or gzip/bz2/xz (detected by magic bytes).

Send it as multipart form data (field `file`, optional fields `name`, `format`,
`label_column`, these two before `file`) or as the raw request body (query parameters
`name`, `format`, `label_column`). The format is read from the content unless `format`
says it: Parquet and .npz by their magic bytes, text whose first line has commas as CSV,
tabs (and no `index:value`) as TSV, anything else as svmlight.

- CSV/TSV: the first line names the columns; the labels are the column named `label`
  (any case) unless `label_column` names another (a header name, or a 0-based position;
  -1 is the last column); the other columns are the features, in order. Every cell must
  be a number: a missing value or text gets 422 naming its line, row and column.
  Zeros are not stored.
- Parquet (needs the server's optional extra `hinge[parquet]`, else 415): the same rule
  for the label column; numeric columns only; nulls and NaN refused naming row and column.
- .npz: the arrays `scipy.sparse.save_npz` writes (`data`, `indices`, `indptr`, `shape`,
  `format` = csr) plus the labels under `y` (or `label`/`labels`) and, optionally,
  `feature_names`.

`task` (query): `classification`, `regression` or `auto` (default; non-integer labels or
more than HINGE_MAX_CLASSES distinct labels make a regression dataset, whose summary is
`label_stats` instead of class counts).

`weight_column` (query): the column of instance weights, by header name (CSV, TSV,
Parquet, .npz with feature names) or 1-based feature index (svmlight); it leaves the
features, a row without a value has weight 0, and the summary gives `weight_stats`.
Weights must be finite and >= 0 (422 naming the row otherwise).

All formats become the same stored arrays, under the same limits. The dataset records
its `source_format` and, where the file named its columns, `feature_names`. Bad input
gets 422 naming the line (or row and column) and the problem; an upload over
HINGE_MAX_UPLOAD_BYTES (compressed or decompressed) gets 413.

The same content uploaded again (the same sha256 of the decompressed text, by the same
tenant) makes a new dataset whose answer lists the earlier ones in `duplicate_of`; with
`reuse=true` the answer is instead the oldest of them (200) and nothing is stored.
"""


@router.post(
    "",
    status_code=201,
    response_model=DatasetPublic,
    description=UPLOAD_DOC,
    responses={200: {"model": DatasetPublic,
                     "description": "reuse=true: a dataset with the same content"}},
    openapi_extra={
        "requestBody": {
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "name": {"type": "string"},
                            "format": {"type": "string", "enum": list(FORMATS)},
                            "label_column": {"type": "string"},
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
    reuse: bool = Query(False, description="Answer with the tenant's dataset of the same "
                        "content (200), if there is one, instead of storing a copy"),
    format: UploadFormat = None,
    label_column: str | None = Query(
        None, max_length=255, description="CSV/TSV/Parquet: the label column, by header "
        "name or 0-based position (default: the column named 'label')"),
    task: UploadTask = "auto",
    weight_column: str | None = Query(
        None, max_length=255, description="The column of instance weights (C_i = C * w_i): "
        "a header name (CSV, TSV, Parquet, .npz with feature names) or a 1-based feature "
        "index (svmlight); it leaves the features (see docs/weights.md)"),
    dtype: UploadDtype = "auto",
) -> DatasetPublic | Response:
    if name is not None:
        check_name(name)
    async with idempotency.Write(request, settings, principal.tenant_id,
                                 "POST /v1/datasets", session) as write:
        return await _upload(request, settings, write, principal.tenant_id, name, reuse,
                             format, label_column, task, weight_column, dtype)


@dataclass
class Body:
    """What an upload reads: the request's own body, or a resumable upload's staged
    bytes (app.api.routes.uploads), and the headers that describe it."""

    chunks: AsyncIterator[bytes]
    content_type: str
    content_length: str | None


def request_body(request: Request) -> Body:
    return Body(request.stream(), request.headers.get("content-type", ""),
                request.headers.get("content-length"))


Stored = Callable[[Session, str], None]  # in the dataset's transaction, with its id


async def _upload(request: Request, settings: Settings, write: idempotency.Write,
                  tenant_id: str, name: str | None, reuse: bool, fmt: str | None,
                  label_column: str | None, task: str = "auto",
                  weight_column: str | None = None, dtype: str = "auto",
                  body: Body | None = None, stored: Stored | None = None) -> Response:
    remaining = await anyio.to_thread.run_sync(
        service.remaining_stored_bytes, settings, tenant_id)
    # svmlight streams to disk in shards (a weight column is taken out of the whole set)
    writer = service.shard_writer(settings, dtype) if weight_column is None else None
    try:
        return await _receive_and_store(request, settings, write, tenant_id, name, reuse,
                                        fmt, label_column, task, weight_column, remaining,
                                        writer, LabelTally(task, settings.max_classes,
                                                           settings.max_memory_dataset_bytes),
                                        dtype, body or request_body(request), stored)
    finally:
        if writer is not None and not writer.owned:
            await anyio.to_thread.run_sync(writer.abort)  # nothing stored: no shard left


async def _receive_and_store(request: Request, settings: Settings,
                             write: idempotency.Write, tenant_id: str, name: str | None,
                             reuse: bool, fmt: str | None, label_column: str | None,
                             task: str, weight_column: str | None, remaining: int,
                             writer: ShardWriter | None, labels: LabelTally,
                             dtype: str, body: Body, stored: Stored | None) -> Response:
    gate = upload_gate(request.app.state, settings)
    async with gate.slots:
        parsed, form_name = await receive_dataset(
            body.chunks, body.content_type, body.content_length,
            settings, threads=gate.threads, max_array_bytes=remaining,
            fmt=fmt, label_column=label_column, task=task, shard_writer=writer,
            labels=labels,
        )
        final_name = name or form_name or "dataset"
        weights = None
        if weight_column is not None:
            parsed, weights = await anyio.to_thread.run_sync(
                take_weight_column, parsed, weight_column, limiter=gate.threads)
        # the same bytes read another way (another label column) are another dataset
        read_as = (parsed.source_format, *(parsed.feature_names or ()))
        asked = idempotency.request_hash(parsed.sha256, final_name,
                                         *(("reuse",) if reuse else ()),
                                         *((task,) if task != DETECT else ()),
                                         *(("weights", weight_column)
                                           if weight_column is not None else ()),
                                         *((f"dtype={dtype}",) if dtype != EXACT_FLOAT32 else ()),
                                         *(read_as if parsed.source_format != "svmlight"
                                           else ()))
        replayed = write.replay(asked)  # the hash of an upload is known once it is read
        if replayed is not None:
            return replayed
        earlier = [d for d in await anyio.to_thread.run_sync(
            service.same_content, settings, tenant_id, parsed.sha256)
            if d.source_format == parsed.source_format
            and d.feature_names == parsed.feature_names
            and task in (DETECT, d.task)
            and d.weight_stats == (None if weights is None else weight_stats(weights))
            and dtype in (EXACT_FLOAT32, d.value_dtype)]
        if reuse and earlier:
            status, answer = 200, DatasetPublic.model_validate(earlier[0])
        else:
            dataset = await anyio.to_thread.run_sync(
                service.create_dataset, write.session, settings, tenant_id, parsed, final_name,
                task, weights, writer if parsed.shards else None, labels, dtype,
                limiter=gate.threads)
            if parsed.shards and writer is not None:
                writer.owned = True  # the row's now; a failed commit removes them
            status, answer = 201, DatasetPublic.model_validate(dataset)
            answer.duplicate_of = [d.id for d in earlier]
    # the dataset and its stored answer commit together: a crash leaves both or neither
    # (and a retry of a request whose process died takes the key over: app/api/idempotency.py)

    def commit() -> Response:
        if stored is not None:
            stored(write.session, answer.id)
        return write.answer(status, answer, asked)

    return await anyio.to_thread.run_sync(commit)


@router.get("", response_model=DatasetsPublic)
def list_datasets(session: SessionDep, principal: ReadAuth, page: PageDep) -> DatasetsPublic:
    tenant = principal.tenant_id
    rows = service.list_datasets(session, tenant, limit=page.limit, offset=page.offset)
    return DatasetsPublic(data=[DatasetPublic.model_validate(r) for r in rows],
                          count=service.count_datasets(session, principal.tenant_id))


@router.get("/{dataset_id}", response_model=DatasetPublic)
def get_dataset(dataset_id: str, session: SessionDep, principal: ReadAuth) -> Dataset:
    dataset_id = ids.resolve(session, "dataset", principal.tenant_id, dataset_id)
    return service.get_dataset(session, principal.tenant_id, dataset_id)


@router.delete("/{dataset_id}", status_code=204)
def delete_dataset(dataset_id: str, session: WriteSessionDep, settings: SettingsDep,
                   principal: TrainAuth) -> None:
    dataset_id = ids.resolve(session, "dataset", principal.tenant_id, dataset_id)
    service.delete_dataset(session, settings, principal.tenant_id, dataset_id)


SPLIT_DOC = """Two new datasets, train and test, from this one's rows: `test_fraction` of the rows
(of each class with `stratify`, the default) go to test, chosen by a shuffle seeded by
`seed` (the same seed gives the same split). Each part records its parent, the seed and
the fraction, and keeps the parent's feature count.

Both parts belong to the caller's tenant and count against its limits like uploads (413
over the number of datasets or the stored bytes). With an `Idempotency-Key` header, a repeat
of the same request gets the first answer (for HINGE_IDEMPOTENCY_HOURS) instead of two more
datasets, and a different one a 422."""


@router.post("/{dataset_id}/split", status_code=201, response_model=SplitPublic,
             description=SPLIT_DOC)
def split_dataset(dataset_id: str, spec: SplitCreate, request: Request, reader: SessionDep,
                  session: WriteSessionDep, settings: SettingsDep, principal: TrainAuth
                  ) -> SplitPublic | Response:
    dataset_id = ids.resolve(reader, "dataset", principal.tenant_id, dataset_id)
    with idempotency.Write(request, settings, principal.tenant_id,
                           "POST /v1/datasets/{id}/split", session) as write:
        return write.run(idempotency.request_hash(dataset_id, spec.model_dump_json()),
                         lambda: (201, _split(reader, session, settings, principal.tenant_id,
                                              dataset_id, spec)))


def _split(reader: Session, session: Session, settings: Settings, tenant_id: str,
           dataset_id: str, spec: SplitCreate) -> SplitPublic:
    train, test = splits.split_dataset(reader, session, settings, tenant_id, dataset_id,
                                       spec)
    return SplitPublic(train=DatasetPublic.model_validate(train),
                       test=DatasetPublic.model_validate(test))
