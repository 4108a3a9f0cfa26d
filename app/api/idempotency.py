"""`Idempotency-Key` on POST /v1/datasets, /v1/datasets/{id}/split, /v1/jobs and
/v1/searches: a client that retries a request it never saw answered gets the first answer
again instead of a second dataset or job.

The first request with a key reserves it (a row committed before the work starts; a
concurrent duplicate finds the row and gets 409 while the first runs), and on success
stores its status, its body and a hash of what was asked (the job spec as validated; for
an upload, the sha256 of the decompressed data and the name), in the same transaction as
the work itself, so that a crash leaves either both or neither. A later request with the
same key and the same request gets the stored answer for `HINGE_IDEMPOTENCY_HOURS`; with a
different request, a 422. A request that fails drops its reservation, so it can be
retried. Keys are per tenant.

A reservation is held by its request's process, not for ever: the row names its holder
(host, PID namespace, PID and the process's start time) and a lease,
HINGE_IDEMPOTENCY_LEASE_SECONDS, that a thread of the holding process renews every third
of it while the request runs. A retry finds the key free again, and takes it over, when
the lease has lapsed (the holder died, on any host) or at once when the holder is a
process of this host's PID namespace that is gone (a PID that no longer exists, or that
now belongs to a process started later). That is the crash the key is for: the API killed
in the middle of an upload, and the client sending the same request again.

Every state-changing POST goes through one wrapper, `Write`: it takes the key (if any),
replays a stored answer, and commits the work together with its answer; on any failure it
rolls the work back and drops the reservation.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType

import anyio.to_thread
from fastapi import Request
from fastapi.responses import Response
from pydantic import BaseModel
from sqlalchemy import and_, delete, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from app.api.http_errors import ApiError
from app.domain.orm import IdempotencyRecord, utcnow
from app.infra.db import session_scope
from app.settings import Settings

HEADER = "Idempotency-Key"
# A reservation without a holder (made before reservations had leases) is held this long.
LEGACY_HOLD = timedelta(minutes=10)

log = logging.getLogger("hinge.api")


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


# -- who holds a key: this process, named so that another process can tell it is gone --

def _start_ticks(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks after boot), None if there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22; the name may hold spaces


def _namespace() -> str:
    """This boot of this kernel and this PID namespace: processes with the same namespace
    see each other's PIDs in /proc. Empty where that cannot be told."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


@dataclass(frozen=True)
class Holder:
    host: str
    namespace: str
    pid: int
    started: str

    def __str__(self) -> str:
        return f"{self.host}|{self.namespace}|{self.pid}|{self.started}"

    @classmethod
    def parse(cls, text: str | None) -> Holder | None:
        parts = (text or "").split("|")
        if len(parts) != 4 or not parts[2].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]), parts[3])

    def gone(self) -> bool:
        """True only when this process can see that the holder no longer runs."""
        if not self.namespace or self.namespace != _namespace():
            return False  # another host or namespace: only its lease can tell
        return _start_ticks(self.pid) != self.started


_me: tuple[int, Holder] | None = None


def this_process() -> Holder:
    global _me
    pid = os.getpid()
    if _me is None or _me[0] != pid:  # (again after a fork)
        _me = (pid, Holder(socket.gethostname()[:100], _namespace(), pid,
                           _start_ticks(pid) or os.urandom(6).hex()))
    return _me[1]


# -- the stored answer, and the reservation ---------------------------------------------

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


class Reserved:
    """This request holds the key: complete or abandon it. Its lease is renewed while the
    object lives and neither has been called."""

    def __init__(self, settings: Settings, tenant_id: str, key: str) -> None:
        self.settings = settings
        self.tenant_id = tenant_id
        self.key = key
        self.holder = str(this_process())
        self.finished = False
        _renewer.hold(self)

    def _mine(self) -> tuple[ColumnElement[bool], ...]:
        return (IdempotencyRecord.tenant_id == self.tenant_id,
                IdempotencyRecord.key == self.key, IdempotencyRecord.holder == self.holder,
                IdempotencyRecord.status_code.is_(None))

    def complete(self, status_code: int, body: bytes, asked: str,
                 session: Session | None = None) -> None:
        """Store the answer: in `session`, the request's own transaction (its commit then
        stores the work and the answer together), or else in a transaction of its own."""
        self.finished = True
        statement = update(IdempotencyRecord).where(*self._mine()).values(
            status_code=status_code, response_body=body, request_hash=asked,
            lease_until=None)
        if session is not None:
            stored = session.execute(statement).rowcount  # type: ignore[attr-defined]
        else:
            with session_scope(self.settings.database_url) as own:
                stored = own.execute(statement).rowcount  # type: ignore[attr-defined]
        if not stored:  # its lease lapsed (renewals failed) and a retry took it over
            log.warning("%s %r: the reservation was taken over before its answer was "
                        "stored", HEADER, self.key)

    def abandon(self) -> None:
        self.finished = True
        with session_scope(self.settings.database_url) as session:
            session.execute(delete(IdempotencyRecord).where(*self._mine()))


