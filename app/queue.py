"""Enqueue training jobs, evaluations and search tasks by task name. The API never imports
the worker or the solvers."""

from __future__ import annotations

from functools import lru_cache

from celery import Celery

TRAIN_TASK = "hinge.train"
EVALUATE_TASK = "hinge.evaluate"
SEARCH_TASK = "hinge.search_task"


@lru_cache(maxsize=4)
def producer(broker_url: str, queue: str) -> Celery:
    app = Celery("hinge-api", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_default_queue=queue,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"max_retries": 3, "interval_start": 0.2,
                                  "interval_step": 0.5, "interval_max": 2},
    )
    return app


def enqueue_training(broker_url: str, queue: str, job_id: str) -> None:
    producer(broker_url, queue).send_task(TRAIN_TASK, args=[job_id], queue=queue,
                                          retry=True)


def enqueue_evaluation(broker_url: str, queue: str, evaluation_id: str) -> None:
    producer(broker_url, queue).send_task(EVALUATE_TASK, args=[evaluation_id], queue=queue,
                                          retry=True)


def enqueue_search_task(broker_url: str, queue: str, task_id: str) -> None:
    producer(broker_url, queue).send_task(SEARCH_TASK, args=[task_id], queue=queue,
                                          retry=True)
