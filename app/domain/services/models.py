"""Models: list, show, delete, predict and export stored models.

A model's arrays are large: every metadata query leaves them out (`_without_arrays`); they
are read only to build the servable model, which a small cache keeps.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from typing import Any, cast

import anyio.to_thread
import numpy as np
import scipy.sparse as sp
from pydantic import ValidationError
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, defer

from app.domain.errors import Conflict, Invalid, Unavailable, Unsupported, not_found
from app.domain.export import liblinear_model_text
from app.domain.metrics import PREDICT_SECONDS
from app.domain.orm import Dataset, Model
from app.domain.predict import (
    ROW_SHAPES,
    CachedModel,
    LinearModel,
    ModelCache,
    ServableModel,
    Unseen,
    linear_few_rows,
    model_from_bytes,
    rows_from_instances,
    rows_from_svmlight,
    sparse_rows,
    too_many_rows,
    unseen_features,
)
from app.domain.schemas import Instance, PredictRequest
from app.domain.services import registry
from app.domain.tasks import model_task
from app.infra.db import after_commit, read_sessionmaker_for
from app.infra.storage import blob_store, model_arrays, model_key
from app.settings import Settings
from solvers.models import Pipeline
from solvers.models import ServableModel as SolverServable
from solvers.scaling import ScalingError, scaler_to_range_text

log = logging.getLogger("hinge.models")
_cache = ModelCache()


def _without_arrays() -> Select[Model]:
    return select(Model).options(defer(Model.arrays))


def list_models(session: Session, tenant_id: str, *, limit: int = 100, offset: int = 0
                ) -> list[Model]:
    """Newest first, without their arrays."""
    return list(session.scalars(
        _without_arrays().where(Model.tenant_id == tenant_id)
        .order_by(Model.created_at.desc()).limit(limit).offset(offset)))


def count_models(session: Session, tenant_id: str) -> int:
    return session.scalar(select(func.count()).select_from(Model)
                          .where(Model.tenant_id == tenant_id)) or 0


def find_model(session: Session, tenant_id: str, model_id: str) -> Model | None:
    """A model's metadata (not its arrays), or None."""
    return session.scalars(_without_arrays().where(Model.id == model_id,
                                                   Model.tenant_id == tenant_id)).first()


def get_model(session: Session, tenant_id: str, model_id: str) -> Model:
    model = find_model(session, tenant_id, model_id)
    if model is None:
        raise not_found("model", model_id)
    return model


def delete_model(session: Session, settings: Settings, tenant_id: str, model_id: str) -> None:
    """Delete the row; once that commits, drop the cached model and remove the blob of
    its arrays, if they had one (see store_model_arrays). 409 while it is a registered
    version (the version must go first)."""
    model = get_model(session, tenant_id, model_id)
    versions = registry.versions_of_model(session, tenant_id, model_id)
    if versions:
        raise Conflict("the model is registered as " + ", ".join(
            f"{name}/versions/{number}" for name, number in versions)
            + ": delete those versions first", {"versions": [
                {"name": name, "version": number} for name, number in versions]})
    session.delete(model)
    session.flush()
    store = blob_store(settings)

    def forget() -> None:
        forget_model(model_id)
        store.delete(model_key(model_id))

    after_commit(session, forget)


def forget_model(model_id: str) -> None:
    """Drop a deleted model from this process's cache (the bus calls it for the others)."""
    _cache.drop(model_id)


def cached_model(tenant_id: str, model_id: str) -> CachedModel | None:
    """The tenant's model from this process's cache, without touching the database."""
    return _cache.get(model_id, tenant_id)


def cached_ids() -> list[str]:
    return _cache.ids()


def set_cache_capacity(capacity: int) -> None:
    _cache.capacity = capacity


def drop_deleted_models(database_url: str) -> list[str]:
    """Drop cached models whose row is gone (deleted through another API process while
    the bus was down, or on the embedded broker, which has no bus); the dropped ids."""
    cached = _cache.ids()
    if not cached:
        return []
    with read_sessionmaker_for(database_url)() as session:
        present = set(session.scalars(select(Model.id).where(Model.id.in_(cached))))
    gone = [model_id for model_id in cached if model_id not in present]
    for model_id in gone:
        _cache.drop(model_id)
    return gone


