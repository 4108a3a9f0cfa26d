"""The labels of a dataset streamed in shards, summed up shard by shard (LabelTally), so
an upload never holds every row's label: class counts as they come (at most
HINGE_MAX_CLASSES + 1 distinct). A regression summary (quantiles, distinct values) needs
every target: they are read back from the written shards at the end, so a regression set
is bounded by HINGE_MAX_MEMORY_DATASET_BYTES (8 bytes a row; a 413 as soon as a set
known to be regression passes it)."""

from __future__ import annotations

from collections.abc import Callable
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
        if self.rows > self.max_kept_rows and self._regression():
            raise TooLarge(f"a regression dataset streamed to disk keeps its targets in "
                           f"memory for its summary: more than {self.max_kept_rows} rows "
                           "exceed HINGE_MAX_MEMORY_DATASET_BYTES",
                           {"limit": self.max_kept_rows, "setting":
                            "HINGE_MAX_MEMORY_DATASET_BYTES"})

    def summary(self, targets: Callable[[], np.ndarray]
                ) -> tuple[str, list[float], dict[str, int], dict[str, Any] | None]:
        """(task, labels, class_counts, label_stats), as of every row added; `targets`
        reads every row's label back (a regression set's summary needs them)."""
        if self._regression():
            y = targets()
            task = dataset_task(y, self.asked, self.max_classes)
            return (task, *label_summary(y, task))
        assert self.counts is not None
        labels = sorted(self.counts)
        task = "classification" if self.asked == DETECT else self.asked
        return (task, [float(v) for v in labels],
                {label_key(np.float64(v)): self.counts[v] for v in labels}, None)
