"""/v1/solvers, /healthz, /metrics, the OpenAPI contract and the shape of errors."""

from __future__ import annotations

import ast
import subprocess
import sys

from fastapi.testclient import TestClient

from solvers.params import SOLVERS
from testkit.layers import import_graph, training_modules
from tests.support import REPO


def test_solvers_lists_parameters_with_defaults_and_ranges(client: TestClient) -> None:
    body = client.get("/v1/solvers").json()
    assert body["count"] == len(body["data"]) >= 1
    dcd = next(s for s in body["data"] if s["name"] == "dcd")
    params = {p["name"]: p for p in dcd["params"]}
    assert params["C"]["default"] == 1.0 and params["C"]["exclusive_minimum"] == 0.0
    assert params["loss"]["choices"] == ["l1", "l2"]
    assert params["eps"]["default"] == 0.1
    assert {"bias", "bias_scale", "max_iter", "max_seconds", "class_weight", "seed"} <= set(
        params)


def test_health_metrics_and_openapi(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    metrics = client.get("/metrics")
    assert metrics.status_code == 200
    assert "hinge_http_requests_total" in metrics.text
    schema = client.get("/openapi.json").json()
    for path in ("/v1/datasets", "/v1/jobs", "/v1/jobs/{job_id}/cancel",
                 "/v1/models/{model_id}/predict", "/v1/models/{model_id}/export",
                 "/v1/solvers"):
        assert path in schema["paths"], path


def test_unknown_route_and_wrong_method_use_the_error_shape(client: TestClient) -> None:
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert set(response.json()["error"]) == {"code", "message", "detail"}
    response = client.put("/v1/datasets")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_the_api_never_loads_a_solver() -> None:
    """app never loads training code: the driver, the backbone, a registered solver, or
    what loads or only serves them (testkit/layers.py derives the set from the registry
    and the import graph; the import-linter contract `training_code` checks it
    statically)."""
    code = (
        "import sys, app.api.main, app.api.routes.jobs, app.api.routes.models, app.domain.predict,"
        " app.api.routes.evaluations, app.domain.services.evaluations, app.domain.services.splits;"
        "print(sorted(m for m in sys.modules if m.startswith('solvers')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout
    loaded = set(ast.literal_eval(out.strip()))
    training = training_modules(import_graph())
    assert "solvers.params" in loaded  # the registry: the API validates specs with it
    assert not loaded & training, sorted(loaded & training)


def test_training_code_is_derived_from_the_registry() -> None:
    """Every registered solver that trains, its compiled kernels and the driver are
    training code; the registry, the parser and the servable models are not."""
    training = training_modules(import_graph())
    assert {spec.module for spec in SOLVERS.values() if not spec.chooses} <= training
    assert {"solvers.train", "solvers.backbone", "solvers.continuation",
            "solvers._tron_kernels", "solvers._alm_kernels", "solvers.smo.steps"} <= training
    assert not {"solvers.params", "solvers.auto", "solvers.svmlight", "solvers.models",
                "solvers.formats", "solvers.kernels", "solvers.scaling"} & training
