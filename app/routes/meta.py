"""/v1/solvers, /healthz and /metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import text

from app.deps import SessionDep
from app.errors import ApiError
from app.schemas import SolverPublic, SolversPublic
from solvers.params import describe_solvers

router = APIRouter(tags=["meta"])


@router.get("/v1/solvers", response_model=SolversPublic)
def list_solvers() -> SolversPublic:
    """Every solver with its parameters, defaults, allowed ranges and a description."""
    solvers = [SolverPublic.model_validate(s) for s in describe_solvers()]
    return SolversPublic(data=solvers, count=len(solvers))


@router.get("/healthz")
def healthz(session: SessionDep) -> dict[str, str]:
    try:
        session.execute(text("SELECT 1"))
    except Exception as exc:
        raise ApiError(503, f"database unavailable: {type(exc).__name__}") from None
    return {"status": "ok"}


@router.get("/metrics", include_in_schema=False)
def metrics() -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
