"""The Celery application of the workers: `celery -A workers.celery_app worker`.

Training is long and must not be lost: late acknowledgement, rejection on worker loss,
prefetch 1. The Redis visibility timeout (the redelivery clock) is derived from the hard
time limit of a job so a long job is never delivered twice while it runs.
"""

from __future__ import annotations

import os
from typing import Any

# Numba's OpenMP threads must not spin while they wait: on a machine whose cores are all
# busy, spinning made the parallel solvers 3-10x slower (measured by the OCAS/ALM bench).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from celery import Celery
from celery.signals import worker_process_init

from app.settings import Settings, get_settings

TRAIN_TASK = "hinge.train"
EVALUATE_TASK = "hinge.evaluate"
SEARCH_TASK = "hinge.search_task"
# The embedded broker (kombu's SQLAlchemy transport) polls its table; its default of 1 s
# adds up to a second to every job's start. kombu passes transport options straight to
# create_engine, so the interval can only be set on the transport class.
SQLA_POLLING_SECONDS = 0.1


def hard_time_limit(settings: Settings) -> float:
    return settings.job_max_seconds * 1.5 + 60.0


def make_celery(settings: Settings) -> Celery:
    if settings.broker_url.startswith("sqla+"):
        from kombu.transport import sqlalchemy as sqla_transport

        sqla_transport.Transport.polling_interval = SQLA_POLLING_SECONDS
    app = Celery("hinge-worker", broker=settings.broker_url, set_as_current=True)
    transport_options: dict[str, Any] = {}
    if settings.broker_url.startswith(("redis://", "rediss://")):
        transport_options["visibility_timeout"] = int(hard_time_limit(settings) + 300)
    app.conf.update(
        task_default_queue=settings.queue,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=1,
        task_time_limit=hard_time_limit(settings),
        broker_connection_retry_on_startup=True,
        broker_transport_options=transport_options,
        worker_hijack_root_logger=False,
        include=["workers.tasks"],
    )
    return app


celery_app = make_celery(get_settings())


@worker_process_init.connect
def _warm_solvers(**_kwargs: Any) -> None:
    """Compile (or load from the on-disk cache) every solver kernel before the first job."""
    from workers.training import warm_up

    warm_up(get_settings())
