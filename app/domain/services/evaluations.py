"""Evaluations: a model's figures on a stored dataset (POST /v1/models/{id}/evaluations).

A dataset of at most HINGE_EVALUATE_INLINE_ROWS rows is evaluated inside the request (the
record is stored `succeeded` or `failed`); a larger one is committed `queued` together with
its message (task `hinge.evaluate`, through the outbox: app.domain.outbox), and a worker
claims it, holds a lease and finishes it, on the lifecycle of every durable work item
(app.domain.lifecycle, `EVALUATIONS`): the claim is a conditional UPDATE (a duplicate
delivery does nothing), the heartbeat renews the lease, the final write succeeds only while
this attempt holds it, and the sweep re-queues an evaluation whose worker vanished, or
fails it after HINGE_MAX_ATTEMPTS, and re-enqueues one left queued.

Every evaluation belongs to its model's tenant: the model and the dataset must both be the
caller's tenant's (another tenant's model is a 404 and another tenant's dataset a 422, the
answers for ones that do not exist), and lists and lookups see only the tenant's records.

The figures are solvers.metrics.evaluate's (equal to scikit-learn's), computed from the
model's own predictions: labels, the decision value as the score of a two-class model,
and its probabilities when it has them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.domain import lifecycle, outbox
from app.domain.errors import Invalid, not_found
from app.domain.job_status import JobStatus
from app.domain.lifecycle import Claim
from app.domain.orm import Dataset, Evaluation, Model, new_id, utcnow
from app.domain.predict import ServableModel
from app.domain.schemas import EvaluationCreate
from app.domain.services.datasets import find_dataset
from app.domain.services.limits import lock_dataset
from app.domain.services.models import get_model, servable_model
from app.domain.tasks import check_task, model_task, outlier_report, regression_report
from app.infra.queue import EVALUATE_TASK
from app.infra.storage import blob_store, load_dataset
from app.settings import Settings
from solvers.metrics import evaluate
from solvers.models import predictions

log = logging.getLogger("hinge.evaluations")

QUEUED, RUNNING = JobStatus.QUEUED, JobStatus.RUNNING
SUCCEEDED, FAILED = JobStatus.SUCCEEDED, JobStatus.FAILED

EVALUATIONS = lifecycle.WorkKind(name="evaluation", plural="evaluations", table=Evaluation,
                                 task=EVALUATE_TASK)


def compute_report(model: ServableModel, X: Any, y: np.ndarray) -> dict[str, Any]:
    """Every figure of solvers.metrics.evaluate for the model's predictions on X (of
    app.domain.tasks for a regression or outlier model), and the model's `task`."""
    labels, values, probabilities = predictions(model, X)
    task = model_task(model)
    if task == "regression":
        return {"task": task, **regression_report(y, labels)}
    if task == "outlier":
        return {"task": task, **outlier_report(y, labels, values)}
    classes = np.asarray(model.classes)
    scores = values if classes.shape[0] == 2 else None
    report = evaluate(y, labels, classes, scores=scores, probabilities=probabilities)
    report["has_probabilities"] = probabilities is not None
    report["task"] = task
    return report


# -- the API's side ----------------------------------------------------------------------

def _no_dataset(dataset_id: str) -> Invalid:
    return Invalid(f"dataset_id: no dataset {dataset_id!r}", field="dataset_id")


def create_evaluation(reader: Session, session: Session, settings: Settings, tenant_id: str,
                      model_id: str, spec: EvaluationCreate) -> Evaluation:
    """Inline (returned `succeeded`) or queued for a worker; 404 for an unknown model (or
    another tenant's), 422 for a dataset that does not fit it (or is not the tenant's). The
    checks and the inline computation use the read session `reader`, so the write session
    `session` (on SQLite: the write lock) is taken only to store the record; there the model
    and the dataset are locked first (a delete committed meanwhile is a 404 or a 422, never
    a foreign-key error)."""
    metadata = get_model(reader, tenant_id, model_id)
    dataset = find_dataset(reader, tenant_id, spec.dataset_id)
    if dataset is None:
        raise _no_dataset(spec.dataset_id)
    if dataset.features > metadata.n_features:
        raise Invalid(f"dataset {dataset.id!r} has {dataset.features} features, more "
                      f"than the model's {metadata.n_features}", field="dataset_id")
    check_task(metadata.task, dataset.task, dataset.id, f"model {model_id!r} is",
               training=False)
    unknown = sorted(set(dataset.labels) - set(metadata.labels))
    if unknown and metadata.task == "classification":
        raise Invalid(f"dataset {dataset.id!r} has labels the model does not know: "
                      f"{', '.join(f'{v:g}' for v in unknown[:10])} (model classes: "
                      f"{', '.join(f'{v:g}' for v in metadata.labels)})",
                      field="dataset_id")
    now = utcnow()
    evaluation = Evaluation(
        id=new_id(), tenant_id=tenant_id, model_id=model_id, dataset_id=dataset.id,
        dataset_name=dataset.name, rows=dataset.rows, status=QUEUED, attempt=0,
        created_at=now, queued_at=now,
    )
    if dataset.rows <= settings.evaluate_inline_rows:
        model = servable_model(reader, settings, model_id)
        try:
            X, y = load_dataset(blob_store(settings), dataset.blob_path, model.n_features,
                                dataset.shards)
        except FileNotFoundError:  # deleted since it was read
            raise _no_dataset(spec.dataset_id) from None
        try:
            evaluation.report = compute_report(model, X, y)
        except ValueError as exc:  # a dataset that does not fit the model after all
            raise Invalid(f"cannot evaluate on dataset {dataset.id!r}: {exc}",
                          field="dataset_id") from None
        evaluation.status, evaluation.attempt, evaluation.finished_at = SUCCEEDED, 1, utcnow()
        evaluation.worker = "inline"
        reader.close()  # its connection back to the pool before the write one is taken
        _lock_owners(session, tenant_id, model_id, dataset.id)
        session.add(evaluation)
        session.flush()
        return evaluation
    reader.close()  # no request holds one pooled connection while it waits for another
    _lock_owners(session, tenant_id, model_id, dataset.id)
    session.add(evaluation)
    session.flush()
    # its message commits with it and is sent right after (app.domain.outbox): a broker
    # that is down delays the evaluation, the sweep sends it once the broker is back
    outbox.post(session, settings, EVALUATE_TASK, evaluation.id)
    return evaluation


