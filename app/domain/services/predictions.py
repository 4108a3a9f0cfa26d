"""Batch predictions (POST /v1/predictions): a model's output on every row of a stored
dataset, computed by a worker and stored as a blob (app.domain.batch_output).

A prediction is a durable work item on the one lifecycle (app.domain.lifecycle,
`PREDICTIONS`): committed `queued` with its message in the outbox, claimed by a worker
(a conditional UPDATE; a duplicate delivery does nothing), held by a heartbeat, finished
only while that attempt holds it; the sweep re-queues one whose worker died and fails
it after HINGE_MAX_ATTEMPTS. A cancelled running prediction stops at its next block.
The output blob's key is the prediction's own (`predictions/<id>.npz`), written whole
and then renamed, so a re-run after a crash replaces it: there is only ever one output.

The tenant's limits count it: its queued predictions count against
HINGE_TENANT_MAX_QUEUED_JOBS (as queued jobs do) and its running ones against
HINGE_TENANT_MAX_RUNNING_JOBS (the claim's admission, as for jobs: one over stays
queued). Another tenant's prediction, model or dataset is a 404 (a dataset a 422), as
one that does not exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import scipy.sparse as sp
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.domain import lifecycle, outbox
from app.domain.batch_output import OUTPUTS, OutputWriter
from app.domain.errors import Conflict, Invalid, OverLimit
from app.domain.job_status import JobStatus
from app.domain.lifecycle import Claim
from app.domain.orm import Dataset, Prediction, new_id, utcnow
from app.domain.services.datasets import find_dataset
from app.domain.services.limits import (
    below_running_limit,
    lock_dataset,
    lock_tenant,
    tenant_limit,
)
from app.domain.services.models import get_model, servable_model
from app.domain.services.owned import get_owned
from app.infra.blobs import BlobRef
from app.infra.bus import notify
from app.infra.db import after_commit
from app.infra.mapped_arrays import release
from app.infra.queue import PREDICT_TASK
from app.infra.storage import blob_store, load_dataset
from app.settings import Settings
from solvers.models import predictions as model_predictions

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING
SUCCEEDED, CANCELLED = JobStatus.SUCCEEDED, JobStatus.CANCELLED
PREDICTIONS_PREFIX = "predictions"


def output_key(prediction_id: str) -> str:
    return f"{PREDICTIONS_PREFIX}/{prediction_id}.npz"


PREDICTIONS = lifecycle.WorkKind(
    name="prediction", plural="predictions", table=Prediction, task=PREDICT_TASK,
    cancel_flag="cancel_requested", admission=below_running_limit(Prediction))


# -- the API's side ----------------------------------------------------------------------

def create_prediction(reader: Session, session: Session, settings: Settings, tenant_id: str,
                      model_id: str, dataset_id: str, outputs: Sequence[str] | None
                      ) -> Prediction:
    """A queued prediction with its message in the outbox (the caller commits); 404 for
    an unknown model, 422 for a dataset that does not fit it, 429 over the tenant's
    queued limit."""
    asked = list(outputs or ["labels", "decision_values", "probabilities"])
    unknown = [name for name in asked if name not in OUTPUTS]
    if unknown or "labels" not in asked:
        raise Invalid(f"outputs: {', '.join(OUTPUTS)}, labels always among them",
                      field="outputs")
    metadata = get_model(reader, tenant_id, model_id)
    dataset = find_dataset(reader, tenant_id, dataset_id)
    if dataset is None:
        raise Invalid(f"dataset_id: no dataset {dataset_id!r}", field="dataset_id")
    if dataset.features > metadata.n_features:
        raise Invalid(f"dataset {dataset.id!r} has {dataset.features} features, more "
                      f"than the model's {metadata.n_features}", field="dataset_id")
    reader.close()
    tenant = lock_tenant(session, tenant_id)
    mine = session.scalar(select(func.count()).select_from(Prediction).where(
        Prediction.tenant_id == tenant_id, Prediction.status == QUEUED)) or 0
    limit = tenant_limit(tenant, settings, "max_queued_jobs")
    if mine >= limit:
        raise OverLimit(f"the tenant has {mine} queued predictions, its limit "
                        "(HINGE_TENANT_MAX_QUEUED_JOBS or the tenant's own); try again later",
                        {"limit": limit}, retry_after=10)
    get_model(session, tenant_id, model_id)  # (deleted meanwhile: a 404)
    if lock_dataset(session, tenant_id, dataset.id) is None:
        raise Invalid(f"dataset_id: no dataset {dataset_id!r}", field="dataset_id")
    now = utcnow()
    prediction = Prediction(
        id=new_id(), tenant_id=tenant_id, model_id=model_id, dataset_id=dataset.id,
        dataset_name=dataset.name, rows=dataset.rows, outputs=asked, rows_done=0,
        cancel_requested=False, status=QUEUED, attempt=0, created_at=now, queued_at=now)
    session.add(prediction)
    session.flush()
    outbox.post(session, settings, PREDICT_TASK, prediction.id)
    return prediction


def get_prediction(session: Session, tenant_id: str, prediction_id: str) -> Prediction:
    return get_owned(session, Prediction, "prediction", tenant_id, prediction_id)


def list_predictions(session: Session, tenant_id: str, *, limit: int = 100,
                     offset: int = 0) -> tuple[list[Prediction], int]:
    """The tenant's predictions, newest first, and how many it has."""
    owned = Prediction.tenant_id == tenant_id
    rows = list(session.scalars(select(Prediction).where(owned)
                                .order_by(Prediction.created_at.desc(), Prediction.id)
                                .limit(limit).offset(offset)))
    return rows, session.scalar(select(func.count()).select_from(Prediction)
                                .where(owned)) or 0


