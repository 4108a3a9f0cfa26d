"""Splits: a stored dataset becomes two new ones, train and test (POST /v1/datasets/{id}/split).

The rows are shuffled by `numpy.random.default_rng(seed)`: with `stratify`, each class (in
sorted label order) is permuted on its own and its first `round(test_fraction * count)`
rows go to test, so every class keeps its share; without, `round(test_fraction * rows)`
rows of one permutation go to test. Both parts keep the parent's row order and feature
count, record the parent, the seed, the fraction and whether they were stratified; the same
seed always gives the same split. A part's `sha256` is that of its stored arrays (data,
indices, indptr, y, in that order), and its `size_bytes` the size of its blob.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sqlalchemy.orm import Session

from app.db import after_rollback
from app.errors import ApiError
from app.orm import Dataset, new_id
from app.schemas import SplitCreate
from app.services.datasets import get_dataset
from app.settings import Settings
from app.storage import load_dataset, save_dataset_arrays
from solvers.params import label_key


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


def split_dataset(reader: Session, session: Session, settings: Settings, dataset_id: str,
                  spec: SplitCreate) -> tuple[Dataset, Dataset]:
    """Store the train and test parts of a dataset as two new datasets (blocking). The
    parent is read with `reader`; the write session `session` only adds the two rows."""
    parent = get_dataset(reader, dataset_id)
    X, y = load_dataset(parent.blob_path, parent.features)
    test = split_rows(y, spec.test_fraction, spec.stratify, spec.seed)
    n_test = int(test.sum())
    if n_test == 0 or n_test == y.shape[0]:
        raise ApiError(422, f"test_fraction {spec.test_fraction} of {y.shape[0]} rows leaves "
                            f"{'no' if n_test == 0 else 'every'} row in the test part; both "
                            "parts need at least one row",
                       {"field": "test_fraction"})
    parts = []
    for part, mask in (("train", ~test), ("test", test)):
        parts.append(_store_part(session, settings, parent, X[mask], y[mask], part, spec))
    session.flush()
    return parts[0], parts[1]


def _store_part(session: Session, settings: Settings, parent: Dataset, X: sp.csr_matrix,
                y: np.ndarray, part: str, spec: SplitCreate) -> Dataset:
    arrays: dict[str, np.ndarray] = {
              "data": np.ascontiguousarray(X.data, dtype=np.float64),
              "indices": np.ascontiguousarray(X.indices, dtype=np.int32),
              "indptr": np.ascontiguousarray(X.indptr, dtype=np.int64),
              "y": np.ascontiguousarray(y, dtype=np.float64)}
    digest = hashlib.sha256()
    for name in ("data", "indices", "indptr", "y"):
        digest.update(arrays[name].tobytes())
    dataset_id = new_id()
    path = save_dataset_arrays(settings.datasets_dir, dataset_id, arrays)
    after_rollback(session, lambda: Path(path).unlink(missing_ok=True))
    labels, counts = np.unique(y, return_counts=True)
    dataset = Dataset(
        id=dataset_id, name=f"{parent.name[:240]} ({part})", rows=int(y.shape[0]),
        features=parent.features, nnz=int(X.nnz), labels=[float(v) for v in labels],
        class_counts={label_key(v): int(c) for v, c in zip(labels, counts, strict=True)},
        sha256=digest.hexdigest(), size_bytes=int(Path(path).stat().st_size),
        blob_path=str(path), parent_id=parent.id, split_part=part, split_seed=spec.seed,
        split_test_fraction=spec.test_fraction, split_stratified=spec.stratify,
    )
    session.add(dataset)
    return dataset
