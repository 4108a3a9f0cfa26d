"""The labels of a dataset streamed in shards, summed up shard by shard (LabelTally), so
an upload never holds every row's label: class counts as they come (at most
HINGE_MAX_CLASSES + 1 distinct), and the targets themselves only while a regression
summary (quantiles, distinct values) may need them and they fit in
HINGE_MAX_MEMORY_DATASET_BYTES (8 bytes a row; a larger regression upload is a 413)."""

from __future__ import annotations

from typing import Any

import numpy as np

from app.domain.errors import TooLarge
from app.domain.tasks import DETECT, dataset_task, label_summary
from solvers.params import label_key


class LabelTally:
    """`add` each shard's labels, then `summary` (what dataset_task and label_summary say
    of the whole)."""

    def __init__(self, asked: str, max_classes: int, max_kept_bytes: int) -> None:
        self.asked = asked
        self.max_classes = max_classes
        self.max_kept_rows = max(1, max_kept_bytes // 8)
        self.rows = 0
        self.counts: dict[float, int] | None = {}  # None: more distinct than max_classes
        self.integer = True
        self.kept: list[np.ndarray] | None = []  # None: too many rows to keep

    def _regression(self) -> bool:
        return self.asked == "regression" or (
            self.asked == DETECT and (not self.integer or self.counts is None))

    def add(self, y: np.ndarray) -> None:
        self.rows += len(y)
        if self.counts is not None:
            values, counts = np.unique(y, return_counts=True)
            for value, count in zip(values.tolist(), counts.tolist(), strict=True):
                self.counts[value] = self.counts.get(value, 0) + count
            if len(self.counts) > self.max_classes:
                self.counts = None
        self.integer = self.integer and bool(np.all(np.mod(y, 1.0) == 0))
        if self.kept is not None:
            if self.rows <= self.max_kept_rows:
                self.kept.append(np.array(y, dtype=np.float64))
            else:
                self.kept = None
        if self.kept is None and self._regression():
            raise TooLarge(f"a regression dataset streamed to disk keeps its targets in "
                           f"memory for its summary: more than {self.max_kept_rows} rows "
                           "exceed HINGE_MAX_MEMORY_DATASET_BYTES",
                           {"limit": self.max_kept_rows, "setting":
                            "HINGE_MAX_MEMORY_DATASET_BYTES"})

    def summary(self) -> tuple[str, list[float], dict[str, int], dict[str, Any] | None]:
        """(task, labels, class_counts, label_stats), as of every row added."""
        if self._regression():
            assert self.kept is not None
            y = np.concatenate(self.kept)
            task = dataset_task(y, self.asked, self.max_classes)
            return (task, *label_summary(y, task))
        assert self.counts is not None
        labels = sorted(self.counts)
        task = "classification" if self.asked == DETECT else self.asked
        return (task, [float(v) for v in labels],
                {label_key(np.float64(v)): self.counts[v] for v in labels}, None)
