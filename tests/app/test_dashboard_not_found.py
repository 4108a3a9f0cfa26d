"""A dashboard page of a job, dataset, model or search that is not there, or is another
tenant's, is the "Not found" page (404, HTML, with the security headers), never an error
page or a JSON body."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.auth import SESSION_COOKIE, session_cookie
from app.api.main import create_app
from app.domain.services import tenants
from app.infra.db import read_sessionmaker_for
from app.settings import Settings
from tests.support import bearer, make_key, migrated_settings


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with migrated_settings("sqlite", tmp_path / "home", rate_per_second=0) as settings:
        yield settings


def _page_client(settings: Settings, key: str) -> TestClient:
    with read_sessionmaker_for(settings.database_url)() as session:
        principal = tenants.verify_key(session, settings.hmac_key(), key)
    assert principal is not None
    client = TestClient(create_app(settings), follow_redirects=False)
    client.cookies.set(SESSION_COOKIE, session_cookie(settings, principal.key_id))
    return client


@pytest.mark.parametrize("kind", ["job", "dataset", "model", "search"])
def test_a_missing_or_foreign_object_is_the_not_found_page(settings: Settings,
                                                           cancer_bytes: bytes,
                                                           kind: str) -> None:
    other = TestClient(create_app(settings), headers=bearer(make_key(settings, "other")))
    with other, _page_client(settings, make_key(settings, "owner")) as pages:
        dataset = other.post("/v1/datasets", content=cancer_bytes).json()["id"]
        foreign = {"dataset": dataset,
                   "job": other.post("/v1/jobs", json={"dataset_id": dataset}).json()["id"]}
        ids = ["0" * 32, *([foreign[kind]] if kind in foreign else [])]
        for ident in ids:
            response = pages.get(f"/{'searches' if kind == 'search' else kind + 's'}/{ident}")
            assert response.status_code == 404, response.text
            assert response.headers["content-type"].startswith("text/html")
            assert f"There is no {kind}" in response.text and ident in response.text
            assert "Content-Security-Policy" in response.headers
