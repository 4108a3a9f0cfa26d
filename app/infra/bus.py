"""Job-change nudges over Redis pub/sub, when the broker is Redis; cache invalidations
(a deleted model, a revoked key) across API processes over Redis or RabbitMQ.

The database stays the only source of truth: a nudge carries no data, it only tells an SSE
stream to read the job's new events now instead of at its next poll. Without Redis (the
embedded default) streams poll the database every 0.1 s; with Redis they wake on the nudge
and fall back to a 1 s poll, so a lost nudge only delays an event. On RabbitMQ, streams
poll the database every 0.1 s as on the embedded broker (docs/operations.md: "Brokers").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import anyio.to_thread
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


# -- invalidations: a deleted model, a revoked key --------------------------------------
#
# Every API process caches models (app.domain.services.models) and verified keys
# (app.domain.services.tenants). The process that deletes or revokes drops its own entry when
# the transaction commits and announces it here; the other API processes drop theirs when
# the announcement arrives: Redis pub/sub (channel hinge:invalidate) or a RabbitMQ fanout
# exchange (hinge.invalidate, one exclusive queue per API process). The embedded broker
# has no bus: there, and whenever an announcement is lost, the caches' own backstops
# apply (models: a check of the cached ids every second; keys: a one-second lifetime).

INVALIDATE_CHANNEL = "hinge:invalidate"
INVALIDATE_EXCHANGE = "hinge.invalidate"
Handlers = dict[str, Callable[[str], None]]


def _amqp_url(settings: Settings) -> str | None:
    url = settings.broker_url
    return url if url.startswith(("amqp://", "amqps://", "pyamqp://")) else None


def announce(settings: Settings, kind: str, ident: str) -> None:
    """Tell the other API processes that `kind` `ident` is gone; never raises."""
    message = f"{kind}:{ident}"
    try:
        if (url := redis_url(settings)) is not None:
            _client(url).publish(INVALIDATE_CHANNEL, message.encode())
        elif (url := _amqp_url(settings)) is not None:
            _amqp_publish(url, message)
    except Exception as exc:
        log.warning("invalidation %s not announced (%s); the caches' backstops apply",
                    message, exc)


_amqp_lock = threading.Lock()


def _amqp_publish(url: str, message: str) -> None:
    from kombu import Connection, Exchange

    exchange = Exchange(INVALIDATE_EXCHANGE, type="fanout", durable=False)
    with _amqp_lock, Connection(url, connect_timeout=2) as connection:
        connection.Producer(exchange=exchange).publish(
            message, serializer="json", declare=[exchange], retry=True,
            retry_policy={"max_retries": 2})


def _dispatch(handlers: Handlers, message: str) -> None:
    kind, _, ident = message.partition(":")
    handler = handlers.get(kind)
    if handler is not None and ident:
        handler(ident)


async def listen(settings: Settings, handlers: Handlers) -> None:
    """Apply announced invalidations until cancelled (reconnecting after a broker outage);
    returns at once on the embedded broker."""
    if redis_url(settings) is not None:
        await _listen_redis(settings, handlers)
    elif _amqp_url(settings) is not None:
        await _listen_amqp(settings, handlers)


async def _listen_redis(settings: Settings, handlers: Handlers) -> None:
    import redis.asyncio as aioredis

    url = redis_url(settings)
    assert url is not None
    while True:
        client = aioredis.Redis.from_url(url, socket_connect_timeout=2)
        try:
            pubsub = client.pubsub()
            await pubsub.subscribe(INVALIDATE_CHANNEL)
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    _dispatch(handlers, bytes(message["data"]).decode())
        except redis.RedisError as exc:
            log.warning("invalidation bus: %s; listening again in 1 s", exc)
        finally:
            await client.aclose()
        await asyncio.sleep(1.0)


async def _listen_amqp(settings: Settings, handlers: Handlers) -> None:
    url = _amqp_url(settings)
    assert url is not None
    stop = threading.Event()
    try:
        await anyio.to_thread.run_sync(_consume_amqp, url, handlers, stop,
                                       abandon_on_cancel=True)
    finally:
        stop.set()


def _consume_amqp(url: str, handlers: Handlers, stop: threading.Event) -> None:
    import uuid

    from kombu import Connection, Exchange, Queue

    exchange = Exchange(INVALIDATE_EXCHANGE, type="fanout", durable=False)
    queue = Queue(f"hinge.invalidate.{uuid.uuid4().hex[:12]}", exchange, exclusive=True,
                  auto_delete=True, durable=False)

    def received(body: Any, message: Any) -> None:
        _dispatch(handlers, str(body))
        message.ack()

    while not stop.is_set():
        try:
            with Connection(url, connect_timeout=2) as connection, connection.Consumer(
                    queue, callbacks=[received], accept=["json"]):
                while not stop.is_set():
                    with contextlib.suppress(TimeoutError):  # no message this second
                        connection.drain_events(timeout=1.0)
        except Exception as exc:
            log.warning("invalidation bus: %s; listening again in 1 s", exc)
            stop.wait(1.0)
