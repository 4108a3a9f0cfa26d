"""Job-change nudges over Redis pub/sub, when the broker is Redis.

The database stays the only source of truth: a nudge carries no data, it only tells an SSE
stream to read the job's new events now instead of at its next poll. Without Redis (the
embedded default) streams poll the database every 0.1 s; with Redis they wake on the nudge
and fall back to a 1 s poll, so a lost nudge only delays an event.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any

import redis

from app.settings import Settings

log = logging.getLogger("hinge.bus")


def redis_url(settings: Settings) -> str | None:
    url = settings.broker_url
    return url if url.startswith(("redis://", "rediss://")) else None


def channel(job_id: str) -> str:
    return f"hinge:job:{job_id}"


@lru_cache(maxsize=4)
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)


def notify(settings: Settings, job_id: str) -> None:
    """Tell listeners that the job has news in the database; never raises."""
    url = redis_url(settings)
    if url is None:
        return
    try:
        _client(url).publish(channel(job_id), b"1")
    except redis.RedisError as exc:
        log.debug("nudge for job %s not sent: %s", job_id, exc)


async def subscribe(settings: Settings, job_id: str) -> Any | None:
    """An asyncio pub/sub subscribed to the job's channel, or None without Redis."""
    url = redis_url(settings)
    if url is None:
        return None
    import redis.asyncio as aioredis

    try:
        client = aioredis.Redis.from_url(url, socket_connect_timeout=1)
        pubsub = client.pubsub()
        await pubsub.subscribe(channel(job_id))
        return pubsub
    except redis.RedisError as exc:
        log.warning("pub/sub unavailable (%s); polling the database instead", exc)
        return None
