"""Tenants and their API keys: create, list, revoke, verify.

A key reads `hk_<id>_<secret>`: `id` (12 hex digits) is stored as it is and finds the row;
`secret` (32 random bytes, URL-safe base64) is stored only as HMAC-SHA256 under the
server's secret key (HINGE_SECRET_KEY, or $HINGE_HOME/secret_key) and compared in
constant time. The full key is shown once, when it is created.

Scopes: `read` (list, show, download, predict, stream events), `train` (also upload,
delete, submit and cancel jobs) and `admin` (also manage tenants and keys). A scope
includes the ones before it.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.domain.errors import Conflict, Invalid, not_found
from app.domain.orm import ApiKey, Tenant, new_id, utcnow
from app.infra.db import after_commit

SCOPES = ("read", "train", "admin")
KEY_PREFIX = "hk_"
KEY_ID_HEX = 12
DEFAULT_TENANT = "default"


def implied_scopes(scopes: list[str] | frozenset[str]) -> frozenset[str]:
    """Every scope that `scopes` grant: a scope includes the ones before it in SCOPES."""
    ranks = [SCOPES.index(s) for s in scopes if s in SCOPES]
    return frozenset(SCOPES[: max(ranks) + 1]) if ranks else frozenset()


@dataclass(frozen=True)
class Principal:
    """Who is calling: a tenant, through one of its keys (directly or by a dashboard
    session signed for that key)."""

    tenant_id: str
    key_id: str
    scopes: frozenset[str]
    via: str = "key"  # "key" | "session"

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


def key_hash(secret_key: bytes, key_id: str, secret: str) -> str:
    return hmac.new(secret_key, f"{key_id}:{secret}".encode(), hashlib.sha256).hexdigest()


def split_key(presented: str) -> tuple[str, str] | None:
    """(id, secret) of a well-formed key, else None."""
    if not presented.startswith(KEY_PREFIX) or len(presented) > 200:
        return None
    parts = presented[len(KEY_PREFIX):].split("_", 1)
    if len(parts) != 2 or len(parts[0]) != KEY_ID_HEX or not parts[1]:
        return None
    key_id, secret = parts
    if any(c not in "0123456789abcdef" for c in key_id):
        return None
    return key_id, secret


_DUMMY_HASH = "0" * 64


def usable_key(key: ApiKey | None, now: datetime) -> bool:
    return (key is not None and key.revoked_at is None
            and (key.expires_at is None or key.expires_at > now))


def verify_key(session: Session, secret_key: bytes, presented: str) -> Principal | None:
    """The principal of a valid, unrevoked, unexpired key; None for anything else."""
    return verify_key_until(session, secret_key, presented)[0]


def verify_key_until(session: Session, secret_key: bytes, presented: str
                     ) -> tuple[Principal | None, datetime | None]:
    """verify_key, and when the key expires (None: never)."""
    parts = split_key(presented)
    if parts is None:
        return None, None
    key_id, secret = parts
    key = session.get(ApiKey, key_id)
    expected = key.key_hash if key is not None else _DUMMY_HASH
    matches = hmac.compare_digest(key_hash(secret_key, key_id, secret), expected)
    if not matches or key is None or not usable_key(key, utcnow()):
        return None, None
    return Principal(key.tenant_id, key.id, implied_scopes(key.scopes)), key.expires_at


class VerifiedKeys:
    """Keys this API process verified in the last `seconds` (HINGE_KEY_CACHE_SECONDS), so
    a busy client's requests (predict) do not each read the key's row. A key revoked
    through this process is dropped when the revocation commits; other API processes drop
    it when the bus announces it (app.infra.bus), and at the latest after `seconds`. Only
    successful verifications are kept, never past the key's own expiry."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._items: dict[str, tuple[Principal, float]] = {}
        self._lock = threading.Lock()

    def get(self, presented: str) -> Principal | None:
        found = self._items.get(presented)
        if found is None:
            return None
        if found[1] <= time.monotonic():
            with self._lock:
                self._items.pop(presented, None)
            return None
        return found[0]

    def put(self, presented: str, principal: Principal, seconds: float,
            expires_at: datetime | None) -> None:
        if expires_at is not None:
            seconds = min(seconds, (expires_at - utcnow()).total_seconds())
        if seconds <= 0:
            return
        with self._lock:
            if len(self._items) >= self.capacity:
                self._items.pop(next(iter(self._items)))
            self._items[presented] = (principal, time.monotonic() + seconds)

    def forget(self, key_id: str) -> None:
        with self._lock:
            for presented in [p for p, (who, _) in self._items.items() if who.key_id == key_id]:
                del self._items[presented]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


