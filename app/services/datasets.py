"""Datasets: store an uploaded (parsed) dataset, list, show, delete.

The arrays live in blob storage, the metadata in the database. A stored file whose row is
never committed is removed again; a deleted row's file is removed once the delete commits.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db import after_commit, after_rollback
from app.errors import ApiError, not_found
from app.job_status import ACTIVE_STATUSES
from app.orm import Dataset, Job, new_id
from app.settings import Settings
from app.storage import save_dataset_arrays
from solvers.params import label_key  # the keys of class_counts and class_weight
from solvers.svmlight import ParsedDataset


def create_dataset(session: Session, settings: Settings, parsed: ParsedDataset, name: str
                   ) -> Dataset:
    """Store the arrays as a blob and add the dataset's row (blocking: run it in a thread)."""
    labels, counts = np.unique(parsed.y, return_counts=True)
    dataset_id = new_id()
    path = save_dataset_arrays(
        settings.datasets_dir, dataset_id,
        {"data": parsed.data, "indices": parsed.indices, "indptr": parsed.indptr,
         "y": parsed.y},
    )
    after_rollback(session, lambda: Path(path).unlink(missing_ok=True))
    dataset = Dataset(
        id=dataset_id,
        name=name[:255],
        rows=len(parsed.y),
        features=int(parsed.n_features),
        nnz=len(parsed.data),
        labels=[float(v) for v in labels],
        class_counts={label_key(v): int(c) for v, c in zip(labels, counts, strict=True)},
        sha256=parsed.sha256,
        size_bytes=int(parsed.bytes_read),
        blob_path=str(path),
    )
    try:
        session.add(dataset)
        session.flush()
    except BaseException:
        Path(path).unlink(missing_ok=True)
        raise
    return dataset


def list_datasets(session: Session, *, limit: int = 100, offset: int = 0) -> list[Dataset]:
    """Newest first."""
    return list(session.scalars(
        select(Dataset).order_by(Dataset.created_at.desc()).limit(limit).offset(offset)))


def count_datasets(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Dataset)) or 0


def find_dataset(session: Session, dataset_id: str | None) -> Dataset | None:
    return session.get(Dataset, dataset_id) if dataset_id else None


def get_dataset(session: Session, dataset_id: str) -> Dataset:
    dataset = session.get(Dataset, dataset_id)
    if dataset is None:
        raise not_found("dataset", dataset_id)
    return dataset


def dataset_names(session: Session, ids: set[str | None]) -> dict[str, str]:
    """Names of the given datasets that still exist, by id."""
    wanted = {i for i in ids if i}
    if not wanted:
        return {}
    rows = session.execute(select(Dataset.id, Dataset.name).where(Dataset.id.in_(wanted)))
    return {row.id: row.name for row in rows}


def delete_dataset(session: Session, dataset_id: str) -> None:
    """Delete a dataset no queued or running job needs (409 otherwise); its jobs keep
    their rows with `dataset_id` null; its file goes once the delete commits."""
    dataset = get_dataset(session, dataset_id)
    active = session.scalar(
        select(func.count()).select_from(Job).where(
            Job.dataset_id == dataset_id, Job.status.in_(ACTIVE_STATUSES))
    )
    if active:
        raise ApiError(409, f"dataset {dataset_id!r} has {active} queued or running job(s); "
                            "cancel them or wait for them to finish first")
    blob = Path(dataset.blob_path)
    session.delete(dataset)
    session.flush()
    after_commit(session, lambda: blob.unlink(missing_ok=True))
