"""Who may call a route: each route declares its scope in one place.

    @router.get("/{id}")
    def show(..., principal: ReadAuth) -> ...      # or TrainAuth, AdminAuth
    @router.get("/healthz", dependencies=[Public])  # no key needed

`require_scope(scope)` authenticates the caller (an `Authorization: Bearer hk_...` key, or
the dashboard's signed session cookie plus an `X-CSRF-Token` header on any request that
changes state), checks the scope, takes a token from the tenant's request-rate bucket and
returns the `Principal`. The declared scope is kept on the dependency (`.scope`), so
tests/app/test_authorization_matrix.py reads it for every route in the OpenAPI schema, and
a route that declares nothing fails that test.

Failures: no or unknown, revoked or expired key: 401 (one message for all); a scope the
key lacks: 403; a session request without its CSRF token: 403; over the rate: 429 with
Retry-After.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from app.api.http_errors import ApiError
from app.api.ratelimit import budget, take_token
from app.domain.services import tenants
from app.domain.services.tenants import Principal
from app.infra.db import read_sessionmaker_for
from app.settings import Settings

SESSION_COOKIE = "hinge_session"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
PUBLIC = "public"

_bearer = HTTPBearer(auto_error=False, description="An API key: `Bearer hk_<id>_<secret>`")


def unauthorized() -> ApiError:
    return ApiError(401, "a valid API key is required: send the header `Authorization: "
                         "Bearer hk_<id>_<secret>` (the hinge command line and its Python "
                         "client send $HINGE_API_KEY, or the key given by --api-key)",
                    detail={"header": "Authorization", "scheme": "Bearer",
                            "environment": "HINGE_API_KEY", "flag": "--api-key"},
                    headers={"WWW-Authenticate": "Bearer"})


# -- dashboard sessions: a cookie signed for one key; the key row is checked every time --

def _sign(secret: bytes, message: str) -> str:
    digest = hmac.new(secret, message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def session_cookie(settings: Settings, key_id: str) -> str:
    expires = int(time.time() + settings.session_hours * 3600)
    return f"{key_id}.{expires}.{_sign(settings.hmac_key(), f'session:{key_id}:{expires}')}"


def session_key_id(settings: Settings, cookie: str | None) -> str | None:
    """The key id of a well-signed, unexpired session cookie."""
    if not cookie or len(cookie) > 200:
        return None
    parts = cookie.split(".")
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    key_id, expires, signature = parts
    expected = _sign(settings.hmac_key(), f"session:{key_id}:{expires}")
    if not hmac.compare_digest(signature, expected) or int(expires) < time.time():
        return None
    return key_id


def csrf_token(settings: Settings, cookie: str) -> str:
    """The token a page of this session must send back on every change."""
    return _sign(settings.hmac_key(), f"csrf:{cookie}")


def csrf_matches(settings: Settings, cookie: str, token: str | None) -> bool:
    return bool(token) and hmac.compare_digest(str(token), csrf_token(settings, cookie))


# -- the dependency ------------------------------------------------------------------

def _lookup(settings: Settings, presented: str | None, session_key: str | None
            ) -> Principal | None:
    with read_sessionmaker_for(settings.database_url)() as session:
        if presented is not None:
            principal, expires_at = tenants.verify_key_until(session, settings.hmac_key(),
                                                             presented)
            if principal is not None and settings.key_cache_seconds > 0:
                tenants.verified_keys.put(presented, principal, settings.key_cache_seconds,
                                          expires_at)
            return principal
        if session_key is not None:
            return tenants.principal_for_key_id(session, session_key)
    return None


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case),
    as FastAPI's HTTPBearer reads it; None for no header or another scheme."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    return token if scheme and token and scheme.lower() == "bearer" else None


async def authenticate(request: Request, authorization: str | None) -> Principal:
    """The caller of `request`, whose Authorization header is `authorization`."""
    settings: Settings = request.app.state.settings
    presented = bearer_token(authorization)
    if presented is None and authorization:
        raise unauthorized()  # an Authorization header that is not a bearer token
    cookie = request.cookies.get(SESSION_COOKIE) if presented is None else None
    session_key = session_key_id(settings, cookie)
    if presented is None and session_key is None:
        raise unauthorized()
    principal = tenants.verified_keys.get(presented) if presented is not None else None
    if principal is None:  # not verified by this process in the last second: the database
        principal = await anyio.to_thread.run_sync(_lookup, settings, presented, session_key)
    if principal is None:
        raise unauthorized()
    if (principal.via == "session" and request.method not in SAFE_METHODS
            and not csrf_matches(settings, str(cookie), request.headers.get(CSRF_HEADER))):
        raise ApiError(403, f"a dashboard session needs the {CSRF_HEADER} header of its page "
                            "on every request that changes something")
    return principal


class SignInRequired(Exception):
    """A dashboard page without a valid session: the app redirects to the sign-in page."""


class ScopeRequirement:
    """A FastAPI dependency that admits callers holding `scope` (see the module doc).
    With `sign_in` (dashboard pages), a caller without a valid session is sent to the
    sign-in page instead of getting a 401."""

    def __init__(self, scope: str, *, sign_in: bool = False) -> None:
        if scope not in (*tenants.SCOPES, PUBLIC):
            raise ValueError(f"unknown scope {scope!r}")
        self.scope = scope
        self.sign_in = sign_in

    async def __call__(self, request: Request) -> Principal | None:
        # The bearer token is read here (bearer_token), not through a sub-dependency nor
        # FastAPI's HTTPBearer: FastAPI solves every level of a dependency tree on every
        # request, and on a predict that was a measurable share of the work. The OpenAPI
        # security scheme that the sub-dependency used to declare comes from
        # declare_bearer_security instead.
        if self.scope == PUBLIC:
            return None
        try:
            principal = await authenticate(request, request.headers.get("authorization"))
        except ApiError as exc:
            if self.sign_in and exc.status == 401:
                raise SignInRequired() from None
            raise
        if not principal.allows(self.scope):
            raise ApiError(403, f"this key lacks the {self.scope!r} scope")
        request.state.principal = principal
        settings = request.app.state.settings
        # the path as the router saw it (request.url would build a whole URL)
        await take_token(settings, budget(settings, request.method, request.scope["path"],
                                          principal.tenant_id, principal.key_id))
        return principal

    def __repr__(self) -> str:
        return f"require_scope({self.scope!r})"


_REQUIREMENTS = {scope: ScopeRequirement(scope) for scope in (*tenants.SCOPES, PUBLIC)}


def require_scope(scope: str) -> Any:
    """`Depends(...)` on a route: callers need `scope` (one of read, train, admin), or
    nobody needs anything for "public"."""
    return Depends(_REQUIREMENTS[scope])


def declared_scope(dependency: Any) -> str | None:
    """The scope a dependency callable declares, if it is a scope requirement."""
    return dependency.scope if isinstance(dependency, ScopeRequirement) else None


def require_page_scope(scope: str) -> Any:
    """`Depends(...)` on a dashboard page: like require_scope, but sends a caller who is
    not signed in to /login."""
    return Depends(_PAGE_REQUIREMENTS[scope])


_PAGE_REQUIREMENTS = {scope: ScopeRequirement(scope, sign_in=True) for scope in tenants.SCOPES}

ReadAuth = Annotated[Principal, require_scope("read")]
TrainAuth = Annotated[Principal, require_scope("train")]
AdminAuth = Annotated[Principal, require_scope("admin")]
Public = require_scope(PUBLIC)


def declare_bearer_security(schema: dict[str, Any], routes: list[Any]) -> dict[str, Any]:
    """Add the bearer-key security scheme to an OpenAPI `schema`, on every operation of a
    route that declares a scope requirement (what FastAPI derived from the HTTPBearer
    sub-dependency), so that /docs offers "Authorize" and clients see the key."""
    from fastapi.routing import APIRoute, iter_route_contexts

    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["HTTPBearer"] = {
        "type": "http", "description": _bearer.model.description, "scheme": "bearer"}
    for context in iter_route_contexts(routes):
        route = context.original_route
        if not isinstance(route, APIRoute):
            continue
        dependant = getattr(context, "dependant", None) or route.dependant
        if not any(isinstance(d.call, ScopeRequirement) for d in dependant.dependencies):
            continue
        path = context.path or route.path
        operations = schema.get("paths", {}).get(path, {})
        for method in route.methods or ():
            operation = operations.get(method.lower())
            if operation is not None:
                operation.setdefault("security", [{"HTTPBearer": []}])
    return schema
