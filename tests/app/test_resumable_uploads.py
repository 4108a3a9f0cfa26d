"""Resumable uploads (/v1/uploads): a file sent in parts makes the dataset a one-shot upload
makes; a connection cut mid-part (a TCP proxy that closes both sides) resumes with only
the bytes that did not arrive (counted by the server); the ordering rule (a part only at
the session's offset); the limits checked before a byte is staged; abort and expiry
remove the staged bytes; the CLI resumes too. Real HTTP (uvicorn on loopback) where a
connection is dropped, the app's TestClient for the rest."""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn
from fastapi.testclient import TestClient
from sqlalchemy import update
from typer.testing import CliRunner

from app.api.main import create_app
from app.client import HingeClient, HingeError
from app.client.cli import app as cli
from app.domain.orm import Dataset, Upload, utcnow
from app.domain.sweep import sweep
from app.infra.db import read_sessionmaker_for, session_scope
from app.infra.staging import StagedFile, staged_path
from app.infra.storage import blob_store, dataset_arrays
from app.settings import Settings
from solvers.svmlight import dump_svmlight
from testkit.datagen import text_like
from testkit.service import free_port
from tests.support import stored_row

PART = 16 << 10


def _text(rows: int = 600, seed: int = 5) -> bytes:
    X, y = text_like(rows, 200, seed=seed, nnz_per_row=10.0)
    buffer = io.BytesIO()
    dump_svmlight(X, y, buffer)
    return buffer.getvalue()


@contextmanager
def _live(settings: Settings) -> Iterator[str]:
    """The app served by uvicorn on loopback, in a thread of this process."""
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1",
                                           port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(15)


class CuttingProxy:
    """A TCP proxy to `port` that cuts the first PATCH's connection (closing both sides)
    once `cut_after` bytes of it went through and the server had a moment to read them
    (bytes a server has not read when the connection drops are lost with it); every
    other connection passes."""

    def __init__(self, port: int, cut_after: int) -> None:
        self.target = port
        self.cut_after = cut_after
        self.cuts = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(downstream, upstream, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, downstream, False),
                             daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, outbound: bool) -> None:
        sent, start = 0, None  # start: where the PATCH to cut began, in this stream
        try:
            while data := source.recv(4096):
                if outbound and start is None and not self.cuts and b"PATCH " in data:
                    start, self.cuts = sent + data.index(b"PATCH "), 1
                if start is not None and sent + len(data) - start >= self.cut_after:
                    sink.sendall(data[:start + self.cut_after - sent])
                    time.sleep(1.0)  # the server reads what came (a slow link, then none)
                    break
                sink.sendall(data)
                sent += len(data)
        except OSError:
            pass
        for end in (source, sink):
            with suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.listener.close()


def _row(settings: Settings, upload_id: str) -> Upload:
    return stored_row(settings, Upload, upload_id)


def _arrays(settings: Settings, dataset_id: str) -> dict[str, np.ndarray]:
    with read_sessionmaker_for(settings.database_url)() as session:
        row = session.get(Dataset, dataset_id)
        assert row is not None
        return dataset_arrays(blob_store(settings), row.blob_path, row.shards)


def _same_dataset(settings: Settings, one: dict, other: dict) -> None:
    keys = ("rows", "features", "nnz", "sha256", "class_counts", "value_dtype", "name")
    assert {k: one[k] for k in keys} == {k: other[k] for k in keys}
    a, b = _arrays(settings, one["id"]), _arrays(settings, other["id"])
    for member in ("data", "indices", "indptr", "y"):
        assert np.array_equal(a[member], b[member]), member


