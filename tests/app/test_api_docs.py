"""docs/api.md's table of routes lists exactly the routes the app serves: every operation
of the OpenAPI schema and the API's routes outside it (/metrics), no more, no fewer."""

from __future__ import annotations

import re
from pathlib import Path

from app.api.main import create_app
from tests.app.test_authorization_matrix import endpoints
from tests.support import REPO, embedded_settings

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_ROUTE = re.compile(rf"^((?:{'|'.join(METHODS)})(?:/(?:{'|'.join(METHODS)}))*) (\S+)$")


def _normal(path: str) -> str:
    """A path with its parameters unnamed ({id} and {model_id} alike), no query."""
    return re.sub(r"\{[^}]*\}", "{}", path.split("?")[0])


def _resolve(path: str, previous: str | None) -> str:
    """`…/versions/{n}` after `/v1/registry/models/{name}/versions`: the earlier path up to
    the segment the short one starts with, or without its last segment."""
    if not path.startswith("…"):
        return path
    assert previous is not None, f"{path!r} follows no full path"
    rest = path[1:]
    first = rest.strip("/").split("/")[0]
    cut = previous.rfind("/" + first)
    base = previous[:cut] if cut > 0 else previous.rsplit("/", 1)[0]
    return base + rest


def documented(text: str) -> set[tuple[str, str]]:
    """(method, path) of every route named in the first column of the routes table."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| route |"))
    found: set[tuple[str, str]] = set()
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cell = re.split(r"(?<!\\)\|", line)[1]
        previous = None
        for chunk in re.findall(r"`([^`]*)`", cell):
            match = _ROUTE.match(chunk.replace("\\|", "|"))
            if match is None:
                continue
            path = _resolve(match.group(2), previous)
            previous = path.split("?")[0]
            found |= {(method, _normal(path)) for method in match.group(1).split("/")}
    return found


def served() -> set[tuple[str, str]]:
    app = create_app(embedded_settings(Path("/nonexistent-hinge-home")))
    routes = {(method.upper(), _normal(path))
              for path, item in app.openapi()["paths"].items() for method in item}
    # the API's routes outside the schema (the dashboard's pages and /docs are not the API)
    routes |= {(method, _normal(e.path)) for e in endpoints(app) if not e.in_schema
               and (e.path.startswith("/v1/") or e.path in ("/healthz", "/metrics"))
               for method in e.methods}
    return routes


def test_the_routes_table_lists_exactly_the_apps_routes() -> None:
    docs = documented((REPO / "docs" / "api.md").read_text())
    app = served()
    assert sorted(app - docs) == [], "served but not in docs/api.md"
    assert sorted(docs - app) == [], "in docs/api.md but not served"


def test_the_table_reader_expands_shorthand() -> None:
    table = ("| route | what |\n|---|---|\n"
             "| `POST/GET /v1/x`, `GET/DELETE …/x/{id}`, `GET …/y?format=a\\|b` | z |\n")
    assert documented(table) == {("POST", "/v1/x"), ("GET", "/v1/x"), ("GET", "/v1/x/{}"),
                                 ("DELETE", "/v1/x/{}"), ("GET", "/v1/x/y")}
