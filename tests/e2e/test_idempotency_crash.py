"""The crash an Idempotency-Key is for, against real API processes: a raw upload with
`Idempotency-Key: k`, the API SIGKILLed in the middle of it, the API started again, and the
same request again. The retry runs (once: exactly one dataset exists) within 30 s of the
API answering again; a further retry gets the stored answer. On SQLite and PostgreSQL.

Before the reservation was leased to its process (app/api/idempotency.py), the retry got 409
"still in progress" for HINGE_IDEMPOTENCY_HOURS.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from app.domain.orm import Dataset, IdempotencyRecord
from app.infra.db import session_scope
from tests.support import embedded_settings, make_key, migrate, postgres_schema, start_api

KEY = "crash-retry-1"


@contextlib.contextmanager
def _database(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        yield ""
    else:
        with postgres_schema() as url:
            yield url


def _reservation(database_url: str) -> IdempotencyRecord | None:
    with session_scope(database_url) as session:
        row = session.scalar(select(IdempotencyRecord).where(IdempotencyRecord.key == KEY))
        if row is not None:
            session.expunge(row)
        return row


def _datasets(database_url: str) -> int:
    with session_scope(database_url) as session:
        return int(session.scalar(select(func.count()).select_from(Dataset)) or 0)


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres",
                                                            marks=pytest.mark.postgres)])
def test_an_upload_cut_by_an_api_crash_runs_once_when_retried(
        tmp_path: Path, backend: str, cancer_bytes: bytes) -> None:
    with _database(backend) as url:
        settings = embedded_settings(tmp_path / "home", database_url=url)
        settings.ensure_dirs()
        migrate(settings.database_url)
        key = make_key(settings)
        api, base = start_api(settings, tmp_path)
        try:
            port = int(base.rsplit(":", 1)[1])
            # the upload: headers and half of the body, then the API dies under it
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(
                f"POST /v1/datasets?name=crash HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                f"Authorization: Bearer {key}\r\nIdempotency-Key: {KEY}\r\n"
                f"Content-Type: application/octet-stream\r\n"
                f"Content-Length: {len(cancer_bytes)}\r\n\r\n".encode())
            sock.sendall(cancer_bytes[:len(cancer_bytes) // 2])
            deadline = time.monotonic() + 30
            while (held := _reservation(settings.database_url)) is None:
                assert time.monotonic() < deadline, api.log()
                time.sleep(0.05)
            assert held.status_code is None and held.holder is not None
            assert f"|{api.process.pid}|" in held.holder
            os.kill(api.process.pid, signal.SIGKILL)
            api.process.wait(timeout=30)
            sock.close()
        finally:
            api.stop()
        assert _datasets(settings.database_url) == 0
        assert _reservation(settings.database_url) is not None  # left behind, unfinished

        api, base = start_api(settings, tmp_path)  # returns once /healthz answers
        back = time.monotonic()
        try:
            with httpx.Client(base_url=base, timeout=60,
                              headers={"Authorization": f"Bearer {key}",
                                       "Idempotency-Key": KEY}) as client:
                answers = []
                while True:
                    retry = client.post("/v1/datasets?name=crash", content=cancer_bytes)
                    answers.append(retry.status_code)
                    if retry.status_code != 409 or time.monotonic() - back > 30:
                        break
                    time.sleep(0.5)
                waited = time.monotonic() - back
                print(f"\n{backend}: the retry answered {retry.status_code} {waited:.2f} s "
                      f"after the API came back (answers {answers})")
                assert retry.status_code == 201, retry.text
                assert waited < 30
                assert _datasets(settings.database_url) == 1
                again = client.post("/v1/datasets?name=crash", content=cancer_bytes)
                assert again.status_code == 201
                assert again.headers["idempotent-replay"] == "true"
                assert again.json()["id"] == retry.json()["id"]
                assert _datasets(settings.database_url) == 1
        finally:
            api.stop()
