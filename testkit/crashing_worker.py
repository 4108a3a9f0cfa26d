"""A Celery app for the crash tests: the production worker's settings and training code,
plus one fault. `celery -A testkit.crashing_worker worker` runs it; tests start it with
`testkit.service.start_worker(..., kill_worker_on=NAME)`.

A worker process SIGKILLs itself right after it has claimed a job on a dataset named
$HINGE_TEST_KILL_WORKER_ON: the claim has counted the attempt in the database, so the job
comes back through the recovery sweep and, every attempt dying the same way, fails after
HINGE_MAX_ATTEMPTS. Jobs on other datasets run exactly as in production
(workers.training.run_claimed). A batch prediction on such a dataset is killed halfway
instead, on its first attempt only (when its progress passes half the rows), so the sweep's
second attempt finishes it. A batch prediction on a dataset named
$HINGE_TEST_SLOW_PREDICTION_ON sleeps 50 ms before each block (so that a test can cancel it
while it runs). Production code knows nothing about these faults.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from typing import Any

from app.domain import lifecycle
from app.domain.lifecycle import Claim
from app.domain.orm import Prediction
from app.domain.services import predictions
from app.infra.db import read_sessionmaker_for
from app.settings import get_settings
from workers import prediction, runner, training
from workers.celery_app import PREDICT_TASK, TRAIN_TASK, make_celery

KILL_WORKER_ON = "HINGE_TEST_KILL_WORKER_ON"
SLOW_PREDICTION_ON = "HINGE_TEST_SLOW_PREDICTION_ON"

log = logging.getLogger("hinge.worker")

celery_app = make_celery(get_settings())
celery_app.conf.include = []  # this module's task replaces workers.tasks.train


@celery_app.task(name=TRAIN_TASK, bind=True)
def train_or_crash(self: Any, job_id: str) -> str:
    settings = get_settings()
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    claimed = training.claim(settings, job_id, runner.worker_name(hostname))
    doomed = os.environ.get(KILL_WORKER_ON)
    if claimed is not None and doomed and claimed.work.dataset_name == doomed:
        log.error("fault injection: killing this worker process on job %s", job_id)
        os.kill(os.getpid(), signal.SIGKILL)
    return training.run_claimed(settings, job_id, claimed)


_progress = predictions.progress


def _progress_or_crash(session: Any, claim: Claim[predictions.PredictionWork],
                       rows_done: int) -> lifecycle.Answer:
    doomed = os.environ.get(KILL_WORKER_ON)
    if claim.attempt == 1 and rows_done * 2 >= claim.work.rows:
        row = session.get(Prediction, claim.id)
        if doomed and row is not None and row.dataset_name == doomed:
            log.error("fault injection: killing this worker process halfway through "
                      "prediction %s", claim.id)
            os.kill(os.getpid(), signal.SIGKILL)
    return _progress(session, claim, rows_done)


predictions.progress = _progress_or_crash

_predict_block = predictions.model_predictions
_slow: list[bool] = [False]  # this delivery's prediction is on the slow dataset


def _predict_slowly(model: Any, X: Any) -> Any:
    if _slow[0]:
        time.sleep(0.05)  # outside any transaction: the API's writes go on meanwhile
    return _predict_block(model, X)


predictions.model_predictions = _predict_slowly


@celery_app.task(name=PREDICT_TASK, bind=True)
def predict_or_crash(self: Any, prediction_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    settings = get_settings()
    with read_sessionmaker_for(settings.database_url)() as session:
        row = session.get(Prediction, prediction_id)
        _slow[0] = bool(row is not None and row.dataset_name
                        == os.environ.get(SLOW_PREDICTION_ON))
    return prediction.run_prediction(settings, prediction_id, hostname)


# -- imports: a SIGKILL after the first part of an import named $HINGE_TEST_KILL_WORKER_ON
# (first attempt only: the sweep's second attempt resumes at the next part), and a sleep
# before each part of one named $HINGE_TEST_SLOW_IMPORT_ON (so a test can cancel it)

SLOW_IMPORT_ON = "HINGE_TEST_SLOW_IMPORT_ON"

from app.domain.orm import Import  # noqa: E402
from app.infra.queue import IMPORT_PART_TASK, IMPORT_TASK  # noqa: E402
from workers import imports as import_worker  # noqa: E402

_run_part = import_worker.run_part


def _import_row(settings: Any, import_id: str) -> Any:
    # the part's own settings: a test process that imported this module (for its names)
    # runs imports in process on other databases than get_settings()'s
    with read_sessionmaker_for(settings.database_url)() as session:
        return session.get(Import, import_id)


def _run_part_with_faults(settings: Any, taken: Any, dataset_id: str, lost: Any) -> str:
    row = _import_row(settings, taken.import_id)
    if row is not None and row.name == os.environ.get(SLOW_IMPORT_ON):
        time.sleep(0.5)
    outcome = _run_part(settings, taken, dataset_id, lost)
    if (row is not None and row.name == os.environ.get(KILL_WORKER_ON)
            and row.attempt == 1 and outcome == "done"):
        log.error("fault injection: killing this worker process after part %d of import %s",
                  taken.part, taken.import_id)
        os.kill(os.getpid(), signal.SIGKILL)
    return outcome


import_worker.run_part = _run_part_with_faults


@celery_app.task(name=IMPORT_TASK, bind=True)
def import_or_crash(self: Any, import_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    return import_worker.run_import(get_settings(), import_id, hostname)


@celery_app.task(name=IMPORT_PART_TASK, bind=True)
def import_part_or_crash(self: Any, import_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    return import_worker.run_helper(get_settings(), import_id, hostname)
