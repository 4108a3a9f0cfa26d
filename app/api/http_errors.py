"""The HTTP edge of every failure: one JSON error shape, {"error": {"code", "message",
"detail"}}, and the one mapping from the domain's errors (app.domain.errors) to HTTP answers.
ApiError is for the edge's own refusals (authentication, rate limits, headers)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from app.domain.errors import (
    AmbiguousId,
    Conflict,
    DomainError,
    Invalid,
    Malformed,
    NoSpace,
    NotFound,
    OverLimit,
    TooLarge,
    Unavailable,
    Unsupported,
)
from app.infra.db import DatabaseBusy

log = logging.getLogger("hinge.api")

# How soon a client should try again after a 503 for a busy database.
BUSY_RETRY_AFTER_SECONDS = 2

_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    411: "length_required",
    413: "too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "too_many_requests",
    500: "internal_error",
    503: "unavailable",
    507: "insufficient_storage",
}


class ApiError(Exception):
    def __init__(self, status: int, message: str, detail: Any = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.detail = detail
        self.code = code or _CODES.get(status, "error")
        self.headers = headers


# The HTTP status of each kind of domain error (app.domain.errors).
DOMAIN_STATUS: dict[type[DomainError], int] = {
    Malformed: 400,
    NotFound: 404,
    Conflict: 409,
    TooLarge: 413,
    Unsupported: 415,
    Invalid: 422,
    AmbiguousId: 422,
    OverLimit: 429,
    Unavailable: 503,
    NoSpace: 507,
}


def domain_status(exc: DomainError) -> int:
    """The status of the nearest kind of `exc` in DOMAIN_STATUS (500 for none)."""
    for kind in type(exc).__mro__:
        if kind in DOMAIN_STATUS:
            return DOMAIN_STATUS[kind]
    return 500


def domain_headers(exc: DomainError) -> dict[str, str] | None:
    retry_after = getattr(exc, "retry_after", None)
    return None if retry_after is None else {"Retry-After": str(retry_after)}


def error_body(status: int, message: str, detail: Any = None, code: str | None = None) -> dict:
    return {"error": {"code": code or _CODES.get(status, "error"), "message": message,
                      "detail": detail}}


def _json(status: int, message: str, detail: Any = None, code: str | None = None,
          headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, detail, code), status_code=status,
                        headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return _json(exc.status, exc.message, exc.detail, exc.code, exc.headers)

    @app.exception_handler(DomainError)
    async def _domain_error(request: Request, exc: DomainError) -> JSONResponse:
        status = domain_status(exc)
        if status == 500:
            return _unhandled_error(request)
        return _json(status, exc.message, exc.detail, exc.code, headers=domain_headers(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(p) for p in first["loc"] if p != "body")
        message = f"{where}: {first['msg']}" if where else str(first["msg"])
        return _json(422, message, errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        return _json(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(DatabaseBusy)
    @app.exception_handler(PoolTimeout)
    async def _busy(request: Request, exc: Exception) -> JSONResponse:
        return _database_busy(request, exc)

    @app.exception_handler(OperationalError)
    async def _operational(request: Request, exc: OperationalError) -> JSONResponse:
        if is_lock_timeout(exc):
            return _database_busy(request, exc)
        if is_refused_connection(exc):
            log.warning("%s %s: %s; answered 503", request.method, request.url.path, exc)
            return _json(503, "the database cannot be reached right now; try again shortly",
                         None, headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)})
        return _unhandled_error(request)

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
        return _unhandled_error(request)


def is_lock_timeout(exc: OperationalError) -> bool:
    """SQLite's "database is locked" (or "busy"): a statement outlived its busy timeout,
    and its transaction did not commit."""
    message = str(exc.orig)
    return "database is locked" in message or "database is busy" in message


def is_refused_connection(exc: OperationalError) -> bool:
    """A new connection was refused (PostgreSQL down, or at its max_connections): the
    statement that needed it never ran."""
    message = str(exc.orig)
    return message.startswith("connection failed") or "too many clients" in message


def _database_busy(request: Request, exc: Exception) -> JSONResponse:
    """503 with Retry-After: the write transaction never began or never committed, so the
    request changed nothing."""
    log.warning("%s %s: %s; answered 503", request.method, request.url.path, exc)
    return _json(503, "the database is busy with other writes; try again shortly", None,
                 headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)})


def _unhandled_error(request: Request) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return _json(500, "internal server error")