def _in_progress() -> ApiError:
    return ApiError(409, f"a request with this {HEADER} is still in progress",
                    {"field": HEADER})


def _free(record: IdempotencyRecord, now: datetime) -> bool:
    """Whether an unfinished reservation may be taken over: its holder is gone."""
    if record.holder is None:
        return record.created_at + LEGACY_HOLD < now
    if record.lease_until is None or record.lease_until < now:
        return True
    holder = Holder.parse(record.holder)
    return holder is not None and holder.gone()


def begin(settings: Settings, tenant_id: str, key: str, route: str) -> Stored | Reserved:
    """The stored answer for this key, or a reservation of it (409 while another live
    request holds it; 422 if it was used on another route)."""
    now = utcnow()
    expired = now - timedelta(hours=settings.idempotency_hours)
    lease = now + timedelta(seconds=settings.idempotency_lease_seconds)
    me = str(this_process())
    try:
        with session_scope(settings.database_url) as session:
            session.execute(delete(IdempotencyRecord).where(
                IdempotencyRecord.tenant_id == tenant_id, IdempotencyRecord.key == key,
                IdempotencyRecord.created_at < expired))
            record = session.scalar(select(IdempotencyRecord).where(
                IdempotencyRecord.tenant_id == tenant_id, IdempotencyRecord.key == key))
            if record is None:
                session.add(IdempotencyRecord(tenant_id=tenant_id, key=key, route=route,
                                              request_hash="", created_at=now, holder=me,
                                              lease_until=lease))
                session.flush()
            else:
                if record.route != route:
                    raise ApiError(422, f"this {HEADER} was used for a different request",
                                   {"field": HEADER})
                if record.status_code is not None and record.response_body is not None:
                    return Stored(record.status_code, record.response_body,
                                  record.request_hash)
                if not _free(record, now):
                    raise _in_progress()
                # taken over only if nobody else did since it was read
                same_holder = (IdempotencyRecord.holder.is_(None) if record.holder is None
                               else IdempotencyRecord.holder == record.holder)
                taken = session.execute(
                    update(IdempotencyRecord).where(
                        IdempotencyRecord.id == record.id, same_holder,
                        IdempotencyRecord.status_code.is_(None))
                    .values(holder=me, lease_until=lease, created_at=now, request_hash="")
                    .execution_options(synchronize_session=False))
                if taken.rowcount != 1:  # type: ignore[attr-defined]
                    raise _in_progress()
                log.warning("%s %r: its holder (%s) is gone; this request takes it over",
                            HEADER, key, record.holder)
    except IntegrityError:  # a concurrent request reserved it first
        raise _in_progress() from None
    return Reserved(settings, tenant_id, key)


# -- the wrapper of every state-changing request ----------------------------------------

