"""Prediction with stored models: parsing the request rows, and the decision function."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import chain
from typing import Any, Protocol, cast

import numpy as np
import scipy.sparse as sp

from app.domain.errors import Invalid, TooLarge
from app.domain.schemas import Instance, PredictRow
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
    # the model's dataset's feature names, by name: the 1-based index (None: it had none)
    feature_index: dict[str, int] | None = None


class ModelCache:
    """A bounded LRU of deserialised models per API process, keyed by model id (ids are
    never reused) and handed out only to the model's tenant. A cached model needs no
    database round trip; a deleted model is dropped here at once by the process that
    deletes it, and from the other API processes through the bus (app.infra.bus) or, as a
    backstop, by their periodic check of the cached ids (app.api.routes.models)."""

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


# Features the model has never seen, with a non-zero value: (0-based row, 1-based index
# or the name the row gave)
Unseen = list[tuple[int, int | str]]

ROW_SHAPES = ('a row is sparse {"indices": [1, 5], "values": [0.5, 1.0]} (1-based '
              'indices), dense [0.5, 0, 0, 0, 1.0] (one value per feature, in order) or '
              'named {"f1": 0.5, "f5": 1.0} (the feature names of the model\'s dataset)')


def sparse_rows(rows: list[PredictRow], n_features: int,
                feature_index: dict[str, int] | None, unseen: Unseen) -> list[Instance]:
    """Every row as sparse (indices, values): dense rows by their non-zero values (a row
    shorter than the model is refused), named rows by the dataset's names (names it did
    not have, with a non-zero value, go to `unseen`)."""
    out: list[Instance] = []
    for r, row in enumerate(rows):
        if type(row) is Instance:
            out.append(row)
        elif isinstance(row, list):
            if len(row) < n_features:
                raise Invalid(f"instances[{r}]: a dense row of {len(row)} values, but the "
                              f"model has {n_features} features: a dense row holds one "
                              "value per feature, in order (or send it sparse: "
                              f"{ROW_SHAPES})", {"row": r, "accepted": ROW_SHAPES})
            kept = [j for j, v in enumerate(row) if v != 0]  # NaN too: refused later
            out.append(Instance.model_construct(indices=[j + 1 for j in kept],
                                                values=[row[j] for j in kept]))
        else:
            assert isinstance(row, dict)
            if feature_index is None:
                raise Invalid(f"instances[{r}]: named features, but this model's dataset "
                              "has no feature names (only CSV, TSV, Parquet and .npz "
                              "uploads with names have them, and a deleted dataset's are "
                              f"gone): send the row sparse or dense; {ROW_SHAPES}",
                              {"row": r, "accepted": ROW_SHAPES})
            pairs: list[tuple[int, float]] = []
            for name, value in row.items():
                index = feature_index.get(name)
                if index is None:
                    if value != 0:
                        unseen.append((r, name))
                else:
                    pairs.append((index, value))
            pairs.sort()
            out.append(Instance.model_construct(indices=[j for j, _ in pairs],
                                                values=[v for _, v in pairs]))
    return out


def unseen_features(unseen: Unseen, n_features: int, strict: bool) -> list[str]:
    """The answer's warnings about features the model has never seen; with `strict`, a
    422 naming the first."""
    if not unseen:
        return []
    row, feature = unseen[0]
    if strict:
        what = (f"feature {feature!r} is not one of the model's features"
                if isinstance(feature, str) else
                f"feature {feature} is beyond the model's {n_features} features")
        raise Invalid(f"instances[{row}]: {what}, and strict is set: drop it, or send "
                      "strict=false to have it ignored with a warning",
                      {"row": row, "feature": feature})
    features = sorted({f for _, f in unseen}, key=lambda f: (isinstance(f, str), str(f)))
    rows = sorted({r for r, _ in unseen})
    shown = ", ".join(repr(f) if isinstance(f, str) else str(f) for f in features[:10])
    more = f" and {len(features) - 10} more" if len(features) > 10 else ""
    rows_shown = ", ".join(str(r) for r in rows[:10]) + (", ..." if len(rows) > 10 else "")
    return [f"ignored non-zero values of {len(features)} feature(s) the model has never "
            f"seen ({n_features} features): {shown}{more}, in instances {rows_shown}; "
            "strict=true refuses them instead"]


def too_many_rows(rows: int, max_rows: int) -> TooLarge:
    return TooLarge(f"{rows} rows exceed the limit of {max_rows} rows per request "
                    "(HINGE_MAX_PREDICT_ROWS)", {"limit": max_rows})


def rows_from_instances(instances: list[Instance], n_features: int,
                        max_rows: int, unseen: Unseen | None = None) -> sp.csr_matrix:
    """CSR from JSON instances; indices beyond the model's features are dropped (their
    non-zero values noted in `unseen`, as (row, index), when given).

    Vectorised for well-formed input; anything it refuses (or cannot hold in int64) goes
    through the row-by-row check, which names the first offending row and value."""
    if len(instances) > max_rows:
        raise too_many_rows(len(instances), max_rows)
    lengths = [len(instance.indices) for instance in instances]
    if lengths != [len(instance.values) for instance in instances]:
        return _rows_one_by_one(instances, n_features, unseen)
    total = sum(lengths)
    try:
        indices = np.fromiter(chain.from_iterable(i.indices for i in instances),
                              dtype=np.int64, count=total)
    except OverflowError:  # an index beyond int64: dropped, row by row
        return _rows_one_by_one(instances, n_features, unseen)
    values = np.fromiter(chain.from_iterable(i.values for i in instances),
                         dtype=np.float64, count=total)
    if total and (int(indices.min()) < 1 or not np.isfinite(values).all()):
        return _rows_one_by_one(instances, n_features, unseen)  # raises with the details
    # int32 throughout (a body of HINGE_MAX_PREDICT_BYTES holds far fewer than 2**31
    # values): scipy then takes the arrays as they are, without converting them
    indptr = np.zeros(len(instances) + 1, dtype=np.int32)
    np.cumsum(lengths, out=indptr[1:])
    keep = indices <= n_features
    if not keep.all():
        if unseen is not None:
            dropped = np.flatnonzero(~keep & (values != 0))
            rows = np.searchsorted(indptr, dropped, side="right") - 1
            unseen.extend(zip(rows.tolist(), indices[dropped].tolist(), strict=True))
        kept = np.zeros(total + 1, dtype=np.int32)
        np.cumsum(keep, out=kept[1:])
        indptr = kept[indptr]
        indices, values = indices[keep], values[keep]
    X = sp.csr_matrix((values, (indices - 1).astype(np.int32), indptr),
                      shape=(len(instances), n_features), copy=False)
    X.sum_duplicates()
    return X


FEW_ROWS = 16  # at most this many rows and FEW_VALUES values take linear_few_rows
FEW_VALUES = 4096


def linear_few_rows(model: LinearModel, instances: list[Instance],
                    unseen: Unseen | None = None) -> tuple[np.ndarray, np.ndarray] | None:
    """Labels and decision values of a few JSON rows on a plain linear model, the same as
    model.predict(rows_from_instances(...)) to the last bit, without building a sparse
    matrix (for one row that costs ten times the arithmetic); None for larger inputs.

    Bit for bit: like scipy's CSR product it sums duplicate indices first (in the order
    given), then accumulates value * weight from 0.0 over the sorted indices, one output
    at a time, and adds the intercept last (tests/app/test_predict_path.py checks it)."""
    if len(instances) > FEW_ROWS or sum(len(i.values) for i in instances) > FEW_VALUES:
        return None
    n_features = model.n_features
    rows: list[list[tuple[int, float]]] = []
    for row, instance in enumerate(instances):
        _check_row(row, instance)
        summed: dict[int, float] = {}
        for index, value in zip(instance.indices, instance.values, strict=True):
            if index <= n_features:
                summed[index - 1] = summed[index - 1] + value if index - 1 in summed \
                    else value
            elif value != 0 and unseen is not None:
                unseen.append((row, index))
        rows.append(sorted(summed.items()))
    coef = model.coef
    scores = np.zeros((len(rows), coef.shape[0]), dtype=np.float64)
    for r, items in enumerate(rows):
        if not items:
            continue
        weights = coef[:, [j for j, _ in items]].tolist()  # one gather per row
        for k, row_weights in enumerate(weights):
            total = 0.0
            for (_j, value), weight in zip(items, row_weights, strict=True):
                total += value * weight
            scores[r, k] = total
    scores = scores + model.intercept
    if coef.shape[0] == 1:
        values = scores[:, 0]
        return np.where(values > 0, model.classes[1], model.classes[0]), values
    return model.classes[np.argmax(scores, axis=1)], scores


def _check_row(row: int, instance: Instance) -> None:
    if len(instance.indices) != len(instance.values):
        raise Invalid(f"instances[{row}]: {len(instance.indices)} indices but "
                      f"{len(instance.values)} values")
    for index, value in zip(instance.indices, instance.values, strict=True):
        if index < 1:
            raise Invalid(f"instances[{row}]: feature index {index} < 1: indices "
                          "are 1-based (the first feature is 1); with 0-based "
                          "indices, add 1 to every index")
        if not math.isfinite(value):
            raise Invalid(f"instances[{row}]: value {value} for feature {index} "
                          "is not finite")


def _rows_one_by_one(instances: list[Instance], n_features: int,
                     unseen: Unseen | None = None) -> sp.csr_matrix:
    indptr = np.zeros(len(instances) + 1, dtype=np.int64)
    all_indices: list[int] = []
    all_values: list[float] = []
    for row, instance in enumerate(instances):
        _check_row(row, instance)
        for index, value in zip(instance.indices, instance.values, strict=True):
            if index <= n_features:
                all_indices.append(index - 1)
                all_values.append(value)
            elif value != 0 and unseen is not None:
                unseen.append((row, index))
        indptr[row + 1] = len(all_indices)
    X = sp.csr_matrix(
        (np.asarray(all_values, dtype=np.float64), np.asarray(all_indices, dtype=np.int32),
         indptr),
        shape=(len(instances), n_features),
    )
    X.sum_duplicates()
    return X


def rows_from_svmlight(text: bytes, n_features: int, max_rows: int,
                       max_features: int, unseen: Unseen | None = None) -> sp.csr_matrix:
    """CSR from svmlight lines whose label is optional; extra features are dropped (their
    non-zero values noted in `unseen`, as (row, index), when given)."""
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
        raise Invalid(f"invalid svmlight rows: {exc}",
                      {"line": exc.line, "reason": exc.reason}) from None
    rows = len(parsed.indptr) - 1
    if rows > max_rows:
        raise too_many_rows(rows, max_rows)
    X = parsed.to_csr(max(parsed.n_features, n_features))
    if unseen is not None and parsed.n_features > n_features:
        extra = X[:, n_features:].tocoo()
        nonzero = extra.data != 0
        unseen.extend(zip(extra.row[nonzero].tolist(),
                          (extra.col[nonzero] + n_features + 1).tolist(), strict=True))
    return X[:, :n_features].tocsr()
