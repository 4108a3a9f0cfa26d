"""The FastAPI application: `uvicorn --factory app.main:create_app`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import Counter, Histogram

from app.auth import CSRF_HEADER, SignInRequired
from app.docs import install_docs
from app.errors import install_error_handlers
from app.routes import (
    admin,
    dashboard,
    datasets,
    evaluations,
    events,
    jobs,
    meta,
    models,
    search_pages,
    searches,
    signin,
)
from app.security import SecurityMiddleware
from app.settings import Settings, get_settings
from app.storage import remove_temporary_blobs
from app.sweep import sweep_forever

REQUESTS = Counter("hinge_http_requests_total", "HTTP requests", ["method", "route", "status"])
LATENCY = Histogram("hinge_http_request_seconds", "HTTP request latency", ["method", "route"])


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.ensure_dirs()
    settings.hmac_key()  # create the secret now, not in the middle of a request
    remove_temporary_blobs(settings.datasets_dir)

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
        description="Train support vector machines on sparse data and serve the models. "
                    "Every route but /healthz needs an API key: `Authorization: Bearer hk_...`.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    install_error_handlers(app)

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, _exc: SignInRequired) -> Response:
        return signin.sign_in_redirect(request)

    for router in (datasets.router, jobs.router, events.router, models.router,
                   evaluations.router, meta.router, admin.router, dashboard.router,
                   signin.router, searches.router, search_pages.router):
        app.include_router(router)
    app.mount("/static", dashboard.static_files(), name="static")
    install_docs(app)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_credentials=False,
            allow_methods=["GET", "POST", "PUT", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key",
                           "Last-Event-ID", CSRF_HEADER],
            expose_headers=["Retry-After"], max_age=600)

    @app.middleware("http")
    async def _observe(request: Request, call_next: Any) -> Response:
        started = time.perf_counter()
        response: Response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        REQUESTS.labels(request.method, path, str(response.status_code)).inc()
        LATENCY.labels(request.method, path).observe(time.perf_counter() - started)
        return response

    # outermost: the host, origin and NUL checks run before anything else
    app.add_middleware(SecurityMiddleware, allowed_hosts=settings.allowed_hosts,
                       cors_origins=settings.cors_origins)
    return app

