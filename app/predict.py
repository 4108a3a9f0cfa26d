"""Prediction with stored models: parsing the request rows, and the decision function."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol, cast

import numpy as np
import scipy.sparse as sp

from app.errors import ApiError
from app.schemas import Instance
from solvers import models as solver_models
from solvers.models import LinearModel
from solvers.svmlight import ParseLimits, SvmlightError, SvmlightParser


class ServableModel(Protocol):
    """What predict needs of a model: its classes, its width, labels and decision values."""

    @property
    def classes(self) -> np.ndarray: ...

    @property
    def n_features(self) -> int: ...

    def predict(self, X: Any) -> tuple[np.ndarray, np.ndarray]: ...


def linear_model_from_bytes(payload: bytes) -> LinearModel:
    return cast(LinearModel, solver_models.model_from_bytes("linear", payload))


def model_from_bytes(kind: str, payload: bytes) -> ServableModel:
    """A stored model, ready to predict (solvers.models: no training code)."""
    return solver_models.model_from_bytes(kind, payload)


@dataclass(frozen=True)
class CachedModel:
    """A model ready to predict, with what predict answers about it."""

    model_id: str
    tenant_id: str
    kind: str
    model: ServableModel
    classes: list[float]
    size_bytes: int


class ModelCache:
    """A bounded LRU of deserialised models per API process, keyed by model id (ids are
    never reused) and handed out only to the model's tenant. A cached model needs no
    database round trip; a deleted model is dropped here at once by the process that
    deletes it, and from the other API processes through the bus (app.bus) or, as a
    backstop, by their periodic check of the cached ids (app.routes.models)."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._items: OrderedDict[str, CachedModel] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, model_id: str, tenant_id: str) -> CachedModel | None:
        with self._lock:
            entry = self._items.get(model_id)
            if entry is None or entry.tenant_id != tenant_id:
                return None
            self._items.move_to_end(model_id)
            return entry

    def peek(self, model_id: str) -> CachedModel | None:
        """The entry whoever the tenant (for callers that checked the tenant already)."""
        with self._lock:
            return self._items.get(model_id)

    def put(self, entry: CachedModel) -> None:
        with self._lock:
            self._items[entry.model_id] = entry
            self._items.move_to_end(entry.model_id)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def drop(self, model_id: str) -> None:
        with self._lock:
            self._items.pop(model_id, None)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)


def _too_many(rows: int, max_rows: int) -> ApiError:
    return ApiError(413, f"{rows} rows exceed the limit of {max_rows} rows per request "
                         "(HINGE_MAX_PREDICT_ROWS)", {"limit": max_rows})


def rows_from_instances(instances: list[Instance], n_features: int,
                        max_rows: int) -> sp.csr_matrix:
    """CSR from JSON instances; indices beyond the model's features are dropped.

    Vectorised for well-formed input; anything it refuses (or cannot hold in int64) goes
    through the row-by-row check, which names the first offending row and value."""
    if len(instances) > max_rows:
        raise _too_many(len(instances), max_rows)
    lengths = [len(instance.indices) for instance in instances]
    if lengths != [len(instance.values) for instance in instances]:
        return _rows_one_by_one(instances, n_features)
    total = sum(lengths)
    try:
        indices = np.fromiter(chain.from_iterable(i.indices for i in instances),
                              dtype=np.int64, count=total)
    except OverflowError:  # an index beyond int64: dropped, row by row
        return _rows_one_by_one(instances, n_features)
    values = np.fromiter(chain.from_iterable(i.values for i in instances),
                         dtype=np.float64, count=total)
    if total and (int(indices.min()) < 1 or not np.isfinite(values).all()):
        return _rows_one_by_one(instances, n_features)  # raises with the details
    indptr = np.zeros(len(instances) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    keep = indices <= n_features
    if not keep.all():
        kept = np.zeros(total + 1, dtype=np.int64)
        np.cumsum(keep, out=kept[1:])
        indptr = kept[indptr]
        indices, values = indices[keep], values[keep]
    X = sp.csr_matrix((values, (indices - 1).astype(np.int32), indptr),
                      shape=(len(instances), n_features))
    X.sum_duplicates()
    return X


def _rows_one_by_one(instances: list[Instance], n_features: int) -> sp.csr_matrix:
    indptr = np.zeros(len(instances) + 1, dtype=np.int64)
    all_indices: list[int] = []
    all_values: list[float] = []
    for row, instance in enumerate(instances):
        if len(instance.indices) != len(instance.values):
            raise ApiError(422, f"instances[{row}]: {len(instance.indices)} indices but "
                                f"{len(instance.values)} values")
        for index, value in zip(instance.indices, instance.values, strict=True):
            if index < 1:
                raise ApiError(422, f"instances[{row}]: feature index {index} < 1 "
                                    "(indices are 1-based)")
            if not np.isfinite(value):
                raise ApiError(422, f"instances[{row}]: value {value} for feature {index} "
                                    "is not finite")
            if index <= n_features:
                all_indices.append(index - 1)
                all_values.append(value)
        indptr[row + 1] = len(all_indices)
    X = sp.csr_matrix(
        (np.asarray(all_values, dtype=np.float64), np.asarray(all_indices, dtype=np.int32),
         indptr),
        shape=(len(instances), n_features),
    )
    X.sum_duplicates()
    return X


def rows_from_svmlight(text: bytes, n_features: int, max_rows: int,
                       max_features: int) -> sp.csr_matrix:
    """CSR from svmlight lines whose label is optional; extra features are dropped."""
    lines = text.split(b"\n")
    labelled: list[bytes] = []
    for line in lines:
        stripped = line.strip()
        first = stripped.split(None, 1)[0] if stripped else b""
        # A line that starts with index:value has no label: give it a placeholder.
        labelled.append(b"0 " + line if b":" in first and not first.startswith(b"qid:")
                        else line)
    parser = SvmlightParser(ParseLimits(max_features=max_features))
    try:
        parser.feed(b"\n".join(labelled))
        parsed = parser.finish()
    except SvmlightError as exc:
        raise ApiError(422, f"invalid svmlight rows: {exc}",
                       {"line": exc.line, "reason": exc.reason}) from None
    rows = len(parsed.indptr) - 1
    if rows > max_rows:
        raise _too_many(rows, max_rows)
    X = parsed.to_csr(max(parsed.n_features, n_features))
    return X[:, :n_features].tocsr()
