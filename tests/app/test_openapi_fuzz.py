"""Schemathesis over the OpenAPI contract: no input produces a server error (5xx).

Runs every operation with generated inputs against the app on a real SQLite database,
with a dataset and a trained model already present so that generated ids can hit them.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from app.main import create_app
from tests.support import embedded_settings, migrate
from workers.training import run_job

_HOME = Path(tempfile.mkdtemp(prefix="hinge-fuzz-"))
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
_SETTINGS = embedded_settings(_HOME / "home", max_upload_bytes=1 << 20, max_predict_rows=1000)
_APP = create_app(_SETTINGS)
schema = schemathesis.openapi.from_asgi("/openapi.json", _APP)


@pytest.fixture(scope="module", autouse=True)
def seeded(heart_bytes: bytes) -> None:
    _SETTINGS.ensure_dirs()
    migrate(_SETTINGS.database_url)
    with TestClient(_APP) as client:
        dataset_id = client.post("/v1/datasets", content=heart_bytes).json()["id"]
        job_id = client.post("/v1/jobs", json={"dataset_id": dataset_id}).json()["id"]
        assert run_job(_SETTINGS, job_id, "fuzz") == "succeeded"


@schema.exclude(path_regex=r"/events$").parametrize()
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_no_input_causes_a_server_error(case) -> None:
    response = case.call()
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    if response.status_code >= 400:
        assert set(response.json()["error"]) == {"code", "message", "detail"}
