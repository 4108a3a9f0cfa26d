from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def heart_id(client: TestClient, cancer_bytes: bytes) -> str:
    response = client.post("/v1/datasets?name=heart", content=cancer_bytes)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
