"""Models trained elsewhere: an uploaded LIBSVM or LIBLINEAR model file (and the svm-scale
range file it was trained behind) stored as a model of the tenant, served by the same code
as a trained one (predict, evaluations, export).

The file is read strictly (solvers/model_import.py): a file that does not parse is a 422
naming the line; a formulation Hinge does not serve yet is a 422 saying so. The stored row
has no job and no dataset; `origin` records the upload (format, file name, sha256 of each
file). `converged` is false and `result` says why: an imported model carries no
certificate of optimality.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy.orm import Session

from app.domain.errors import Invalid, TooLarge
from app.domain.orm import Model, new_id
from app.domain.tasks import model_task
from app.infra.storage import blob_store, model_key, store_model_arrays
from app.settings import Settings
from solvers.model_import import (
    ImportLimits,
    ModelFileError,
    NotServable,
    OverLimit,
    read_model_file,
)
from solvers.models import model_to_bytes


def import_limits(settings: Settings) -> ImportLimits:
    return ImportLimits(max_support_vectors=settings.max_import_support_vectors,
                        max_features=settings.max_features,
                        max_classes=settings.max_classes)


def _text(payload: bytes, what: str, settings: Settings) -> str:
    if len(payload) > settings.max_model_import_bytes:
        raise TooLarge(f"the {what} has {len(payload)} bytes, over the limit of "
                       f"{settings.max_model_import_bytes} (HINGE_MAX_MODEL_IMPORT_BYTES)",
                       {"limit": settings.max_model_import_bytes})
    try:
        return payload.decode("ascii")
    except UnicodeDecodeError as exc:
        line = payload[:exc.start].count(b"\n") + 1
        raise Invalid(f"{what}: line {line}: not a text model file (byte "
                      f"0x{payload[exc.start]:02x} is not ASCII; compressed files are not "
                      "read: decompress it first)", {"line": line, "file": what}) from None


def import_model(session: Session, settings: Settings, tenant_id: str, payload: bytes,
                 file_name: str, range_payload: bytes | None = None,
                 range_name: str | None = None, n_features: int | None = None) -> Model:
    """Validate the model file (and range file), store the model; the new row (flushed)."""
    text = _text(payload, "model file", settings)
    range_text = None if range_payload is None else _text(range_payload, "range file",
                                                          settings)
    try:
        imported = read_model_file(text, import_limits(settings), range_text=range_text,
                                   n_features=n_features)
    except ModelFileError as exc:
        file = "range file" if str(exc).startswith("range file") else "model file"
        message = str(exc) if file == "range file" else f"model file: {exc}"
        detail = {"line": exc.line, "reason": exc.reason, "file": file}
        if isinstance(exc, OverLimit):
            raise TooLarge(message, detail) from None
        if isinstance(exc, NotServable):
            raise Invalid(message, {**detail, "supported": False}) from None
        raise Invalid(message, detail) from None
    arrays_payload = model_to_bytes(imported.model)
    model_id = new_id()
    arrays, in_blob = store_model_arrays(blob_store(settings), settings, model_id,
                                         arrays_payload)
    origin: dict[str, Any] = {
        "source": "imported", "format": imported.format, "file_name": file_name,
        "sha256": hashlib.sha256(payload).hexdigest(), "solver_type": imported.solver,
    }
    if range_payload is not None:
        origin["range_file"] = range_name
        origin["range_sha256"] = hashlib.sha256(range_payload).hexdigest()
    model = Model(
        id=model_id, tenant_id=tenant_id, job_id=None, dataset_id=None,
        kind=imported.kind, task=model_task(imported.model), solver=imported.format,
        params=imported.params,
        labels=imported.classes, n_features=imported.n_features,
        result={"exit_reason": "imported", "converged": False,
                "note": "imported from a model file: no certificate of optimality",
                **imported.summary},
        converged=False, arrays=arrays, size_bytes=len(arrays_payload),
        train_accuracy=None, origin=origin,
    )
    session.add(model)
    try:
        session.flush()
    except BaseException:
        if in_blob:
            blob_store(settings).delete(model_key(model_id))
        raise
    return model
