"""/v1/models: import, list, show, delete, predict, export, lineage; by id or by a
registry reference (name@alias, name/versions/n)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Coroutine
from typing import Annotated, Any

import anyio.to_thread
import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import PlainTextResponse
from fastapi.routing import APIRoute

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth, declared_scope
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.api.http_errors import ApiError
from app.domain.errors import Invalid, Unsupported
from app.domain.orm import Model
from app.domain.schemas import (
    LineagePublic,
    ModelPublic,
    ModelsPublic,
    PredictRequest,
    PredictResponse,
)
from app.domain.services import lineage, model_import, registry
from app.domain.services import models as service
from app.domain.services.tenants import Principal
from app.infra.bus import announce
from app.infra.db import after_commit
from app.settings import Settings

router = APIRouter(prefix="/v1/models", tags=["models"])

# A predict body up to this size on a cached model runs on the event loop (a single row
# takes tens of microseconds); larger ones, and cache misses, in a worker thread.
INLINE_PREDICT_BYTES = 16 << 10


PREDICT_DOC = """Predict with a stored model (kept in memory by each API process after its
first use, so a repeated predict reads nothing from the database).

JSON body `{"instances": [row, ...]}` where each row is sparse
`{"indices": [1-based ints], "values": [floats]}`, dense `[one float per feature, in
order]` (at least as many values as the model has features) or, for a model trained on a
dataset with feature names (CSV, TSV, Parquet, .npz with names), named
`{"feature name": float, ...}` (names left out are 0); or a `text/plain` body of
svmlight lines (the label is optional and ignored). A wrong shape gets 422 showing the
accepted ones.

Features the model has never seen (an index beyond its features, a name its dataset did
not have, a dense row's extra values) have no weight: a non-zero value for one is ignored
and named in the answer's `warnings`; with `strict` (the query parameter `?strict=true`,
or `"strict": true` in the JSON body) it is refused instead, 422 naming the row and the
feature. A model trained with `scale` scales the rows with the stored training ranges
first.

`decision_values`: for two classes one value per row, positive for `classes[1]`. For more
classes, one-vs-rest models (every linear solver; smo with multiclass 'ovr') give one value
per class, in the order of `classes` (the largest wins); one-vs-one models (smo, the
default) give one value per class pair in LIBSVM's order (0,1), (0,2), ..., (0,k-1),
(1,2), ...: a positive value for pair (i, j) is a vote for `classes[i]`, a negative one for
`classes[j]`; the label is the class with the most votes (ties to the smaller class).

`probabilities` (models trained with `probability: true`): one row per instance, one
probability per class in the order of `classes`, summing to 1.

`model_id` may be a registry reference, `{name}@{alias}` (e.g. `churn@production`), or
use POST /v1/models/{name}/versions/{version}/predict: the answer's `served_by` and the
`Hinge-Model-Version` header name the version that answered.
"""


PREDICT_OPENAPI = {
    # read from the query string by hand (the hot path solves no dependencies)
    "parameters": [{"name": "strict", "in": "query", "required": False,
                    "schema": {"type": "boolean", "default": False},
                    "description": "Refuse (422) non-zero values of features the "
                    "model has never seen instead of ignoring them with a warning"}],
    "requestBody": {
        "content": {
            "application/json": {"schema": PredictRequest.model_json_schema()},
            "text/plain": {"schema": {"type": "string"}},
        },
        "required": True,
    }
}
# The version of a registered model that answered a request by reference.
VERSION_HEADER = "Hinge-Model-Version"


class PredictRoute(APIRoute):
    """POST /v1/models/{model_id}/predict without FastAPI's dependency solver: its handler
    calls the route's scope requirement (the same `ReadAuth` object FastAPI would call,
    still declared on the endpoint for the OpenAPI schema and the authorization matrix)
    and the endpoint itself. Solving the dependency tree (the path parameter, the request,
    the principal) cost more per request than the whole single-row predict."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        requirement: Callable[[Request], Coroutine[Any, Any, Principal]] = next(
            d.call for d in self.dependant.dependencies
            if d.call is not None and declared_scope(d.call) is not None)
        endpoint = self.endpoint

        async def handler(request: Request) -> Response:
            principal = await requirement(request)
            return await endpoint(request.path_params["model_id"], request, principal)

        return handler


async def predict(model_id: str, request: Request, principal: ReadAuth) -> Response:
    return await _predict(model_id, request, principal)


# first in the router: it tries routes in order, and predict is the hot path
router.add_api_route("/{model_id}/predict", predict, methods=["POST"],
                     response_model=PredictResponse, description=PREDICT_DOC,
                     openapi_extra=PREDICT_OPENAPI, route_class_override=PredictRoute)


