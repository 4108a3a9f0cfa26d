from __future__ import annotations

import lzma
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.settings import Settings
from tests.support import bearer, data_file, embedded_settings, make_key, migrate


@pytest.fixture(scope="session")
def heart_bytes() -> bytes:
    return lzma.decompress(data_file("heart_scale.xz").read_bytes())


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The embedded default (SQLite database + SQLite broker) in a fresh HINGE_HOME."""
    configured = embedded_settings(tmp_path / "home")
    configured.ensure_dirs()
    migrate(configured.database_url)
    return configured


@pytest.fixture
def admin_key(settings: Settings) -> str:
    """An admin key of tenant "default"."""
    return make_key(settings)


@pytest.fixture
def client(settings: Settings, admin_key: str) -> Iterator[TestClient]:
    """The app on the embedded default, called with `admin_key`."""
    with TestClient(create_app(settings), headers=bearer(admin_key)) as test_client:
        yield test_client
