"""Predict routes draw on a rate budget of their own per API key
(HINGE_PREDICT_RATE_PER_SECOND, HINGE_PREDICT_RATE_BURST), not on the tenant's bucket
(HINGE_RATE_PER_SECOND, HINGE_RATE_BURST) that every other route shares.

The predicts here name a model that does not exist: the budget is spent before the route
runs, so a 404 is a request let through and a 429 one refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from tests.support import bearer, embedded_settings, make_key, migrate, require_redis

MISSING = "/v1/models/" + "0" * 32 + "/predict"
ROW = {"instances": [[1.0, 2.0]]}


def _app(tmp_path: Path, where: str, **overrides: object) -> tuple[TestClient, object]:
    if where == "redis":
        overrides["broker_url"] = require_redis()
    settings = embedded_settings(tmp_path / "home", **overrides)  # type: ignore[arg-type]
    settings.ensure_dirs()
    migrate(settings.database_url)
    return TestClient(create_app(settings)), settings


@pytest.mark.parametrize("where", ["process", pytest.param("redis", marks=pytest.mark.redis)])
def test_predict_has_a_budget_per_key_apart_from_the_tenants(tmp_path: Path, where: str
                                                              ) -> None:
    app, settings = _app(tmp_path, where, rate_per_second=0.5, rate_burst=3,
                         predict_rate_per_second=0.5, predict_rate_burst=5)
    with app as client:
        key = bearer(make_key(settings, f"t-{where}"))  # type: ignore[arg-type]
        other_key = bearer(make_key(settings, f"t-{where}"))  # type: ignore[arg-type]
        predicted = [client.post(MISSING, json=ROW, headers=key).status_code
                     for _ in range(6)]
        assert predicted == [404] * 5 + [429]
        refused = client.post(MISSING, json=ROW, headers=key)
        assert "HINGE_PREDICT_RATE_PER_SECOND" in refused.json()["error"]["message"]
        assert int(refused.headers["retry-after"]) >= 1
        # the tenant's bucket is untouched by the predicts, and the predicts by it
        listed = [client.get("/v1/jobs", headers=key).status_code for _ in range(4)]
        assert listed == [200, 200, 200, 429]
        assert "HINGE_RATE_PER_SECOND" in client.get(
            "/v1/jobs", headers=key).json()["error"]["message"]
        # another key of the tenant predicts on its own budget
        assert client.post(MISSING, json=ROW, headers=other_key).status_code == 404


def test_predict_at_a_few_hundred_requests_is_not_refused_by_default(tmp_path: Path
                                                                      ) -> None:
    app, settings = _app(tmp_path, "process")
    with app as client:
        key = bearer(make_key(settings, "busy"))  # type: ignore[arg-type]
        statuses = {client.post(MISSING, json=ROW, headers=key).status_code
                    for _ in range(400)}
        assert statuses == {404}
        assert client.get("/v1/jobs", headers=key).status_code == 200
