"""The Celery application of the workers: `celery -A workers.celery_app worker`.

Training is long and must not be lost: late acknowledgement, rejection on worker loss,
prefetch 1. The Redis visibility timeout (the redelivery clock) is derived from the hard
time limit of a job so a long job is never delivered twice while it runs. The queue is
durable and messages persistent; on RabbitMQ publishes wait for the broker's confirm
(app.infra.queue.broker_conf, shared with the API's producer). Search tasks wait in a queue of
their own (app.infra.queue.search_queue), which a worker consumes beside the queue it is given.
"""

from __future__ import annotations

import os
import socket
from typing import Any

# Numba's OpenMP threads must not spin while they wait: on a machine whose cores are all
# busy, spinning made the parallel solvers 3-10x slower (measured by the OCAS/ALM bench).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from celery import Celery
from celery.signals import (
    celeryd_after_setup,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_shutdown,
)

from app.infra.queue import (  # task names and broker helpers, shared with the API
    EVALUATE_TASK,
    PREDICT_TASK,
    SEARCH_TASK,
    TRAIN_TASK,
    broker_conf,
    is_redis,
    search_queue,
)
from app.settings import Settings, get_settings

__all__ = ["EVALUATE_TASK", "PREDICT_TASK", "SEARCH_TASK", "TRAIN_TASK", "make_celery"]
# The embedded broker (kombu's SQLAlchemy transport) polls its table; its default of 1 s
# adds up to a second to every job's start. kombu passes transport options straight to
# create_engine, so the interval can only be set on the transport class.
SQLA_POLLING_SECONDS = 0.1
# A pool process that has not come up by then is replaced. Its warm-up loads the kernels of
# `auto` and `smo` from the cache in seconds, but compiles them the first time: over a
# minute of CPU on a quiet 2-core machine, several on a busy one (the kernels compiled so
# far stay in the cache, so a replaced process resumes rather than restarts).
WARM_UP_TIMEOUT_SECONDS = 900.0


def hard_time_limit(settings: Settings) -> float:
    return settings.job_max_seconds * 1.5 + 60.0


def make_celery(settings: Settings) -> Celery:
    if settings.broker_url.startswith(("sqla+", "sqlalchemy+")):  # kombu's SQLAlchemy transport
        from kombu.transport import sqlalchemy as sqla_transport

        sqla_transport.Transport.polling_interval = SQLA_POLLING_SECONDS
    app = Celery("hinge-worker", broker=settings.broker_url, set_as_current=True)
    conf = broker_conf(settings.broker_url, settings.queue)
    if is_redis(settings.broker_url):
        conf["broker_transport_options"]["visibility_timeout"] = int(
            hard_time_limit(settings) + 300)
    app.conf.update(
        conf,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_concurrency=settings.worker_concurrency,
        task_time_limit=hard_time_limit(settings),
        # A new pool process loads every solver kernel before it says it is up
        # (_warm_solvers); on a busy host that took longer than Celery's 4 s default, and
        # the worker killed and replaced the process over and over (seen after a SIGKILL).
        worker_proc_alive_timeout=WARM_UP_TIMEOUT_SECONDS,
        worker_hijack_root_logger=False,
        include=["workers.tasks"],
    )
    return app


celery_app = make_celery(get_settings())


# The node's name and pool size, set in its main process (worker_init) before the pool
# processes are forked, so each of them knows both.
_NODE: dict[str, Any] = {"hostname": None, "concurrency": 1}
_PRESENCE: list[Any] = []  # this pool process's workers.presence.Presence


@celeryd_after_setup.connect
def _consume_search_tasks(sender: Any = None, instance: Any = None, **_kwargs: Any) -> None:
    """Consume the search queue too, even when `--queues` names only HINGE_QUEUE (as
    `make run`, the tests and older deployments do)."""
    queues = instance.app.amqp.queues
    queues.select_add(queues[search_queue(instance.app.conf.task_default_queue)])


@worker_init.connect
def _remember_node(sender: Any = None, **_kwargs: Any) -> None:
    from workers.presence import clear_node

    _NODE["hostname"] = getattr(sender, "hostname", None)
    concurrency = getattr(sender, "concurrency", 1)
    _NODE["concurrency"] = concurrency if isinstance(concurrency, int) else 1
    if _NODE["hostname"]:
        clear_node(get_settings(), _NODE["hostname"])  # rows of a previous run's killed pool


@worker_shutdown.connect
def _forget_node(**_kwargs: Any) -> None:
    from workers.presence import clear_node

    if _NODE["hostname"]:
        clear_node(get_settings(), _NODE["hostname"])


@worker_process_init.connect
def _warm_solvers(sender: Any = None, **_kwargs: Any) -> None:
    """Report `warming`, compile (or load from the on-disk cache) the kernels of `auto`
    and `smo` before the first job (helper processes compile the others meanwhile:
    workers.warmup.warm_up), then report `ready` (GET /v1/status, a job's waiting_for)."""
    from workers.presence import Presence
    from workers.warmup import warm_up

    settings = get_settings()
    hostname = str(sender or _NODE["hostname"] or socket.gethostname())
    presence = Presence(settings, hostname, int(_NODE["concurrency"])).start()
    _PRESENCE.append(presence)
    warm_up(settings)
    presence.ready()


@worker_process_shutdown.connect
def _leave(**_kwargs: Any) -> None:
    from workers.warmup import stop_kernel_compilers

    stop_kernel_compilers()
    while _PRESENCE:
        _PRESENCE.pop().stop()