async def _predict(model_id: str, request: Request, principal: ReadAuth) -> Response:
    settings: Settings = request.app.state.settings  # (no dependency: fewer to solve)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > settings.max_predict_bytes:
            raise ApiError(413, f"request body exceeds {settings.max_predict_bytes} bytes "
                                "(HINGE_MAX_PREDICT_BYTES)")
    content_type = request.headers.get("content-type", "application/json")
    strict = (_strict(request.query_params.get("strict")) if request.scope["query_string"]
              else False)
    served = None
    if registry.is_reference(model_id):  # name@alias, name/versions/n
        served = await registry.resolve_off_loop(settings.database_url, principal.tenant_id,
                                                 model_id)
        model_id = served.model_id
    else:
        model_id = await ids.resolve_off_loop(settings.database_url, "model",
                                              principal.tenant_id, model_id)
    cached = service.cached_model(principal.tenant_id, model_id)
    if cached is not None and len(body) <= INLINE_PREDICT_BYTES:
        # a few rows on a model in memory: cheaper here than a hop to a worker thread
        answer = service.predict_with(cached, settings, bytes(body), content_type, strict)
    else:  # a database read, or many rows: off the event loop
        answer = await anyio.to_thread.run_sync(
            service.predict, settings, settings.database_url, principal.tenant_id, model_id,
            bytes(body), content_type, strict)
    if served is None:
        return Response(orjson.dumps(answer), media_type="application/json")
    answer["served_by"] = {"name": served.name, "version": served.version,
                           "alias": served.alias}
    return Response(orjson.dumps(answer), media_type="application/json",
                    headers={VERSION_HEADER: served.header})


@router.post("/{name}/versions/{version}/predict", response_model=PredictResponse,
             description="Predict with version `version` of the registered model `name` "
             "(the body and the answer as for POST /v1/models/{model_id}/predict).",
             openapi_extra=PREDICT_OPENAPI)
async def predict_version(name: str, version: int, request: Request, principal: ReadAuth
                          ) -> Response:
    return await _predict(f"{name}/versions/{version}", request, principal)


@router.get("/{model_id}/lineage", response_model=LineagePublic)
def model_lineage(model_id: str, session: SessionDep, principal: ReadAuth) -> LineagePublic:
    """Where the model comes from and what became of it: its dataset (with its sha256; a
    split's parent), the job that trained it and the search that chose its parameters
    (when a search's refit trained it), the parameters as applied, the solver's exit,
    certificate and regularisation path, the code version that trained it, its
    evaluations, and the registered versions it is."""
    model_id = ids.resolve(session, "model", principal.tenant_id, model_id)
    return LineagePublic.model_validate(lineage.lineage(session, principal.tenant_id,
                                                        model_id))


IMPORT_DOC = """Import a model trained elsewhere: a LIBSVM model file (`svm_save_model`,
`svm-train`) or a LIBLINEAR one (`save_model`, `train`), as multipart form data: field
`file` (the model), optional `range` (the `svm-scale -s` range file it was trained behind:
predict then scales raw rows with it, like `svm-scale -r` before `svm-predict`), optional
`n_features` (a LIBSVM file does not say its width: the default is the largest
support-vector index; rows are cut to the width on predict).

The file is checked field by field (header fields, counts, every support-vector or weight
line); one that does not parse gets 422 naming the line (`detail.line`). Served:
LIBSVM c_svc and nu_svc (linear, polynomial, rbf, sigmoid kernels; with probA/probB,
predict gives probabilities), LIBLINEAR's classification solvers (-s 0 to 7). Regression,
one-class and precomputed-kernel models get 422 "not supported yet". Limits:
HINGE_MAX_MODEL_IMPORT_BYTES (each file), HINGE_MAX_IMPORT_SUPPORT_VECTORS,
HINGE_MAX_FEATURES, HINGE_MAX_CLASSES.

The model (201) has no job and no dataset; `origin` records the format, the file names and
their sha256. Predict, evaluations and export serve it like a trained model."""


