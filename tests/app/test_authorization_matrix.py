"""The authorization matrix, generated from the OpenAPI schema: every route and method x
{no key, wrong key, revoked key, a read-only key, another tenant's key}, each with the
status its declared scope implies, on SQLite and on PostgreSQL.

A route declares its scope in one place (`app.api.auth.require_scope`: read, train, admin or
public); the expected statuses come from that declaration, so a new route is covered the
moment it is in the schema, and a route that declares no scope, or has a path parameter
this test cannot fill, fails here.

Tenant "owner" has a dataset, a succeeded job, its model, an evaluation of the model on
the dataset, a (cancelled) search and an open upload session; their ids fill the paths.
A POST whose body names an object gets a valid body (BODIES), so the answer comes from
the route's object checks, not from validation.
Callers:
- no key, a malformed key, a well-formed key nobody issued, a revoked key: 401;
- the owner's read-only key: allowed on `read` routes (and finds the object: not 404),
  403 on `train` and `admin` routes;
- another tenant's `train` key: on a route with an owner's id in its path, 404 with the
  same body as an id that does not exist; allowed on routes without one; 403 on `admin`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient

from app.api.auth import PUBLIC, declared_scope
from app.api.main import create_app
from app.domain.services import tenants
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import bearer, embedded_settings, make_key, migrate, postgres_schema
from workers.training import run_job

DENIED = {401, 403}
MISSING_ID = "f" * 32


@dataclass(frozen=True)
class Endpoint:
    """One API route as the app serves it (full path, with its routers' dependencies)."""

    path: str
    methods: frozenset[str]
    dependant: Dependant
    in_schema: bool


def endpoints(app: FastAPI) -> list[Endpoint]:
    found = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute):
            found.append(Endpoint(context.path or route.path, frozenset(route.methods),
                                  getattr(context, "dependant", None) or route.dependant,
                                  route.include_in_schema))
    return found


def route_scope(route: Endpoint | APIRoute) -> str | None:
    """The scope the route declares through require_scope, anywhere in its dependencies."""
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        scope = declared_scope(dependant.call)
        if scope is not None:
            return scope
        pending.extend(dependant.dependencies)
    return None


def schema_operations(app: FastAPI) -> list[tuple[str, str, Endpoint | None]]:
    """(method, path, route) for every operation in the OpenAPI schema."""
    routes = {(m, r.path): r for r in endpoints(app) for m in r.methods}
    operations = []
    for path, item in app.openapi()["paths"].items():
        for method in item:
            operations.append((method.upper(), path, routes.get((method.upper(), path))))
    return operations


_SCHEMA_APP = create_app(embedded_settings(Path("/nonexistent-hinge-home")))


def test_every_route_declares_its_scope() -> None:
    undeclared = [f"{method} {path}" for method, path, route in schema_operations(_SCHEMA_APP)
                  if route is None or route_scope(route) is None]
    assert undeclared == [], ("routes without require_scope(...): add one (read, train, "
                              f"admin or public): {undeclared}")


def test_the_openapi_schema_offers_the_bearer_key_on_every_operation() -> None:
    """/docs' "Authorize" and generated clients: the scheme, and every operation of a route
    with a scope requirement names it (the requirement reads the header itself)."""
    schema = _SCHEMA_APP.openapi()
    assert schema["components"]["securitySchemes"]["HTTPBearer"] == {
        "type": "http", "scheme": "bearer",
        "description": "An API key: `Bearer hk_<id>_<secret>`"}
    missing = [f"{method} {path}" for path, item in schema["paths"].items()
               for method, operation in item.items()
               if operation.get("security") != [{"HTTPBearer": []}]]
    assert missing == []


def test_every_dashboard_page_declares_its_scope_too() -> None:
    pages = [r for r in endpoints(_SCHEMA_APP) if not r.in_schema]
    assert {"/", "/datasets", "/login", "/docs"} <= {r.path for r in pages}
    assert [r.path for r in pages if route_scope(r) is None] == []


def test_the_scope_finder_sees_a_route_without_a_declaration() -> None:
    app = FastAPI()

    @app.get("/undeclared")
    def undeclared() -> None: ...

    assert [route_scope(r) for r in app.routes if isinstance(r, APIRoute)] == [None]


# -- the matrix ----------------------------------------------------------------------

