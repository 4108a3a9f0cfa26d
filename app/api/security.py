"""Checks every request passes before it reaches a route, and headers every answer carries.

- Host allow-list (HINGE_ALLOWED_HOSTS): another Host is a 400, so a DNS-rebinding page
  cannot talk to a Hinge on the victim's loopback through its own name.
- A request that changes state (not GET/HEAD/OPTIONS) and names an `Origin` must come from
  this host itself or from an origin in HINGE_CORS_ORIGINS: a 403 otherwise, whatever
  credentials it carries.
- A NUL byte in the path or the query string is a 422 (no database can store it).
- Every answer: nosniff, a referrer policy, no framing, same-origin opener and resource
  policies; JSON and other non-page answers also `Content-Security-Policy: default-src
  'none'` and `Cache-Control: no-store` unless the route set its own.
"""

from __future__ import annotations

import json
from urllib.parse import unquote_to_bytes, urlsplit

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.http_errors import error_body

BASE_HEADERS = {
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
    "permissions-policy": "camera=(), microphone=(), geolocation=(), interest-cohort=()",
}
API_HEADERS = {
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    "cache-control": "no-store",
}
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def host_allowed(host: str, allowed: list[str]) -> bool:
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.lower()
    for pattern in allowed:
        pattern = pattern.lower()
        if pattern == "*" or name == pattern:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


def _origin_allowed(origin: str, host: str, scheme: str, cors_origins: list[str]) -> bool:
    if origin in cors_origins or "*" in cors_origins:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps(error_body(status, message)).encode()
    headers = [(b"content-type", b"application/json"),
               (b"content-length", str(len(body)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in {**BASE_HEADERS, **API_HEADERS}.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# the headers added to every response, encoded once: pages get BASE_HEADERS, the rest
# (JSON, files) also API_HEADERS
_PAGE_EXTRA = [(k.encode(), v.encode()) for k, v in BASE_HEADERS.items()]
_API_EXTRA = [(k.encode(), v.encode()) for k, v in {**BASE_HEADERS, **API_HEADERS}.items()]


class SecurityMiddleware:
    def __init__(self, app: ASGIApp, allowed_hosts: list[str], cors_origins: list[str]
                 ) -> None:
        self.app = app
        self.allowed_hosts = allowed_hosts
        self.cors_origins = cors_origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not host_allowed(host, self.allowed_hosts):
            await _refuse(send, 400, "this Host is not served here (HINGE_ALLOWED_HOSTS)")
            return
        origin = headers.get("origin")
        if (scope["method"] not in SAFE_METHODS and origin is not None
                and not _origin_allowed(origin, host, scope.get("scheme", "http"),
                                        self.cors_origins)):
            await _refuse(send, 403, "requests that change state are not accepted from "
                                     "another origin (HINGE_CORS_ORIGINS)")
            return
        if "\x00" in scope["path"] or b"\x00" in unquote_to_bytes(scope["query_string"]):
            await _refuse(send, 422, "NUL byte in the URL")
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _v in headers}
                content_type = next((v for k, v in headers if k == b"content-type"), b"")
                extra = _PAGE_EXTRA if content_type.startswith(b"text/html") else _API_EXTRA
                message["headers"] = headers + [h for h in extra if h[0] not in present]
            await send(message)

        await self.app(scope, receive, send_with_headers)
