"""The client's calls of imports (POST /v1/imports: part files in S3, or under the
server's HINGE_IMPORT_ROOTS), mixed into app.client.HingeClient."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

DEFAULT_DTYPE = "auto"  # an import's dtype when none is asked: the server decides


class ImportCalls:
    """HingeClient's import methods (it gives `_json` and `_events`)."""

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _events(self, path: str, last_event_id: int | None = None,
                timeout: float | None = None) -> Iterator[Any]:
        raise NotImplementedError

    def start_import(self, source: str | list[str], name: str | None = None, *,
                     format: str = "svmlight", task: str = "auto", dtype: str = DEFAULT_DTYPE,
                     idempotency_key: str | None = None) -> dict[str, Any]:
        """Start importing `source` (`s3://bucket/key`, a glob of part files, or
        `file:///path` under the server's HINGE_IMPORT_ROOTS; or a list): the queued
        import. Follow it with `import_events` or `wait_import`. `dtype`: the stored
        values' layout, as for an upload (float32: 8 bytes a non-zero, values rounded;
        float64: 12; auto: float32 when every value is exactly a float32)."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else {}
        body = {"source": source, "name": name, "format": format, "task": task}
        if dtype != DEFAULT_DTYPE:  # (a server before dtype refuses the field)
            body["dtype"] = dtype
        return cast(dict[str, Any], self._json("POST", "/v1/imports", json=body,
                                               headers=headers))

    def get_import(self, import_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json("GET", f"/v1/imports/{import_id}"))

    def imports(self, *, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
        page = self._json("GET", "/v1/imports", params={"limit": limit, "offset": offset})
        return cast(list[dict[str, Any]], page["data"])

    def cancel_import(self, import_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], self._json("DELETE", f"/v1/imports/{import_id}"))

    def import_events(self, import_id: str, *, timeout: float | None = None
                      ) -> Iterator[Any]:
        """The import's `progress` events (bytes, rows, non-zeros and parts done), then
        its terminal `status` event."""
        return self._events(f"/v1/imports/{import_id}/events", timeout=timeout)

    def wait_import(self, import_id: str, *,
                    progress: Callable[[int, int | None], None] | None = None,
                    timeout: float | None = None) -> dict[str, Any]:
        """Follow the import to its end (`progress(bytes_done, bytes_total)` at each
        event); the import as it ended (`dataset_id` once succeeded)."""
        for event in self.import_events(import_id, timeout=timeout):
            if progress is not None and "bytes_done" in event.data:
                progress(int(event.data["bytes_done"]), event.data.get("bytes_total"))
        return self.get_import(import_id)