async def check_cached_models_forever(settings: Settings) -> None:
    """drop_deleted_models every HINGE_MODEL_CACHE_CHECK_SECONDS (one indexed query per
    API process, whatever the request rate; nothing while the cache is empty)."""
    while True:
        await asyncio.sleep(settings.model_cache_check_seconds)
        if cached_ids():
            try:
                await anyio.to_thread.run_sync(drop_deleted_models, settings.database_url)
            except Exception:
                log.warning("checking the cached models failed; trying again",
                            exc_info=True)


def _load(session: Session, settings: Settings, model_id: str, tenant_id: str | None
          ) -> CachedModel | None:
    query = (select(Model.tenant_id, Model.kind, Model.arrays, Dataset.feature_names)
             .outerjoin(Dataset, Dataset.id == Model.dataset_id).where(Model.id == model_id))
    if tenant_id is not None:
        query = query.where(Model.tenant_id == tenant_id)
    row = session.execute(query).first()
    if row is None:
        return None
    arrays = model_arrays(blob_store(settings), row.arrays)  # inline or behind a blob
    model = model_from_bytes(row.kind, arrays)
    names = row.feature_names
    entry = CachedModel(model_id=model_id, tenant_id=row.tenant_id, kind=row.kind,
                        model=model, classes=[float(v) for v in model.classes],
                        size_bytes=len(arrays),
                        feature_index=None if names is None else
                        {name: i + 1 for i, name in enumerate(names)})
    _cache.put(entry)
    return entry


def load_model(session: Session, settings: Settings, tenant_id: str, model_id: str
               ) -> CachedModel:
    """The tenant's model ready to predict, from the cache or the database; 404 if the
    tenant has no such model."""
    entry = _cache.get(model_id, tenant_id) or _load(session, settings, model_id, tenant_id)
    if entry is None:
        raise not_found("model", model_id)
    return entry


def servable_model(session: Session, settings: Settings, model_id: str) -> ServableModel:
    """The model ready to predict (callers have checked that it is the tenant's)."""
    entry = _cache.peek(model_id) or _load(session, settings, model_id, None)
    if entry is None:
        raise not_found("model", model_id)
    return entry.model


# What predict takes, said the way a curl user fixes it.
PREDICT_TYPES = ("predict takes JSON, {\"instances\": [{\"indices\": [1, 5], \"values\": "
                 "[0.5, 1]}]} with -H 'Content-Type: application/json', or svmlight rows "
                 "(labels optional) with -H 'Content-Type: text/plain'")
_SVMLIGHT_START = re.compile(rb"^\s*(?:[+-]?[0-9.eE+-]+\s+)?[0-9]+:")


def predict_media_type(content_type: str) -> str:
    """"text/plain" or "application/json" (also for no content type, or a +json type);
    415 that names the two accepted types for anything else."""
    media = content_type.split(";")[0].strip().lower()
    if media == "text/plain":
        return media
    if media in ("", "application/json") or media.endswith("+json"):
        return "application/json"
    why = (" (curl's default for -d and --data-binary)"
           if media == "application/x-www-form-urlencoded" else "")
    raise Unsupported(f"Content-Type {media}{why} is not accepted: {PREDICT_TYPES}",
                      {"accepted": ["application/json", "text/plain"]})