def _lock_owners(session: Session, tenant_id: str, model_id: str, dataset_id: str) -> None:
    """Lock the model's and the dataset's rows in the write session until it ends (on
    PostgreSQL FOR KEY SHARE, which a delete waits for, and the dataset FOR UPDATE as job
    submission does; on SQLite the write session already excludes other writers), so the
    record's foreign keys hold at commit."""
    model = session.scalar(select(Model.id).where(Model.id == model_id,
                                                  Model.tenant_id == tenant_id)
                           .with_for_update(read=True, key_share=True))
    if model is None:
        raise not_found("model", model_id)
    if lock_dataset(session, tenant_id, dataset_id) is None:
        raise _no_dataset(dataset_id)


def _owned(tenant_id: str, model_id: str) -> tuple[Any, ...]:
    return (Evaluation.tenant_id == tenant_id, Evaluation.model_id == model_id)


def list_evaluations(session: Session, tenant_id: str, model_id: str, *, limit: int = 100,
                     offset: int = 0) -> list[Evaluation]:
    """The tenant's model's evaluations, newest first (404 for an unknown model or
    another tenant's)."""
    get_model(session, tenant_id, model_id)
    return list(session.scalars(
        select(Evaluation).where(*_owned(tenant_id, model_id))
        .order_by(Evaluation.created_at.desc()).limit(limit).offset(offset)))


def count_evaluations(session: Session, tenant_id: str, model_id: str) -> int:
    return session.scalar(select(func.count()).select_from(Evaluation)
                          .where(*_owned(tenant_id, model_id))) or 0


def get_evaluation(session: Session, tenant_id: str, model_id: str,
                   evaluation_id: str) -> Evaluation:
    """404 (naming the evaluation) unless it is this model's and the tenant's."""
    evaluation = session.scalar(select(Evaluation).where(
        Evaluation.id == evaluation_id, *_owned(tenant_id, model_id)))
    if evaluation is None:
        raise not_found("evaluation", evaluation_id)
    return evaluation


# -- the worker's side: claim, lease, finish ---------------------------------------------

@dataclass(frozen=True)
class EvaluationWork:
    """What a claimed evaluation scores (its `lifecycle.Claim`'s work)."""

    model_id: str
    blob_path: str | None  # None: the dataset was deleted
    shards: list[dict[str, Any]] | None = None  # the dataset's row shards (None: one blob)


def claim_evaluation(session: Session, evaluation_id: str,
                     worker: str) -> Claim[EvaluationWork] | None:
    """queued -> running on the next attempt; None if it is not queued (any more)."""
    def work(evaluation: Evaluation) -> EvaluationWork:
        dataset = session.get(Dataset, evaluation.dataset_id) if evaluation.dataset_id else None
        return EvaluationWork(evaluation.model_id, dataset.blob_path if dataset else None,
                              dataset.shards if dataset else None)

    return lifecycle.claim_as(session, EVALUATIONS, evaluation_id, worker, work)


def run_claimed_evaluation(session: Session, settings: Settings,
                           claim: Claim[EvaluationWork]) -> dict[str, Any]:
    """The report of a claimed evaluation (raises when the model or dataset is gone)."""
    work = claim.work
    if work.blob_path is None:
        raise lifecycle.Failed("the dataset was deleted before the evaluation started")
    model = servable_model(session, settings, work.model_id)
    X, y = load_dataset(blob_store(settings), work.blob_path, model.n_features, work.shards)
    return compute_report(model, X, y)
