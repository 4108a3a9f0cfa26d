"""/v1/models: list, show, delete, predict, export."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import ValidationError
from sqlalchemy import func, select
from sqlalchemy.orm import Session, defer

from app.deps import SessionDep, SettingsDep, WriteSessionDep
from app.errors import ApiError, not_found
from app.export import liblinear_model_text
from app.orm import Model
from app.predict import (
    LinearModel,
    ModelCache,
    ServableModel,
    model_from_bytes,
    rows_from_instances,
    rows_from_svmlight,
)
from app.schemas import ModelPublic, ModelsPublic, PredictRequest, PredictResponse

router = APIRouter(prefix="/v1/models", tags=["models"])
_cache = ModelCache()


def _metadata(session: Session, model_id: str) -> Model:
    model = session.scalars(
        select(Model).options(defer(Model.arrays)).where(Model.id == model_id)
    ).first()
    if model is None:
        raise not_found("model", model_id)
    return model


def _load(session: Session, model_id: str) -> ServableModel:
    cached = _cache.get(model_id)
    if cached is not None:
        return cached
    row = session.execute(select(Model.kind, Model.arrays).where(Model.id == model_id)).first()
    if row is None:
        raise not_found("model", model_id)
    model = model_from_bytes(row.kind, row.arrays)
    _cache.put(model_id, model)
    return model


@router.get("", response_model=ModelsPublic)
def list_models(
    session: SessionDep,
    limit: int = Query(100, ge=1, le=1000),
    offset: int = Query(0, ge=0, le=1_000_000_000),
) -> ModelsPublic:
    count = session.scalar(select(func.count()).select_from(Model)) or 0
    rows = session.scalars(
        select(Model).options(defer(Model.arrays))
        .order_by(Model.created_at.desc()).limit(limit).offset(offset)
    ).all()
    return ModelsPublic(data=[ModelPublic.model_validate(r) for r in rows], count=count)


@router.get("/{model_id}", response_model=ModelPublic)
def get_model(model_id: str, session: SessionDep) -> Model:
    return _metadata(session, model_id)


@router.delete("/{model_id}", status_code=204)
def delete_model(model_id: str, session: WriteSessionDep) -> None:
    model = _metadata(session, model_id)
    session.delete(model)
    session.commit()
    _cache.drop(model_id)


PREDICT_DOC = """Predict with a stored model.

JSON body `{"instances": [{"indices": [1-based ints], "values": [floats]}, ...]}`, or a
`text/plain` body of svmlight lines (the label is optional and ignored). Features beyond
the model's are ignored (their weight is 0). For two classes `decision_values` has one
value per row, positive for `classes[1]`; for more, one value per class.
"""


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
async def predict(
    model_id: str, request: Request, settings: SettingsDep, session: SessionDep
) -> PredictResponse:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > settings.max_predict_bytes:
            raise ApiError(413, f"request body exceeds {settings.max_predict_bytes} bytes "
                                "(HINGE_MAX_PREDICT_BYTES)")
    content_type = request.headers.get("content-type", "application/json").split(";")[0]

    def run() -> PredictResponse:
        metadata = _metadata(session, model_id)
        model = _load(session, model_id)
        if content_type.strip().lower() == "text/plain":
            X = rows_from_svmlight(bytes(body), model.n_features, settings.max_predict_rows,
                                   settings.max_features)
        else:
            try:
                spec = PredictRequest.model_validate_json(bytes(body))
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"])
                raise ApiError(422, f"{where}: {first['msg']}" if where else first["msg"],
                               [{"loc": list(e["loc"]), "msg": e["msg"]}
                                for e in exc.errors()]) from None
            X = rows_from_instances(spec.instances, model.n_features,
                                    settings.max_predict_rows)
        labels, values = model.predict(X)
        return PredictResponse(
            model_id=metadata.id,
            labels=[float(v) for v in labels],
            decision_values=values.tolist(),
            classes=[float(v) for v in model.classes],
        )

    return await anyio.to_thread.run_sync(run)


ExportFormat = Annotated[str | None, Query(pattern="^(liblinear|libsvm)$")]


@router.get("/{model_id}/export", response_class=PlainTextResponse)
def export_model(model_id: str, session: SessionDep, format: ExportFormat = None
                 ) -> PlainTextResponse:
    """A model file the reference engine loads: `format=liblinear` for linear models (the
    default for them), `format=libsvm` for kernel models (their default)."""
    metadata = _metadata(session, model_id)
    wanted = format or ("libsvm" if metadata.kind == "kernel" else "liblinear")
    model = _load(session, model_id)
    if wanted == "liblinear":
        if not isinstance(model, LinearModel):
            raise ApiError(422, "a kernel model cannot be written as a LIBLINEAR file; "
                                "use format=libsvm")
        text = liblinear_model_text(model, metadata.params)
    else:
        if isinstance(model, LinearModel):
            raise ApiError(422, "a linear model is exported as format=liblinear")
        from solvers.kernels import KernelModel
        from solvers.libsvm_format import libsvm_model_text

        assert isinstance(model, KernelModel)
        try:
            text = libsvm_model_text(model)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
    return PlainTextResponse(
        text, headers={"Content-Disposition": f'attachment; filename="{model_id}.model"'}
    )
