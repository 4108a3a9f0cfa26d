"""Datasets: store an uploaded (parsed) dataset, list, show, delete; each query within
one tenant (another tenant's id is a 404, the same answer as a missing one).

The arrays live in blob storage, the metadata in the database. A stored file whose row is
never committed is removed again; a deleted row's file is removed once the delete commits.
The tenant's limits on datasets and stored bytes are checked with the tenant's row locked
(`lock_tenant`), so concurrent uploads cannot both squeeze under them.
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.domain.errors import Conflict, TooLarge, not_found
from app.domain.job_status import ACTIVE_STATUSES
from app.domain.orm import Dataset, Job, Tenant, new_id
from app.domain.services.limits import lock_dataset, lock_tenant, tenant_limit
from app.domain.tasks import dataset_task, label_summary
from app.domain.weights import weight_stats
from app.infra.db import after_commit, after_rollback, read_sessionmaker_for
from app.infra.storage import BlobRef, blob_store, save_dataset_arrays
from app.settings import Settings
from solvers.svmlight import ParsedDataset


def stored_size(parsed: ParsedDataset) -> int:
    """Bytes of the dataset's arrays as stored (the .npz adds a few hundred bytes)."""
    return int(parsed.data.nbytes + parsed.indices.nbytes + parsed.indptr.nbytes
               + parsed.y.nbytes)


def check_quota(session: Session, settings: Settings, tenant: Tenant, adding: int,
                datasets: int = 1) -> None:
    """413 unless the tenant (its row locked: lock_tenant) may store `datasets` more
    datasets of `adding` bytes in all."""
    max_datasets = tenant_limit(tenant, settings, "max_datasets")
    max_bytes = tenant_limit(tenant, settings, "max_stored_bytes")
    count, stored = session.execute(
        select(func.count(), func.coalesce(func.sum(Dataset.stored_bytes), 0))
        .where(Dataset.tenant_id == tenant.id)).one()
    if count + datasets > max_datasets:
        more = "one more" if datasets == 1 else f"{datasets} more"
        raise TooLarge(f"the tenant has {count} datasets; {more} would exceed its limit "
                       f"of {max_datasets} (HINGE_TENANT_MAX_DATASETS or the tenant's "
                       "own); delete some first", {"limit": max_datasets})
    if stored + adding > max_bytes:
        raise TooLarge(f"storing {adding} more bytes would exceed the tenant's limit of "
                       f"{max_bytes} stored bytes ({stored} used; "
                       "HINGE_TENANT_MAX_STORED_BYTES or the tenant's own)",
                       {"limit": max_bytes, "used": int(stored), "adding": adding})


def remaining_stored_bytes(settings: Settings, tenant_id: str) -> int:
    """What the tenant may still store (a bound for parsing its next upload; the commit
    checks again, under the tenant's lock)."""
    with read_sessionmaker_for(settings.database_url)() as session:
        tenant = session.get(Tenant, tenant_id)
        if tenant is None:
            return 0
        stored = session.scalar(select(func.coalesce(func.sum(Dataset.stored_bytes), 0))
                                .where(Dataset.tenant_id == tenant_id)) or 0
        return max(0, tenant_limit(tenant, settings, "max_stored_bytes") - int(stored))


def same_content(settings: Settings, tenant_id: str, sha256: str) -> list[Dataset]:
    """The tenant's datasets with this content (sha256 of the decompressed text), oldest
    first (in a read session of its own: an upload takes no write lock before its blob is
    written)."""
    with read_sessionmaker_for(settings.database_url)() as session:
        return list(session.scalars(
            select(Dataset).where(Dataset.tenant_id == tenant_id, Dataset.sha256 == sha256)
            .order_by(Dataset.created_at, Dataset.id)))


