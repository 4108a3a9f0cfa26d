"""A disk that cannot hold an upload (a small tmpfs mounted over HINGE_HOME/datasets):
507 with the reason, no dataset, no shard or temporary file left, and the service goes on
answering. Mounting needs root (CI runs as root: there a missing mount fails)."""

from __future__ import annotations

import io
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.settings import Settings
from solvers.svmlight import dump_svmlight
from testkit import bundled
from testkit.datagen import text_like
from tests.support import unavailable


def _mount(where: Path, options: str) -> None:
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
                       check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        unavailable("mounting a tmpfs (root)", exc)


@pytest.fixture
def small_disk(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Path]:
    """HINGE_HOME/datasets on a tmpfs of the options the test's param says."""
    where = settings.home / "datasets"
    where.mkdir(parents=True, exist_ok=True)
    _mount(where, request.param)
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True, timeout=30)


def _text(rows: int = 12000) -> bytes:
    X, y = text_like(rows, 500, seed=11, nnz_per_row=20.0)
    buffer = io.BytesIO()
    dump_svmlight(X, y, buffer)
    return buffer.getvalue()  # ~2.5 MB of arrays


# size=1m: the next shard does not fit (the free-space check); nr_inodes=4: the bytes fit
# but no file can be created after two shards (ENOSPC from the filesystem itself)
@pytest.mark.parametrize("small_disk", ["size=1m", "size=64m,nr_inodes=4"], indirect=True)
def test_a_full_disk_is_507_and_leaves_nothing(client: TestClient, settings: Settings,
                                               small_disk: Path) -> None:
    settings.shard_bytes = 64 << 10
    settings.disk_reserve_bytes = 0
    answer = client.post("/v1/datasets?name=big", content=_text())
    assert answer.status_code == 507, answer.text
    error = answer.json()["error"]
    assert error["code"] == "insufficient_storage"
    assert "No space left on device" in error["message"] or "bytes free" in error["message"]
    assert error["detail"]["setting"] == "HINGE_DISK_RESERVE_BYTES"
    assert list(small_disk.rglob("*")) == []  # no shard, no temporary file, no folder
    assert client.get("/v1/datasets").json()["count"] == 0
    # the service goes on answering, and stores what fits (in one blob)
    assert client.get("/healthz").status_code == 200
    settings.shard_bytes = 64 << 20
    small = client.post("/v1/datasets?name=small", content=bundled.svmlight_bytes("cancer"))
    assert small.status_code == 201, small.text


@pytest.mark.parametrize("small_disk", ["size=16m"], indirect=True)
def test_the_disk_reserve_refuses_what_would_eat_into_it(client: TestClient,
                                                         settings: Settings,
                                                         small_disk: Path) -> None:
    settings.shard_bytes = 64 << 10
    settings.disk_reserve_bytes = 15 << 20  # 1 MiB usable: the set needs more
    answer = client.post("/v1/datasets", content=_text())
    assert answer.status_code == 507, answer.text
    assert "to keep free" in answer.json()["error"]["message"]
    assert list(small_disk.rglob("*")) == []
    settings.disk_reserve_bytes = 1 << 20
    assert client.post("/v1/datasets", content=_text()).status_code == 201
