"""Resumable uploads (/v1/uploads): a session per file, its bytes staged in parts on the
API host's disk (app.infra.staging), then parsed into a dataset through the same
streaming path as POST /v1/datasets (app.api.routes.uploads).

Every resource is bounded before a byte is staged:
- a session declares its `size`: over HINGE_MAX_UPLOAD_BYTES, or more than the tenant's
  stored bytes can hold beside its datasets and its other open sessions (the arrays take
  about as many bytes as the text), it is a 413 (`check_quota`, the tenant's row
  locked); a tenant has at most HINGE_TENANT_MAX_OPEN_UPLOADS open sessions (429);
- the staging disk must keep HINGE_DISK_RESERVE_BYTES free beside what every open
  session on it may still bring (507), and again beside each part;
- a part carries at most HINGE_UPLOAD_MAX_PART_BYTES (app.api.body_limit) and never
  goes past the declared size (413).

The ordering rule that makes a retried part harmless: a part says where it starts
(`Upload-Offset`), and it is taken only there, the session's offset; a part whose bytes
already arrived (its answer was lost) has an offset behind and is a 409 with the current
offset, written nowhere. A session with no part for HINGE_UPLOAD_EXPIRE_HOURS is swept
(`sweep_uploads`) with its staged bytes, and a staged file whose session is gone too.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from app.domain.errors import OverLimit, TooLarge, no_space
from app.domain.orm import Upload, new_id, utcnow
from app.domain.services.datasets import check_quota
from app.domain.services.limits import lock_tenant
from app.domain.services.owned import get_owned
from app.domain.upload_schemas import UploadCreate
from app.infra.db import after_commit, read_sessionmaker_for, session_scope
from app.infra.staging import (
    check_room,
    remove_staged,
    settled_size,
    staged_ids_older_than,
    staged_size,
)
from app.settings import Settings

OPEN, COMPLETED = "open", "completed"


def public(settings: Settings, row: Upload, offset: int | None = None) -> dict[str, Any]:
    """The answer's fields (UploadPublic): `offset`, the bytes staged, as given (a part's
    request holds the file) or read once no part is being written."""
    if row.status != OPEN:
        offset = row.size
    elif offset is None:
        offset = settled_size(settings.home, row.id)
    return {"id": row.id, "status": row.status, "name": row.name, "size": row.size,
            "offset": offset, "bytes_received": row.bytes_received, "parts": row.parts,
            "max_part_bytes": settings.upload_max_part_bytes, "options": row.options,
            "dataset_id": row.dataset_id, "created_at": row.created_at,
            "expires_at": row.expires_at}


def create_upload(session: Session, settings: Settings, tenant_id: str, spec: UploadCreate
                  ) -> Upload:
    """An open session (the caller commits); 413, 429 or 507 as the module doc says."""
    if spec.size > settings.max_upload_bytes:
        raise TooLarge(f"an upload of {spec.size} bytes exceeds the limit of "
                       f"{settings.max_upload_bytes} bytes (HINGE_MAX_UPLOAD_BYTES)",
                       {"limit": settings.max_upload_bytes})
    tenant = lock_tenant(session, tenant_id)
    count, declared = session.execute(
        select(func.count(), func.coalesce(func.sum(Upload.size), 0))
        .where(Upload.tenant_id == tenant_id, Upload.status == OPEN)).one()
    limit = settings.tenant_max_open_uploads
    if count >= limit:
        raise OverLimit(f"the tenant has {count} open uploads, its limit "
                        "(HINGE_TENANT_MAX_OPEN_UPLOADS); complete or delete one first",
                        {"limit": limit})
    try:
        check_quota(session, settings, tenant, int(declared) + spec.size, 1 + count)
    except TooLarge as exc:
        raise TooLarge(f"the upload declares {spec.size} bytes (with {count} other open "
                       f"upload(s) of {declared} bytes); {exc.message}",
                       {**(exc.detail or {}), "size": spec.size}) from None
    pending = _pending_bytes(session, settings)
    try:
        check_room(settings.home, pending + spec.size, settings.disk_reserve_bytes)
    except OSError as exc:
        raise no_space(exc) from None
    now = utcnow()
    row = Upload(id=new_id(), tenant_id=tenant_id, name=spec.name, options=spec.options(),
                 size=spec.size, staged=0, bytes_received=0, parts=0, status=OPEN,
                 created_at=now, expires_at=_expiry(settings))
    session.add(row)
    session.flush()
    return row


def _pending_bytes(session: Session, settings: Settings) -> int:
    """What the open sessions (every tenant's) may still stage on this disk."""
    rows = session.execute(select(Upload.id, Upload.size).where(Upload.status == OPEN))
    return sum(max(0, size - staged_size(settings.home, uid)) for uid, size in rows)


def _expiry(settings: Settings) -> Any:
    return utcnow() + timedelta(hours=settings.upload_expire_hours)


def get_upload(session: Session, tenant_id: str, upload_id: str) -> Upload:
    return get_owned(session, Upload, "upload", tenant_id, upload_id)


def find_upload(settings: Settings, tenant_id: str, upload_id: str) -> Upload:
    """The tenant's session, read in a session of its own (404 if none)."""
    with read_sessionmaker_for(settings.database_url)() as session:
        row = get_upload(session, tenant_id, upload_id)
        session.expunge(row)
        return row


def record_part(settings: Settings, upload_id: str, staged: int, received: int,
                acknowledged: bool) -> Upload | None:
    """After a part (the staged file still locked): the offset, the bytes that came and,
    when the part was taken whole, one more part acknowledged and a later expiry. None
    when the session is gone (deleted meanwhile)."""
    with session_scope(settings.database_url) as session:
        values: dict[str, Any] = {"staged": staged,
                                  "bytes_received": Upload.bytes_received + received}
        if acknowledged:
            values.update(parts=Upload.parts + 1, expires_at=_expiry(settings))
        session.execute(update(Upload).where(Upload.id == upload_id, Upload.status == OPEN)
                        .values(**values))
        row = session.get(Upload, upload_id)
        if row is not None:
            session.expunge(row)
        return row


def mark_completed(session: Session, upload_id: str, dataset_id: str) -> None:
    """In the dataset's transaction: the session is completed into `dataset_id`."""
    session.execute(update(Upload).where(Upload.id == upload_id, Upload.status == OPEN)
                    .values(status=COMPLETED, dataset_id=dataset_id))


def delete_upload(session: Session, settings: Settings, tenant_id: str, upload_id: str
                  ) -> None:
    """Abort an open session (its staged bytes go once the delete commits) or forget a
    completed one (its dataset stays)."""
    row = get_upload(session, tenant_id, upload_id)
    session.delete(row)
    session.flush()
    after_commit(session, lambda: remove_staged(settings.home, upload_id))


def sweep_uploads(settings: Settings) -> int:
    """Remove the sessions past their expiry and their staged bytes, and staged files
    with no session older than HINGE_ORPHAN_BLOB_GRACE_SECONDS; how many."""
    with session_scope(settings.database_url) as session:
        expired = list(session.scalars(select(Upload.id).where(Upload.expires_at < utcnow())))
        if expired:
            session.execute(delete(Upload).where(Upload.id.in_(expired)))
    removed = set(expired)
    stale = staged_ids_older_than(settings.home, settings.orphan_blob_grace_seconds)
    if stale:
        with read_sessionmaker_for(settings.database_url)() as session:
            known = set(session.scalars(select(Upload.id).where(Upload.id.in_(stale))))
        removed |= {uid for uid in stale if uid not in known}
    for upload_id in removed:
        remove_staged(settings.home, upload_id)
    return len(removed)
