"""/v1/predictions: batch predictions of a model over a stored dataset, run by a worker
(app.domain.services.predictions): create, list, show, cancel, delete, progress events,
output.

Creating, cancelling and deleting need the `train` scope (it runs work on a worker, as a job does);
the rest `read`. Another tenant's prediction is a 404."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response, StreamingResponse
from sse_starlette import EventSourceResponse

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.api.routes.events import state_stream
from app.domain.batch_output import FORMATS, encode
from app.domain.orm import Prediction
from app.domain.prediction_schemas import PredictionCreate, PredictionPublic, PredictionsPublic
from app.domain.services import predictions as service
from app.domain.services.models import get_model
from app.infra.db import read_sessionmaker_for
from app.infra.storage import blob_store

router = APIRouter(prefix="/v1/predictions", tags=["predictions"])


@router.post("", status_code=202, response_model=PredictionPublic)
def create_prediction(spec: PredictionCreate, request: Request, reader: SessionDep,
                      session: WriteSessionDep, settings: SettingsDep, principal: TrainAuth
                      ) -> PredictionPublic | Response:
    """Queue a batch prediction of model `model_id` on every row of stored dataset
    `dataset_id`: 202 with the `queued` record. Follow it with GET (or its `events`), then
    download its output. An `Idempotency-Key` header works as for POST /v1/jobs: the
    record, its message to the workers and the stored answer commit together."""
    tenant = principal.tenant_id
    model_id, _served = ids.resolve_model(reader, tenant, spec.model_id)
    dataset_id = ids.resolve_field(reader, "dataset", tenant, spec.dataset_id, "dataset_id")
    with idempotency.Write(request, settings, tenant, "POST /v1/predictions", session) as write:
        return write.run(
            idempotency.request_hash(model_id, dataset_id, spec.model_dump_json()),
            lambda: (202, PredictionPublic.model_validate(service.create_prediction(
                reader, session, settings, tenant, model_id, dataset_id, spec.outputs))))


@router.get("", response_model=PredictionsPublic)
def list_predictions(session: SessionDep, principal: ReadAuth, page: PageDep
                     ) -> PredictionsPublic:
    rows, count = service.list_predictions(session, principal.tenant_id, limit=page.limit,
                                           offset=page.offset)
    return PredictionsPublic(data=[PredictionPublic.model_validate(r) for r in rows],
                             count=count)


@router.get("/{prediction_id}", response_model=PredictionPublic)
def get_prediction(prediction_id: str, session: SessionDep, principal: ReadAuth
                   ) -> PredictionPublic:
    prediction_id = ids.resolve(session, "prediction", principal.tenant_id, prediction_id)
    return PredictionPublic.model_validate(
        service.get_prediction(session, principal.tenant_id, prediction_id))


@router.post("/{prediction_id}/cancel", status_code=202, response_model=PredictionPublic)
def cancel_prediction(prediction_id: str, session: WriteSessionDep, settings: SettingsDep,
                      principal: TrainAuth) -> PredictionPublic:
    """A queued prediction is cancelled at once; a running one stops after its block."""
    prediction_id = ids.resolve(session, "prediction", principal.tenant_id, prediction_id)
    return PredictionPublic.model_validate(
        service.cancel(session, settings, principal.tenant_id, prediction_id))


@router.delete("/{prediction_id}", status_code=204)
def delete_prediction(prediction_id: str, session: WriteSessionDep, settings: SettingsDep,
                      principal: TrainAuth) -> None:
    """Delete a finished prediction and its output (409 while queued or running)."""
    prediction_id = ids.resolve(session, "prediction", principal.tenant_id, prediction_id)
    service.delete_prediction(session, settings, principal.tenant_id, prediction_id)


@router.get("/{prediction_id}/output", response_class=StreamingResponse,
            responses={200: {"content": {t: {} for t in FORMATS.values()}}})
def prediction_output(prediction_id: str, session: SessionDep, settings: SettingsDep,
                      principal: ReadAuth,
                      format: str = Query("csv", pattern="^(csv|jsonl|npz)$")
                      ) -> StreamingResponse:
    """The output of a succeeded prediction (409 before), streamed: `csv` (row, label,
    decision_value or decision_value_<i>, probability_<class>), `jsonl` (one object per
    row) or `npz` (arrays labels, decision_values, probabilities)."""
    tenant = principal.tenant_id
    prediction_id = ids.resolve(session, "prediction", tenant, prediction_id)
    prediction = service.get_prediction(session, tenant, prediction_id)
    ref = service.output_ref(prediction)
    classes = list(get_model(session, tenant, prediction.model_id).labels)
    session.close()
    handle = blob_store(settings).open(ref)
    return StreamingResponse(encode(handle, format, classes), media_type=FORMATS[format],
                             headers={"Content-Disposition": f'attachment; filename='
                                      f'"prediction-{prediction_id}.{format}"'})


def _state(database_url: str, prediction_id: str) -> dict[str, Any]:
    with read_sessionmaker_for(database_url)() as session:
        row = session.get(Prediction, prediction_id)
        assert row is not None
        return {"status": row.status.value, "rows_done": row.rows_done, "rows": row.rows,
                "error": row.error}


@router.get("/{prediction_id}/events", response_class=EventSourceResponse,
            responses={200: {"content": {"text/event-stream": {}},
                             "description": "SSE stream of `progress` and `status` events"}})
async def prediction_events(prediction_id: str, request: Request, settings: SettingsDep,
                            principal: ReadAuth) -> EventSourceResponse:
    """`progress` events ({rows_done, rows}) as the worker passes its blocks, then one
    terminal `status` event, after which the stream ends."""
    tenant = principal.tenant_id
    prediction_id = await ids.owned_off_loop(settings.database_url, "prediction", tenant,
                                             prediction_id)
    return state_stream(request, settings, prediction_id,
                        lambda: _state(settings.database_url, prediction_id))
