"""Celery tasks: thin, they take an id and hand over to workers.training (jobs),
workers.evaluation (evaluations), workers.search (search tasks), workers.prediction
(batch predictions) or workers.imports (imports and their helpers)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from app.infra.queue import IMPORT_PART_TASK, IMPORT_TASK
from app.settings import Settings, get_settings
from workers.celery_app import EVALUATE_TASK, PREDICT_TASK, SEARCH_TASK, TRAIN_TASK, celery_app
from workers.evaluation import run_evaluation
from workers.imports import run_helper, run_import
from workers.prediction import run_prediction
from workers.search import run_search_task
from workers.training import run_job


def _task(name: str, run: Callable[[Settings, str, str], str]) -> Any:
    """The Celery task `name`: run the work item whose id it carries on this host."""
    @celery_app.task(name=name, bind=True)
    def task(self: Any, item_id: str) -> str:
        hostname = getattr(self.request, "hostname", None) or socket.gethostname()
        return run(get_settings(), item_id, hostname)

    return task


train = _task(TRAIN_TASK, run_job)
evaluate = _task(EVALUATE_TASK, run_evaluation)
search_task = _task(SEARCH_TASK, run_search_task)
predict_batch = _task(PREDICT_TASK, run_prediction)
import_dataset = _task(IMPORT_TASK, run_import)
import_part = _task(IMPORT_PART_TASK, run_helper)
