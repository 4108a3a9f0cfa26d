"""Splits: a stored dataset becomes two new ones, train and test (POST /v1/datasets/{id}/split).

The rows are shuffled by `numpy.random.default_rng(seed)`: with `stratify`, each class (in
sorted label order) is permuted on its own and its first `round(test_fraction * count)`
rows go to test, so every class keeps its share; without, `round(test_fraction * rows)`
rows of one permutation go to test. Both parts keep the parent's row order and feature
count, record the parent, the seed, the fraction and whether they were stratified; the same
seed always gives the same split. A part's `sha256` is that of its stored arrays (data,
indices, indptr, y, in that order), and its `size_bytes` the size of its blob.

Both parts belong to the parent's tenant and count against its limits (datasets, stored
bytes) like uploads.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from app.domain.errors import Invalid, not_found
from app.domain.orm import Dataset, new_id
from app.domain.schemas import SplitCreate
from app.domain.services.datasets import check_quota, get_dataset
from app.domain.services.limits import lock_dataset, lock_tenant
from app.domain.tasks import label_summary
from app.domain.weights import weight_stats
from app.infra.db import after_rollback
from app.infra.storage import (
    BlobRef,
    blob_store,
    csr_from_arrays,
    dataset_arrays,
    save_dataset_arrays,
)
from app.settings import Settings


def split_rows(y: np.ndarray, test_fraction: float, stratify: bool, seed: int) -> np.ndarray:
    """A boolean mask of the test rows (deterministic for a given seed)."""
    rng = np.random.default_rng(seed)
    test = np.zeros(y.shape[0], dtype=bool)
    groups = [np.flatnonzero(y == label) for label in np.unique(y)] if stratify else [
        np.arange(y.shape[0])]
    for rows in groups:
        n_test = round(test_fraction * rows.shape[0])
        test[rng.permutation(rows)[:n_test]] = True
    return test


def split_dataset(reader: Session, session: Session, settings: Settings, tenant_id: str,
                  dataset_id: str, spec: SplitCreate) -> tuple[Dataset, Dataset]:
    """Store the train and test parts of the tenant's dataset as two new datasets of the
    tenant (blocking); 404 for another tenant's dataset, as for a missing one; 413 when the
    two parts would exceed the tenant's limits (datasets, stored bytes), as for an upload.

    The parent is read with `reader`, and both blobs are written before the write session
    `session` takes a lock (on SQLite a write transaction blocks every other writer). Then,
    as create_dataset and job submission do, the tenant's row is locked and the limits
    checked, and the parent's row is locked: a parent deleted meanwhile is a 404, never a
    foreign-key error. A refused or failed insert removes both blobs."""
    parent = get_dataset(reader, tenant_id, dataset_id)
    try:
        arrays = dataset_arrays(blob_store(settings), parent.blob_path, parent.shards)
        X, y, w = csr_from_arrays(arrays, parent.features), arrays["y"], arrays.get("w")
    except FileNotFoundError:  # deleted since it was read
        raise not_found("dataset", dataset_id) from None
    # a regression dataset has no classes to stratify by
    test = split_rows(y, spec.test_fraction, spec.stratify and parent.task != "regression",
                      spec.seed)
    n_test = int(test.sum())
    if n_test == 0 or n_test == y.shape[0]:
        raise Invalid(f"test_fraction {spec.test_fraction} of {y.shape[0]} rows leaves "
                      f"{'no' if n_test == 0 else 'every'} row in the test part; both "
                      "parts need at least one row",
                      field="test_fraction")
    stored: list[_Part] = []
    try:
        for part, mask in (("train", ~test), ("test", test)):
            stored.append(_store_part(settings, part, X[mask], y[mask],
                                      None if w is None else w[mask]))
    except BaseException:
        _remove(settings, stored)
        raise
    after_rollback(session, lambda: _remove(settings, stored))
    try:
        check_quota(session, settings, lock_tenant(session, tenant_id),
                    sum(p.size for p in stored), datasets=2)
        if lock_dataset(session, tenant_id, dataset_id) is None:
            raise not_found("dataset", dataset_id)
        train, test_part = [_add_row(session, tenant_id, parent, p, spec) for p in stored]
        session.flush()
    except BaseException:
        _remove(settings, stored)
        raise
    return train, test_part


@dataclass(frozen=True)
class _Part:
    """One part's arrays, written to blob storage under a new dataset id."""

    dataset_id: str
    part: str  # train | test
    blob: BlobRef
    size: int
    sha256: str
    nnz: int
    y: np.ndarray
    w: np.ndarray | None  # the rows' instance weights, if the parent has them


def _remove(settings: Settings, stored: list[_Part]) -> None:
    store = blob_store(settings)
    for part in stored:
        store.delete(part.blob.key)


def _store_part(settings: Settings, part: str, X: sp.csr_matrix, y: np.ndarray,
                w: np.ndarray | None) -> _Part:
    arrays: dict[str, np.ndarray] = {
              "data": np.ascontiguousarray(X.data, dtype=np.float64),
              "indices": np.ascontiguousarray(X.indices, dtype=np.int32),
              "indptr": np.ascontiguousarray(X.indptr, dtype=np.int64),
              "y": np.ascontiguousarray(y, dtype=np.float64)}
    if w is not None:
        arrays["w"] = np.ascontiguousarray(w, dtype=np.float64)
    digest = hashlib.sha256()
    for name in ("data", "indices", "indptr", "y", *(("w",) if w is not None else ())):
        digest.update(arrays[name].tobytes())
    dataset_id = new_id()
    blob = save_dataset_arrays(blob_store(settings), dataset_id, arrays)
    return _Part(dataset_id, part, blob.ref, blob.size, digest.hexdigest(), int(X.nnz), y, w)


def _add_row(session: Session, tenant_id: str, parent: Dataset, stored: _Part,
             spec: SplitCreate) -> Dataset:
    labels, class_counts, label_stats = label_summary(stored.y, parent.task)
    dataset = Dataset(
        id=stored.dataset_id, tenant_id=tenant_id, name=f"{parent.name[:240]} ({stored.part})",
        rows=int(stored.y.shape[0]), features=parent.features, nnz=stored.nnz,
        labels=labels, class_counts=class_counts, task=parent.task, label_stats=label_stats,
        weight_stats=None if stored.w is None else weight_stats(stored.w),
        sha256=stored.sha256, size_bytes=stored.size, stored_bytes=stored.size,
        blob_path=str(stored.blob), parent_id=parent.id, split_part=stored.part,
        split_seed=spec.seed, split_test_fraction=spec.test_fraction,
        split_stratified=spec.stratify and parent.task != "regression",
        source_format=parent.source_format, feature_names=parent.feature_names,
    )
    session.add(dataset)
    return dataset
