"""Dashboard sign-in with an API key, and sign-out.

`POST /login` checks the key and sets `hinge_session`: HttpOnly, SameSite=Strict, Secure
over HTTPS, signed for the key's id (the key itself never goes into the cookie; a revoked
or expired key ends its sessions at once). The sign-in form carries a token that must
match a short-lived cookie (double submit), so another site cannot sign a browser in to
its own key. Every page of a session carries that session's CSRF token
(`<meta name="csrf-token">`); the dashboard's scripts send it as `X-CSRF-Token`, and the
API refuses any change made with the session cookie but without it. Sign-out is a POST
with the same token.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated
from urllib.parse import parse_qs, quote

import anyio.to_thread
from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.api.auth import SESSION_COOKIE, Public, csrf_matches, session_cookie
from app.api.routes.dashboard import DashboardRoute, _page
from app.domain.services import tenants
from app.domain.services.tenants import Principal
from app.infra.db import read_sessionmaker_for
from app.settings import Settings

LOGIN_COOKIE = "hinge_login"
MAX_FORM_BYTES = 4096

router = APIRouter(include_in_schema=False, route_class=DashboardRoute,
                   default_response_class=HTMLResponse, dependencies=[Public])


def safe_next(target: str | None) -> str:
    """A path on this site to go to after sign-in (never another host)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _login_page(request: Request, next_path: str, error: str | None = None,
                status_code: int = 200) -> HTMLResponse:
    token = secrets.token_urlsafe(24)
    response = _page(request, "login.html", status_code=status_code, nav="login",
                     login_token=token, next_path=next_path, error=error, csrf=None)
    response.set_cookie(LOGIN_COOKIE, token, max_age=900, httponly=True, samesite="strict",
                        secure=request.url.scheme == "https", path="/login")
    return response


@router.get("/login")
def login_form(request: Request,
               next: Annotated[str | None, Query(max_length=512)] = None) -> HTMLResponse:
    return _login_page(request, safe_next(next))


async def _form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            break
    if len(body) > MAX_FORM_BYTES:
        return {}
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    return {name: values[0] for name, values in fields.items() if values}


def _verify(settings: Settings, presented: str) -> Principal | None:
    with read_sessionmaker_for(settings.database_url)() as session:
        return tenants.verify_key(session, settings.hmac_key(), presented)


@router.post("/login")
async def login(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    form = await _form(request)
    next_path = safe_next(form.get("next"))
    expected = request.cookies.get(LOGIN_COOKIE, "")
    if not expected or not hmac.compare_digest(form.get("token", ""), expected):
        return _login_page(request, next_path, "The sign-in form expired; try again.", 403)
    principal = await anyio.to_thread.run_sync(_verify, settings, form.get("key", "").strip())
    if principal is None:
        return _login_page(request, next_path, "That key is not valid.", 401)
    response = RedirectResponse(next_path, status_code=303)
    response.set_cookie(SESSION_COOKIE, session_cookie(settings, principal.key_id),
                        max_age=int(settings.session_hours * 3600), httponly=True,
                        samesite="strict", secure=request.url.scheme == "https", path="/")
    response.delete_cookie(LOGIN_COOKIE, path="/login")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    settings: Settings = request.app.state.settings
    form = await _form(request)
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie and not csrf_matches(settings, cookie, form.get("csrf")):
        return HTMLResponse("Sign-out needs the form of a dashboard page.", status_code=403)
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def sign_in_redirect(request: Request) -> RedirectResponse:
    """Where a page sends a visitor without a session."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target, safe='')}", status_code=303)
