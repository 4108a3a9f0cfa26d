"""Share-nothing scale-out: workers and API processes that share only PostgreSQL, the
broker (Redis or RabbitMQ) and the object store (a moto S3 server), each with its own
HINGE_HOME.

In the `netns` variant each worker runs in its own network namespace, a separate "host"
that reaches the three servers only through a veth link (testkit/netns.py): nothing on
this machine's loopback, no directory of the API. The `loopback` variant (default suite)
runs the same processes on this machine's loopback, still with separate HINGE_HOMEs.
Both run on each broker: Redis and RabbitMQ (the shared servers, a queue of the test's
own, dropped after).

Asserted: jobs land on both workers, each worker read the dataset from the object store
into its own cache (no dataset file anywhere), two API processes give identical
predictions, and a worker SIGKILLed mid-job (its whole process group, as a host that
dies) is recovered by the other one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.settings import Settings
from testkit.netns import Host, netns_unavailable_reason, separate_host
from tests.e2e.long_fit import long_fit_bytes, long_job
from tests.support import (
    ServiceProcess,
    bearer,
    broker_url_for,
    drop_queue,
    embedded_settings,
    make_key,
    migrate,
    postgres_schema,
    s3_overrides,
    start_api,
    start_worker,
    unavailable,
    wait_for_job,
)

# long_fit.py's fits end on max_seconds on any machine: a 1 s job holds its worker long
# enough for the next one to go elsewhere (a fraction of a second suffices: the two jobs
# are submitted together); a 6 s one is still running when its worker is killed.
SHORT_JOB = long_job(1.0)
LONG_JOB = long_job(6.0)


@dataclass
class Cluster:
    apis: list[httpx.Client]
    workers: dict[str, ServiceProcess]  # by Celery hostname
    worker_homes: dict[str, Path]
    api_homes: list[Path]


def _through(host: Host | None, url: str, default_port: int) -> str:
    """`url` (a server on 127.0.0.1) as a process on `host` reaches it."""
    if host is None:
        return url
    parsed = make_url(url)
    port = parsed.port or default_port
    gateway, forwarded = host.url_host(port).split(":")
    return parsed.set(host=gateway, port=int(forwarded)).render_as_string(
        hide_password=False)


def _cluster_settings(home: Path, database_url: str, broker_url: str, s3_endpoint: str
                      ) -> Settings:
    return embedded_settings(
        home, database_url=database_url, broker_url=broker_url,
        secret_key=f"share-nothing-{uuid.uuid4().hex}",
        job_lease_seconds=3.0, sweep_interval_seconds=0.5, requeue_after_seconds=5.0,
        **s3_overrides(s3_endpoint))


BROKER_PORTS = {"redis": 6379, "rabbitmq": 5672}


@pytest.fixture(params=["loopback", pytest.param("netns", marks=pytest.mark.slow)])
def network(request: pytest.FixtureRequest) -> str:
    if request.param == "netns":
        reason = netns_unavailable_reason()
        if reason:
            unavailable("network namespaces (ip netns, as root)", RuntimeError(reason))
    return str(request.param)


# RabbitMQ is slow (make test-slow): the default suite shares nothing on redis, and
# covers RabbitMQ's own ways (a killed worker's redelivery, a cancel, a restart) in
# test_lifecycle.py and test_searches.py
@pytest.fixture(params=[pytest.param("redis", marks=pytest.mark.redis),
                        pytest.param("rabbitmq", marks=[pytest.mark.rabbitmq,
                                                        pytest.mark.slow])])
def broker(request: pytest.FixtureRequest) -> str:
    """The broker's name; its URL (the shared server) from broker_url_for, which fails
    under CI=true when the server is not there."""
    broker_url_for(request.param)
    return str(request.param)


@pytest.fixture
def cluster(network: str, broker: str, tmp_path: Path, s3_endpoint: str
            ) -> Iterator[Cluster]:
    broker_url = broker_url_for(broker)
    with postgres_schema() as database_url:
        base = _cluster_settings(tmp_path / "api-0", database_url, broker_url, s3_endpoint)
        migrate(base.database_url)
        key = make_key(base)
        s3_port = int(make_url(s3_endpoint).port or 80)
        pg_port = make_url(database_url).port or 5432
        broker_port = make_url(broker_url).port or BROKER_PORTS[broker]
        started: list[ServiceProcess] = []
        with _hosts(network, tmp_path, [pg_port, broker_port, s3_port]) as hosts:
            try:
                workers: dict[str, ServiceProcess] = {}
                homes: dict[str, Path] = {}
                for index, host in enumerate(hosts):
                    name = f"hinge-{'ab'[index]}-{uuid.uuid4().hex[:4]}@share-nothing"
                    homes[name] = tmp_path / f"worker-{index}"
                    settings = base.model_copy(update={
                        "home": homes[name],
                        "database_url": _through(host, database_url, 5432),
                        "broker_url": _through(host, broker_url, BROKER_PORTS[broker]),
                        "s3_endpoint_url": _through(host, s3_endpoint, 80)})
                    worker = start_worker(settings, tmp_path, name=name, wait=False,
                                          prefix=tuple(host.run_prefix) if host else ())
                    started.append(worker)
                    workers[name] = worker
                for worker in started:
                    worker.wait_for_log("ready.", timeout=180)
                api_homes = [tmp_path / "api-0", tmp_path / "api-1"]
                apis = []
                for home in api_homes:
                    api, url = start_api(base.model_copy(update={"home": home}), tmp_path)
                    started.append(api)
                    apis.append(httpx.Client(base_url=url, timeout=60, headers=bearer(key)))
                yield Cluster(apis, workers, homes, api_homes)
                for client in apis:
                    client.close()
            finally:
                for process in started:
                    process.stop()
                drop_queue(broker_url, base.queue)


@contextlib.contextmanager
def _hosts(network: str, tmp_path: Path, ports: list[int]) -> Iterator[list[Host | None]]:
    """Two "hosts" for the workers: network namespaces, or this machine (None) twice."""
    if network != "netns":
        yield [None, None]
        return
    with separate_host(tmp_path, ports) as first, separate_host(tmp_path, ports) as second:
        yield [first, second]


def _upload(client: httpx.Client, payload: bytes) -> str:
    response = client.post("/v1/datasets?name=long", content=payload)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _submit(client: httpx.Client, dataset_id: str, params: dict[str, Any]) -> str:
    response = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                             "params": params})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _worker_of(job: dict[str, Any]) -> str:
    return str(job["worker"]).rsplit(" pid ", 1)[0]


def _files(home: Path, pattern: str) -> list[Path]:
    return [p for p in home.rglob(pattern) if p.is_file()] if home.exists() else []


def test_workers_and_apis_share_nothing_but_the_servers(cluster: Cluster, network: str
                                                        ) -> None:
    netns = network == "netns"
    first, second = cluster.apis
    dataset_id = _upload(first, long_fit_bytes())

    # jobs land on both workers (prefetch 1: a busy worker takes no second message, so
    # of two jobs submitted together each worker gets one)
    jobs = [_submit(first, dataset_id, SHORT_JOB) for _ in range(4 if netns else 2)]
    finished = [wait_for_job(first.get, job_id, timeout=300) for job_id in jobs]
    assert all(job["status"] == "succeeded" for job in finished), finished
    assert {_worker_of(job) for job in finished} == set(cluster.workers)

    # every process read the dataset from the object store into its own HINGE_HOME's
    # cache; no process keeps a dataset file
    for home in [*cluster.worker_homes.values(), *cluster.api_homes]:
        assert _files(home, "*.npz") == [], home
    for home in cluster.worker_homes.values():
        assert len(_files(home / "blob-cache", "*.blob")) >= 1, home

    # two API processes (separate homes, empty caches for the second) predict the same
    rows = {"instances": [{"indices": [1, 3, 7, 22], "values": [0.5, -0.25, 1.0, 0.75]},
                          {"indices": [2, 5, 9], "values": [-1.0, 0.3, 0.9]}]}
    model_id = finished[0]["model_id"]
    answers = [client.post(f"/v1/models/{model_id}/predict", json=rows) for client in
               cluster.apis]
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert answers[0].json() == answers[1].json()
    assert len(_files(cluster.api_homes[1] / "blob-cache", "*.blob")) == 1  # the model's

    # a worker SIGKILLed mid-job (the whole process group, as a host that dies): the
    # sweep re-queues the job when its lease runs out, and the other worker finishes it
    job_id = _submit(first, dataset_id, LONG_JOB)
    deadline = time.monotonic() + 180
    while True:
        job = first.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "running" and job["progress"]:
            break
        assert time.monotonic() < deadline and job["status"] in ("queued", "running"), job
        time.sleep(0.1)
    victim = _worker_of(job)
    os.killpg(cluster.workers[victim].process.pid, signal.SIGKILL)
    job = wait_for_job(second.get, job_id, timeout=300)
    assert job["status"] == "succeeded", job
    assert job["attempt"] == 2
    assert _worker_of(job) != victim and _worker_of(job) in cluster.workers
    models = [m for m in second.get("/v1/models").json()["data"] if m["job_id"] == job_id]
    assert len(models) == 1
