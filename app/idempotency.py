"""`Idempotency-Key` on POST /v1/datasets and POST /v1/jobs: a client that retries a
request it never saw answered gets the first answer again instead of a second dataset or
job.

The first request with a key reserves it (a row committed before the work starts; a
concurrent duplicate finds the row and gets 409 while the first runs), and on success
stores its status, its body and a hash of what was asked (the job spec as validated; for
an upload, the sha256 of the decompressed data and the name). A later request with the
same key and the same request gets the stored answer for `HINGE_IDEMPOTENCY_HOURS`; with a
different request, a 422. A request that fails drops its reservation, so it can be
retried. Keys are per tenant.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import timedelta

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import session_scope
from app.errors import ApiError
from app.orm import IdempotencyRecord, utcnow
from app.settings import Settings

HEADER = "Idempotency-Key"


def request_key(request: Request) -> str | None:
    """The request's Idempotency-Key, if any (422 unless 1-255 printable ASCII)."""
    value = request.headers.get(HEADER)
    if value is None:
        return None
    if not 1 <= len(value) <= 255 or not all(33 <= ord(c) <= 126 for c in value):
        raise ApiError(422, f"{HEADER}: 1 to 255 printable ASCII characters, no spaces",
                       {"field": HEADER})
    return value


def request_hash(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class Stored:
    """A finished request's answer."""

    status_code: int
    body: bytes
    request_hash: str

    def replay(self, asked: str) -> Response:
        if asked != self.request_hash:
            raise ApiError(422, f"this {HEADER} was used for a different request",
                           {"field": HEADER})
        return Response(self.body, status_code=self.status_code,
                        media_type="application/json", headers={"Idempotent-Replay": "true"})


@dataclass(frozen=True)
class Reserved:
    """This request holds the key: complete or abandon it."""

    settings: Settings
    tenant_id: str
    key: str

    def complete(self, status_code: int, body: bytes, asked: str,
                 session: Session | None = None) -> None:
        """Store the answer; with `session`, in its transaction, so that the answer commits
        with the work it reports or not at all."""
        stored = update(IdempotencyRecord).where(
            IdempotencyRecord.tenant_id == self.tenant_id,
            IdempotencyRecord.key == self.key,
        ).values(status_code=status_code, response_body=body, request_hash=asked)
        if session is not None:
            session.execute(stored)
            return
        with session_scope(self.settings.database_url) as own:
            own.execute(stored)

    def abandon(self) -> None:
        with session_scope(self.settings.database_url) as session:
            session.execute(delete(IdempotencyRecord).where(
                IdempotencyRecord.tenant_id == self.tenant_id,
                IdempotencyRecord.key == self.key,
                IdempotencyRecord.status_code.is_(None)))


def begin(settings: Settings, tenant_id: str, key: str, route: str) -> Stored | Reserved:
    """The stored answer for this key, or a reservation of it (409 while another request
    holds it; 422 if it was used on another route)."""
    expired = utcnow() - timedelta(hours=settings.idempotency_hours)
    try:
        with session_scope(settings.database_url) as session:
            session.execute(delete(IdempotencyRecord).where(
                IdempotencyRecord.tenant_id == tenant_id, IdempotencyRecord.key == key,
                IdempotencyRecord.created_at < expired))
            record = session.scalar(select(IdempotencyRecord).where(
                IdempotencyRecord.tenant_id == tenant_id, IdempotencyRecord.key == key))
            if record is None:
                session.add(IdempotencyRecord(tenant_id=tenant_id, key=key, route=route,
                                              request_hash="", created_at=utcnow()))
                session.flush()
                return Reserved(settings, tenant_id, key)
            if record.route != route:
                raise ApiError(422, f"this {HEADER} was used for a different request",
                               {"field": HEADER})
            if record.status_code is None or record.response_body is None:
                raise ApiError(409, f"a request with this {HEADER} is still in progress",
                               {"field": HEADER})
            return Stored(record.status_code, record.response_body, record.request_hash)
    except IntegrityError:  # a concurrent request reserved it first
        raise ApiError(409, f"a request with this {HEADER} is still in progress",
                       {"field": HEADER}) from None