class World:
    """Two tenants and their keys; the owner's objects."""

    def __init__(self, settings: Settings, app: FastAPI, cancer: bytes) -> None:
        self.settings = settings
        owner_admin = make_key(settings, "owner")
        self.read_only = make_key(settings, "owner", ("read",))
        self.other = make_key(settings, "other", ("train",))
        revoked = make_key(settings, "owner", ("admin",))
        with session_scope(settings.database_url) as session:
            tenants.revoke_key(session, revoked[3:15])
            owner = tenants.tenant_by_name(session, "owner")
            assert owner is not None
            self.tenant_id = owner.id
        self.callers = {
            "no key": {},
            "malformed key": bearer("not-a-key"),
            "unknown key": bearer("hk_0123456789ab_" + "x" * 43),
            "revoked key": bearer(revoked),
        }
        with TestClient(app, headers=bearer(owner_admin)) as client:
            self.dataset_id = client.post("/v1/datasets", content=cancer).json()["id"]
            self.job_id = client.post("/v1/jobs", json={"dataset_id": self.dataset_id}
                                      ).json()["id"]
        assert run_job(settings, self.job_id, "matrix") == "succeeded"
        with TestClient(app, headers=bearer(owner_admin)) as client:
            self.model_id = client.get(f"/v1/jobs/{self.job_id}").json()["model_id"]
            evaluation = client.post(f"/v1/models/{self.model_id}/evaluations",
                                     json={"dataset_id": self.dataset_id})
            assert evaluation.status_code == 201, evaluation.text
            self.evaluation_id = evaluation.json()["id"]
            search = client.post("/v1/searches", json={"dataset_id": self.dataset_id,
                                                       "space": {"C": [1.0]}})
            assert search.status_code == 202, search.text
            self.search_id = search.json()["id"]
            # cancelled, so that its event stream ends (as the succeeded job's does)
            assert client.post(f"/v1/searches/{self.search_id}/cancel").status_code == 202
            # a batch prediction, cancelled (no worker runs here) so its event stream ends
            prediction = client.post("/v1/predictions", json={
                "model_id": self.model_id, "dataset_id": self.dataset_id})
            assert prediction.status_code == 202, prediction.text
            self.prediction_id = prediction.json()["id"]
            assert client.post(f"/v1/predictions/{self.prediction_id}/cancel"
                               ).status_code == 202
            # a dataset import (POST /v1/imports), cancelled so its event stream ends
            part = settings.home / "import-root" / "part-0.svm"
            part.parent.mkdir(parents=True, exist_ok=True)
            part.write_bytes(cancer)
            created = client.post("/v1/imports", json={"source": f"file://{part}"})
            assert created.status_code == 202, created.text
            self.import_id = created.json()["id"]
            assert client.delete(f"/v1/imports/{self.import_id}").status_code == 202
            # a resumable upload session with its first part staged (POST /v1/uploads)
            opened = client.post("/v1/uploads", json={"size": len(cancer)})
            assert opened.status_code == 201, opened.text
            self.upload_id = opened.json()["id"]
            assert client.patch(f"/v1/uploads/{self.upload_id}", content=cancer[:100],
                                headers={"Upload-Offset": "0"}).status_code == 200
            # a model imported from a LIBLINEAR file (POST /v1/models)
            exported = client.get(f"/v1/models/{self.model_id}/export").content
            imported = client.post("/v1/models", files={"file": ("m.model", exported)})
            assert imported.status_code == 201, imported.text
            self.imported_model_id = imported.json()["id"]
            # a registered name with version 1 (the trained model) and an alias on it
            self.registered_name = "owner-churn-model"
            assert client.post("/v1/registry/models", json={"name": self.registered_name}
                               ).status_code == 201
            assert client.post(f"/v1/registry/models/{self.registered_name}/versions",
                               json={"model_id": self.model_id}).status_code == 201
            assert client.put(f"/v1/registry/models/{self.registered_name}/aliases/"
                              "production", json={"version": 1}).status_code == 200
        self.model_file = exported
        self.ids = {"dataset_id": self.dataset_id, "job_id": self.job_id,
                    "model_id": self.model_id, "evaluation_id": self.evaluation_id,
                    "tenant_id": self.tenant_id, "key_id": self.read_only[3:15],
                    "search_id": self.search_id, "name": self.registered_name,
                    "version": "1", "alias": "production",
                    "prediction_id": self.prediction_id, "import_id": self.import_id,
                    "upload_id": self.upload_id}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def world(request: pytest.FixtureRequest, tmp_path: Path, cancer_bytes: bytes
          ) -> Iterator[tuple[FastAPI, World]]:
    def build(database_url: str = "") -> tuple[FastAPI, World]:
        settings = embedded_settings(tmp_path / "home", database_url=database_url,
                                     rate_per_second=0,
                                     import_roots=[str(tmp_path / "home" / "import-root")])
        settings.ensure_dirs()
        migrate(settings.database_url)
        app = create_app(settings)
        return app, World(settings, app, cancer_bytes)

    if request.param == "sqlite":
        yield build()
    else:
        with postgres_schema() as url:
            yield build(url)