def _invalid_json(exc: ValidationError, body: bytes) -> Invalid:
    errors = exc.errors()
    first = errors[0]
    loc = first["loc"]
    where = ".".join(str(p) for p in loc)
    message = f"{where}: {first['msg']}" if where else first["msg"]
    if len(loc) >= 2 and loc[0] == "instances" and isinstance(loc[1], int):
        # a row of no accepted shape: pydantic's three attempts say less than the shapes
        message = (f"instances[{loc[1]}] is not a row of any accepted shape: {ROW_SHAPES}"
                   f" (sparse: {_first_for(errors, loc[1], 'Instance')})")
    elif loc[:1] == ("instances",):
        message += f"; instances is a list of rows: {ROW_SHAPES}"
    if first["type"] == "json_invalid":
        if _SVMLIGHT_START.match(body[:4096]):
            message += ("; this body looks like svmlight rows: send them with "
                        "-H 'Content-Type: text/plain'")
        else:
            message += f"; {PREDICT_TYPES}"
    return Invalid(message, [{"loc": list(e["loc"]), "msg": e["msg"]} for e in errors])


def _first_for(errors: list[Any], row: int, shape: str) -> str:
    """pydantic's first complaint about row `row` read as `shape`."""
    for error in errors:
        loc = error["loc"]
        if loc[:3] == ("instances", row, shape):
            rest = ".".join(str(p) for p in loc[3:])
            return f"{rest}: {error['msg']}" if rest else error["msg"]
    return errors[0]["msg"]


def predict(settings: Settings, database_url: str, tenant_id: str, model_id: str,
            body: bytes, content_type: str, strict: bool = False) -> dict[str, Any]:
    """predict_with the tenant's model, loaded from the database if this process has not
    cached it (blocking: run it in a thread)."""
    entry = _cache.get(model_id, tenant_id)
    if entry is None:
        with read_sessionmaker_for(database_url)() as session:
            entry = load_model(session, settings, tenant_id, model_id)
    return predict_with(entry, settings, body, content_type, strict)


@functools.cache
def _predict_seconds(kind: str) -> Any:
    """PREDICT_SECONDS's child for a model kind (labels() takes a lock every call)."""
    return PREDICT_SECONDS.labels(kind)


def predict_with(entry: CachedModel, settings: Settings, body: bytes, content_type: str,
                 strict: bool = False) -> dict[str, Any]:
    """Labels and decision values for the rows in `body`: svmlight lines when the content
    type is text/plain, else JSON instances (sparse, dense or named rows); the
    PredictResponse document as a dict. Non-zero values of features the model has never
    seen are ignored with a warning, or refused (422) with `strict` (the query's, or the
    JSON body's)."""
    started = time.perf_counter()
    media = predict_media_type(content_type)
    model = entry.model
    few: tuple[np.ndarray, np.ndarray] | None = None
    unseen: Unseen = []
    if media == "text/plain":
        X: sp.csr_matrix | None = rows_from_svmlight(
            body, model.n_features, settings.max_predict_rows, settings.max_features,
            unseen)
    else:
        try:
            spec = PredictRequest.model_validate_json(body)
        except ValidationError as exc:
            raise _invalid_json(exc, body) from None
        strict = strict or spec.strict
        if len(spec.instances) > settings.max_predict_rows:
            raise too_many_rows(len(spec.instances), settings.max_predict_rows)
        rows = cast(list[Instance], spec.instances)
        if not all(type(row) is Instance for row in spec.instances):  # dense or named
            rows = sparse_rows(spec.instances, model.n_features, entry.feature_index,
                               unseen)
        if type(model) is LinearModel:  # a few rows: no sparse matrix (bit-identical)
            few = linear_few_rows(model, rows, unseen)
        X = None if few is not None else rows_from_instances(
            rows, model.n_features, settings.max_predict_rows, unseen)
    warnings = unseen_features(unseen, model.n_features, strict)
    probabilities = None
    with np.errstate(over="ignore", invalid="ignore"):
        if few is not None:
            labels, values = few
        elif isinstance(model, Pipeline):
            labels, values, probabilities = model.predict_with_probabilities(X)
        else:
            labels, values = model.predict(X)
    if not np.all(np.isfinite(values)):
        bad = int(np.flatnonzero(~np.isfinite(np.asarray(values).reshape(len(labels), -1)
                                             ).any(axis=1))[0])
        raise Invalid(f"row {bad + 1}: the decision value overflows (feature values too "
                      "large for this model's weights); scale the input",
                      {"row": bad + 1})
    _predict_seconds(entry.kind).observe(time.perf_counter() - started)
    calibration = model.calibration if isinstance(model, Pipeline) else None
    return {
        "model_id": entry.model_id,
        "task": model_task(model),
        "labels": np.asarray(labels, dtype=np.float64).tolist(),
        "decision_values": values.tolist(),
        "classes": entry.classes,
        "probabilities": None if probabilities is None else probabilities.tolist(),
        "sigma": None if calibration is None else calibration.sigma,
        "warnings": warnings,
    }