@router.post(
    "",
    status_code=201,
    response_model=ModelPublic,
    description=IMPORT_DOC,
    openapi_extra={
        "requestBody": {
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "file": {"type": "string", "format": "binary"},
                            "range": {"type": "string", "format": "binary"},
                            "n_features": {"type": "integer", "minimum": 1},
                        },
                        "required": ["file"],
                    }
                },
            },
            "required": True,
        }
    },
)
async def import_model(request: Request, settings: SettingsDep, session: WriteSessionDep,
                       principal: TrainAuth) -> Response:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "multipart/form-data":
        raise Unsupported(
            f"Content-Type {media or '(none)'} is not accepted: send the model file as "
            "multipart/form-data, field `file` (curl -F file=@svm.model), with an "
            "optional `range` file (-F range=@svm.range)",
            {"accepted": ["multipart/form-data"]})
    form = await request.form(max_files=2, max_fields=4)
    try:
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise Invalid("the model file goes in a multipart file field `file` "
                          "(curl -F file=@svm.model)", field="file")
        range_upload = form.get("range")
        if isinstance(range_upload, str):
            raise Invalid("the range file goes in a multipart file field `range` "
                          "(curl -F range=@svm.range)", field="range")
        width = _n_features(form.get("n_features"))
        payload = await upload.read()
        range_payload = None if range_upload is None else await range_upload.read()
        file_name = upload.filename or "model"
        range_name = None if range_upload is None else (range_upload.filename or "range")
    finally:
        await form.close()
    async with idempotency.Write(request, settings, principal.tenant_id, "POST /v1/models",
                                 session) as write:
        asked = idempotency.request_hash(
            hashlib.sha256(payload).hexdigest(), file_name,
            "" if range_payload is None else hashlib.sha256(range_payload).hexdigest(),
            str(width))
        replayed = write.replay(asked)
        if replayed is not None:
            return replayed
        model = await anyio.to_thread.run_sync(
            model_import.import_model, write.session, settings, principal.tenant_id,
            payload, file_name, range_payload, range_name, width)
        return await anyio.to_thread.run_sync(write.answer, 201,
                                              ModelPublic.model_validate(model), asked)


def _n_features(value: object) -> int | None:
    if value is None or value == "":
        return None
    try:
        width = int(str(value))
    except ValueError:
        width = 0
    if width < 1:
        raise Invalid(f"n_features must be a positive integer, not {value!r}",
                      field="n_features")
    return width


def _strict(value: str | None) -> bool:
    if value is None:
        return False
    if value.lower() in ("true", "1", "yes", "on"):
        return True
    if value.lower() in ("false", "0", "no", "off", ""):
        return False
    raise ApiError(422, f"strict={value!r}: expected true or false")


@router.get("", response_model=ModelsPublic)
def list_models(session: SessionDep, principal: ReadAuth, page: PageDep) -> ModelsPublic:
    tenant = principal.tenant_id
    rows = service.list_models(session, tenant, limit=page.limit, offset=page.offset)
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


ExportFormat = Annotated[str | None, Query(pattern="^(liblinear|libsvm|scale|onnx)$")]


@router.get("/{model_id}/export", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {},
                                         "application/octet-stream": {}}}})
def export_model(model_id: str, session: SessionDep, settings: SettingsDep,
                 principal: ReadAuth, format: ExportFormat = None) -> Response:
    """A model file the reference engine loads: `format=liblinear` for linear models (the
    default for them), `format=libsvm` for kernel models (their default; with probA/probB
    when trained with probability), or `format=scale`: the `svm-scale -s` range file of a
    model trained with scale minmax (scale test rows with `svm-scale -r` before LIBSVM's or
    LIBLINEAR's predict).

    `format=onnx`: the model as an ONNX graph (application/octet-stream), linear or kernel,
    with its scaler and probability calibration inside: input `input` double [N,
    n_features] (raw dense rows), outputs `label` [N], `decision_values` ([N] for two
    classes, else [N, m]) and, for calibrated models, `probabilities` [N, n_classes], the
    same as predict's (docs/api.md). Needs the server's `onnx` extra (503 without it).

    `model_id` may be `{name}@{alias}`; the Hinge-Model-Version header then names the
    version exported."""
    model_id, served = ids.resolve_model(session, principal.tenant_id, model_id)
    headers = {} if served is None else {VERSION_HEADER: served.header}
    if format == "onnx":
        return Response(
            service.export_onnx(session, settings, principal.tenant_id, model_id),
            media_type="application/octet-stream",
            headers={"Content-Disposition": f'attachment; filename="{model_id}.onnx"',
                     **headers})
    suffix = "range" if format == "scale" else "model"
    return PlainTextResponse(
        service.export_model(session, settings, principal.tenant_id, model_id, format),
        headers={"Content-Disposition": f'attachment; filename="{model_id}.{suffix}"',
                 **headers},
    )


@router.get("/{name}/versions/{version}/export", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {},
                                         "application/octet-stream": {}}}})
def export_version(name: str, version: int, session: SessionDep, settings: SettingsDep,
                   principal: ReadAuth, format: ExportFormat = None) -> Response:
    """Export version `version` of the registered model `name`, as GET
    /v1/models/{model_id}/export does."""
    return export_model(f"{name}/versions/{version}", session, settings, principal, format)
