"""Keys, limits and the edges of the service: the admin CLI and routes, revocation and
expiry, keys stored only as keyed hashes, tenant limits, the request rate (in-process and
in Redis), Host and Origin checks, security headers, CORS, /docs from local assets, and
the clean-up of what a crash leaves in blob storage."""

from __future__ import annotations

import os
import socket
import time
from datetime import timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from app.admin import run as admin
from app.api.main import create_app
from app.domain.orm import ApiKey
from app.domain.services import tenants
from app.domain.sweep import sweep_storage
from app.infra.db import session_scope
from app.infra.storage import PARTIAL
from app.settings import Settings
from tests.support import (
    bearer,
    downgrade,
    embedded_settings,
    make_key,
    migrate,
    require_redis,
)


def _app(tmp_path: Path, **overrides: object) -> tuple[Settings, TestClient]:
    settings = embedded_settings(tmp_path / "home", **overrides)  # type: ignore[arg-type]
    settings.ensure_dirs()
    migrate(settings.database_url)
    return settings, TestClient(create_app(settings))


def test_cli_creates_lists_and_revokes_keys(client: TestClient, settings: Settings) -> None:
    key = admin(["keys", "create", "--tenant", "acme", "--scopes", "read,train",
                 "--name", "ci"], settings)
    assert key.startswith("hk_")
    assert client.get("/v1/datasets", headers=bearer(key)).status_code == 200
    assert client.get("/v1/admin/keys", headers=bearer(key)).status_code == 403
    listing = admin(["keys", "list", "--tenant", "acme"], settings)
    assert key[3:15] in listing and "scopes=read,train" in listing and key not in listing
    assert admin(["keys", "revoke", key[3:15]], settings) == f"revoked {key[3:15]}"
    assert client.get("/v1/datasets", headers=bearer(key)).status_code == 401
    assert "acme" in admin(["tenants", "list"], settings)


