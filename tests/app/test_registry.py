"""The model registry (/v1/registry/models) and predicting, evaluating and exporting by
reference (name@alias, name/versions/n), on SQLite and PostgreSQL; a model's lineage."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.domain.orm import ModelAlias, SearchTask
from app.domain.services import registry
from app.infra.bus import _dispatch
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import bearer, make_key, migrated_settings
from workers.search import run_search_task
from workers.training import run_job

ROWS = {"instances": [{"indices": [1, 2, 3], "values": [0.5, -0.2, 0.1]},
                      {"indices": [2, 5], "values": [1.0, 0.3]}]}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    with migrated_settings(request.param, tmp_path / "home", rate_per_second=0) as configured:
        yield configured


def _train(client: TestClient, settings: Settings, dataset_id: str, C: float) -> str:
    job = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                        "params": {"C": C, "eps": 0.01}}).json()
    assert run_job(settings, job["id"], "test-worker") == "succeeded"
    return str(client.get(f"/v1/jobs/{job['id']}").json()["model_id"])


@pytest.fixture
def two_models(client: TestClient, settings: Settings, cancer_id: str) -> tuple[str, str]:
    return _train(client, settings, cancer_id, 0.01), _train(client, settings, cancer_id, 10.0)


def _register(client: TestClient, name: str, *model_ids: str) -> None:
    assert client.post("/v1/registry/models", json={"name": name}).status_code == 201
    for number, model_id in enumerate(model_ids, 1):
        response = client.post(f"/v1/registry/models/{name}/versions", json={
            "model_id": model_id[:10], "description": f"C try {number}",
            "tags": {"team": "risk"}})
        assert response.status_code == 201, response.text
        assert response.json()["version"] == number
        assert response.json()["model_id"] == model_id


def _predict(client: TestClient, ref: str) -> dict:
    response = client.post(f"/v1/models/{ref}/predict", json=ROWS)
    assert response.status_code == 200, response.text
    served = response.json()["served_by"]
    assert response.headers["Hinge-Model-Version"] == (
        f"{served['name']}/versions/{served['version']}")
    return dict(response.json())


def _promote(client: TestClient, alias: str, version: int) -> None:
    response = client.put(f"/v1/registry/models/churn/aliases/{alias}",
                          json={"version": version})
    assert response.status_code == 200, response.text
    assert response.json()["version"] == version


@pytest.fixture
def promoted(client: TestClient, two_models: tuple[str, str]) -> tuple[str, str]:
    """"churn": versions 1 and 2 (the two models), production on 2."""
    _register(client, "churn", *two_models)
    _promote(client, "production", 2)
    return two_models


def test_register_version_alias_promote_and_roll_back(
        client: TestClient, two_models: tuple[str, str], admin_key: str) -> None:
    first, second = two_models
    _register(client, "churn", first, second)
    listed = client.get("/v1/registry/models/churn/versions").json()
    assert [(v["version"], v["model_id"], v["tags"]) for v in listed["data"]] == [
        (2, second, {"team": "risk"}), (1, first, {"team": "risk"})]
    assert listed["data"][0]["created_by"] == admin_key[3:15]

    _promote(client, "production", 1)
    by_id = client.post(f"/v1/models/{first}/predict", json=ROWS).json()
    answer = _predict(client, "churn@production")
    assert answer["served_by"] == {"name": "churn", "version": 1, "alias": "production"}
    assert answer["model_id"] == first
    assert answer["decision_values"] == by_id["decision_values"]
    assert "served_by" not in by_id

    _promote(client, "production", 2)  # promote: this process follows at once
    assert _predict(client, "churn@production")["model_id"] == second
    _promote(client, "production", 1)  # roll back
    assert _predict(client, "churn@production")["served_by"]["version"] == 1
    assert _predict(client, "churn/versions/2")["served_by"] == {
        "name": "churn", "version": 2, "alias": None}

    name = client.get("/v1/registry/models/churn").json()
    assert (name["latest_version"], name["aliases"]) == (2, {"production": 1})
    history = client.get("/v1/registry/models/churn/history").json()["data"]
    assert [(m["alias"], m["from_version"], m["to_version"]) for m in history] == [
        ("production", 2, 1), ("production", 1, 2), ("production", None, 1)]
    assert {m["moved_by"] for m in history} == {admin_key[3:15]}


def test_a_version_an_alias_points_at_cannot_be_deleted(
        client: TestClient, two_models: tuple[str, str]) -> None:
    first, second = two_models
    _register(client, "churn", first, second)
    _promote(client, "staging", 1)
    refused = client.delete("/v1/registry/models/churn/versions/1")
    assert refused.status_code == 409
    assert refused.json()["error"]["detail"] == {"aliases": ["staging"]}
    # nor the model of a registered version
    assert client.delete(f"/v1/models/{first}").status_code == 409
    _promote(client, "staging", 2)
    assert client.delete("/v1/registry/models/churn/versions/1").status_code == 204
    assert client.get("/v1/registry/models/churn/versions/1").status_code == 404
    assert client.post("/v1/models/churn/versions/1/predict", json=ROWS).status_code == 404
    # numbers are never given again
    again = client.post("/v1/registry/models/churn/versions", json={"model_id": first})
    assert again.json()["version"] == 3
    assert client.delete("/v1/registry/models/churn/aliases/staging").status_code == 204
    assert client.post("/v1/models/churn@staging/predict", json=ROWS).status_code == 404
    assert client.delete("/v1/registry/models/churn/versions/2").status_code == 204


def test_what_the_registry_refuses(client: TestClient, two_models: tuple[str, str]) -> None:
    first, _ = two_models
    _register(client, "churn", first)
    taken = client.post("/v1/registry/models", json={"name": "churn"})
    assert taken.status_code == 409
    assert client.post("/v1/registry/models", json={"name": "a@b"}).status_code == 422
    unknown = client.post("/v1/registry/models/churn/versions", json={"model_id": "f" * 32})
    assert unknown.status_code == 422
    assert unknown.json()["error"]["detail"]["field"] == "model_id"
    no_version = client.put("/v1/registry/models/churn/aliases/production",
                            json={"version": 7})
    assert no_version.status_code == 422
    assert client.put("/v1/registry/models/churn/aliases/7", json={"version": 1}
                      ).status_code == 422  # an alias is never a number
    assert client.post("/v1/models/churn@nowhere/predict", json=ROWS).status_code == 404
    assert client.post("/v1/models/nobody@production/predict", json=ROWS).status_code == 404
    assert client.get("/v1/registry/models/nobody/versions").status_code == 404


def test_another_tenants_names_are_not_found(
        client: TestClient, settings: Settings, two_models: tuple[str, str]) -> None:
    first, _ = two_models
    _register(client, "churn", first)
    _promote(client, "production", 1)
    other = bearer(make_key(settings, "other", ("train",)))
    for method, url in [("GET", "/v1/registry/models/churn"),
                        ("GET", "/v1/registry/models/churn/versions"),
                        ("GET", "/v1/models/churn@production"),
                        ("POST", "/v1/models/churn@production/predict"),
                        ("POST", "/v1/models/churn/versions/1/predict"),
                        ("GET", "/v1/models/churn/versions/1/export"),
                        ("DELETE", "/v1/registry/models/churn/versions/1")]:
        response = client.request(method, url, headers=other,
                                  json=ROWS if method == "POST" else None)
        assert response.status_code == 404, (method, url, response.text)
    # the other tenant may use the same name for its own models
    assert client.post("/v1/registry/models", json={"name": "churn"},
                       headers=other).status_code == 201
    assert client.get("/v1/registry/models", headers=other).json()["data"][0][
        "latest_version"] is None


def test_export_and_evaluate_by_reference(
        client: TestClient, promoted: tuple[str, str], cancer_id: str) -> None:
    first, second = promoted
    exported = client.get("/v1/models/churn@production/export")
    assert exported.status_code == 200
    assert exported.headers["Hinge-Model-Version"] == "churn/versions/2"
    assert exported.text == client.get(f"/v1/models/{second}/export").text
    by_version = client.get("/v1/models/churn/versions/1/export")
    assert by_version.text == client.get(f"/v1/models/{first}/export").text
    evaluation = client.post("/v1/models/churn/versions/1/evaluations",
                             json={"dataset_id": cancer_id})
    assert evaluation.status_code == 201, evaluation.text
    assert evaluation.headers["Hinge-Model-Version"] == "churn/versions/1"
    assert evaluation.json()["model_id"] == first
    assert client.post("/v1/models/churn@production/evaluations",
                       json={"dataset_id": cancer_id}).json()["model_id"] == second


def test_every_process_follows_a_move(client: TestClient, settings: Settings,
                                      two_models: tuple[str, str]) -> None:
    """A move made by another API process: the bus's announcement drops this process's
    resolution; without one, the periodic check does."""
    first, second = two_models
    _register(client, "churn", first, second)
    _promote(client, "production", 1)
    assert _predict(client, "churn@production")["model_id"] == first
    registry.drop_stale_references(settings.database_url)  # (earlier tests' tenants)
    assert registry.cached(_tenant(settings), "churn@production") is not None

    def moved_elsewhere(version: int) -> None:  # as another process's commit, unannounced
        with session_scope(settings.database_url) as session:
            session.execute(update(ModelAlias).where(ModelAlias.alias == "production")
                            .values(version=version))

    moved_elsewhere(2)
    assert _predict(client, "churn@production")["model_id"] == first  # still cached here
    assert registry.drop_stale_references(settings.database_url) == 1
    assert _predict(client, "churn@production")["model_id"] == second
    assert registry.drop_stale_references(settings.database_url) == 0

    moved_elsewhere(1)
    served = registry.cached(_tenant(settings), "churn@production")
    assert served is not None and served.version == 2
    _dispatch({registry.BUS_KIND: registry.forget}, f"registry:{_tenant(settings)}/churn")
    assert registry.cached(_tenant(settings), "churn@production") is None
    assert _predict(client, "churn@production")["model_id"] == first


def _tenant(settings: Settings) -> str:
    from app.domain.services import tenants

    with session_scope(settings.database_url) as session:
        found = tenants.tenant_by_name(session, "default")
        assert found is not None
        return found.id


def test_concurrent_moves_are_serialised(client: TestClient, settings: Settings,
                                         two_models: tuple[str, str]) -> None:
    """Moves from many threads at once (of an alias that exists, and of one that each
    thread may be the first to make): each one's history names the version the one
    before it left, and the alias ends where the last recorded move put it."""
    first, second = two_models
    _register(client, "churn", first, second)
    _promote(client, "production", 1)
    errors: list[BaseException] = []

    def mover(worker: int) -> None:
        try:
            for step in range(4):
                for alias in ("production", "staging"):
                    response = client.put(f"/v1/registry/models/churn/aliases/{alias}",
                                          json={"version": 1 + (worker + step) % 2})
                    assert response.status_code == 200, response.text
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=mover, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    history = client.get("/v1/registry/models/churn/history?limit=1000").json()["data"]
    for alias in ("production", "staging"):
        chain = [m for m in reversed(history) if m["alias"] == alias]
        assert chain[0]["from_version"] is None
        for before, after in itertools.pairwise(chain):
            assert after["from_version"] == before["to_version"]
            assert after["from_version"] != after["to_version"]
        final = client.get("/v1/registry/models/churn").json()["aliases"][alias]
        assert final == chain[-1]["to_version"]


def test_lineage_of_a_trained_model(client: TestClient, two_models: tuple[str, str],
                                    cancer_id: str) -> None:
    first, _ = two_models
    _register(client, "churn", first)
    client.post(f"/v1/models/{first}/evaluations", json={"dataset_id": cancer_id})
    dataset = client.get(f"/v1/datasets/{cancer_id}").json()
    model = client.get(f"/v1/models/{first}").json()
    lineage = client.get(f"/v1/models/{first[:8]}/lineage").json()
    assert lineage["dataset"]["id"] == cancer_id
    assert lineage["dataset"]["sha256"] == dataset["sha256"]
    assert lineage["job"]["id"] == model["job_id"]
    assert lineage["search"] is None
    assert lineage["params"] == model["params"]
    assert lineage["params"]["C"] == 0.01
    assert lineage["certificate"]["converged"] == model["converged"]
    assert lineage["certificate"]["duality_gap"] == model["result"]["duality_gap"]
    assert lineage["code_version"].startswith("hinge ")
    assert [e["accuracy"] for e in lineage["evaluations"]] == [
        pytest.approx(model["train_accuracy"])]
    assert lineage["registered_versions"] == [{"name": "churn", "version": 1}]
    assert client.get("/v1/models/churn@x/lineage").status_code == 404
    # the dataset deleted: its id remains
    client.delete(f"/v1/datasets/{cancer_id}")
    assert client.get(f"/v1/models/{first}/lineage").json()["dataset"] == {
        "id": cancer_id, "exists": False, "name": None, "sha256": None, "rows": None,
        "features": None, "source_format": None, "parent_id": None, "split_part": None}


def test_the_registry_pages_and_the_model_pages_lineage(
        client: TestClient, promoted: tuple[str, str], cancer_id: str) -> None:
    first, second = promoted
    listing = client.get("/registry")
    assert listing.status_code == 200
    assert 'href="/registry/churn"' in listing.text and "production → 2" in listing.text
    page = client.get("/registry/churn")
    assert page.status_code == 200
    assert f'href="/models/{second}"' in page.text and "(new)" in page.text
    assert client.get("/registry/nobody").status_code == 404
    model_page = client.get(f"/models/{first}").text
    assert f'href="/datasets/{cancer_id}"' in model_page
    assert 'href="/registry/churn">churn/versions/1' in model_page
    job_id = client.get(f"/v1/models/{first}").json()["job_id"]
    assert f'href="/jobs/{job_id}"' in model_page


def test_lineage_of_a_searchs_refit_model(client: TestClient, settings: Settings,
                                          cancer_id: str) -> None:
    created = client.post("/v1/searches", json={
        "dataset_id": cancer_id, "solver": "dcd", "space": {"C": [0.1, 1.0]},
        "cv": {"folds": 2, "seed": 1}})
    assert created.status_code == 202, created.text
    search_id = created.json()["id"]
    with session_scope(settings.database_url) as session:
        task_ids = list(session.scalars(select(SearchTask.id).where(
            SearchTask.search_id == search_id)))
    assert {run_search_task(settings, t, "test") for t in task_ids} == {"succeeded"}
    search = client.get(f"/v1/searches/{search_id}").json()
    assert run_job(settings, search["refit_job_id"], "test") == "succeeded"
    model_id = client.get(f"/v1/searches/{search_id}").json()["model_id"]
    lineage = client.get(f"/v1/models/{model_id}/lineage").json()
    assert lineage["search"]["id"] == search_id
    assert lineage["search"]["best"]["values"] == search["best"]["values"]
    assert lineage["job"]["id"] == search["refit_job_id"]
    assert lineage["params"]["C"] == search["best"]["values"]["C"]
    assert f'href="/searches/{search_id}"' in client.get(f"/models/{model_id}").text
