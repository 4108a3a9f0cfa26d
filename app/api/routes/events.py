"""GET /v1/jobs/{id}/events: the job's progress as Server-Sent Events.

First the stored history after `Last-Event-ID` (each stored event has its sequence number as
SSE id, so a reconnect resumes without gaps or duplicates), then live events as the worker
writes them, then one terminal `status` event, after which the stream ends. Between stored
points, the job's latest progress is sent as an `progress` event without an id (it is not
part of the history, so a resume neither repeats nor misses it).

The handler is a coroutine, so every database call runs in a worker thread: a call on the
event loop that waited for SQLite's lock would also stop the loop from finishing the
request that holds it (the loop runs dependency teardowns), a deadlock that lasted until
the 30 s busy timeout and ended in a 500.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Header, Request
from sse_starlette import EventSourceResponse

from app.api.auth import ReadAuth
from app.api.deps import SettingsDep
from app.api.http_errors import ApiError
from app.domain.errors import not_found
from app.domain.job_status import TERMINAL_STATUSES
from app.domain.metrics import observe_progress_lag
from app.domain.orm import JobEvent
from app.domain.services import jobs as service
from app.infra.bus import subscribe
from app.infra.db import read_sessionmaker_for

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

POLL_SECONDS = 0.1  # database poll without Redis
NUDGED_POLL_SECONDS = 1.0  # fallback poll when pub/sub nudges arrive
BATCH = 500
MAX_EVENT_ID = 2**31 - 1  # event ids are the job_events.seq integers


def _exists(database_url: str, tenant_id: str, job_id: str) -> bool:
    with read_sessionmaker_for(database_url)() as session:
        return service.job_exists(session, tenant_id, job_id)


def parse_last_event_id(value: str | None) -> int:
    """The event id to resume after: 0 without the header; 422 unless a decimal integer
    in [0, 2**31 - 1]."""
    if not value:
        return 0
    text = value.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > 10 or int(text) > MAX_EVENT_ID:
        raise ApiError(422, f"Last-Event-ID must be an event id, an integer from 0 to "
                            f"{MAX_EVENT_ID}", {"field": "Last-Event-ID"})
    return int(text)


def _fetch(database_url: str, job_id: str, after: int) -> tuple[list[JobEvent], dict | None]:
    with read_sessionmaker_for(database_url)() as session:
        found = service.events_after(session, job_id, after, BATCH)
        session.commit()
        return found


def _message(event: JobEvent) -> dict[str, Any]:
    return {"id": str(event.seq), "event": event.kind,
            "data": json.dumps({"seq": event.seq, **event.payload})}


@router.get(
    "/{job_id}/events",
    response_class=EventSourceResponse,
    responses={200: {"content": {"text/event-stream": {}},
                     "description": "SSE stream of `status` and `progress` events"}},
)
async def job_events(
    job_id: str,
    request: Request,
    settings: SettingsDep,
    principal: ReadAuth,
    last_event_id: str | None = Header(None, alias="Last-Event-ID"),
) -> EventSourceResponse:
    """`curl -N` shows a job's progress live; the stream ends after the terminal status."""
    after = parse_last_event_id(last_event_id)
    if not await anyio.to_thread.run_sync(_exists, settings.database_url,
                                          principal.tenant_id, job_id):
        raise not_found("job", job_id)

    async def stream() -> AsyncIterator[dict[str, Any]]:
        pubsub = await subscribe(settings, job_id)
        try:
            async for message in _events(pubsub):
                yield message
        finally:
            if pubsub is not None:
                await pubsub.aclose()

    async def _events(pubsub: Any) -> AsyncIterator[dict[str, Any]]:
        connected = time.time()
        seq = after
        last_live: dict | None = None
        while True:
            events, progress = await anyio.to_thread.run_sync(
                _fetch, settings.database_url, job_id, seq
            )
            for event in events:
                seq = event.seq
                yield _message(event)
                if event.kind == "progress":
                    last_live = event.payload
                    observe_progress_lag(event.payload, connected)
                if event.kind == "status" and event.payload.get("status") in TERMINAL_STATUSES:
                    return
            if len(events) == BATCH:
                continue
            if progress and progress != last_live:
                last_live = progress
                yield {"event": "progress", "data": json.dumps(progress)}
                observe_progress_lag(progress, connected)
            if await request.is_disconnected():
                return
            if pubsub is None:
                await asyncio.sleep(POLL_SECONDS)
                continue
            try:  # wake on a nudge, or poll anyway after a second
                if await pubsub.get_message(ignore_subscribe_messages=True,
                                            timeout=NUDGED_POLL_SECONDS):
                    while await pubsub.get_message(ignore_subscribe_messages=True,
                                                   timeout=0):
                        pass
            except Exception:  # Redis went away: keep streaming from the database
                pubsub = None

    return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-cache",
                                                           "X-Accel-Buffering": "no"})
