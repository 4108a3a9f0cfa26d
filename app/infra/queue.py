"""Enqueue training jobs, evaluations and search tasks by task name, and look at what the
broker holds. The API never imports the worker or the solvers.

Two queues: `HINGE_QUEUE` carries training jobs and evaluations, and `search_queue` of it
(`<HINGE_QUEUE>.search`) a search's tasks, so that what the broker holds in the first one
compares with the queued jobs and evaluations alone (RabbitMQ only tells a queue's count: a
search's waiting tasks used to hide that many lost jobs). Workers consume both whatever
their `--queues` (workers.celery_app).

Three brokers (docs/operations.md: "Brokers"):
- the embedded default, kombu's SQLAlchemy transport on a SQLite file (on disk: a restart
  loses nothing). The file is not the app's database: it has its own write lock, and the
  worker's poll takes it ten times a second. Every connection to it runs in WAL mode and
  waits up to `SQLA_BUSY_TIMEOUT_SECONDS` for the lock (pysqlite's default is 5 s in
  rollback-journal mode, where readers wait for writers too: 50 concurrent submissions
  made sends fail with "database is locked");
- Redis (messages live in a list; a Redis without persistence loses them on restart);
- RabbitMQ (`amqp://`), the production choice: the queue is durable, messages are
  persistent, and a send waits for the broker's publisher confirm, so once
  `enqueue_training` has returned, a broker restart loses nothing.

`broker_holding` tells the recovery sweep (app.domain.sweep) which messages are still there, so it
re-sends only the jobs whose message is gone instead of every job that merely waits.
"""

from __future__ import annotations

import ast
import base64
import json
import logging
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

log = logging.getLogger("hinge.queue")

TRAIN_TASK = "hinge.train"
EVALUATE_TASK = "hinge.evaluate"
SEARCH_TASK = "hinge.search_task"
PREDICT_TASK = "hinge.predict_batch"
IMPORT_TASK = "hinge.import"
IMPORT_PART_TASK = "hinge.import_part"  # a helper that parses parts of an import
SQLA_BUSY_TIMEOUT_SECONDS = 30.0


def is_amqp(broker_url: str) -> bool:
    return broker_url.startswith(("amqp://", "amqps://", "pyamqp://"))


def is_redis(broker_url: str) -> bool:
    return broker_url.startswith(("redis://", "rediss://"))


def is_sqlite_broker(broker_url: str) -> bool:
    return broker_url.startswith(("sqla+sqlite:", "sqlalchemy+sqlite:"))


