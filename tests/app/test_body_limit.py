"""Every request body is bounded before it is read (app/api/body_limit.py): the JSON control
routes by HINGE_MAX_JSON_BODY_BYTES, uploads and predict by their own limits; a 413 in the
project's error shape that names the limit, before the key is checked. (A real API process
under 20 concurrent 400 MB bodies: tests/e2e/test_body_limit.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.settings import Settings
from tests.support import bearer, embedded_settings, make_key, migrate

LIMIT = 4096
CONTROL_ROUTES = ["/v1/jobs", "/v1/searches", "/v1/datasets/some-id/split",
                  "/v1/models/some-id/evaluations", "/v1/admin/tenants", "/v1/admin/keys",
                  "/v1/jobs/some-id/cancel", "/login"]
BODYLESS = {"/v1/jobs/some-id/cancel"}  # a route without a body parameter


@pytest.fixture
def small(tmp_path: Path) -> Iterator[tuple[TestClient, Settings]]:
    settings = embedded_settings(tmp_path / "home", max_json_body_bytes=LIMIT,
                                 rate_per_second=0)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings)) as client:
        yield client, settings


def _refused(response) -> None:  # type: ignore[no-untyped-def]
    assert response.status_code == 413, response.text
    assert response.headers["connection"] == "close"
    error = response.json()["error"]
    assert error["code"] == "too_large"
    assert error["message"] == (f"request body exceeds the limit of {LIMIT} bytes "
                                "(HINGE_MAX_JSON_BODY_BYTES)")
    assert error["detail"] == {"limit": LIMIT, "setting": "HINGE_MAX_JSON_BODY_BYTES"}
    # the security middleware still dresses the answer
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("path", CONTROL_ROUTES)
def test_a_control_route_refuses_a_long_body_before_the_key(
        small: tuple[TestClient, Settings], path: str) -> None:
    client, _settings = small
    body = b'{"x": "' + b"a" * LIMIT + b'"}'
    _refused(client.post(path, content=body, headers={"content-type": "application/json"}))

    def chunked() -> Iterator[bytes]:  # no Content-Length
        for start in range(0, len(body), 1000):
            yield body[start:start + 1000]

    streamed = client.post(path, content=chunked(),
                           headers={"content-type": "application/json"})
    if path in BODYLESS:  # nothing reads the body: the key is checked, and that is all
        assert streamed.status_code == 401, streamed.text
    else:
        _refused(streamed)


def test_a_body_at_the_limit_is_served_and_one_byte_more_is_not(
        small: tuple[TestClient, Settings], cancer_bytes: bytes) -> None:
    """A valid job spec padded with JSON whitespace to exactly the limit: 202, with and
    without Content-Length; one byte more: 413 with a valid key too."""
    client, settings = small
    client.headers.update(bearer(make_key(settings)))
    assert len(cancer_bytes) > LIMIT  # uploads keep their own limit
    dataset = client.post("/v1/datasets", content=cancer_bytes)
    assert dataset.status_code == 201, dataset.text
    spec = json.dumps({"dataset_id": dataset.json()["id"]}).encode()
    exact = spec + b" " * (LIMIT - len(spec))
    assert len(exact) == LIMIT
    headers = {"content-type": "application/json"}
    assert client.post("/v1/jobs", content=exact, headers=headers).status_code == 202
    assert client.post("/v1/jobs", content=iter([exact[:100], exact[100:]]),
                       headers=headers).status_code == 202
    _refused(client.post("/v1/jobs", content=exact + b" ", headers=headers))
    _refused(client.post("/v1/jobs", content=iter([exact[:100], exact[100:] + b" "]),
                         headers=headers))


def test_predict_and_uploads_keep_their_own_limits(tmp_path: Path, cancer_bytes: bytes
                                                   ) -> None:
    settings = embedded_settings(tmp_path / "home", max_json_body_bytes=LIMIT,
                                 max_predict_bytes=2 * LIMIT, max_upload_bytes=1 << 20)
    settings.ensure_dirs()
    migrate(settings.database_url)
    with TestClient(create_app(settings)) as client:  # no key: refused before it matters
        over_predict = client.post("/v1/models/any/predict", content=b"1:1\n" * LIMIT)
        assert over_predict.status_code == 413
        assert over_predict.json()["error"]["detail"] == {
            "limit": 2 * LIMIT, "setting": "HINGE_MAX_PREDICT_BYTES"}
        within = client.post("/v1/models/any/predict", content=b"1:1\n" * (LIMIT // 4 + 1))
        assert within.status_code == 401  # past the JSON limit, within predict's
        over_upload = client.post("/v1/datasets", content=b"1 1:1\n" * (1 << 20))
        assert LIMIT < len(cancer_bytes) < 1 << 20
        assert over_upload.status_code == 413
        assert over_upload.json()["error"]["detail"]["setting"] == "HINGE_MAX_UPLOAD_BYTES"
        assert client.post("/v1/datasets", content=cancer_bytes).status_code == 401
