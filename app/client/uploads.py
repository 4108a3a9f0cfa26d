"""The client's resumable uploads (/v1/uploads), mixed into app.client.HingeClient: a file
sent in parts, each acknowledged with the server's offset; a dropped connection (or a
part refused as out of order) is followed by asking the offset (HEAD) and sending from
there, so nothing that arrived is sent again."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import httpx

PART_BYTES = 16 << 20  # a part's bytes by default; a larger file is sent in parts
READ_BYTES = 1 << 20  # a part is streamed in pieces of this much
RETRIES = 8  # failed tries in a row before giving up
RETRY_STATUSES = frozenset({0, 409, 502, 503, 504})  # 0: the connection failed


class UploadCalls:
    """HingeClient's resumable uploads (it gives `_request`)."""

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        raise NotImplementedError

    def resumable_upload(self, file: str | os.PathLike[str] | BinaryIO,
                         name: str | None = None, *, part_bytes: int = PART_BYTES,
                         progress: Callable[[int, int | None], None] | None = None,
                         idempotency_key: str | None = None, retries: int = RETRIES,
                         upload_id: str | None = None, **options: Any) -> dict[str, Any]:
        """Upload a seekable file in parts of `part_bytes` through a resumable session
        and complete it into a dataset (the answer of POST /v1/datasets). `options`: the
        dataset's (`format`, `label_column`, `task`, `weight_column`, `dtype`, `reuse`),
        as HingeClient.upload takes them. A failed part (a dropped connection, a 409, a
        502-504) is retried up to `retries` times in a row, from the offset the server
        reports; `upload_id` resumes a session made earlier (by another process).
        `progress(acknowledged or sent, size)` after each piece."""
        if isinstance(file, str | os.PathLike):
            path = Path(file)
            with path.open("rb") as handle:
                return self.resumable_upload(handle, name or path.name,
                                             part_bytes=part_bytes, progress=progress,
                                             idempotency_key=idempotency_key,
                                             retries=retries, upload_id=upload_id, **options)
        start = file.tell()
        size = os.fstat(file.fileno()).st_size - start
        if upload_id is None:
            body = {"size": size, "name": name,
                    **{k: (str(v) if k.endswith("_column") else v)
                       for k, v in options.items() if v is not None}}
            headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
            upload_id = self._request("POST", "/v1/uploads", json=body,
                                      headers=headers).json()["id"]
        assert upload_id is not None
        self._send_parts(upload_id, file, start, size, part_bytes, progress, retries)
        try:
            response = self._retrying(retries, lambda: self._request(
                "POST", f"/v1/uploads/{upload_id}/complete"))
        except Exception as exc:
            if getattr(exc, "status_code", None) in (413, 415, 422):  # the content is at fault
                self.abort_upload(upload_id)
            raise
        dataset = dict(response.json())
        dataset["reused"] = response.status_code == 200 and bool(options.get("reuse"))
        dataset["upload_id"] = upload_id
        return dataset

    def upload_offset(self, upload_id: str) -> int:
        """The bytes of the session staged on the server (where the next part starts)."""
        return int(self._request("HEAD", f"/v1/uploads/{upload_id}")
                   .headers["Upload-Offset"])

    def get_upload(self, upload_id: str) -> dict[str, Any]:
        return dict(self._request("GET", f"/v1/uploads/{upload_id}").json())

    def abort_upload(self, upload_id: str) -> None:
        """Delete the session and its staged bytes."""
        self._request("DELETE", f"/v1/uploads/{upload_id}")

    def _send_parts(self, upload_id: str, file: BinaryIO, start: int, size: int,
                    part_bytes: int, progress: Callable[[int, int | None], None] | None,
                    retries: int) -> None:
        offset: int | None = None
        failures = 0
        while True:
            try:
                if offset is None:
                    offset = self.upload_offset(upload_id)
                if progress is not None:
                    progress(offset, size)
                if offset >= size:
                    return
                offset = self._send_part(upload_id, file, start, offset,
                                         min(part_bytes, size - offset), size, progress)
                failures = 0
            except Exception as exc:
                failures += 1
                offset = self._after_failure(exc, failures, retries)

    def _send_part(self, upload_id: str, file: BinaryIO, start: int, offset: int,
                   length: int, size: int,
                   progress: Callable[[int, int | None], None] | None) -> int:
        def pieces() -> Iterator[bytes]:
            file.seek(start + offset)
            sent = 0
            while sent < length:
                piece = file.read(min(READ_BYTES, length - sent))
                if not piece:
                    raise OSError(f"the file ended {length - sent} bytes early")
                sent += len(piece)
                yield piece
                if progress is not None:
                    progress(offset + sent, size)

        response = self._request(
            "PATCH", f"/v1/uploads/{upload_id}", content=pieces(),
            headers={"Upload-Offset": str(offset), "Content-Length": str(length),
                     "Content-Type": "application/offset+octet-stream"})
        return int(response.headers["Upload-Offset"])

    def _retrying(self, retries: int, call: Callable[[], httpx.Response]) -> httpx.Response:
        failures = 0
        while True:
            try:
                return call()
            except Exception as exc:
                failures += 1
                if self._after_failure(exc, failures, retries) is not None:
                    raise  # bytes missing: not mended by asking again

    @staticmethod
    def _after_failure(exc: Exception, failures: int, retries: int) -> int | None:
        """Re-raise `exc` unless it is worth another try (then wait a little): the offset
        the server named (a part out of order), else None (ask it)."""
        status = getattr(exc, "status_code", None)
        if status not in RETRY_STATUSES or failures > retries:
            raise exc
        detail = getattr(exc, "detail", None)
        if status == 409 and isinstance(detail, dict) and isinstance(detail.get("offset"), int):
            return int(detail["offset"])
        if status == 409 and not (isinstance(detail, dict) and detail.get("reason") == "busy"):
            raise exc  # completed, or another conflict a retry cannot mend
        time.sleep(min(0.1 * 2 ** failures, 5.0))
        return None