def test_parts_make_the_dataset_a_one_shot_upload_makes(settings: Settings, admin_key: str,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "set.svm"
    path.write_bytes(_text())
    seen: list[int] = []
    with _live(settings) as url, HingeClient(url, admin_key) as hinge:
        whole = hinge.upload(path, "set", part_bytes=1 << 30)  # one request
        parts = hinge.upload(path, "set", part_bytes=PART,
                             progress=lambda sent, _size: seen.append(sent))
    assert "upload_id" not in whole and parts["upload_id"]
    _same_dataset(settings, whole, parts)
    assert parts["duplicate_of"] == [whole["id"]]
    row = _row(settings, parts["upload_id"])
    size = path.stat().st_size
    assert (row.status, row.dataset_id, row.staged) == ("completed", parts["id"], size)
    assert row.parts == -(-size // PART) and row.bytes_received == size
    assert seen[-1] == size and seen == sorted(seen)
    assert not staged_path(settings.home, row.id).exists()  # removed once stored


def test_a_connection_cut_mid_part_resumes_with_only_the_rest(
        settings: Settings, admin_key: str, tmp_path: Path) -> None:
    path = tmp_path / "set.svm"
    path.write_bytes(_text())
    size = path.stat().st_size
    seen: list[int] = []
    with _live(settings) as url:
        proxy = CuttingProxy(int(url.rsplit(":", 1)[1]), cut_after=PART + PART // 2)
        try:
            with HingeClient(proxy.url, admin_key) as hinge:
                dataset = hinge.upload(path, "cut", part_bytes=4 * PART,
                                       progress=lambda sent, _size: seen.append(sent))
        finally:
            proxy.close()
        with HingeClient(url, admin_key) as hinge:
            whole = hinge.upload(path, "cut", part_bytes=1 << 30)
    assert proxy.cuts == 1
    row = _row(settings, dataset["upload_id"])
    # what arrived of the cut part was kept: every byte came exactly once
    assert row.bytes_received == size and row.staged == size
    # it resumed where the server's bytes ended, inside the cut part (its headers and
    # about 1.5 * PART of its body got through), and sent the rest in parts from there
    kept = [offset for offset in seen if PART < offset < PART + PART // 2]
    assert len(kept) == 1, seen
    assert row.parts == -(-(size - kept[0]) // (4 * PART))
    _same_dataset(settings, whole, dataset)


def _open(client: TestClient, size: int, **options: object) -> dict:
    answer = client.post("/v1/uploads", json={"size": size, **options})
    assert answer.status_code == 201, answer.text
    return dict(answer.json())


def _patch(client: TestClient, upload_id: str, offset: int | None, body: bytes
           ) -> httpx.Response:
    headers = {} if offset is None else {"Upload-Offset": str(offset)}
    return client.patch(f"/v1/uploads/{upload_id}", content=body, headers=headers)


def test_a_part_is_taken_only_at_the_offset(client: TestClient, settings: Settings) -> None:
    text = _text(200)
    upload = _open(client, len(text), name="ordered")
    assert upload["offset"] == 0 and upload["status"] == "open"
    first = _patch(client, upload["id"], 0, text[:1000])
    assert first.status_code == 200, first.text
    assert first.headers["Upload-Offset"] == "1000" and first.json()["parts"] == 1
    # the same part again (its answer lost): 409 naming the offset, nothing written
    again = _patch(client, upload["id"], 0, text[:1000])
    assert again.status_code == 409
    assert again.json()["error"]["detail"]["offset"] == 1000
    ahead = _patch(client, upload["id"], 5000, text[5000:6000])  # a part skipped
    assert ahead.status_code == 409 and ahead.json()["error"]["detail"]["offset"] == 1000
    assert _patch(client, upload["id"], None, text[1000:2000]).status_code == 422
    assert _patch(client, upload["id"], 1000, text[1000:] + b"x").status_code == 413
    early = client.post(f"/v1/uploads/{upload['id']}/complete")
    assert early.status_code == 409 and early.json()["error"]["detail"]["offset"] == 1000
    with StagedFile(settings.home, upload["id"]):  # another request is writing it
        busy = _patch(client, upload["id"], 1000, text[1000:])
        assert busy.status_code == 409 and busy.json()["error"]["detail"]["reason"] == "busy"
    head = client.head(f"/v1/uploads/{upload['id']}")
    assert head.status_code == 200
    assert (head.headers["Upload-Offset"], head.headers["Upload-Length"]) == (
        "1000", str(len(text)))
    assert _patch(client, upload["id"], 1000, text[1000:]).status_code == 200
    row = _row(settings, upload["id"])
    assert (row.staged, row.parts, row.bytes_received) == (len(text), 2, len(text))
    done = client.post(f"/v1/uploads/{upload['id']}/complete")
    assert done.status_code == 201, done.text
    assert done.json()["name"] == "ordered"
    replay = client.post(f"/v1/uploads/{upload['id']}/complete")  # a retried completion
    assert replay.status_code == 200 and replay.json()["id"] == done.json()["id"]
    assert client.get("/v1/datasets").json()["count"] == 1
    after = _patch(client, upload["id"], len(text), b"1 1:1\n")
    assert after.status_code == 409


def test_bad_content_is_a_422_at_completion_and_keeps_the_staged_bytes(
        client: TestClient, settings: Settings) -> None:
    text = b"1 1:1\nnot a row\n"
    upload = _open(client, len(text))
    assert _patch(client, upload["id"], 0, text).status_code == 200
    answer = client.post(f"/v1/uploads/{upload['id']}/complete")
    assert answer.status_code == 422 and answer.json()["error"]["detail"]["line"] == 2
    assert staged_path(settings.home, upload["id"]).stat().st_size == len(text)
    assert client.get("/v1/datasets").json()["count"] == 0


def test_abort_removes_the_staged_bytes(client: TestClient, settings: Settings) -> None:
    upload = _open(client, 10_000)
    assert _patch(client, upload["id"], 0, b"1 1:1\n" * 100).status_code == 200
    staged = staged_path(settings.home, upload["id"])
    assert staged.stat().st_size == 600
    assert client.delete(f"/v1/uploads/{upload['id']}").status_code == 204
    assert not staged.exists()
    assert client.get(f"/v1/uploads/{upload['id']}").status_code == 404
    assert _patch(client, upload["id"], 600, b"1 1:1\n").status_code == 404
    assert not staged.exists()


def test_expired_sessions_and_orphan_staged_files_are_swept(client: TestClient,
                                                            settings: Settings) -> None:
    expired, alive = _open(client, 1000), _open(client, 1000)
    for upload in (expired, alive):
        assert _patch(client, upload["id"], 0, b"1 1:1\n").status_code == 200
    orphan = staged_path(settings.home, "0" * 32)
    orphan.write_bytes(b"left by a crash")
    old = time.time() - settings.orphan_blob_grace_seconds - 10
    os.utime(orphan, (old, old))
    with session_scope(settings.database_url) as session:
        session.execute(update(Upload).where(Upload.id == expired["id"])
                        .values(expires_at=utcnow() - timedelta(seconds=1)))
    assert sweep(settings)["uploads_swept"] == 2
    assert client.get(f"/v1/uploads/{expired['id']}").status_code == 404
    assert not staged_path(settings.home, expired["id"]).exists() and not orphan.exists()
    assert client.get(f"/v1/uploads/{alive['id']}").json()["offset"] == 6
    assert staged_path(settings.home, alive["id"]).exists()


def test_every_limit_is_checked_before_a_byte_is_staged(client: TestClient,
                                                        settings: Settings) -> None:
    settings.tenant_max_stored_bytes = 50_000
    over = client.post("/v1/uploads", json={"size": 60_000})
    assert over.status_code == 413 and "stored bytes" in over.json()["error"]["message"]
    _open(client, 30_000)  # the open sessions' declared sizes count
    assert client.post("/v1/uploads", json={"size": 30_000}).status_code == 413
    settings.tenant_max_stored_bytes = 1 << 30
    settings.tenant_max_open_uploads = 2
    _open(client, 1000)
    assert client.post("/v1/uploads", json={"size": 1000}).status_code == 429
    settings.tenant_max_open_uploads = 8
    settings.disk_reserve_bytes = 1 << 60  # no disk keeps that free
    full = client.post("/v1/uploads", json={"size": 1000})
    assert full.status_code == 507, full.text
    settings.disk_reserve_bytes = 0
    upload = _open(client, 100_000)
    settings.disk_reserve_bytes = 1 << 60  # the disk fills up after the session is made
    refused = _patch(client, upload["id"], 0, b"1 1:1\n" * 100)
    assert refused.status_code == 507 and "HINGE_DISK_RESERVE_BYTES" in refused.text
    settings.disk_reserve_bytes = 0
    settings.upload_max_part_bytes = 4096
    assert _patch(client, upload["id"], 0, b"1 1:1\n" * 1000).status_code == 413
    assert client.get(f"/v1/uploads/{upload['id']}").json()["offset"] == 0
    with read_sessionmaker_for(settings.database_url)() as session:
        assert session.query(Upload).count() == 3


def test_hinge_upload_resumes_after_a_cut(settings: Settings, admin_key: str,
                                          tmp_path: Path) -> None:
    path = tmp_path / "set.svm"
    path.write_bytes(_text(400, seed=8))
    size = path.stat().st_size
    with _live(settings) as url:
        proxy = CuttingProxy(int(url.rsplit(":", 1)[1]), cut_after=PART)
        try:
            result = CliRunner().invoke(cli, ["upload", str(path), "--part-size", str(2 * PART),
                                              "--quiet"],
                                        env={"HINGE_URL": proxy.url, "HINGE_API_KEY": admin_key})
        finally:
            proxy.close()
    assert result.exit_code == 0, result.output
    assert proxy.cuts == 1
    dataset_id = result.output.strip().splitlines()[-1]
    with read_sessionmaker_for(settings.database_url)() as session:
        row = session.query(Upload).one()
        assert (row.dataset_id, row.bytes_received, row.staged) == (dataset_id, size, size)


def test_the_client_gives_up_on_a_refused_completion(settings: Settings, admin_key: str,
                                                      tmp_path: Path) -> None:
    path = tmp_path / "bad.svm"
    path.write_bytes(b"1 1:1\n" * 3000 + b"oops\n")
    with (_live(settings) as url, HingeClient(url, admin_key) as hinge,
          pytest.raises(HingeError) as refused):
        hinge.upload(path, part_bytes=PART)
    assert refused.value.status_code == 422
    with read_sessionmaker_for(settings.database_url)() as session:
        assert session.query(Upload).count() == 0  # aborted: no staged bytes left
    assert list((settings.home / "uploads").iterdir()) == []


def test_a_session_is_resumed_by_its_id_or_its_idempotency_key(
        settings: Settings, admin_key: str, tmp_path: Path) -> None:
    """Another process (a client that died after its first part) goes on from the server's
    offset, by the session's id or by creating it again with the same Idempotency-Key."""
    path = tmp_path / "set.svm"
    text = _text(300, seed=9)
    path.write_bytes(text)
    key = {"Authorization": f"Bearer {admin_key}"}
    with _live(settings) as url, HingeClient(url, admin_key) as hinge:
        first = httpx.post(f"{url}/v1/uploads", json={"size": len(text), "name": "later"},
                           headers={**key, "Idempotency-Key": "set-1"}).json()
        assert httpx.patch(f"{url}/v1/uploads/{first['id']}", content=text[:PART + 123],
                           headers={**key, "Upload-Offset": "0"}).status_code == 200
        by_id = hinge.resumable_upload(path, upload_id=first["id"], part_bytes=PART)
        second = hinge.resumable_upload(path, "later", idempotency_key="set-1",
                                        part_bytes=PART)  # the same session, completed
    assert by_id["name"] == "later" and by_id["upload_id"] == first["id"]
    assert (second["id"], second["upload_id"]) == (by_id["id"], first["id"])
    row = _row(settings, first["id"])
    assert (row.bytes_received, row.staged, row.status) == (len(text), len(text), "completed")
    with read_sessionmaker_for(settings.database_url)() as session:
        assert session.query(Dataset).count() == 1 and session.query(Upload).count() == 1