def export_model(session: Session, settings: Settings, tenant_id: str, model_id: str,
                 format: str | None) -> str:
    """The model file of the reference engine: LIBLINEAR's for linear models (their
    default), LIBSVM's for kernel models (theirs), or (`scale`) the svm-scale range file of
    a model trained with scale minmax; 422 for a format the model cannot take.

    A scaled model's file holds the model of the scaled features: scale the rows with the
    range file (`svm-scale -r`) before LIBSVM's or LIBLINEAR's predict."""
    metadata = get_model(session, tenant_id, model_id)
    wanted = format or ("libsvm" if metadata.kind == "kernel" else "liblinear")
    served = load_model(session, settings, tenant_id, model_id).model
    pipeline = served if isinstance(served, Pipeline) else None
    if wanted == "scale":
        return _range_file(pipeline)
    model = pipeline.estimator if pipeline is not None else served
    if wanted == "liblinear":
        if not isinstance(model, LinearModel):
            raise Invalid("a kernel model cannot be written as a LIBLINEAR file; "
                          "use format=libsvm")
        return liblinear_model_text(model, _trained_with(metadata))
    if isinstance(model, LinearModel):
        raise Invalid("a linear model is exported as format=liblinear")
    from solvers.formats import libsvm_model_text
    from solvers.kernels import KernelModel

    assert isinstance(model, KernelModel)
    calibration = pipeline.calibration if pipeline is not None else None
    if calibration is not None and calibration.layout == "ovr":
        calibration = None  # one-vs-rest: refused below (LIBSVM is one-vs-one only)
    try:
        if calibration is not None and calibration.layout == "density":
            return libsvm_model_text(model, density_marks=calibration.A)
        if calibration is not None:
            return libsvm_model_text(model, calibration.A, calibration.B)
        return libsvm_model_text(model)
    except ValueError as exc:
        raise Invalid(str(exc)) from None


def export_onnx(session: Session, settings: Settings, tenant_id: str, model_id: str
                ) -> bytes:
    """The model as an ONNX graph (solvers/onnx_graph.py: its scaler and probability
    sigmoids included); 503 naming the extra when the onnx package is not installed."""
    from solvers.onnx_graph import OnnxTooLarge, OnnxUnavailable, onnx_model_bytes

    get_model(session, tenant_id, model_id)
    served = load_model(session, settings, tenant_id, model_id).model
    try:
        return onnx_model_bytes(cast(SolverServable, served))
    except OnnxUnavailable as exc:
        raise Unavailable(f"{exc}; the other export formats work without it",
                          {"extra": "onnx"}) from None
    except OnnxTooLarge as exc:
        raise Invalid(str(exc)) from None


def _range_file(pipeline: Pipeline | None) -> str:
    if pipeline is None or pipeline.scaler is None:
        raise Invalid("this model was trained without scaling: there is no range file "
                      "(train with \"scale\": \"minmax\" to get one)")
    try:
        return scaler_to_range_text(pipeline.scaler)
    except ScalingError as exc:
        raise Invalid(str(exc)) from None


def _trained_with(metadata: Any) -> dict[str, Any]:
    """The parameters the model's solver ran with: the job's, and for `auto` its choice
    and the settings it gave the choice (the SVR's method), recorded in the result."""
    params = {**metadata.params, "solver": metadata.solver}
    auto = (metadata.result or {}).get("auto") or {}
    if auto.get("chosen"):
        params.update(auto.get("settings") or {}, solver=auto["chosen"])
    return params
