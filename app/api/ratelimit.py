"""Request rates: token buckets. Every route but predict draws on its tenant's bucket of
HINGE_RATE_BURST tokens refilled at HINGE_RATE_PER_SECOND; the predict routes (POST
.../predict) draw on a bucket of their own per API key, HINGE_PREDICT_RATE_BURST tokens
refilled at HINGE_PREDICT_RATE_PER_SECOND, so a service predicting at a few hundred
requests a second neither is refused for the tenant's other traffic nor starves it.
With a Redis broker the buckets live in Redis (one Lua script, so
every API process shares it atomically); on the embedded default, in this process. Over
the rate: 429 with Retry-After (whole seconds, at least 1).

If Redis does not answer, the request is let through (a log line says so): the rate limit
protects capacity, and refusing every request while Redis restarts would cost more.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import anyio.to_thread
import redis

from app.api.http_errors import ApiError
from app.infra.bus import redis_url
from app.settings import Settings

log = logging.getLogger("hinge.ratelimit")

# KEYS[1]: the bucket; ARGV: rate, burst, now (s). Returns {allowed, wait_ms}.
_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed = 0
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait_ms = math.ceil((1 - tokens) / rate * 1000)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, wait_ms}
"""


@dataclass(frozen=True)
class Budget:
    """One bucket: its name (the tenant's id, or `predict:<key id>`), rate and burst, and
    the settings that set them (named in a 429)."""

    bucket: str
    rate: float
    burst: int
    what: str
    settings: str


def budget(settings: Settings, method: str, path: str, tenant_id: str, key_id: str
           ) -> Budget:
    """The bucket a request draws on: its key's predict budget for POST .../predict, else
    its tenant's."""
    if method == "POST" and path.endswith("/predict"):
        return Budget(f"predict:{key_id}", settings.predict_rate_per_second,
                      settings.predict_rate_burst, "predict requests of this key",
                      "HINGE_PREDICT_RATE_PER_SECOND, HINGE_PREDICT_RATE_BURST")
    return Budget(tenant_id, settings.rate_per_second, settings.rate_burst,
                  "this tenant", "HINGE_RATE_PER_SECOND, HINGE_RATE_BURST")


class LocalBuckets:
    """Token buckets in this process, one per bucket name."""

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, tenant_id: str, rate: float, burst: int, now: float) -> float:
        """0 if a token was taken, else the seconds until one is available."""
        with self._lock:
            tokens, at = self._buckets.get(tenant_id, (float(burst), now))
            tokens = min(float(burst), tokens + max(0.0, now - at) * rate)
            if tokens >= 1:
                self._buckets[tenant_id] = (tokens - 1, now)
                return 0.0
            self._buckets[tenant_id] = (tokens, now)
            return (1 - tokens) / rate


_local = LocalBuckets()


@lru_cache(maxsize=4)
def _script(url: str) -> Any:
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    return client.register_script(_LUA)


def _take_in_redis(url: str, tenant_id: str, rate: float, burst: int) -> float:
    try:
        allowed, wait_ms = _script(url)(keys=[f"hinge:rate:{tenant_id}"],
                                        args=[rate, burst, time.time()])
    except redis.RedisError as exc:
        log.warning("rate limit not checked, Redis unavailable: %s", exc)
        return 0.0
    return 0.0 if int(allowed) else int(wait_ms) / 1000


async def take_token(settings: Settings, spent: Budget) -> None:
    """Take one request token of the budget's bucket, or raise 429 with Retry-After."""
    rate, burst = spent.rate, spent.burst
    if rate <= 0:
        return
    url = redis_url(settings)
    if url is None:
        wait = _local.take(spent.bucket, rate, burst, time.monotonic())
    else:
        wait = await anyio.to_thread.run_sync(_take_in_redis, url, spent.bucket, rate, burst)
    if wait > 0:
        retry = max(1, math.ceil(wait))
        raise ApiError(429, f"request rate over {rate:g}/s (burst {burst}) for {spent.what} "
                            f"({spent.settings}); retry later",
                       {"retry_after": retry}, headers={"Retry-After": str(retry)})
