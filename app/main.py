"""The FastAPI application: `uvicorn --factory app.main:create_app`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from prometheus_client import Counter, Histogram

from app.errors import install_error_handlers
from app.routes import dashboard, datasets, evaluations, events, jobs, meta, models
from app.settings import Settings, get_settings
from app.sweep import sweep_forever

REQUESTS = Counter("hinge_http_requests_total", "HTTP requests", ["method", "route", "status"])
LATENCY = Histogram("hinge_http_request_seconds", "HTTP request latency", ["method", "route"])


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.ensure_dirs()
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(sweep_forever(settings))
        try:
            yield
        finally:
            task.cancel()

    app = FastAPI(
        lifespan=lifespan,
        title="Hinge",
        version="0.1.0",
        description="Train support vector machines on sparse data and serve the models.",
    )
    app.state.settings = settings
    install_error_handlers(app)
    for router in (datasets.router, jobs.router, events.router, models.router,
                   evaluations.router, meta.router, dashboard.router):
        app.include_router(router)
    app.mount("/static", dashboard.static_files(), name="static")

    @app.middleware("http")
    async def _observe(request: Request, call_next: Any) -> Response:
        started = time.perf_counter()
        response: Response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        REQUESTS.labels(request.method, path, str(response.status_code)).inc()
        LATENCY.labels(request.method, path).observe(time.perf_counter() - started)
        return response

    return app

