"""A client's common mistakes get an answer that says the fix: predict with curl's default
content type, JSON that is really svmlight rows, 0-based feature indices (in a predict
body and in an upload)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.settings import Settings
from workers.training import run_job

CURL_FIX = "-H 'Content-Type: text/plain'"
JSON_FIX = "-H 'Content-Type: application/json'"


@pytest.fixture
def model_id(client: TestClient, settings: Settings, cancer_bytes: bytes) -> str:
    dataset = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
    job = client.post("/v1/jobs", json={"dataset_id": dataset, "solver": "dcd"}).json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    return str(client.get(f"/v1/jobs/{job['id']}").json()["model_id"])


def _error(response: object) -> str:
    return str(response.json()["error"]["message"])  # type: ignore[attr-defined]


def test_curls_default_content_type_gets_415_naming_both_accepted_types(
        client: TestClient, model_id: str, cancer_bytes: bytes) -> None:
    rows = b"\n".join(cancer_bytes.splitlines()[:3])
    # what `curl --data-binary @rows.txt URL` sends without -H
    response = client.post(f"/v1/models/{model_id}/predict", content=rows,
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert response.status_code == 415, response.text
    message = _error(response)
    assert "application/x-www-form-urlencoded (curl's default for -d and --data-binary)" \
        in message
    assert CURL_FIX in message and JSON_FIX in message
    assert response.json()["error"]["detail"] == {"accepted": ["application/json",
                                                               "text/plain"]}
    # following the message works
    fixed = client.post(f"/v1/models/{model_id}/predict", content=rows,
                        headers={"Content-Type": "text/plain"})
    assert fixed.status_code == 200 and len(fixed.json()["labels"]) == 3
    other = client.post(f"/v1/models/{model_id}/predict", content=rows,
                        headers={"Content-Type": "application/octet-stream"})
    assert other.status_code == 415 and "curl's default" not in _error(other)


def test_svmlight_rows_sent_as_json_are_recognised(client: TestClient, model_id: str,
                                                   cancer_bytes: bytes) -> None:
    rows = b"\n".join(cancer_bytes.splitlines()[:2])
    for body in (rows, b"3:1 11:1 14:1\n"):  # with and without labels
        response = client.post(f"/v1/models/{model_id}/predict", content=body,
                               headers={"Content-Type": "application/json"})
        assert response.status_code == 422, response.text
        message = _error(response)
        assert message.startswith("Invalid JSON")
        assert f"this body looks like svmlight rows: send them with {CURL_FIX}" in message


def test_other_invalid_json_names_what_predict_takes(client: TestClient,
                                                     model_id: str) -> None:
    response = client.post(f"/v1/models/{model_id}/predict", content=b"{instances: []}",
                           headers={"Content-Type": "application/json"})
    assert response.status_code == 422
    message = _error(response)
    assert message.startswith("Invalid JSON") and '{"instances"' in message
    assert CURL_FIX in message and JSON_FIX in message
    # valid JSON of the wrong shape keeps the precise field message
    response = client.post(f"/v1/models/{model_id}/predict", json={"rows": []})
    assert response.status_code == 422 and _error(response).startswith("instances: ")


def test_zero_based_indices_say_the_fix(client: TestClient, model_id: str) -> None:
    response = client.post(f"/v1/models/{model_id}/predict",
                           json={"instances": [{"indices": [0, 3], "values": [1, 1]}]})
    assert response.status_code == 422
    assert _error(response) == ("instances[0]: feature index 0 < 1: indices are 1-based "
                                "(the first feature is 1); with 0-based indices, add 1 to "
                                "every index")
    response = client.post(f"/v1/models/{model_id}/predict", content=b"0:1 3:1\n",
                           headers={"Content-Type": "text/plain"})
    assert response.status_code == 422
    assert "indices are 1-based" in _error(response)
    assert "needs every index raised by one" in _error(response)


def test_an_upload_with_zero_based_indices_names_the_line_and_the_fix(
        client: TestClient) -> None:
    response = client.post("/v1/datasets", content=b"1 1:0.5\n-1 0:1 2:1\n")
    assert response.status_code == 422
    message = _error(response)
    assert "line 2" in message and "index 0 in" in message
    assert "indices are 1-based (the first feature is 1:)" in message
    assert "needs every index raised by one" in message
