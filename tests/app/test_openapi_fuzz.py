"""Schemathesis over the OpenAPI contract: no input produces a server error (5xx).

Runs every operation with generated inputs against the app on a real SQLite database,
with an admin key, and two tenants each with a dataset and a trained model already
present, so that generated ids can hit their own and the other tenant's objects.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings

from app.api.main import create_app
from tests.support import bearer, embedded_settings, make_key, migrate
from workers.training import run_job

_HOME = Path(tempfile.mkdtemp(prefix="hinge-fuzz-"))
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
_SETTINGS = embedded_settings(_HOME / "home", max_upload_bytes=1 << 20, max_predict_rows=1000,
                              rate_per_second=0)
_APP = create_app(_SETTINGS)


async def _app_without_lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The app as the fuzzer calls it: its requests, not its lifespan. schemathesis starts
    an app's lifespan when it loads the schema (here, at collection) and keeps it running
    until the process exits, so the app's background loops (the sweeper, the bus) ran in a
    thread beside everything else this test process collected and ran. Before `seeded`
    migrates the database they failed and logged tracebacks, and Python 3.11 formats a
    traceback with `ast.parse`: two threads in the AST constructor at once trip CPython's
    shared recursion counter (python/cpython#106905), and pytest's assertion rewriting
    of the next test module failed ("SystemError: AST constructor recursion depth
    mismatch")."""
    if scope["type"] != "lifespan":
        await _APP(scope, receive, send)
        return
    while (await receive())["type"] != "lifespan.shutdown":
        await send({"type": "lifespan.startup.complete"})
    await send({"type": "lifespan.shutdown.complete"})


schema = schemathesis.openapi.from_asgi("/openapi.json", _app_without_lifespan)
_KEYS: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def seeded(cancer_bytes: bytes) -> None:
    _SETTINGS.ensure_dirs()
    migrate(_SETTINGS.database_url)
    _KEYS["admin"] = make_key(_SETTINGS)
    for key in (_KEYS["admin"], make_key(_SETTINGS, "other", ("train",))):
        with TestClient(_APP, headers=bearer(key)) as client:
            dataset_id = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
            job_id = client.post("/v1/jobs", json={"dataset_id": dataset_id}).json()["id"]
            assert run_job(_SETTINGS, job_id, "fuzz") == "succeeded"


@schema.exclude(path_regex=r"/events$").parametrize()
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                 HealthCheck.function_scoped_fixture])
def test_no_input_causes_a_server_error(case) -> None:
    response = case.call(headers=bearer(_KEYS["admin"]))
    assert response.status_code < 500, (case.method, case.path, response.text[:500])
    if response.status_code >= 400 and case.method != "HEAD":  # (HEAD answers: no body)
        assert set(response.json()["error"]) == {"code", "message", "detail"}