def cancel(session: Session, settings: Settings, tenant_id: str, prediction_id: str
           ) -> Prediction:
    """A queued prediction is cancelled at once; a running one stops at its next block; a
    finished one is a 409."""
    prediction = get_prediction(session, tenant_id, prediction_id)
    lifecycle.request_cancel(session, PREDICTIONS, prediction)
    after_commit(session, lambda: notify(settings, prediction_id))
    return prediction


def delete_prediction(session: Session, settings: Settings, tenant_id: str,
                      prediction_id: str) -> None:
    """Delete a finished prediction and, once that commits, its output blob; a queued or
    running one is a 409 (cancel it first)."""
    prediction = get_prediction(session, tenant_id, prediction_id)
    if prediction.status in (QUEUED, RUNNING):
        raise Conflict(f"prediction {prediction_id!r} is {prediction.status.value}; cancel "
                       "it first", {"status": prediction.status.value})
    store = blob_store(settings)
    key = output_key(prediction_id)
    session.delete(prediction)
    session.flush()
    after_commit(session, lambda: store.delete(key))


def output_ref(prediction: Prediction) -> BlobRef:
    """The stored output of a succeeded prediction; 409 before."""
    if prediction.status != SUCCEEDED or prediction.output_path is None:
        raise Conflict(f"prediction {prediction.id!r} has no output: it is "
                       f"{prediction.status.value}", {"status": prediction.status.value})
    return BlobRef.parse(prediction.output_path)


# -- the worker's side: claim, blocks, finish -------------------------------------------

@dataclass(frozen=True)
class PredictionWork:
    """What a claimed prediction predicts (its `lifecycle.Claim`'s work)."""

    model_id: str
    outputs: tuple[str, ...]
    rows: int
    blob_path: str | None  # None: the dataset was deleted
    shards: list[dict[str, Any]] | None = None  # the dataset's row shards (None: one blob)


def claim_prediction(session: Session, settings: Settings, prediction_id: str, worker: str
                     ) -> Claim[PredictionWork] | None:
    """queued -> running on the next attempt (rows_done back to 0); None if it is not
    queued (any more); NotAdmitted over the tenant's running limit."""
    def work(prediction: Prediction) -> PredictionWork:
        prediction.rows_done = 0
        dataset = session.get(Dataset, prediction.dataset_id) if prediction.dataset_id else None
        return PredictionWork(prediction.model_id, tuple(prediction.outputs), prediction.rows,
                              dataset.blob_path if dataset else None,
                              dataset.shards if dataset else None)

    return lifecycle.claim_as(session, PREDICTIONS, prediction_id, worker, work, settings)


def progress(session: Session, claim: Claim[PredictionWork], rows_done: int
             ) -> lifecycle.Answer:
    """Record the rows done (and the heartbeat) while this attempt holds the prediction:
    lifecycle.progress's "go", "stop" (asked to) or "lost"."""
    return claim.progress(session, rows_done=rows_done)


def _row_block(X: sp.csr_matrix, start: int, stop: int) -> sp.csr_matrix:
    """Rows start:stop of X over views of its data and indices (SciPy's own row slice
    copies them, and with mixed index dtypes all of X's indices first)."""
    first, last = int(X.indptr[start]), int(X.indptr[stop])
    return sp.csr_matrix((X.data[first:last], X.indices[first:last],
                          X.indptr[start:stop + 1] - first), shape=(stop - start, X.shape[1]))


def predict_blocks(model: Any, X: Any, outputs: Sequence[str], block_rows: int,
                   writer: OutputWriter, go_on: Callable[[int], bool]) -> bool:
    """Pass the rows of X through the model `block_rows` at a time into `writer`;
    `go_on(rows_done)` after each block (False: stop). Whether every row was written.

    Each block of a CSR X is a matrix over views of its arrays (`_row_block`: no copy);
    the pages of a mapped X (app.infra.mapped_arrays) a block has passed are handed back
    after it, so the process's resident set holds about one block of the dataset."""
    rows = X.shape[0]
    for start in range(0, rows, block_rows):
        stop = min(rows, start + block_rows)
        if sp.issparse(X) and X.format == "csr":
            labels, values, probabilities = model_predictions(model, _row_block(X, start,
                                                                                stop))
            first, last = int(X.indptr[start]), int(X.indptr[stop])
            release(X.data, first, last)
            release(X.indices, first, last)
        else:
            labels, values, probabilities = model_predictions(model, X[start:stop])
        block: dict[str, Any] = {"labels": labels}
        if "decision_values" in outputs:
            block["decision_values"] = values
        if "probabilities" in outputs and probabilities is not None:
            block["probabilities"] = probabilities
        writer.append(block)
        if not go_on(stop):
            return False
    return True


def run_blocks(settings: Settings, session: Session, claim: Claim[PredictionWork],
               writer: OutputWriter, go_on: Callable[[int], bool]) -> bool:
    """A claimed prediction's model over its dataset, a block of HINGE_PREDICT_BLOCK_ROWS
    rows at a time (`predict_blocks`)."""
    work = claim.work
    if work.blob_path is None:
        raise lifecycle.Failed("the dataset was deleted before the prediction started")
    model = servable_model(session, settings, work.model_id)
    session.close()
    X, _y = load_dataset(blob_store(settings), work.blob_path, model.n_features, work.shards)
    return predict_blocks(model, X, work.outputs, settings.predict_block_rows, writer, go_on)


def succeed(session: Session, claim: Claim[PredictionWork], output_path: str, size: int
            ) -> bool:
    return claim.finish(session, SUCCEEDED, output_path=output_path, output_bytes=size,
                        rows_done=claim.work.rows)
