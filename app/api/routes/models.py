"""/v1/models: list, show, delete, predict, export."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import PlainTextResponse

from app.api import ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import SessionDep, SettingsDep, WriteSessionDep
from app.api.http_errors import ApiError
from app.domain.orm import Model
from app.domain.schemas import ModelPublic, ModelsPublic, PredictRequest, PredictResponse
from app.domain.services import models as service
from app.infra.bus import announce
from app.infra.db import after_commit
from app.settings import Settings

router = APIRouter(prefix="/v1/models", tags=["models"])

# A predict body up to this size on a cached model runs on the event loop (a single row
# takes tens of microseconds); larger ones, and cache misses, in a worker thread.
INLINE_PREDICT_BYTES = 16 << 10


PREDICT_DOC = """Predict with a stored model (kept in memory by each API process after its
first use, so a repeated predict reads nothing from the database).

JSON body `{"instances": [{"indices": [1-based ints], "values": [floats]}, ...]}`, or a
`text/plain` body of svmlight lines (the label is optional and ignored). Features beyond
the model's are ignored (their weight is 0). A model trained with `scale` scales the rows
with the stored training ranges first.

`decision_values`: for two classes one value per row, positive for `classes[1]`. For more
classes, one-vs-rest models (every linear solver; smo with multiclass 'ovr') give one value
per class, in the order of `classes` (the largest wins); one-vs-one models (smo, the
default) give one value per class pair in LIBSVM's order (0,1), (0,2), ..., (0,k-1),
(1,2), ...: a positive value for pair (i, j) is a vote for `classes[i]`, a negative one for
`classes[j]`; the label is the class with the most votes (ties to the smaller class).

`probabilities` (models trained with `probability: true`): one row per instance, one
probability per class in the order of `classes`, summing to 1.
"""


# first in the router: it tries routes in order, and predict is the hot path
@router.post(
    "/{model_id}/predict",
    response_model=PredictResponse,
    description=PREDICT_DOC,
    openapi_extra={
        "requestBody": {
            "content": {
                "application/json": {"schema": PredictRequest.model_json_schema()},
                "text/plain": {"schema": {"type": "string"}},
            },
            "required": True,
        }
    },
)
async def predict(model_id: str, request: Request, principal: ReadAuth) -> Response:
    settings: Settings = request.app.state.settings  # (no dependency: fewer to solve)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > settings.max_predict_bytes:
            raise ApiError(413, f"request body exceeds {settings.max_predict_bytes} bytes "
                                "(HINGE_MAX_PREDICT_BYTES)")
    content_type = request.headers.get("content-type", "application/json")
    model_id = await ids.resolve_off_loop(settings.database_url, "model", principal.tenant_id,
                                          model_id)
    cached = service.cached_model(principal.tenant_id, model_id)
    if cached is not None and len(body) <= INLINE_PREDICT_BYTES:
        # a few rows on a model in memory: cheaper here than a hop to a worker thread
        answer = service.predict_with(cached, settings, bytes(body), content_type)
    else:  # a database read, or many rows: off the event loop
        answer = await anyio.to_thread.run_sync(
            service.predict, settings, settings.database_url, principal.tenant_id, model_id,
            bytes(body), content_type)
    return Response(orjson.dumps(answer), media_type="application/json")


@router.get("", response_model=ModelsPublic)
def list_models(
    session: SessionDep,
    principal: ReadAuth,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> ModelsPublic:
    rows = service.list_models(session, principal.tenant_id, limit=limit, offset=offset)
    return ModelsPublic(data=[ModelPublic.model_validate(r) for r in rows],
                        count=service.count_models(session, principal.tenant_id))


@router.get("/{model_id}", response_model=ModelPublic)
def get_model(model_id: str, session: SessionDep, principal: ReadAuth) -> Model:
    model_id = ids.resolve(session, "model", principal.tenant_id, model_id)
    return service.get_model(session, principal.tenant_id, model_id)


@router.delete("/{model_id}", status_code=204)
def delete_model(model_id: str, session: WriteSessionDep, settings: SettingsDep,
                 principal: TrainAuth) -> None:
    """Delete a model; every API process stops serving it (their caches drop it)."""
    model_id = ids.resolve(session, "model", principal.tenant_id, model_id)
    service.delete_model(session, settings, principal.tenant_id, model_id)
    after_commit(session, lambda: announce(settings, "model", model_id))


ExportFormat = Annotated[str | None, Query(pattern="^(liblinear|libsvm|scale)$")]


@router.get("/{model_id}/export", response_class=PlainTextResponse)
def export_model(model_id: str, session: SessionDep, settings: SettingsDep,
                 principal: ReadAuth, format: ExportFormat = None) -> PlainTextResponse:
    """A model file the reference engine loads: `format=liblinear` for linear models (the
    default for them), `format=libsvm` for kernel models (their default; with probA/probB
    when trained with probability), or `format=scale`: the `svm-scale -s` range file of a
    model trained with scale minmax (scale test rows with `svm-scale -r` before LIBSVM's or
    LIBLINEAR's predict)."""
    suffix = "range" if format == "scale" else "model"
    model_id = ids.resolve(session, "model", principal.tenant_id, model_id)
    return PlainTextResponse(
        service.export_model(session, settings, principal.tenant_id, model_id, format),
        headers={"Content-Disposition": f'attachment; filename="{model_id}.{suffix}"'},
    )
