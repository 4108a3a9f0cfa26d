"""Limits that must hold under concurrency, on PostgreSQL and SQLite alike.

A check-then-insert is atomic only if two requests cannot both check before either
inserts. On SQLite every write session begins with BEGIN IMMEDIATE, so writers are already
serialised. On PostgreSQL (READ COMMITTED) the row that a limit is about is locked first:
`SELECT ... FOR UPDATE` on the tenant (per-tenant limits) or on the dataset (a job against
a dataset being deleted), and a transaction-scoped advisory lock for the global queue cap.
Each lock is held until the transaction ends, and each count runs after it is taken, so it
sees every row committed by whoever held it before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, func, select, text
from sqlalchemy.orm import Session, aliased

from app.domain.errors import OverLimit, not_found
from app.domain.job_status import ACTIVE_STATUSES, JobStatus
from app.domain.orm import Dataset, Tenant
from app.settings import Settings

# pg_advisory_xact_lock(SUBMIT_LOCK, hashtext(current_schema())): advisory locks belong
# to the whole database, so the key includes the schema, or two deployments in one
# database (the test suite's schemas, a soak beside them) would queue on each other.
SUBMIT_LOCK = 0x68696E67  # "hing"


def tenant_limit(tenant: Tenant, settings: Settings, name: str) -> int:
    """The tenant's own limit `name` if set, else the setting `tenant_<name>`."""
    own = getattr(tenant, name)
    return int(own) if own is not None else int(getattr(settings, f"tenant_{name}"))


def check_tenant_active(session: Session, settings: Settings, tenant_id: str, table: Any,
                        noun: str) -> Tenant:
    """429 when the tenant has as many active (queued or running) rows of `table` as its
    queue limit (`max_queued_jobs`: HINGE_TENANT_MAX_QUEUED_JOBS or its own); `noun` says
    what they are ("active searches"). The tenant's row, locked first (run under it)."""
    tenant = lock_tenant(session, tenant_id)
    active = session.scalar(select(func.count()).select_from(table).where(
        table.tenant_id == tenant_id, table.status.in_(ACTIVE_STATUSES))) or 0
    limit = tenant_limit(tenant, settings, "max_queued_jobs")
    if active >= limit:
        raise OverLimit(f"the tenant has {active} {noun}, its limit "
                        "(HINGE_TENANT_MAX_QUEUED_JOBS or the tenant's own); try again "
                        "later", {"limit": limit}, retry_after=10)
    return tenant


def below_running_limit(table: Any) -> Callable[[Session, Settings, str], ColumnElement[bool]]:
    """A work kind's claim admission (app.domain.lifecycle.WorkKind.admission): the item's
    tenant runs fewer items of `table` than its `max_running_jobs`. The tenant's row is
    locked first, so two claims of one tenant's items count one after the other."""
    def admission(session: Session, settings: Settings, item_id: str) -> ColumnElement[bool]:
        tenant_id = session.scalar(select(table.tenant_id).where(table.id == item_id))
        tenant = lock_tenant(session, tenant_id or "")
        running = aliased(table)
        count = (select(func.count()).select_from(running)
                 .where(running.tenant_id == tenant.id, running.status == JobStatus.RUNNING)
                 .correlate(None).scalar_subquery())
        return count < tenant_limit(tenant, settings, "max_running_jobs")

    return admission


def _is_postgres(session: Session) -> bool:
    return session.get_bind().dialect.name == "postgresql"


def lock_tenant(session: Session, tenant_id: str) -> Tenant:
    """The tenant's row, locked until the transaction ends."""
    tenant = session.scalar(select(Tenant).where(Tenant.id == tenant_id)
                            .with_for_update().execution_options(populate_existing=True))
    if tenant is None:
        raise not_found("tenant", tenant_id)
    return tenant


def lock_dataset(session: Session, tenant_id: str, dataset_id: str) -> Dataset | None:
    """The tenant's dataset, locked until the transaction ends; None if it is not there
    (any more: a delete that held the lock has committed)."""
    return session.scalar(select(Dataset)
                          .where(Dataset.id == dataset_id, Dataset.tenant_id == tenant_id)
                          .with_for_update().execution_options(populate_existing=True))


def lock_submissions(session: Session) -> None:
    """Serialise job submissions (the global queue cap) until the transaction ends."""
    if _is_postgres(session):
        session.execute(text("SELECT pg_advisory_xact_lock(:key, hashtext(current_schema()))"),
                        {"key": SUBMIT_LOCK})
