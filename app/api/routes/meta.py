"""/v1/solvers, /healthz and /metrics."""

from __future__ import annotations

import anyio
import anyio.to_thread
from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST
from sqlalchemy import text

from app.api.auth import AdminAuth, Public, ReadAuth
from app.api.deps import SettingsDep
from app.api.http_errors import ApiError
from app.domain.metrics import exposition
from app.domain.schemas import SolverPublic, SolversPublic
from app.infra.db import read_sessionmaker_for
from solvers.params import describe_solvers

router = APIRouter(tags=["meta"])

# /healthz runs its query on threads of its own: when uploads or slow requests hold every
# thread of the shared pool, the health check still answers at once.
_HEALTH_THREADS = anyio.CapacityLimiter(2)


@router.get("/v1/solvers", response_model=SolversPublic)
def list_solvers(_principal: ReadAuth) -> SolversPublic:
    """Every solver with its parameters, defaults, allowed ranges and a description."""
    solvers = [SolverPublic.model_validate(s) for s in describe_solvers()]
    return SolversPublic(data=solvers, count=len(solvers))


def _database_answers(database_url: str) -> None:
    with read_sessionmaker_for(database_url)() as session:
        session.execute(text("SELECT 1"))


@router.get("/healthz", dependencies=[Public])
async def healthz(settings: SettingsDep) -> dict[str, str]:
    """Liveness: the API answers and its database does (no key needed)."""
    try:
        with anyio.fail_after(10):
            await anyio.to_thread.run_sync(_database_answers, settings.database_url,
                                           limiter=_HEALTH_THREADS, abandon_on_cancel=True)
    except Exception as exc:
        raise ApiError(503, f"database unavailable: {type(exc).__name__}") from None
    return {"status": "ok"}


@router.get("/metrics", include_in_schema=False)
def metrics(settings: SettingsDep, _principal: AdminAuth) -> Response:
    """Prometheus metrics (an admin key: they count every tenant's requests and jobs)."""
    return Response(exposition(settings.database_url), media_type=CONTENT_TYPE_LATEST)
