"""Jobs you can watch, stop and trust: SSE progress, cancellation and crash recovery.

Real API server and Celery worker processes on the embedded default (SQLite + SQLite
broker), a private Redis server for the Redis restart test, and the shared RabbitMQ server
(a queue of its own per test) for the same scenarios on RabbitMQ.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.infra.queue import broker_holding
from app.settings import Settings
from tests.e2e.long_fit import long_fit_bytes, long_job, wait_running_with_progress
from tests.support import (
    IN_CI,
    child_pids,
    drop_queue,
    embedded_settings,
    free_port,
    postgres_schema,
    read_sse,
    require_rabbitmq,
    require_redis,
    running_service,
    wait_for_job,
)

# A fit that ends on max_seconds after 6 s on any machine (tests/e2e/long_fit.py): about
# 30 progress events 0.2 s apart, long enough to watch, kill or cancel it, short enough to
# wait for. (A sweep budget on ijcnn1 ran 5 s on one machine and 1.4 s on a faster one.)
LONG_SECONDS = 6.0
LONG_JOB = long_job(LONG_SECONDS)


def _settings(home: Path, **overrides) -> Settings:
    defaults = {"job_lease_seconds": 2.0, "sweep_interval_seconds": 0.5, "max_attempts": 3,
                "requeue_after_seconds": 3.0}
    return embedded_settings(home, **(defaults | overrides))


@pytest.fixture(scope="module")
def long_bytes() -> bytes:
    return long_fit_bytes()


def _upload(client: httpx.Client, payload: bytes, name: str = "long") -> str:
    response = client.post(f"/v1/datasets?name={name}", content=payload)
    assert response.status_code == 201, response.text
    return str(response.json()["id"])


def _submit(client: httpx.Client, dataset_id: str, params: dict) -> str:
    response = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                             "params": params})
    assert response.status_code == 202, response.text
    return str(response.json()["id"])


def _read_sse(client: httpx.Client, job_id: str, last_event_id: str | None = None,
              stop_after: int | None = None) -> list[dict]:
    """Events as dicts {id, event, data}; stops at the end of the stream or after N."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    with client.stream("GET", f"/v1/jobs/{job_id}/events", headers=headers,
                       timeout=120) as response:
        return read_sse(response, stop_after)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    home = tmp_path_factory.mktemp("lifecycle")
    with running_service(_settings(home / "home"), home) as (client, _workers):
        yield client