class Write:
    """One state-changing request: its work, its answer and their one commit, with or
    without an Idempotency-Key. The key is read (422 if malformed) when it is made; the
    key is reserved, or its stored answer found, on entering the block:

        with idempotency.Write(request, settings, tenant_id, "POST /v1/jobs", session) as w:
            return w.run(request_hash(...), lambda: (202, answer_model))

    `run` (or `replay` then `answer`, when the request's hash is known only halfway
    through the work, as for an upload) replays the stored answer of an earlier request
    with the same key (422 if it asked something else), or does the work and commits it in
    the request's write session together with its stored answer: a crash leaves both or
    neither. Leaving the block by an exception rolls the work back (releasing SQLite's
    write lock) and then drops the reservation, so that the request may be retried.
    `async with` does the same from a coroutine, the database steps on a worker thread."""

    def __init__(self, request: Request, settings: Settings, tenant_id: str, route: str,
                 session: Session) -> None:
        self.key = request_key(request)
        self.settings = settings
        self.tenant_id = tenant_id
        self.route = route
        self.session = session
        self.held: Stored | Reserved | None = None

    def __enter__(self) -> Write:
        if self.key is not None:
            self.held = begin(self.settings, self.tenant_id, self.key, self.route)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is not None and isinstance(self.held, Reserved):
            self.session.rollback()  # release this request's transaction first
            self.held.abandon()

    async def __aenter__(self) -> Write:
        return await anyio.to_thread.run_sync(self.__enter__)

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await anyio.to_thread.run_sync(self.__exit__, kind, exc, tb)

    def replay(self, asked: str) -> Response | None:
        """The stored answer of an earlier request with this key (422 when that one asked
        something else than `asked`); None when this request is to do the work."""
        return self.held.replay(asked) if isinstance(self.held, Stored) else None

    def answer(self, status_code: int, body: BaseModel, asked: str) -> Response:
        """Commit the work and, with a key, its stored answer in the same transaction."""
        if isinstance(self.held, Stored):
            raise RuntimeError("a request with a stored answer is replayed, not answered")
        data = body.model_dump_json().encode()
        if isinstance(self.held, Reserved):
            self.held.complete(status_code, data, asked, session=self.session)
        self.session.commit()  # (the outbox sends the work's messages right after)
        return Response(data, status_code=status_code, media_type="application/json")

    def run(self, asked: str, work: Callable[[], tuple[int, BaseModel]]) -> Response:
        """The stored answer, or `work()`'s (status, body) committed with the work."""
        replayed = self.replay(asked)
        if replayed is not None:
            return replayed
        status_code, body = work()
        return self.answer(status_code, body, asked)


# -- the lease: renewed by one thread per process while any reservation lives ------------

class _Renewer:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: weakref.WeakSet[Reserved] = weakref.WeakSet()
        self.thread: threading.Thread | None = None
        self.wake = threading.Event()  # a new reservation: its lease may be shorter

    def hold(self, reserved: Reserved) -> None:
        with self.lock:
            self.held.add(reserved)
            self.wake.set()
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name="idempotency-lease")
                self.thread.start()

    def _live(self) -> list[Reserved]:
        with self.lock:
            return [r for r in list(self.held) if not r.finished]

    def _run(self) -> None:
        """Renew every third of the shortest lease held, counted from the last renewal: a
        reservation with a shorter lease than those before wakes the thread (it would
        otherwise sleep out a third of the longer one first), and a stream of new ones
        does not put the renewal off."""
        last = time.monotonic()
        while True:
            live = self._live()
            if not live:
                with self.lock:  # nothing to renew: end (hold() starts another)
                    if not [r for r in list(self.held) if not r.finished]:
                        self.thread = None
                        return
                continue
            due = last + min(r.settings.idempotency_lease_seconds for r in live) / 3
            if time.monotonic() < due:
                self.wake.wait(due - time.monotonic())
                self.wake.clear()
                continue
            renew(self._live())
            last = time.monotonic()


_renewer = _Renewer()


def renew(held: list[Reserved]) -> int:
    """Extend the lease of every reservation in `held` (this process's); how many rows."""
    renewed = 0
    by_database: dict[str, list[Reserved]] = {}
    for reserved in held:
        by_database.setdefault(reserved.settings.database_url, []).append(reserved)
    for url, group in by_database.items():
        lease = utcnow() + timedelta(seconds=min(
            r.settings.idempotency_lease_seconds for r in group))
        keys = or_(*(and_(IdempotencyRecord.tenant_id == r.tenant_id,
                          IdempotencyRecord.key == r.key) for r in group))
        try:
            with session_scope(url) as session:
                renewed += session.execute(
                    update(IdempotencyRecord).where(
                        keys, IdempotencyRecord.holder == group[0].holder,
                        IdempotencyRecord.status_code.is_(None))
                    .values(lease_until=lease).execution_options(synchronize_session=False)
                ).rowcount  # type: ignore[attr-defined]
        except Exception:  # the next renewal, a third of the lease later, tries again
            log.warning("could not renew the leases of %d %s reservation(s)", len(group),
                        HEADER, exc_info=True)
    return renewed
