"""The FastAPI application: `uvicorn --factory app.api.main:create_app`."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.middleware.cors import CORSMiddleware
from prometheus_client import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.auth import CSRF_HEADER, SignInRequired, declare_bearer_security
from app.api.body_limit import BodyLimitMiddleware
from app.api.docs import install_docs
from app.api.http_errors import install_error_handlers
from app.api.routes import (
    admin,
    dashboard,
    datasets,
    evaluations,
    events,
    import_pages,
    imports,
    jobs,
    meta,
    models,
    predictions,
    registry,
    registry_pages,
    search_pages,
    searches,
    signin,
    status,
    uploads,
)
from app.api.security import SecurityMiddleware
from app.domain.services import models as model_service
from app.domain.services import registry as registry_service
from app.domain.services import tenants as tenant_service
from app.domain.sweep import sweep_forever
from app.infra import bus
from app.infra.storage import remove_temporary_blobs
from app.settings import Settings, get_settings

REQUESTS = Counter("hinge_http_requests_total", "HTTP requests", ["method", "route", "status"])
LATENCY = Histogram("hinge_http_request_seconds", "HTTP request latency", ["method", "route"])


# (method, route template, status) -> its counter and histogram children: a bounded set,
# the route templates and statuses the app has (unmatched paths share "unmatched")
_SERIES: dict[tuple[str, str, int], tuple[Any, Any]] = {}


class MetricsMiddleware:
    """Counts requests and their latency by method, route template and status.

    Pure ASGI: it only wraps `send` to see the status. (Starlette's BaseHTTPMiddleware,
    what `@app.middleware("http")` builds, runs every request through a task group and
    memory streams, which cost more than a whole predict.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route = scope.get("route")  # set by the router on the same scope dict
            path = getattr(route, "path", "unmatched")
            labels = (scope["method"], path, status)
            series = _SERIES.get(labels)
            if series is None:  # prometheus's labels() costs a lock and a tuple each time
                series = _SERIES[labels] = (REQUESTS.labels(labels[0], path, str(status)),
                                            LATENCY.labels(labels[0], path))
            series[0].inc()
            series[1].observe(time.perf_counter() - started)


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or get_settings()
    settings.ensure_dirs()
    settings.hmac_key()  # create the secret now, not in the middle of a request
    remove_temporary_blobs(settings.datasets_dir)

    model_service.set_cache_capacity(settings.model_cache_size)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        tasks = [
            asyncio.create_task(sweep_forever(settings)),
            asyncio.create_task(bus.listen(settings, {
                "model": model_service.forget_model,
                "key": tenant_service.verified_keys.forget,
                registry_service.BUS_KIND: registry_service.forget})),
            asyncio.create_task(model_service.check_cached_models_forever(settings)),
            asyncio.create_task(registry_service.check_references_forever(settings)),
        ]
        # Everything imported and built so far lives as long as the process: out of the
        # collector's sight, a full collection no longer walks it (tens of milliseconds
        # that landed on whichever request triggered one: predict's p99).
        # Given back at shutdown: a process that runs apps one after another (the tests)
        # would otherwise never collect what each left in reference cycles (sockets,
        # database connections, file descriptors). Only the young generations are
        # collected first: a full collection walks the whole heap, 0.3-0.5 s in a process
        # that has run a few hundred apps (the tests) - old garbage waits for the shutdown.
        gc.collect(1)
        gc.freeze()
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            gc.unfreeze()

    app = FastAPI(
        lifespan=lifespan,
        title="Hinge",
        version="0.1.0",
        description="Train support vector machines on sparse data and serve the models. "
                    "Every route but /healthz needs an API key: `Authorization: Bearer hk_...`.",
        docs_url=None,
        redoc_url=None,
        # FastAPI's OpenTelemetry hooks: Hinge configures no provider (its metrics are
        # Prometheus's, /metrics); off, a request does not ask the providers every time
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )
    app.state.settings = settings
    install_error_handlers(app)

    @app.exception_handler(SignInRequired)
    async def _sign_in(request: Request, _exc: SignInRequired) -> Response:
        return signin.sign_in_redirect(request)

    # models first: the router tries routes in order, and predict is the hot path
    for router in (models.router, datasets.router, jobs.router, events.router,
                   evaluations.router, meta.router, status.router, admin.router,
                   dashboard.router,
                   signin.router, searches.router, search_pages.router, registry.router,
                   registry_pages.router, predictions.router, imports.router,
                   import_pages.router, uploads.router):
        app.include_router(router)
    app.mount("/static", dashboard.static_files(), name="static")
    install_docs(app)
    # every body bounded before anything reads it (inside CORS, so a browser sees its 413)
    app.add_middleware(BodyLimitMiddleware, settings=settings)
    if settings.cors_origins:
        app.add_middleware(
            CORSMiddleware, allow_origins=settings.cors_origins, allow_credentials=False,
            allow_methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key",
                           "Last-Event-ID", "Upload-Offset", CSRF_HEADER],
            expose_headers=["Retry-After", "Upload-Offset", "Upload-Length"], max_age=600)

    app.add_middleware(MetricsMiddleware)
    # outermost: the host, origin and NUL checks run before anything else
    app.add_middleware(SecurityMiddleware, allowed_hosts=settings.allowed_hosts,
                       cors_origins=settings.cors_origins)
    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:  # built once, then cached by FastAPI
            declare_bearer_security(default_openapi(), app.routes)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
    return app

