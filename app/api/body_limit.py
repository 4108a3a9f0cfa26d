"""Every request body is bounded before anything reads it: one limit per route class.

- uploads (POST /v1/datasets): HINGE_MAX_UPLOAD_BYTES (plus the multipart envelope);
- predict (POST /v1/models/{id}/predict): HINGE_MAX_PREDICT_BYTES;
- model imports (POST /v1/models): HINGE_MAX_MODEL_IMPORT_BYTES (plus the envelope);
- a resumable upload's part (PATCH /v1/uploads/{id}): HINGE_UPLOAD_MAX_PART_BYTES;
- everything else (the JSON control routes: jobs, searches, splits, evaluations, admin;
  the sign-in form): HINGE_MAX_JSON_BODY_BYTES, 1 MiB by default.

A pure ASGI middleware on the raw receive stream, so it holds for a body sent with a
Content-Length and for a chunked one alike, and it runs before FastAPI parses the body
(which it does before the route's dependencies, the API-key check included). A declared
Content-Length over the limit is refused before a byte of the body is read; a body that
grows past it is refused at the first message that does. The refusal is a 413 in the
project's error shape that names the limit and its setting, with `Connection: close`, so
the server stops reading and the client can stop sending; whatever the app does with the
body afterwards (it gets the 413 as an HTTPException from `receive`) is not sent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.http_errors import error_body
from app.domain.ingest import MULTIPART_OVERHEAD
from app.settings import Settings

_PREDICT = re.compile(r"/v1/models/[^/]+/predict")
_UPLOAD_PART = re.compile(r"/v1/uploads/[^/]+")


@dataclass(frozen=True)
class Limit:
    size: int
    setting: str

    def message(self) -> str:
        return f"request body exceeds the limit of {self.size} bytes (HINGE_{self.setting})"

    def body(self) -> bytes:
        return json.dumps(error_body(413, self.message(), {
            "limit": self.size, "setting": f"HINGE_{self.setting}"})).encode()


def limit_for(settings: Settings, method: str, path: str) -> Limit:
    """The body limit of a request to `path`."""
    if method == "POST" and path in ("/v1/datasets", "/v1/datasets/"):
        return Limit(settings.max_upload_bytes + MULTIPART_OVERHEAD, "MAX_UPLOAD_BYTES")
    if method == "POST" and path in ("/v1/models", "/v1/models/"):
        return Limit(settings.max_model_import_bytes + MULTIPART_OVERHEAD,
                     "MAX_MODEL_IMPORT_BYTES")
    if method == "PATCH" and _UPLOAD_PART.fullmatch(path):
        return Limit(settings.upload_max_part_bytes, "UPLOAD_MAX_PART_BYTES")
    if method == "POST" and _PREDICT.fullmatch(path):
        return Limit(settings.max_predict_bytes, "MAX_PREDICT_BYTES")
    return Limit(settings.max_json_body_bytes, "MAX_JSON_BODY_BYTES")


class BodyTooLarge(HTTPException):
    """Raised from `receive` once the body passes its limit. An HTTPException, so FastAPI's
    body parsing lets it through and the app's handlers turn it into a 413 rather than a
    400 or a 500 (the middleware has already sent its own 413; the app's is dropped)."""

    def __init__(self, limit: Limit) -> None:
        super().__init__(413, limit.message())


async def _refuse(send: Send, limit: Limit) -> None:
    body = limit.body()
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(self.settings, scope["method"], scope["path"])
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > limit.size:
            await _refuse(send, limit)  # not a byte of the body read
            return

        received = 0
        started = refused = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            if refused:
                raise BodyTooLarge(limit)
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit.size:
                    refused = True
                    if not started:
                        await _refuse(send, limit)
                    raise BodyTooLarge(limit)
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the 413 went out already
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracked_send)
        except BodyTooLarge:
            if not refused:
                raise