verified_keys = VerifiedKeys()


def principal_for_key_id(session: Session, key_id: str) -> Principal | None:
    """The principal of a usable key found by its id (a signed dashboard session)."""
    key = session.get(ApiKey, key_id)
    if key is None or not usable_key(key, utcnow()):
        return None
    return Principal(key.tenant_id, key.id, implied_scopes(key.scopes), via="session")


# -- tenants -------------------------------------------------------------------------

def _valid_name(name: str) -> str:
    name = name.strip()
    if not 1 <= len(name) <= 64 or not all(c.isalnum() or c in "-_." for c in name):
        raise Invalid("tenant name: 1 to 64 letters, digits, '-', '_' or '.'",
                      field="name")
    return name


def create_tenant(session: Session, name: str, **limits: int | None) -> Tenant:
    name = _valid_name(name)
    if session.scalar(select(Tenant.id).where(Tenant.name == name)) is not None:
        raise Conflict(f"tenant {name!r} already exists")
    tenant = Tenant(id=new_id(), name=name, created_at=utcnow(), **limits)
    session.add(tenant)
    session.flush()
    return tenant


def tenant_by_name(session: Session, name: str) -> Tenant | None:
    return session.scalar(select(Tenant).where(Tenant.name == name))


def get_tenant(session: Session, tenant_id: str) -> Tenant:
    tenant = session.get(Tenant, tenant_id)
    if tenant is None:
        raise not_found("tenant", tenant_id)
    return tenant


def list_tenants(session: Session) -> list[Tenant]:
    return list(session.scalars(select(Tenant).order_by(Tenant.created_at, Tenant.name)))


def update_limits(session: Session, tenant_id: str, **limits: int | None) -> Tenant:
    tenant = get_tenant(session, tenant_id)
    for name, value in limits.items():
        setattr(tenant, name, value)
    session.flush()
    return tenant


# -- keys ----------------------------------------------------------------------------

def create_key(session: Session, secret_key: bytes, tenant_id: str, scopes: list[str],
               *, name: str = "", expires_in: timedelta | None = None) -> tuple[ApiKey, str]:
    """A new key for the tenant: its row and the full key (shown once, never stored)."""
    unknown = sorted(set(scopes) - set(SCOPES))
    if unknown or not scopes:
        raise Invalid(f"scopes: choose from {', '.join(SCOPES)}",
                      {"unknown": unknown}, field="scopes")
    get_tenant(session, tenant_id)
    key_id = secrets.token_hex(KEY_ID_HEX // 2)
    secret = secrets.token_urlsafe(32)
    now = utcnow()
    key = ApiKey(id=key_id, tenant_id=tenant_id, name=name[:64], scopes=sorted(set(scopes)),
                 key_hash=key_hash(secret_key, key_id, secret), created_at=now,
                 expires_at=now + expires_in if expires_in is not None else None)
    session.add(key)
    session.flush()
    return key, f"{KEY_PREFIX}{key_id}_{secret}"


def list_keys(session: Session, tenant_id: str | None = None) -> list[ApiKey]:
    query = select(ApiKey).order_by(ApiKey.created_at)
    if tenant_id is not None:
        query = query.where(ApiKey.tenant_id == tenant_id)
    return list(session.scalars(query))


def get_key(session: Session, key_id: str) -> ApiKey:
    key = session.get(ApiKey, key_id)
    if key is None:
        raise not_found("key", key_id)
    return key


def revoke_key(session: Session, key_id: str) -> ApiKey:
    key = get_key(session, key_id)
    if key.revoked_at is None:
        key.revoked_at = utcnow()
        session.flush()
    after_commit(session, lambda: verified_keys.forget(key_id))
    return key


def count_keys(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(ApiKey)) or 0


def bootstrap_admin_key(session: Session, secret_key: bytes) -> str | None:
    """On a database without any key: an admin key for tenant "default" (created if
    missing), returned once; None when keys exist already."""
    if count_keys(session):
        return None
    tenant = tenant_by_name(session, DEFAULT_TENANT) or create_tenant(session,
                                                                      DEFAULT_TENANT)
    _key, full = create_key(session, secret_key, tenant.id, ["admin"], name="bootstrap")
    return full