def test_sse_streams_progress_then_terminal_and_resumes_without_gaps(
    service: httpx.Client, long_bytes: bytes
) -> None:
    job_id = _submit(service, _upload(service, long_bytes), LONG_JOB)
    events = _read_sse(service, job_id)
    stored = [e for e in events if "id" in e]
    progress = [e for e in stored if e["event"] == "progress"]
    assert len(progress) >= 5, events
    iterations = [e["data"]["iteration"] for e in progress]
    assert iterations == sorted(iterations) and len(set(iterations)) == len(iterations)
    for key in ("iteration", "elapsed_s", "primal", "active_size"):
        assert key in progress[0]["data"], progress[0]
    terminal = events[-1]
    assert terminal["event"] == "status" and terminal["data"]["status"] == "succeeded"
    ids = [int(e["id"]) for e in stored]
    assert ids == list(range(1, len(ids) + 1))  # the whole history, no gap, no duplicate

    # Reconnect from the middle: exactly the stored events after that id.
    middle = ids[len(ids) // 2]
    resumed = [e for e in _read_sse(service, job_id, str(middle)) if "id" in e]
    assert [int(e["id"]) for e in resumed] == ids[ids.index(middle) + 1:]

    job = service.get(f"/v1/jobs/{job_id}").json()
    assert job["result"]["exit_reason"] == "max_seconds", job["result"]
    assert progress[-1]["data"]["elapsed_s"] < LONG_SECONDS + 1.0
    # stopped by the clock, not converged: the bar stays at the last event's fraction
    assert job["result"]["converged"] is False
    assert job["progress_fraction"] == progress[-1]["data"]["fraction"] < 1.0


def _median_event_lag(client: httpx.Client, dataset: bytes) -> float:
    job_id = _submit(client, _upload(client, dataset), LONG_JOB)
    wait_running_with_progress(client, job_id)
    live = _read_sse(client, job_id, stop_after=30)
    lags = sorted(event["received"] - event["data"]["at"] for event in live
                  if event["event"] == "progress" and "at" in event["data"])
    client.post(f"/v1/jobs/{job_id}/cancel")
    assert len(lags) >= 5, live
    return lags[len(lags) // 2]


def test_sse_event_latency_is_under_half_a_second(service: httpx.Client,
                                                  long_bytes: bytes) -> None:
    assert _median_event_lag(service, long_bytes) < 0.5


@pytest.mark.postgres
@pytest.mark.redis
def test_sse_on_postgres_and_redis_wakes_on_pubsub(tmp_path: Path, long_bytes: bytes
                                                   ) -> None:
    redis_url = require_redis()
    with postgres_schema() as database_url:
        settings = _settings(tmp_path / "home", database_url=database_url,
                             broker_url=redis_url)
        with running_service(settings, tmp_path) as (client, _workers):
            # nudged: far below the 1 s fallback poll
            assert _median_event_lag(client, long_bytes) < 0.25


@pytest.fixture
def rabbitmq_settings(tmp_path: Path) -> Iterator[Settings]:
    """The lifecycle settings on the shared RabbitMQ (a queue of its own, dropped after)."""
    settings = _settings(tmp_path / "home", broker_url=require_rabbitmq())
    try:
        yield settings
    finally:
        drop_queue(settings.broker_url, settings.queue)


def test_cancel_running_job_within_two_seconds_and_no_model(
    service: httpx.Client, long_bytes: bytes
) -> None:
    _cancel_running_job(service, long_bytes)


@pytest.mark.rabbitmq
def test_cancel_running_job_on_rabbitmq(rabbitmq_settings: Settings, tmp_path: Path,
                                        long_bytes: bytes) -> None:
    with running_service(rabbitmq_settings, tmp_path) as (client, _workers):
        _cancel_running_job(client, long_bytes)
        queued = _submit(client, _upload(client, long_bytes), LONG_JOB)
        _submit(client, _upload(client, long_bytes), LONG_JOB)  # keeps the worker busy
        assert client.post(f"/v1/jobs/{queued}/cancel").status_code == 202
        assert wait_for_job(client.get, queued, timeout=10)["status"] == "cancelled"


def _cancel_running_job(service: httpx.Client, long_bytes: bytes) -> None:
    job_id = _submit(service, _upload(service, long_bytes), LONG_JOB)
    wait_running_with_progress(service, job_id)
    asked = time.monotonic()
    response = service.post(f"/v1/jobs/{job_id}/cancel")
    assert response.status_code == 202
    job = wait_for_job(service.get, job_id, timeout=10)
    took = time.monotonic() - asked
    assert job["status"] == "cancelled", job
    assert took < 2.0, took
    assert job["model_id"] is None
    assert all(m["job_id"] != job_id for m in service.get("/v1/models").json()["data"])
    assert service.post(f"/v1/jobs/{job_id}/cancel").status_code == 409


@pytest.mark.parametrize("broker", ["sqla", pytest.param("rabbitmq",
                                                          marks=pytest.mark.rabbitmq)])
def test_sigkilled_worker_job_completes_on_a_new_attempt(
    tmp_path: Path, long_bytes: bytes, broker: str, request: pytest.FixtureRequest
) -> None:
    settings = (request.getfixturevalue("rabbitmq_settings") if broker == "rabbitmq"
                else _settings(tmp_path / "home"))
    with running_service(settings, tmp_path) as (client, workers):
        job_id = _submit(client, _upload(client, long_bytes), LONG_JOB)
        job = wait_running_with_progress(client, job_id)
        pid = int(job["worker"].rsplit(" ", 1)[1])
        assert pid in child_pids(workers[0].process.pid)
        os.kill(pid, signal.SIGKILL)
        job = wait_for_job(client.get, job_id, timeout=120)
        assert job["status"] == "succeeded", job
        assert job["attempt"] == 2
        statuses = [h["status"] for h in job["status_history"]]
        assert statuses == ["queued", "running", "queued", "running", "succeeded"]
        models = [m for m in client.get("/v1/models").json()["data"] if m["job_id"] == job_id]
        assert len(models) == 1


def test_job_that_kills_its_worker_every_time_fails_after_the_cap(
    tmp_path: Path, long_bytes: bytes, cancer_bytes: bytes
) -> None:
    # a cap of 2 attempts: each is a worker process killed, noticed by the sweep and
    # replaced (the suite's longest e2e test at 3); the cap itself, at any value, is
    # tests/app/test_sweep.py's
    settings = _settings(tmp_path / "home", max_attempts=2)
    with running_service(settings, tmp_path, kill_worker_on="crash-me") as (client, _workers):
        crashing = _submit(client, _upload(client, cancer_bytes, "crash-me"), {})
        healthy = _submit(client, _upload(client, cancer_bytes, "cancer"), {})
        job = wait_for_job(client.get, crashing, timeout=120)
        assert job["status"] == "failed", job
        assert job["attempt"] == settings.max_attempts == 2
        assert "worker lost" in job["error"]
        assert job["model_id"] is None
        assert wait_for_job(client.get, healthy, timeout=120)["status"] == "succeeded"


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[tuple[str, callable]]:
    binary = shutil.which("redis-server")
    if binary is None:
        if IN_CI:
            pytest.fail("redis-server is not installed (CI=true)")
        pytest.skip("redis-server is not installed")
    port = free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(tmp_path)]
    state = {"process": subprocess.Popen(args, stdout=subprocess.DEVNULL)}

    def wait_up() -> None:
        import redis

        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                redis.Redis(port=port, socket_connect_timeout=0.5).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise TimeoutError("private redis did not start")

    def restart() -> None:
        state["process"].kill()
        state["process"].wait()
        time.sleep(1.0)
        state["process"] = subprocess.Popen(args, stdout=subprocess.DEVNULL)
        wait_up()

    wait_up()
    yield f"redis://127.0.0.1:{port}/0", restart
    state["process"].kill()
    state["process"].wait()


def test_redis_restart_with_jobs_queued_and_running(
    tmp_path: Path, long_bytes: bytes, cancer_bytes: bytes, private_redis
) -> None:
    redis_url, restart = private_redis
    settings = _settings(tmp_path / "home", broker_url=redis_url)
    with running_service(settings, tmp_path) as (client, _workers):
        running = _submit(client, _upload(client, long_bytes),
                          LONG_JOB)
        small = _upload(client, cancer_bytes, "cancer")
        queued = [_submit(client, small, {"C": c}) for c in (0.5, 1.0, 2.0)]
        wait_running_with_progress(client, running)
        restart()  # loses every queued message: this Redis keeps nothing on disk
        for job_id in [running, *queued]:
            job = wait_for_job(client.get, job_id, timeout=180)
            assert job["status"] == "succeeded", job


def _restart_rabbitmq() -> None:
    """Stop and start the RabbitMQ application (the Erlang node stays up): every
    connection drops, and only what is on disk survives. Quick, since the server is
    shared with other tests."""
    rabbitmqctl = shutil.which("rabbitmqctl")
    if rabbitmqctl is None:
        if IN_CI:
            pytest.fail("rabbitmqctl is not installed (CI=true)")
        pytest.skip("rabbitmqctl is not installed")
    subprocess.run([rabbitmqctl, "stop_app"], check=True, capture_output=True, timeout=60)
    subprocess.run([rabbitmqctl, "start_app"], check=True, capture_output=True, timeout=60)


@pytest.mark.slow
@pytest.mark.rabbitmq
def test_rabbitmq_restart_loses_no_queued_job_without_the_sweep(
    tmp_path: Path, long_bytes: bytes, cancer_bytes: bytes
) -> None:
    """Durable queue, persistent messages, publisher confirms: a broker restart with jobs
    running and queued loses nothing, and the sweep is not needed: it is turned off here
    (its first run would be 10^6 s away, and neither a stale lease nor a long wait would
    trigger it). With a non-durable queue this test fails: the queued jobs stay queued."""
    no_sweep = {"sweep_interval_seconds": 1e6, "requeue_after_seconds": 1e6,
                "job_lease_seconds": 600.0}
    settings = _settings(tmp_path / "home", broker_url=require_rabbitmq(), **no_sweep)
    try:
        with running_service(settings, tmp_path) as (client, workers):
            running = _submit(client, _upload(client, long_bytes), LONG_JOB)
            small = _upload(client, cancer_bytes, "cancer")
            queued = [_submit(client, small, {"C": c}) for c in (0.5, 1.0, 2.0, 4.0, 8.0)]
            wait_running_with_progress(client, running)
            assert broker_holding(settings.broker_url, settings.queue).ready == len(queued)
            _restart_rabbitmq()
            for job_id in [running, *queued]:
                job = wait_for_job(client.get, job_id, timeout=180)
                assert job["status"] == "succeeded", job
                # one attempt, never put back to queued: nothing but the broker kept it
                assert job["attempt"] == 1, job
                assert [h["status"] for h in job["status_history"]] == [
                    "queued", "running", "succeeded"], job
            assert "Connection to broker lost" in workers[0].log()  # it did restart
            models = client.get("/v1/models").json()["data"]
            assert sorted(m["job_id"] for m in models) == sorted([running, *queued])
    finally:
        drop_queue(settings.broker_url, settings.queue)


def test_twenty_concurrent_writers_on_sqlite_never_see_a_lock(
    service: httpx.Client, cancer_bytes: bytes
) -> None:
    dataset_id = _upload(service, cancer_bytes, "cancer")
    statuses: list[int] = []
    bodies: list[str] = []
    lock = threading.Lock()

    def write(index: int) -> None:
        with httpx.Client(base_url=str(service.base_url), timeout=60,
                          headers=service.headers) as own:
            for _ in range(3):
                up = own.post(f"/v1/datasets?name=w{index}", content=cancer_bytes)
                job = own.post("/v1/jobs", json={"dataset_id": dataset_id,
                                                 "params": {"C": 1 + index}})
                with lock:
                    statuses.extend([up.status_code, job.status_code])
                    bodies.extend([up.text, job.text])

    threads = [threading.Thread(target=write, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all("locked" not in body for body in bodies)
    assert sorted(set(statuses)) == [201, 202], statuses
    assert len(statuses) == 120
