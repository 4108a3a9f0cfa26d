"""/v1/models/{id}/evaluations: evaluate a model on a stored dataset, list, show.

Creating one needs the `train` scope: it stores a record and may run a task on a worker,
as a job does; listing and showing need `read`. The model and the dataset must be the
caller's tenant's."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from app.api import idempotency, ids
from app.api.auth import ReadAuth, TrainAuth
from app.api.deps import PageDep, SessionDep, SettingsDep, WriteSessionDep
from app.api.routes.models import VERSION_HEADER
from app.domain.job_status import JobStatus
from app.domain.schemas import EvaluationCreate, EvaluationPublic, EvaluationsPublic
from app.domain.services import evaluations as service

router = APIRouter(prefix="/v1/models", tags=["evaluations"])

CREATE_DOC = """Evaluate the model on a stored dataset (`dataset_id`) whose features fit the model
and whose labels are among its classes. A dataset of at most HINGE_EVALUATE_INLINE_ROWS rows
is evaluated at once: 201 with the finished record. A larger one runs on a worker: 202 with
a `queued` record; GET it until `succeeded` (or `failed`).

The report: accuracy, balanced accuracy, the confusion matrix (rows = true class, columns =
predicted, classes sorted), per-class precision, recall, F1 and support, macro and
weighted averages; for two classes ROC AUC, average precision and the ROC and
precision-recall curves (at most 200 points, scored by the decision value); log loss and
Brier score when the model has probabilities. Equal to scikit-learn's metrics on the same
predictions.

Needs the `train` scope. Another tenant's model is a 404 and another tenant's dataset a
422, the same answers as for ones that do not exist."""


@router.post("/{model_id}/evaluations", status_code=201, response_model=EvaluationPublic,
             description=CREATE_DOC,
             responses={202: {"model": EvaluationPublic, "description": "queued for a worker"}})
def create_evaluation(model_id: str, spec: EvaluationCreate, request: Request,
                      reader: SessionDep, session: WriteSessionDep,
                      settings: SettingsDep, principal: TrainAuth
                      ) -> EvaluationPublic | Response:
    """An `Idempotency-Key` header works as for POST /v1/jobs: the record, its message to
    the workers (app.domain.outbox) and the stored answer commit in one transaction."""
    model_id, served = ids.resolve_model(reader, principal.tenant_id, model_id)
    spec.dataset_id = ids.resolve_field(reader, "dataset", principal.tenant_id,
                                        spec.dataset_id, "dataset_id")

    def work() -> tuple[int, EvaluationPublic]:
        evaluation = service.create_evaluation(reader, session, settings,
                                               principal.tenant_id, model_id, spec)
        status = 202 if evaluation.status == JobStatus.QUEUED else 201
        return status, EvaluationPublic.model_validate(evaluation)

    with idempotency.Write(request, settings, principal.tenant_id,
                           "POST /v1/models/{id}/evaluations", session) as write:
        asked = idempotency.request_hash(model_id, spec.model_dump_json())
        answer = write.run(asked, work)
    if served is not None:
        answer.headers[VERSION_HEADER] = served.header
    return answer


@router.post("/{name}/versions/{version}/evaluations", status_code=201,
             response_model=EvaluationPublic,
             responses={202: {"model": EvaluationPublic, "description": "queued for a worker"}})
def create_version_evaluation(name: str, version: int, spec: EvaluationCreate,
                              request: Request, reader: SessionDep,
                              session: WriteSessionDep, settings: SettingsDep,
                              principal: TrainAuth) -> EvaluationPublic | Response:
    """Evaluate version `version` of the registered model `name`, as POST
    /v1/models/{model_id}/evaluations does (`model_id` there may also be `name@alias`);
    the Hinge-Model-Version header names the version evaluated."""
    return create_evaluation(f"{name}/versions/{version}", spec, request, reader, session,
                             settings, principal)


@router.get("/{model_id}/evaluations", response_model=EvaluationsPublic)
def list_evaluations(
    model_id: str,
    session: SessionDep,
    principal: ReadAuth,
    page: PageDep,
) -> EvaluationsPublic:
    tenant = principal.tenant_id
    model_id = ids.resolve(session, "model", tenant, model_id)
    rows = service.list_evaluations(session, tenant, model_id, limit=page.limit, offset=page.offset)
    return EvaluationsPublic(data=[EvaluationPublic.model_validate(r) for r in rows],
                             count=service.count_evaluations(session, tenant, model_id))


@router.get("/{model_id}/evaluations/{evaluation_id}", response_model=EvaluationPublic)
def get_evaluation(model_id: str, evaluation_id: str, session: SessionDep,
                   principal: ReadAuth) -> EvaluationPublic:
    model_id = ids.resolve(session, "model", principal.tenant_id, model_id)
    evaluation_id = ids.resolve(session, "evaluation", principal.tenant_id, evaluation_id)
    return EvaluationPublic.model_validate(
        service.get_evaluation(session, principal.tenant_id, model_id, evaluation_id))
