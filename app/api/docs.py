"""The OpenAPI contract as Swagger UI at /docs, from assets served here (the
swagger-ui-bundle package), so the page works without internet and under a CSP that
allows only this origin."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from app.api.auth import Public
from app.api.routes.dashboard import static_url

DOCS_CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
            "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
            "frame-ancestors 'none'")

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Hinge API</title>
<link rel="icon" href="{favicon}" type="image/svg+xml">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="{init}"></script>
</body>
</html>
"""


def install_docs(app: FastAPI) -> None:
    app.mount("/docs/assets", StaticFiles(directory=swagger_ui_path), name="docs-assets")

    @app.get("/docs", include_in_schema=False, dependencies=[Public])
    def docs() -> HTMLResponse:
        page = _PAGE.format(favicon=static_url("favicon.svg"),
                            init=static_url("js/swagger-init.js"))
        return HTMLResponse(page, headers={"Content-Security-Policy": DOCS_CSP,
                                           "Cache-Control": "no-store"})
