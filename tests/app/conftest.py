from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.settings import Settings
from workers.training import run_job


@pytest.fixture
def cancer_id(client: TestClient, cancer_bytes: bytes) -> str:
    response = client.post("/v1/datasets?name=cancer", content=cancer_bytes)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


@pytest.fixture
def cancer_model_id(client: TestClient, settings: Settings, cancer_id: str) -> str:
    """A model trained on cancer (a default job, run in this process by the worker's code)."""
    job_id = client.post("/v1/jobs", json={"dataset_id": cancer_id}).json()["id"]
    assert run_job(settings, job_id, "test-worker") == "succeeded"
    return str(client.get(f"/v1/jobs/{job_id}").json()["model_id"])