def test_admin_routes_issue_keys_that_work_at_once_and_stop_when_revoked(
    client: TestClient,
) -> None:
    tenant = client.post("/v1/admin/tenants", json={"name": "beta", "max_datasets": 3})
    assert tenant.status_code == 201 and tenant.json()["max_datasets"] == 3
    assert client.post("/v1/admin/tenants", json={"name": "beta"}).status_code == 409
    made = client.post("/v1/admin/keys", json={"tenant_id": tenant.json()["id"],
                                                "scopes": ["read"]})
    assert made.status_code == 201, made.text
    key = made.json()["key"]
    assert client.get("/v1/jobs", headers=bearer(key)).status_code == 200
    assert client.get("/v1/admin/keys").json()["count"] == 2
    assert all("key" not in k and "key_hash" not in k
               for k in client.get("/v1/admin/keys").json()["data"])
    revoked = client.post(f"/v1/admin/keys/{made.json()['id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["revoked_at"]
    response = client.get("/v1/jobs", headers=bearer(key))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


def test_keys_are_stored_as_keyed_hashes_and_expire(client: TestClient, settings: Settings
                                                    ) -> None:
    key = make_key(settings, "gamma", ("read",))
    key_id, secret = key[3:15], key[16:]
    with session_scope(settings.database_url) as session:
        row = session.get(ApiKey, key_id)
        assert row is not None and secret not in row.key_hash and len(row.key_hash) == 64
        assert row.key_hash == tenants.key_hash(settings.hmac_key(), key_id, secret)
        owner = tenants.tenant_by_name(session, "gamma")
        assert owner is not None
        _row, expired = tenants.create_key(session, settings.hmac_key(), owner.id, ["read"],
                                           expires_in=timedelta(seconds=-1))
    assert client.get("/v1/jobs", headers=bearer(expired)).status_code == 401
    tampered = key[:-1] + ("A" if key[-1] != "A" else "B")
    assert client.get("/v1/jobs", headers=bearer(tampered)).status_code == 401
    assert client.get("/v1/jobs", headers={"Authorization": f"Basic {key}"}).status_code == 401
    with session_scope(settings.database_url) as session:  # the bootstrap runs only once
        assert tenants.bootstrap_admin_key(session, settings.hmac_key()) is None


def test_tenant_limits_on_datasets_stored_bytes_and_queued_jobs(
    tmp_path: Path, cancer_bytes: bytes
) -> None:
    settings, app = _app(tmp_path, tenant_max_datasets=2, tenant_max_queued_jobs=1,
                         rate_per_second=0, max_job_seconds=100)
    with app as client:
        small = bearer(make_key(settings, "small"))
        other = bearer(make_key(settings, "other"))
        first = client.post("/v1/datasets", content=cancer_bytes, headers=small).json()["id"]
        assert client.post("/v1/datasets", content=cancer_bytes, headers=small
                           ).status_code == 201
        third = client.post("/v1/datasets", content=cancer_bytes, headers=small)
        assert third.status_code == 413 and "DATASETS" in third.json()["error"]["message"]
        assert client.post("/v1/datasets", content=cancer_bytes, headers=other
                           ).status_code == 201
        job = client.post("/v1/jobs", json={"dataset_id": first}, headers=small)
        assert job.status_code == 202
        queued = client.post("/v1/jobs", json={"dataset_id": first}, headers=small)
        assert queued.status_code == 429 and queued.headers["retry-after"]
        capped = client.post("/v1/jobs", json={"dataset_id": first,
                                               "params": {"max_seconds": 1000}}, headers=other)
        assert capped.status_code == 422 and "MAX_JOB_SECONDS" in capped.text
        tenant_id = client.get("/v1/admin/tenants", headers=small).json()["data"]
        small_id = next(t["id"] for t in tenant_id if t["name"] == "small")
        limits = client.put(f"/v1/admin/tenants/{small_id}/limits", headers=small,
                            json={"max_stored_bytes": 1000})
        assert limits.status_code == 200
        client.post(f"/v1/jobs/{job.json()['id']}/cancel", headers=small)
        assert client.delete(f"/v1/datasets/{first}", headers=small).status_code == 204
        over = client.post("/v1/datasets", content=cancer_bytes, headers=small)
        assert over.status_code == 413 and "stored bytes" in over.json()["error"]["message"]
    assert len(list(settings.datasets_dir.glob("*.npz"))) == 2  # nothing left behind


@pytest.mark.parametrize("where", ["process", pytest.param("redis", marks=pytest.mark.redis)])
def test_the_request_rate_is_a_token_bucket_per_tenant(tmp_path: Path, where: str) -> None:
    overrides: dict[str, object] = {"rate_per_second": 0.5, "rate_burst": 3}
    if where == "redis":
        overrides["broker_url"] = require_redis()
    settings, app = _app(tmp_path, **overrides)
    with app as client:
        fast, calm = bearer(make_key(settings, "fast")), bearer(make_key(settings, "calm"))
        statuses = [client.get("/v1/jobs", headers=fast).status_code for _ in range(4)]
        assert statuses == [200, 200, 200, 429]
        refused = client.get("/v1/jobs", headers=fast)
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1
        assert client.get("/v1/jobs", headers=calm).status_code == 200  # its own bucket
        assert client.get("/healthz").status_code == 200  # no key, no bucket


def test_host_origin_nul_and_security_headers(client: TestClient, cancer_bytes: bytes) -> None:
    assert client.get("/healthz", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/healthz", headers={"host": "127.0.0.1:8000"}).status_code == 200
    evil = client.post("/v1/datasets", files={"file": ("x", cancer_bytes)},
                       headers={"origin": "http://evil.example"})
    assert evil.status_code == 403
    same = client.post("/v1/datasets", content=cancer_bytes,
                       headers={"origin": "http://testserver"})
    assert same.status_code == 201
    assert client.get("/v1/datasets").json()["count"] == 1
    response = client.get("/v1/jobs")
    for name, value in {"x-content-type-options": "nosniff", "referrer-policy": "no-referrer",
                        "x-frame-options": "DENY", "cache-control": "no-store"}.items():
        assert response.headers[name] == value, name
    assert "default-src 'none'" in response.headers["content-security-policy"]
    assert client.get("/v1/jobs/x%00y").status_code == 422
    preflight = client.options("/v1/jobs", headers={
        "origin": "http://evil.example", "access-control-request-method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers


def test_cors_allows_only_the_configured_origins(tmp_path: Path) -> None:
    settings, app = _app(tmp_path, cors_origins=["https://app.example"])
    with app as client:
        key = bearer(make_key(settings))
        allowed = client.get("/v1/jobs", headers={**key, "origin": "https://app.example"})
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        other = client.get("/v1/jobs", headers={**key, "origin": "https://other.example"})
        assert "access-control-allow-origin" not in other.headers


def test_docs_come_from_local_assets(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    assert "/docs/assets/swagger-ui-bundle.js" in page.text
    assert "http" not in page.text.replace("http-equiv", "")  # nothing from elsewhere
    asset = client.get("/docs/assets/swagger-ui-bundle.js")
    assert asset.status_code == 200 and len(asset.content) > 100_000
    assert client.get("/static/js/swagger-init.js").status_code == 200


def test_crash_leftovers_in_blob_storage_are_cleaned(tmp_path: Path, cancer_bytes: bytes
                                                     ) -> None:
    settings = embedded_settings(tmp_path / "home", orphan_blob_grace_seconds=60)
    settings.ensure_dirs()
    migrate(settings.database_url)
    directory = settings.datasets_dir
    host = socket.gethostname()
    dead = directory / f".{'a' * 32}.{host}.999999999{PARTIAL}"  # no such pid
    alive = directory / f".{'b' * 32}.{host}.{os.getpid()}{PARTIAL}"
    for path in (dead, alive):
        path.write_bytes(b"half a blob")
    # start-up removes the dead process's temporary file
    with TestClient(create_app(settings)) as client:
        assert not dead.exists() and alive.exists()
        kept = client.post("/v1/datasets", content=cancer_bytes,
                           headers=bearer(make_key(settings))).json()["id"]
    orphan = directory / f"{'c' * 32}.npz"  # a blob whose row was never committed
    orphan.write_bytes(b"npz")
    assert sweep_storage(settings) == []  # too young: an upload may still commit it
    old = time.time() - 120
    for path in directory.iterdir():
        os.utime(path, (old, old))
    assert sorted(sweep_storage(settings)) == sorted([alive.name, orphan.name])
    assert [p.name for p in directory.iterdir()] == [f"{kept}.npz"]


def test_existing_rows_go_to_the_default_tenant_on_upgrade(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite'}"
    migrate(url, "0002")
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.execute(sa.text(
            "INSERT INTO datasets (id, name, rows, features, nnz, labels, class_counts, "
            "sha256, size_bytes, blob_path, created_at) VALUES ('d1', 'old', 1, 1, 1, '[1]', "
            "'{}', 'x', 1, '/x', CURRENT_TIMESTAMP)"))
    migrate(url)
    with engine.connect() as connection:
        owner = connection.execute(sa.text(
            "SELECT t.name FROM datasets d JOIN tenants t ON t.id = d.tenant_id")).scalar()
    engine.dispose()
    assert owner == "default"
    downgrade(url, "0002")


def test_a_job_over_its_tenants_running_limit_waits_in_the_queue(
    tmp_path: Path, cancer_bytes: bytes
) -> None:
    from app.infra.queue import broker_holding
    from workers.runner import DEFER_SECONDS
    from workers.training import claim, run_job

    settings, app = _app(tmp_path, tenant_max_running_jobs=1, rate_per_second=0)
    with app as client:
        key = bearer(make_key(settings))
        dataset = client.post("/v1/datasets", content=cancer_bytes, headers=key).json()["id"]
        first, second = (client.post("/v1/jobs", json={"dataset_id": dataset}, headers=key
                                     ).json()["id"] for _ in range(2))
        assert claim(settings, first, "worker-1") is not None  # running now
        messages = broker_holding(settings.broker_url, settings.queue).ready
        started = time.monotonic()
        assert run_job(settings, second, "worker-2") == "deferred"
        # no worker waits for the tenant: the job goes round again with a countdown
        assert time.monotonic() - started < DEFER_SECONDS
        assert broker_holding(settings.broker_url, settings.queue).ready == messages + 1
        assert client.get(f"/v1/jobs/{second}", headers=key).json()["status"] == "queued"
