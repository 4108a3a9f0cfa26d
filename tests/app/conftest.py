from __future__ import annotations

import lzma

import pytest
from fastapi.testclient import TestClient

from tests.support import data_file


@pytest.fixture(scope="session")
def heart_bytes() -> bytes:
    return lzma.decompress(data_file("heart_scale.xz").read_bytes())


@pytest.fixture
def heart_id(client: TestClient, heart_bytes: bytes) -> str:
    response = client.post("/v1/datasets?name=heart", content=heart_bytes)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])
