"""Celery tasks: thin, they take a job id and hand over to workers.training."""

from __future__ import annotations

import socket

from app.settings import get_settings
from workers.celery_app import TRAIN_TASK, celery_app
from workers.training import run_job


@celery_app.task(name=TRAIN_TASK, bind=True)
def train(self, job_id: str) -> str:
    hostname = getattr(self.request, "hostname", None) or socket.gethostname()
    return run_job(get_settings(), job_id, hostname)
