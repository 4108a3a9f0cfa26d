"""What the domain refuses, in its own words: services, the parsers and the workers raise
these, and import neither FastAPI nor Starlette. The HTTP edge (app.api.http_errors) turns each
kind into its answer: NotFound 404, Conflict 409, Invalid 422, TooLarge 413, OverLimit 429,
Unavailable 503, Unsupported 415, Malformed 400, NoSpace 507, all in the one error shape
{"error": {"code", "message", "detail"}} with `detail` as given here."""

from __future__ import annotations

import errno
from typing import Any


class DomainError(Exception):
    """A request the domain cannot carry out; `message` says why, `detail` (JSON-able)
    says what to change; `code`, when a kind sets it, is the error body's code (else the
    HTTP status's)."""

    code: str | None = None

    def __init__(self, message: str, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class NotFound(DomainError):
    """No such resource (of this tenant): a 404 for the API, the not-found page for the
    dashboard."""

    def __init__(self, kind: str, ident: str, message: str | None = None) -> None:
        super().__init__(message or f"{kind} {ident!r} not found")
        self.kind = kind
        self.ident = ident


def not_found(kind: str, ident: str) -> NotFound:
    return NotFound(kind, ident)


class Conflict(DomainError):
    """The resource's state forbids it (a finished job cancelled, a name taken)."""


class Invalid(DomainError):
    """The request asks for something that cannot be: `field` names the input at fault."""

    def __init__(self, message: str, detail: Any = None, *, field: str | None = None
                 ) -> None:
        if field is not None:
            detail = {"field": field, **(detail or {})}
        super().__init__(message, detail)


class AmbiguousId(Invalid):
    """An id prefix that matches several of the tenant's rows: `detail.candidates` lists
    them (`detail.more`: whether there are others)."""

    code = "ambiguous_id"


class TooLarge(DomainError):
    """The request is bigger than a limit allows (its bytes, rows, fits, or the tenant's
    stored datasets): sending it again will not help."""


class OverLimit(DomainError):
    """A queue or rate limit is full now: the same request may succeed `retry_after`
    seconds later."""

    def __init__(self, message: str, detail: Any = None, *, retry_after: int | None = None
                 ) -> None:
        super().__init__(message, detail)
        self.retry_after = retry_after


class Unavailable(DomainError):
    """A service it needs (the broker, the database) cannot be reached; nothing was
    started."""

    def __init__(self, message: str, detail: Any = None, *, retry_after: int | None = None
                 ) -> None:
        super().__init__(message, detail)
        self.retry_after = retry_after


class NoSpace(DomainError):
    """The server's disk cannot hold what the request would store (keeping its reserve,
    HINGE_DISK_RESERVE_BYTES): nothing was stored; the same request may succeed once
    space is freed."""


def no_space(exc: OSError) -> NoSpace:
    """A disk that cannot hold a dataset (ENOSPC, EDQUOT) as a 507; other errors as is."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        raise exc
    return NoSpace("the server's disk cannot hold this dataset: "
                   f"{exc.strerror} (nothing was stored; free disk space, or lower "
                   "HINGE_DISK_RESERVE_BYTES)",
                   {"reason": str(exc.strerror), "setting": "HINGE_DISK_RESERVE_BYTES"})


class Unsupported(DomainError):
    """A content type the operation does not read."""


class Malformed(DomainError):
    """The request's framing is broken (a multipart body, a length) before its content
    could be read."""
