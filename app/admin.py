"""Tenants and API keys from a shell:

    python -m app.admin tenants create acme [--max-stored-bytes N] [--max-datasets N] ...
    python -m app.admin tenants list
    python -m app.admin keys create --tenant acme --scopes read,train [--name ci]
                                    [--expires-in-days 90]
    python -m app.admin keys list [--tenant acme]
    python -m app.admin keys revoke <key id>

It uses the same settings (HINGE_*) and database as the API; a new key is printed once.
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

from app.domain.errors import DomainError, NotFound
from app.domain.services import tenants
from app.infra.bus import announce
from app.infra.db import after_commit, session_scope
from app.settings import Settings

LIMITS = ("max_stored_bytes", "max_datasets", "max_running_jobs", "max_queued_jobs")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app.admin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    kinds = parser.add_subparsers(dest="kind", required=True)
    tenant = kinds.add_parser("tenants").add_subparsers(dest="action", required=True)
    create = tenant.add_parser("create")
    create.add_argument("name")
    for limit in LIMITS:
        create.add_argument(f"--{limit.replace('_', '-')}", type=int, default=None)
    tenant.add_parser("list")
    keys = kinds.add_parser("keys").add_subparsers(dest="action", required=True)
    key = keys.add_parser("create")
    key.add_argument("--tenant", required=True, help="tenant name (created if missing)")
    key.add_argument("--scopes", required=True, help="comma-separated: read,train,admin")
    key.add_argument("--name", default="")
    key.add_argument("--expires-in-days", type=float, default=None)
    listing = keys.add_parser("list")
    listing.add_argument("--tenant", default=None)
    revoke = keys.add_parser("revoke")
    revoke.add_argument("key_id")
    return parser


def run(argv: list[str], settings: Settings) -> str:
    args = _parser().parse_args(argv)
    with session_scope(settings.database_url) as session:
        if args.kind == "tenants" and args.action == "create":
            made = tenants.create_tenant(session, args.name,
                                         **{k: getattr(args, k) for k in LIMITS})
            return f"tenant {made.name} {made.id}"
        if args.kind == "tenants":
            return "\n".join(f"{t.id}  {t.name}" for t in tenants.list_tenants(session))
        if args.action == "create":
            owner = (tenants.tenant_by_name(session, args.tenant)
                     or tenants.create_tenant(session, args.tenant))
            expires = (timedelta(days=args.expires_in_days)
                       if args.expires_in_days is not None else None)
            scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
            _key, full = tenants.create_key(session, settings.hmac_key(), owner.id, scopes,
                                            name=args.name, expires_in=expires)
            return full
        if args.action == "list":
            owner_id = None
            if args.tenant is not None:
                found = tenants.tenant_by_name(session, args.tenant)
                if found is None:
                    raise NotFound("tenant", args.tenant, f"no tenant {args.tenant!r}")
                owner_id = found.id
            return "\n".join(
                f"{k.id}  tenant={k.tenant_id}  scopes={','.join(k.scopes)}  "
                f"name={k.name or '-'}  expires={k.expires_at or '-'}  "
                f"revoked={k.revoked_at or '-'}"
                for k in tenants.list_keys(session, owner_id))
        revoked = tenants.revoke_key(session, args.key_id)
        after_commit(session, lambda: announce(settings, "key", args.key_id))
        return f"revoked {revoked.id}"


def main(argv: list[str] | None = None) -> int:
    settings = Settings()
    settings.ensure_dirs()
    try:
        print(run(sys.argv[1:] if argv is None else argv, settings))
    except DomainError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