def _fill(path: str, ids: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        assert name in ids, (f"{path}: the matrix cannot fill {{{name}}}; add an object of "
                             "that kind to World.ids")
        return ids[name]

    return re.sub(r"\{(\w+)\}", one, path)


def _path_id(url: str) -> str:
    """The id a filled path ends with (the owner's object the 404 names)."""
    return next(p for p in reversed(url.split("/")) if len(p) >= 12)


BODIES: dict[tuple[str, str], Callable[[World], Any]] = {
    # a body that passes validation, so the owner's id in the path decides the answer
    ("POST", "/v1/models/{model_id}/evaluations"): lambda w: {"dataset_id": w.dataset_id},
    ("POST", "/v1/models/{name}/versions/{version}/evaluations"):
        lambda w: {"dataset_id": w.dataset_id},
    ("POST", "/v1/registry/models/{name}/versions"): lambda w: {"model_id": w.model_id},
    ("PUT", "/v1/registry/models/{name}/aliases/{alias}"): lambda w: {"version": 1},
}
# what fills a path for an object that does not exist (a version is a number)
MISSING = {"version": "999999"}
# multipart bodies (sent as files=) rather than JSON
FILES: dict[tuple[str, str], Callable[[World], Any]] = {
    ("POST", "/v1/models"): lambda w: {"file": ("m.model", w.model_file)},
}


def _call(client: TestClient, method: str, url: str, headers: dict[str, str],
          json: Any = None, files: Any = None) -> Any:
    body: dict[str, Any] = {}
    if files is not None:
        body = {"files": files}
    elif method in ("POST", "PUT", "PATCH"):
        body = {"json": {} if json is None else json}
    return client.request(method, url, headers=headers, **body)


def test_authorization_matrix(world: tuple[FastAPI, World]) -> None:
    app, w = world
    failures: list[str] = []
    operations = schema_operations(app)
    assert len(operations) >= 15
    assert set(BODIES) <= {(method, path) for method, path, _ in operations}, "stale BODIES"

    def expect(ok: bool, what: str, response: Any) -> None:
        if not ok:
            failures.append(f"{what}: {response.status_code} {response.text[:160]}")

    with TestClient(app) as client:
        for method, path, route in operations:
            assert route is not None
            scope = route_scope(route)
            assert scope is not None, f"{method} {path} declares no scope"
            url = _fill(path, w.ids)
            has_id = url != path
            json = BODIES[(method, path)](w) if (method, path) in BODIES else None
            files = FILES[(method, path)](w) if (method, path) in FILES else None
            for name, headers in w.callers.items():
                response = _call(client, method, url, headers, json, files)
                if scope == PUBLIC:
                    expect(response.status_code not in DENIED, f"{method} {path} {name}",
                           response)
                else:
                    expect(response.status_code == 401, f"{method} {path} {name} -> 401",
                           response)
            # another tenant's key
            response = _call(client, method, url, bearer(w.other), json, files)
            if scope == "admin":
                expect(response.status_code == 403, f"{method} {path} other -> 403", response)
            elif has_id and scope != PUBLIC:
                expect(response.status_code == 404, f"{method} {path} other -> 404", response)
                missing_url = _fill(path, {**dict.fromkeys(w.ids, MISSING_ID), **MISSING})
                missing = _call(client, method, missing_url, bearer(w.other), json)
                expect(missing.status_code == 404 and response.status_code == 404
                       and response.text == missing.text.replace(MISSING_ID, _path_id(url)),
                       f"{method} {path} other: the same 404 as a missing id", response)
            else:
                expect(response.status_code not in DENIED, f"{method} {path} other allowed",
                       response)
            # the owner's read-only key
            response = _call(client, method, url, bearer(w.read_only), json, files)
            if scope in ("train", "admin"):
                expect(response.status_code == 403, f"{method} {path} read-only -> 403",
                       response)
            else:
                ok = response.status_code not in DENIED
                if has_id and scope != PUBLIC:
                    ok = ok and response.status_code != 404
                expect(ok, f"{method} {path} read-only allowed (and finds the object)",
                       response)
        # the owner's imported model, like its trained one: another tenant's key finds
        # nothing on any of its routes
        for method, path, route in operations:
            if "{model_id}" not in path or "{evaluation_id}" in path:
                continue
            url = _fill(path, {**w.ids, "model_id": w.imported_model_id})
            json = BODIES[(method, path)](w) if (method, path) in BODIES else None
            response = _call(client, method, url, bearer(w.other), json)
            expect(response.status_code == 404, f"{method} {path} imported, other -> 404",
                   response)
            assert route is not None
            if method == "GET" and route_scope(route) == "read":
                response = _call(client, method, url, bearer(w.read_only))
                expect(response.status_code == 200,
                       f"{method} {path} imported, read-only -> 200", response)
    assert failures == [], "\n".join(failures)
