"""Domain errors inside, HTTP at the edge: services and workers raise app.domain.errors' kinds
and load neither FastAPI nor Starlette; app.api.http_errors alone turns each kind into its
HTTP answer."""

from __future__ import annotations

import ast
import inspect
import pkgutil
import subprocess
import sys

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import app.domain.services
from app.api.http_errors import DOMAIN_STATUS, install_error_handlers
from app.domain import errors
from tests.support import REPO


def _web_modules_after_importing(*modules: str) -> set[str]:
    code = (f"import sys, {', '.join(modules)}; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('fastapi', 'starlette')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=REPO).stdout
    return set(ast.literal_eval(out.strip()))


def test_the_workers_task_module_loads_neither_fastapi_nor_starlette() -> None:
    """What `celery -A workers.celery_app worker` imports (its include, workers.tasks, and
    through it every worker module and the services they reuse)."""
    assert _web_modules_after_importing("workers.celery_app", "workers.tasks") == set()


def test_no_service_module_loads_fastapi_or_starlette() -> None:
    services = [f"app.domain.services.{m.name}"
                for m in pkgutil.iter_modules(app.domain.services.__path__)]
    assert len(services) >= 9, services
    assert _web_modules_after_importing("app.domain.errors", *services) == set()


def test_the_check_sees_a_web_import() -> None:
    """(The two tests above would pass vacuously if the check could not see one.)"""
    assert "fastapi" in _web_modules_after_importing("app.api.http_errors")


def test_every_kind_of_domain_error_has_an_http_status() -> None:
    kinds = {cls for _, cls in inspect.getmembers(errors, inspect.isclass)
             if issubclass(cls, errors.DomainError) and cls is not errors.DomainError}
    assert kinds == set(DOMAIN_STATUS)


CASES = [
    (errors.NotFound("job", "j1"), 404, "not_found", "job 'j1' not found", None, None),
    (errors.Conflict("already done", {"status": "succeeded"}), 409, "conflict",
     "already done", {"status": "succeeded"}, None),
    (errors.Invalid("params.C: too small", field="params.C"), 422, "invalid_input",
     "params.C: too small", {"field": "params.C"}, None),
    (errors.Invalid("scopes", {"unknown": ["x"]}, field="scopes"), 422, "invalid_input",
     "scopes", {"field": "scopes", "unknown": ["x"]}, None),
    (errors.Invalid("rows", [{"loc": ["a"], "msg": "m"}]), 422, "invalid_input", "rows",
     [{"loc": ["a"], "msg": "m"}], None),
    (errors.AmbiguousId("job id prefix 'ab12' matches 2 jobs", {"candidates": ["a", "b"]},
                        field="job_id"), 422, "ambiguous_id",
     "job id prefix 'ab12' matches 2 jobs", {"field": "job_id", "candidates": ["a", "b"]},
     None),
    (errors.TooLarge("too many fits", {"limit": 3}), 413, "too_large", "too many fits",
     {"limit": 3}, None),
    (errors.OverLimit("queue full", {"limit": 2}, retry_after=10), 429,
     "too_many_requests", "queue full", {"limit": 2}, "10"),
    (errors.Unavailable("no broker", {"search_id": "s"}), 503, "unavailable", "no broker",
     {"search_id": "s"}, None),
    (errors.Unavailable("later", retry_after=2), 503, "unavailable", "later", None, "2"),
    (errors.Unsupported("text/html", {"accepted": ["text/plain"]}), 415,
     "unsupported_media_type", "text/html", {"accepted": ["text/plain"]}, None),
    (errors.Malformed("no boundary"), 400, "bad_request", "no boundary", None, None),
]


@pytest.mark.parametrize(("exc", "status", "code", "message", "detail", "retry_after"),
                         CASES, ids=[type(c[0]).__name__ for c in CASES])
def test_the_edge_answers_each_domain_error(exc: errors.DomainError, status: int, code: str,
                                            message: str, detail: object,
                                            retry_after: str | None) -> None:
    api = FastAPI()
    install_error_handlers(api)

    @api.get("/refused")
    def refused() -> None:
        raise exc

    with TestClient(api, raise_server_exceptions=False) as client:
        response = client.get("/refused")
    assert response.status_code == status
    assert response.json() == {"error": {"code": code, "message": message, "detail": detail}}
    assert response.headers.get("retry-after") == retry_after
