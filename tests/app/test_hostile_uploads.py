"""Hostile uploads against a real API process: decompression bombs and row bombs end in a
413/422 with the process's peak memory (VmHWM) up by less than 300 MB, at the default
limits; /healthz answers while every thread of the shared pool is busy.

The bombs are those of issue #15: a few hundred bytes of bzip2 that expand to 1 GiB of
zeros (sent three at a time), and 41 KB of xz that expand to 256 MiB of `1\\n` lines
(134 million one-label rows, ~3 GB of arrays if nothing stopped them). Both are
concatenated streams of one small compressed member, which the decompressor accepts like
`cat a.xz b.xz` and which keeps the test's own set-up to a second.
"""

from __future__ import annotations

import bz2
import lzma
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import anyio.to_thread
import httpx
import pytest

from app.api.main import create_app
from tests.support import (
    ServiceProcess,
    bearer,
    embedded_settings,
    make_key,
    migrate,
    start_api,
)

MB = 1 << 20
BOUND = 300 * MB


@pytest.fixture(scope="module")
def zeros_bomb() -> bytes:
    member = bz2.compress(b"\0" * (64 * MB), 9)
    return member * 16  # 1 GiB of zeros in ~700 bytes


@pytest.fixture(scope="module")
def rows_bomb() -> bytes:
    member = lzma.compress(b"1\n" * (8 * MB))
    return member * 16  # 256 MiB of "1\n" in ~41 KB


@pytest.fixture(scope="module")
def values_bomb() -> bytes:
    line = b"1 " + b" ".join(b"%d:1" % i for i in range(1, 201)) + b"\n"
    member = lzma.compress(line * (16 * MB // len(line)))
    return member * 16  # 256 MiB of 200-value rows: ~60 million non-zeros


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[httpx.Client, ServiceProcess]]:
    # svmlight streams to disk, bounded by the tenant's stored bytes: these bombs would
    # be stored (bounded memory, gigabytes of disk); the dataset limits refuse them here
    settings = embedded_settings(tmp_path / "home", max_dataset_rows=5_000_000,
                                 max_dataset_nnz=8_000_000, max_dataset_bytes=128 << 20)
    settings.ensure_dirs()
    migrate(settings.database_url)
    server, base = start_api(settings, tmp_path)
    try:
        with httpx.Client(base_url=base, timeout=120,
                          headers=bearer(make_key(settings))) as client:
            yield client, server
    finally:
        server.stop()


def test_bombs_are_refused_with_bounded_memory(
    api: tuple[httpx.Client, ServiceProcess], zeros_bomb: bytes, rows_bomb: bytes,
    values_bomb: bytes, cancer_bytes: bytes,
) -> None:
    client, server = api
    # warm up: an ordinary upload, so imports and the parser are paid for before measuring
    assert client.post("/v1/datasets", content=lzma.compress(cancer_bytes)).status_code == 201
    before = peak_rss(server.process.pid)

    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _i: client.post("/v1/datasets", content=zeros_bomb),
                                range(3)))
    for response in answers:
        assert response.status_code in (413, 422), response.text
    for bomb in (rows_bomb, values_bomb):
        answer = client.post("/v1/datasets", content=bomb)
        assert answer.status_code == 413, answer.text
        assert "HINGE_MAX_DATASET" in answer.json()["error"]["message"]

    grown = peak_rss(server.process.pid) - before
    print(f"peak RSS grew by {grown / MB:.0f} MB")
    assert grown < BOUND, f"peak RSS grew by {grown / MB:.0f} MB"
    assert client.get("/v1/datasets").json()["count"] == 1
    assert client.get("/healthz").status_code == 200
    blobs = list((server.log_path.parent / "home" / "datasets").iterdir())
    assert len(blobs) == 1, blobs  # nothing left behind by the refused uploads


def test_the_row_bounds_are_checked_while_parsing(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    settings = embedded_settings(tmp_path / "home", max_dataset_rows=1000,
                                 max_dataset_nnz=5000)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as client:
        assert client.post("/v1/datasets", content=b"1 1:1\n" * 1000).status_code == 201
        rows = client.post("/v1/datasets", content=b"1 1:1\n" * 1001)
        assert rows.status_code == 413 and "ROWS" in rows.json()["error"]["message"]
        nnz = client.post("/v1/datasets", content=b"1 1:1 2:1 3:1 4:1 5:1 6:1\n" * 900)
        assert nnz.status_code == 413 and "NNZ" in nnz.json()["error"]["message"]


def test_healthz_answers_while_the_shared_thread_pool_is_full(tmp_path: Path) -> None:
    settings = embedded_settings(tmp_path / "home")
    settings.ensure_dirs()
    migrate(settings.database_url)
    app = create_app(settings)

    async def scenario() -> int:
        limiter = anyio.to_thread.current_default_thread_limiter()
        release = threading.Event()
        transport = httpx.ASGITransport(app=app)
        async with anyio.create_task_group() as group, httpx.AsyncClient(
                transport=transport, base_url="http://testserver") as client:
            for _ in range(int(limiter.total_tokens)):
                group.start_soon(lambda: anyio.to_thread.run_sync(release.wait))
            while limiter.borrowed_tokens < limiter.total_tokens:
                await anyio.sleep(0.01)
            try:
                with anyio.fail_after(5):
                    return (await client.get("/healthz")).status_code
            finally:
                release.set()

    assert anyio.run(scenario) == 200
