"""POST/GET/DELETE /v1/datasets against a real SQLite database and blob directory."""

from __future__ import annotations

import bz2
import gzip
import lzma
import zlib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.support import (
    BLOB_BACKENDS,
    bearer,
    blob_exists,
    data_file,
    embedded_settings,
    make_key,
    migrate,
)


@pytest.fixture(params=BLOB_BACKENDS)
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test of this module runs with blobs in local files and in an S3 store."""
    return str(request.param)


@pytest.fixture(scope="module")
def cancer_text() -> bytes:
    return lzma.decompress(data_file("heart_scale.xz").read_bytes())


def _check_cancer(body: dict) -> None:
    assert body["rows"] == 270
    assert body["features"] == 13
    assert body["nnz"] == 3378
    assert body["labels"] == [-1.0, 1.0]
    assert body["class_counts"] == {"-1": 150, "1": 120}
    assert body["sha256"].startswith("5defa0a4c4c5bdaf")


def test_multipart_upload_then_get_list_delete(client: TestClient, cancer_text: bytes) -> None:
    response = client.post("/v1/datasets", files={"file": ("cancer.txt", cancer_text)},
                           data={"name": "cancer"})
    assert response.status_code == 201, response.text
    body = response.json()
    _check_cancer(body)
    assert body["name"] == "cancer"
    dataset_id = body["id"]

    assert client.get(f"/v1/datasets/{dataset_id}").json() == body
    listing = client.get("/v1/datasets").json()
    assert listing["count"] == 1 and listing["data"][0]["id"] == dataset_id

    settings = client.app.state.settings  # type: ignore[attr-defined]
    assert blob_exists(settings, f"datasets/{dataset_id}.npz")
    assert client.delete(f"/v1/datasets/{dataset_id}").status_code == 204
    assert not blob_exists(settings, f"datasets/{dataset_id}.npz")
    missing = client.get(f"/v1/datasets/{dataset_id}")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert client.delete(f"/v1/datasets/{dataset_id}").status_code == 404


@pytest.mark.parametrize(
    "compress", [lambda b: b, gzip.compress, bz2.compress, lzma.compress],
    ids=["plain", "gzip", "bz2", "xz"],
)
def test_raw_body_in_every_compression_detected_by_magic(
    client: TestClient, cancer_text: bytes, compress
) -> None:
    response = client.post("/v1/datasets?name=raw.txt", content=compress(cancer_text),
                           headers={"content-type": "application/octet-stream"})
    assert response.status_code == 201, response.text
    _check_cancer(response.json())
    assert response.json()["name"] == "raw.txt"


def test_shared_xz_file_uploads_as_is(client: TestClient) -> None:
    response = client.post("/v1/datasets",
                           files={"file": ("a9a.xz", data_file("a9a.xz").read_bytes())})
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["rows"], body["features"], body["nnz"]) == (32561, 123, 451592)
    assert body["class_counts"] == {"-1": 24720, "1": 7841}
    assert body["name"] == "a9a.xz"


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        (b"1 1:1\n1 0:2\n", 2, "index"),
        (b"1 1:1\n\n1 2:nan\n", 3, ""),
        (b"1 2:1 1:1\n", 1, ""),
        (b"1:1 2:3\n", 1, "label"),
        (b"1 1:1\n-1 3:\n", 2, ""),
        (b"1 1:1\x00\n", 1, ""),
        (b"1 2000000000:1\n", 1, ""),
    ],
    ids=["index-0", "nan", "decreasing", "no-label", "empty-value", "nul", "huge-index"],
)
def test_bad_input_is_422_naming_the_line(client: TestClient, text: bytes, line: int,
                                          reason: str) -> None:
    response = client.post("/v1/datasets", files={"file": ("bad.txt", text)})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_input"
    assert error["detail"]["line"] == line
    assert f"line {line}" in error["message"]
    assert reason in error["message"].lower()
    assert client.get("/v1/datasets").json()["count"] == 0


def test_empty_and_truncated_uploads_are_422(client: TestClient, cancer_text: bytes) -> None:
    assert client.post("/v1/datasets", content=b"").status_code == 422
    truncated = gzip.compress(cancer_text)[:-20]
    response = client.post("/v1/datasets", content=truncated)
    assert response.status_code == 422, response.text
    assert "gzip" in response.json()["error"]["message"]


def test_multipart_without_file_field_is_422(client: TestClient) -> None:
    response = client.post("/v1/datasets", data={"name": "x"}, files={"other": ("a", b"1 1:1")})
    assert response.status_code == 422
    assert "file" in response.json()["error"]["message"]


@pytest.fixture
def small_cap_client(tmp_path: Path):
    settings = embedded_settings(tmp_path / "home", max_upload_bytes=4096)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings), headers=bearer(make_key(settings))) as test_client:
        yield test_client


def test_one_byte_over_the_cap_is_413_with_and_without_content_length(
    small_cap_client: TestClient,
) -> None:
    line = b"1 1:0.5 2:0.25\n"
    exact = line * (4096 // len(line) - 1)
    exact += b"1 1:1" + b" " * (4096 - len(exact) - 6) + b"\n"
    assert len(exact) == 4096
    assert small_cap_client.post("/v1/datasets", content=exact).status_code == 201
    over = exact + b"\n"
    response = small_cap_client.post("/v1/datasets", content=over)
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "too_large"

    def chunks():  # no Content-Length: chunked transfer
        yield over[:2000]
        yield over[2000:]

    response = small_cap_client.post("/v1/datasets", content=chunks())
    assert response.status_code == 413


def test_decompression_bomb_is_413(small_cap_client: TestClient) -> None:
    bomb = zlib.compress(b"1 1:1\n" * 200_000, 9)
    gz = gzip.compress(b"1 1:1\n" * 200_000)
    assert len(gz) < 4096 and len(bomb) < 4096
    response = small_cap_client.post("/v1/datasets", content=gz)
    assert response.status_code == 413
    assert "decompressed" in response.json()["error"]["message"]


def test_malformed_multipart_is_400_not_500(client: TestClient) -> None:
    body = (b"--b\r\nContent-Disposition: form-data; name=\"file\"\r\n"
            b"Bad[Header: x\r\n\r\n1 1:1\r\n--b--\r\n")
    response = client.post("/v1/datasets", content=body,
                           headers={"content-type": "multipart/form-data; boundary=b"})
    assert response.status_code == 400, response.text
    assert "multipart" in response.json()["error"]["message"]