class _BrokerConnection(sqlite3.Connection):
    """A connection to the embedded broker's SQLite file, in WAL mode: the worker's poll
    (a write transaction) and the API's sends no longer keep readers waiting."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute("PRAGMA journal_mode=WAL")
        self.execute("PRAGMA synchronous=NORMAL")


def search_queue(queue: str) -> str:
    """The queue of search tasks beside the queue of jobs and evaluations."""
    return f"{queue}.search"


def _durable_queue(name: str) -> Queue:
    return Queue(name, Exchange(name, type="direct", durable=True), routing_key=name,
                 durable=True)


def broker_conf(broker_url: str, queue: str) -> dict[str, Any]:
    """Celery settings the API's producer and the workers share: the queues (`queue` and
    its search queue) are declared durable and messages are persistent on every broker; on
    RabbitMQ a publish also waits for the broker's confirm (kombu's `confirm_publish`)."""
    transport: dict[str, Any] = {}
    if is_amqp(broker_url):
        transport["confirm_publish"] = True
    if is_sqlite_broker(broker_url):  # kombu passes these on to create_engine
        transport["connect_args"] = {"factory": _BrokerConnection,
                                     "timeout": SQLA_BUSY_TIMEOUT_SECONDS}
    return {
        "task_default_queue": queue,
        "task_queues": [_durable_queue(queue), _durable_queue(search_queue(queue))],
        "task_default_delivery_mode": "persistent",
        "task_ignore_result": True,
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": transport,
    }


@lru_cache(maxsize=4)
def producer(broker_url: str, queue: str) -> Celery:
    app = Celery("hinge-api", broker=broker_url, set_as_current=False)
    conf = broker_conf(broker_url, queue)
    conf["broker_transport_options"] = {
        **conf["broker_transport_options"],
        "max_retries": 3, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 2}
    app.conf.update(conf)
    return app


def enqueue(broker_url: str, queue: str, task: str, ref_id: str,
            countdown: float | None = None) -> None:
    """Send task `task` on row `ref_id`: search tasks to the search queue of `queue` (the
    jobs' queue), the others to `queue` itself; with `countdown`, to run no sooner than
    that many seconds from now."""
    target = search_queue(queue) if task == SEARCH_TASK else queue
    producer(broker_url, queue).send_task(task, args=[ref_id], queue=target, retry=True,
                                          countdown=countdown)


def enqueue_training(broker_url: str, queue: str, job_id: str) -> None:
    enqueue(broker_url, queue, TRAIN_TASK, job_id)


def enqueue_evaluation(broker_url: str, queue: str, evaluation_id: str) -> None:
    enqueue(broker_url, queue, EVALUATE_TASK, evaluation_id)


def enqueue_search_task(broker_url: str, queue: str, task_id: str) -> None:
    """Send a search task to the search queue of `queue` (the jobs' queue)."""
    enqueue(broker_url, queue, SEARCH_TASK, task_id)


# -- what the broker holds -----------------------------------------------------------

@dataclass(frozen=True)
class BrokerHolding:
    """The messages the broker holds for a queue (the jobs' queue holds jobs and
    evaluations only; search tasks wait in `search_queue`).

    `ids`: the job or evaluation id of every message waiting in the queue, when the broker
    lets us read them (Redis, the embedded SQLite broker); None when it does not
    (RabbitMQ cannot peek at a queue cheaply). `ready`: how many messages wait in the
    queue. Neither counts a message delivered to a worker and not yet acknowledged: that
    is a running job (or one a worker took and died with, which must be sent again).
    """

    ids: frozenset[str] | None
    ready: int


def _task_id_of(payload: Any) -> str | None:
    """The first argument (a job or evaluation id) of a kombu message as JSON."""
    try:
        message = json.loads(payload) if isinstance(payload, str | bytes) else payload
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        decoded = json.loads(body)
        args = decoded[0] if isinstance(decoded, list) else decoded.get("args")
        if args:
            return str(args[0])
    except (KeyError, TypeError, ValueError, IndexError):
        pass
    try:  # protocol 2 keeps a repr of the arguments in the headers too
        args = ast.literal_eval(message["headers"]["argsrepr"])
        return str(args[0]) if args else None
    except Exception:
        return None


def _ids(payloads: Iterable[Any]) -> frozenset[str]:
    return frozenset(i for i in map(_task_id_of, payloads) if i is not None)


def _redis_holding(broker_url: str, queue: str) -> BrokerHolding:
    import redis

    client = redis.Redis.from_url(broker_url, socket_connect_timeout=2, socket_timeout=5)
    try:
        waiting = client.lrange(queue, 0, -1)
    finally:
        client.close()
    return BrokerHolding(_ids(waiting), len(waiting))


def _sqla_holding(broker_url: str, queue: str) -> BrokerHolding:
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(broker_url.removeprefix("sqla+"))
    try:
        if not inspect(engine).has_table("kombu_message"):
            return BrokerHolding(frozenset(), 0)
        with engine.connect() as connection:
            # visible: waiting; delivered messages are kept invisible and never come back
            payloads = connection.execute(text(
                "SELECT m.payload FROM kombu_message m JOIN kombu_queue q "
                "ON m.queue_id = q.id WHERE q.name = :queue AND m.visible"),
                {"queue": queue}).scalars().all()
    finally:
        engine.dispose()
    return BrokerHolding(_ids(payloads), len(payloads))


def _amqp_holding(broker_url: str, queue: str) -> BrokerHolding:
    from amqp.exceptions import NotFound
    from kombu import Connection

    with Connection(broker_url, connect_timeout=3) as connection:
        channel = connection.channel()
        try:
            _name, ready, _consumers = channel.queue_declare(queue=queue, passive=True)
        except NotFound:  # no queue, no message
            return BrokerHolding(None, 0)
    return BrokerHolding(None, int(ready))


def broker_holding(broker_url: str, queue: str) -> BrokerHolding:
    """What the broker holds for `queue` (raises if the broker cannot be reached)."""
    if is_redis(broker_url):
        return _redis_holding(broker_url, queue)
    if is_amqp(broker_url):
        return _amqp_holding(broker_url, queue)
    if broker_url.startswith("sqla+"):
        return _sqla_holding(broker_url, queue)
    raise ValueError(f"unsupported broker {broker_url.split(':', 1)[0]!r}")
