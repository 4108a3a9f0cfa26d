from __future__ import annotations

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def cancer_id(client: TestClient, cancer_bytes: bytes) -> str:
    response = client.post("/v1/datasets?name=cancer", content=cancer_bytes)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
