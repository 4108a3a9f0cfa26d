"""POST/GET/DELETE /v1/datasets against a real SQLite database and blob directory."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import zlib
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sklearn.datasets import load_svmlight_file

from app.api.main import create_app
from testkit import bundled
from tests.support import (
    BLOB_BACKENDS,
    bearer,
    blob_exists,
    embedded_settings,
    make_key,
    migrate,
)


@pytest.fixture(params=BLOB_BACKENDS)
def blob_backend(request: pytest.FixtureRequest) -> str:
    """Every test of this module runs with blobs in local files and in an S3 store."""
    return str(request.param)


def _summary(text: bytes) -> dict:
    """What the API must report of an svmlight text, computed here by scikit-learn's parser:
    rows, features (the largest index), stored values, labels, rows per label, sha256."""
    X, y = load_svmlight_file(io.BytesIO(text))
    labels, counts = np.unique(y, return_counts=True)
    return {"rows": X.shape[0], "features": X.shape[1], "nnz": X.nnz,
            "labels": labels.tolist(),
            "class_counts": {f"{label:g}": int(n) for label, n in zip(labels, counts,
                                                                       strict=True)},
            "sha256": hashlib.sha256(text).hexdigest()}


def _check_cancer(body: dict, text: bytes) -> None:
    expected = _summary(text)
    assert {key: body[key] for key in expected} == expected
    assert (body["rows"], body["features"]) == (569, 30)  # breast_cancer, as documented


def test_multipart_upload_then_get_list_delete(client: TestClient, cancer_bytes: bytes) -> None:
    response = client.post("/v1/datasets", files={"file": ("cancer.txt", cancer_bytes)},
                           data={"name": "cancer"})
    assert response.status_code == 201, response.text
    body = response.json()
    _check_cancer(body, cancer_bytes)
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
    client: TestClient, cancer_bytes: bytes, compress
) -> None:
    response = client.post("/v1/datasets?name=raw.txt", content=compress(cancer_bytes),
                           headers={"content-type": "application/octet-stream"})
    assert response.status_code == 201, response.text
    _check_cancer(response.json(), cancer_bytes)
    assert response.json()["name"] == "raw.txt"


def test_an_xz_file_uploads_as_is(client: TestClient, tmp_path: Path) -> None:
    """A larger sparse 0/1 set (a9a-like, 8,000 rows) as a user uploads it: an .xz file."""
    path = bundled.write_xz("onehot", tmp_path)
    response = client.post("/v1/datasets", files={"file": (path.name, path.read_bytes())})
    assert response.status_code == 201, response.text
    body = response.json()
    expected = _summary(bundled.svmlight_bytes("onehot"))
    assert {key: body[key] for key in expected} == expected
    assert body["rows"] == 8000 and body["labels"] == [-1.0, 1.0]
    assert body["name"] == "onehot.xz"


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


def test_empty_and_truncated_uploads_are_422(client: TestClient, cancer_bytes: bytes) -> None:
    assert client.post("/v1/datasets", content=b"").status_code == 422
    truncated = gzip.compress(cancer_bytes)[:-20]
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
