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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Header, Request
from sse_starlette import EventSourceResponse

from app.api import ids
from app.api.auth import ReadAuth
from app.api.deps import SettingsDep
from app.api.http_errors import ApiError
from app.domain.job_status import TERMINAL_STATUSES
from app.domain.metrics import observe_progress_lag
from app.domain.orm import JobEvent
from app.domain.services import jobs as service
from app.infra.bus import subscribe
from app.infra.db import read_sessionmaker_for
from app.settings import Settings

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

POLL_SECONDS = 0.1  # database poll without Redis
NUDGED_POLL_SECONDS = 1.0  # fallback poll when pub/sub nudges arrive
BATCH = 500
MAX_EVENT_ID = 2**31 - 1  # event ids are the job_events.seq integers


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


Round = tuple[list[dict[str, Any]], bool, bool]  # (messages, the end, read again at once)


def live_stream(request: Request, settings: Settings, channel: str,
                read_round: Callable[[], Awaitable[Round]]) -> EventSourceResponse:
    """The SSE loop of every live stream (a job's events, a search's points): each round
    `read_round` reads what is new and says whether the stream ends after it or must be
    read again at once (a full batch); between rounds the loop waits for a nudge on the
    bus (`channel`, Redis pub/sub), polling anyway after NUDGED_POLL_SECONDS, or without
    pub/sub polls every POLL_SECONDS. It ends when the client goes away."""

    async def stream() -> AsyncIterator[dict[str, Any]]:
        pubsub = await subscribe(settings, channel)
        try:
            while True:
                messages, end, again = await read_round()
                for message in messages:
                    yield message
                if end:
                    return
                if again:
                    continue
                if await request.is_disconnected():
                    return
                pubsub = await _wait_for_news(pubsub)
        finally:
            if pubsub is not None:
                await pubsub.aclose()

    return EventSourceResponse(stream(), ping=15, headers={"Cache-Control": "no-cache",
                                                           "X-Accel-Buffering": "no"})


def state_stream(request: Request, settings: Settings, item_id: str,
                 read_state: Callable[[], dict[str, Any]]) -> EventSourceResponse:
    """A live stream of an item's state (`read_state`, read in a thread: a dict with its
    `status`): a `progress` event each time the state changes, then one `status` event once
    the item is finished, after which the stream ends (an import's, a prediction's)."""
    last: dict[str, Any] = {}

    async def read_round() -> Round:
        state = await anyio.to_thread.run_sync(read_state)
        if state["status"] in {s.value for s in TERMINAL_STATUSES}:
            return [{"event": "status", "data": json.dumps(state)}], True, False
        messages = []
        if state != last:
            last.clear()
            last.update(state)
            messages.append({"event": "progress", "data": json.dumps(state)})
        return messages, False, False

    return live_stream(request, settings, item_id, read_round)


async def _wait_for_news(pubsub: Any) -> Any:
    """Until a nudge or the poll interval; the subscription to keep (None once Redis has
    gone away: the stream then goes on from the database alone)."""
    if pubsub is None:
        await asyncio.sleep(POLL_SECONDS)
        return None
    try:
        if await pubsub.get_message(ignore_subscribe_messages=True,
                                    timeout=NUDGED_POLL_SECONDS):
            while await pubsub.get_message(ignore_subscribe_messages=True, timeout=0):
                pass
    except Exception:  # Redis went away: keep streaming from the database
        return None
    return pubsub


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
    job_id = await ids.owned_off_loop(settings.database_url, "job", principal.tenant_id,
                                      job_id)

    connected = time.time()
    seq, last_live = after, None

    async def read_round() -> Round:
        nonlocal seq, last_live
        events, progress = await anyio.to_thread.run_sync(
            _fetch, settings.database_url, job_id, seq)
        messages = []
        for event in events:
            seq = event.seq
            messages.append(_message(event))
            if event.kind == "progress":
                last_live = event.payload
                observe_progress_lag(event.payload, connected)
            if event.kind == "status" and event.payload.get("status") in TERMINAL_STATUSES:
                return messages, True, False
        if len(events) == BATCH:
            return messages, False, True
        if progress and progress != last_live:
            last_live = progress
            messages.append({"event": "progress", "data": json.dumps(progress)})
            observe_progress_lag(progress, connected)
        return messages, False, False

    return live_stream(request, settings, job_id, read_round)
