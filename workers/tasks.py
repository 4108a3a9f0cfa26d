"""Celery tasks: thin, they take an id and hand over to workers.training (jobs),
workers.evaluation (evaluations), workers.search (search tasks) or workers.prediction
(batch predictions)."""

from __future__ import annotations

import socket

from app.settings import get_settings
from workers.celery_app import EVALUATE_TASK, PREDICT_TASK, SEARCH_TASK, TRAIN_TASK, celery_app
from workers.evaluation import run_evaluation
from workers.prediction import run_prediction
from workers.search import run_search_task
from workers.training import run_job


@celery_app.task(name=TRAIN_TASK, bind=True)
def train(self, job_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    return run_job(get_settings(), job_id, hostname)


@celery_app.task(name=EVALUATE_TASK, bind=True)
def evaluate(self, evaluation_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    return run_evaluation(get_settings(), evaluation_id, hostname)


@celery_app.task(name=SEARCH_TASK, bind=True)
def search_task(self, task_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    return run_search_task(get_settings(), task_id, hostname)


@celery_app.task(name=PREDICT_TASK, bind=True)
def predict_batch(self, prediction_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    return run_prediction(get_settings(), prediction_id, hostname)