def create_dataset(session: Session, settings: Settings, tenant_id: str,
                   parsed: ParsedDataset, name: str, task: str = "auto",
                   weights: np.ndarray | None = None) -> Dataset:
    """Store the arrays as a blob and add the dataset's row (blocking: run it in a thread);
    413 over the tenant's limits. `task`: the upload's (app.domain.tasks: auto reads the
    labels); `weights`: the rows' instance weights (app.domain.weights), stored as `w`.

    The blob is written before the transaction takes any lock (on SQLite a write
    transaction blocks every other writer); the limits are then checked under the tenant's
    lock and the row added; a refused or failed insert removes the blob again."""
    resolved = dataset_task(parsed.y, task, settings.max_classes)
    labels, class_counts, label_stats = label_summary(parsed.y, resolved)
    dataset_id = new_id()
    store = blob_store(settings)
    stored = save_dataset_arrays(
        store, dataset_id,
        {"data": parsed.data, "indices": parsed.indices, "indptr": parsed.indptr,
         "y": parsed.y, **({} if weights is None else {"w": weights})},
    )
    after_rollback(session, lambda: store.delete(stored.ref.key))
    try:
        check_quota(session, settings, lock_tenant(session, tenant_id),
                    stored_size(parsed) + (0 if weights is None else weights.nbytes))
    except BaseException:
        store.delete(stored.ref.key)
        raise
    dataset = Dataset(
        id=dataset_id,
        tenant_id=tenant_id,
        name=name[:255],
        rows=len(parsed.y),
        features=int(parsed.n_features),
        nnz=len(parsed.data),
        labels=labels, class_counts=class_counts, task=resolved, label_stats=label_stats,
        weight_stats=None if weights is None else weight_stats(weights),
        sha256=parsed.sha256,
        size_bytes=int(parsed.bytes_read),
        blob_path=str(stored.ref),
        stored_bytes=stored.size,
        source_format=parsed.source_format,
        feature_names=parsed.feature_names,
    )
    try:
        session.add(dataset)
        session.flush()
    except BaseException:
        store.delete(stored.ref.key)
        raise
    return dataset


def list_datasets(session: Session, tenant_id: str, *, limit: int = 100, offset: int = 0
                  ) -> list[Dataset]:
    """Newest first."""
    return list(session.scalars(
        select(Dataset).where(Dataset.tenant_id == tenant_id)
        .order_by(Dataset.created_at.desc()).limit(limit).offset(offset)))


def count_datasets(session: Session, tenant_id: str) -> int:
    return session.scalar(select(func.count()).select_from(Dataset)
                          .where(Dataset.tenant_id == tenant_id)) or 0


def find_dataset(session: Session, tenant_id: str, dataset_id: str | None) -> Dataset | None:
    if not dataset_id:
        return None
    return session.scalar(select(Dataset).where(Dataset.id == dataset_id,
                                                Dataset.tenant_id == tenant_id))


def get_dataset(session: Session, tenant_id: str, dataset_id: str) -> Dataset:
    dataset = find_dataset(session, tenant_id, dataset_id)
    if dataset is None:
        raise not_found("dataset", dataset_id)
    return dataset


def dataset_names(session: Session, tenant_id: str, ids: set[str | None]) -> dict[str, str]:
    """Names of the given datasets that still exist, by id."""
    wanted = {i for i in ids if i}
    if not wanted:
        return {}
    rows = session.execute(select(Dataset.id, Dataset.name).where(
        Dataset.id.in_(wanted), Dataset.tenant_id == tenant_id))
    return {row.id: row.name for row in rows}


def delete_dataset(session: Session, settings: Settings, tenant_id: str, dataset_id: str
                   ) -> None:
    """Delete a dataset no queued or running job needs (409 otherwise); its jobs keep
    their rows with `dataset_id` null; its file goes once the delete commits.

    The dataset's row is locked first (FOR UPDATE on PostgreSQL; SQLite's write lock), as
    job submission locks it: a job is either committed before the count below sees it
    (409), or its submission finds the dataset gone (422), never a foreign-key error."""
    dataset = lock_dataset(session, tenant_id, dataset_id)
    if dataset is None:
        raise not_found("dataset", dataset_id)
    active = session.scalar(
        select(func.count()).select_from(Job).where(
            Job.dataset_id == dataset_id, Job.status.in_(ACTIVE_STATUSES))
    )
    if active:
        raise Conflict(f"dataset {dataset_id!r} has {active} queued or running job(s); "
                       "cancel them or wait for them to finish first")
    keys = {BlobRef.parse(dataset.blob_path).key,
            *(BlobRef.parse(s["blob_path"]).key for s in dataset.shards or [])}
    store = blob_store(settings)
    session.delete(dataset)
    session.flush()

    def remove() -> None:
        for key in sorted(keys):
            store.delete(key)

    after_commit(session, remove)
