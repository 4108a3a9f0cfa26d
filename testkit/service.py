"""Real service processes for tests and benchmarks: migrated databases, a Celery worker
and an API server as child processes, with their logs in files (no mocks, no eager mode).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from alembic import command
from alembic.config import Config

from app.settings import Settings
from testkit.paths import REPO


def migrate(database_url: str, revision: str = "head") -> None:
    """Alembic's upgrade, in this process (the test's own interpreter)."""
    config = Config(str(REPO / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    command.upgrade(config, revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    config = Config(str(REPO / "alembic.ini"))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logger"] = False
    command.downgrade(config, revision)


TEST_HOSTS = ["127.0.0.1", "localhost", "testserver"]


def embedded_settings(home: Path, **overrides: Any) -> Settings:
    overrides.setdefault("allowed_hosts", TEST_HOSTS)
    return Settings(home=home, queue=f"hinge.test.{uuid.uuid4().hex[:8]}", **overrides)


def make_key(settings: Settings, tenant: str = "default", scopes: tuple[str, ...] = ("admin",),
             **options: Any) -> str:
    """A new API key of `tenant` (created if missing) in the settings' database."""
    from app.domain.services import tenants
    from app.infra.db import session_scope

    with session_scope(settings.database_url) as session:
        owner = tenants.tenant_by_name(session, tenant) or tenants.create_tenant(session, tenant)
        _key, full = tenants.create_key(session, settings.hmac_key(), owner.id, list(scopes),
                                        **options)
    return full


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def settings_env(settings: Settings) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "HINGE_HOME": str(settings.home),
        "HINGE_DATABASE_URL": settings.database_url,
        "HINGE_BROKER_URL": settings.broker_url,
        "HINGE_QUEUE": settings.queue,
        "HINGE_JOB_MAX_SECONDS": str(settings.job_max_seconds),
        "HINGE_JOB_LEASE_SECONDS": str(settings.job_lease_seconds),
        "HINGE_SWEEP_INTERVAL_SECONDS": str(settings.sweep_interval_seconds),
        "HINGE_MAX_ATTEMPTS": str(settings.max_attempts),
        "HINGE_REQUEUE_AFTER_SECONDS": str(settings.requeue_after_seconds),
        "HINGE_PROGRESS_INTERVAL_SECONDS": str(settings.progress_interval_seconds),
        "HINGE_WORKER_STALE_SECONDS": str(settings.worker_stale_seconds),
        "HINGE_ALLOWED_HOSTS": ",".join(settings.allowed_hosts),
        "HINGE_RATE_PER_SECOND": str(settings.rate_per_second),
        "HINGE_RATE_BURST": str(settings.rate_burst),
        "HINGE_WORKER_CONCURRENCY": str(settings.worker_concurrency),
        "HINGE_SOLVER_THREADS": str(settings.solver_threads),
        "HINGE_KEY_CACHE_SECONDS": str(settings.key_cache_seconds),
        "HINGE_PREDICT_BLOCK_ROWS": str(settings.predict_block_rows),
        "HINGE_MODEL_CACHE_CHECK_SECONDS": str(settings.model_cache_check_seconds),
        "HINGE_MAX_UPLOAD_BYTES": str(settings.max_upload_bytes),
        "HINGE_MAX_DATASET_ROWS": str(settings.max_dataset_rows),
        "HINGE_MAX_DATASET_NNZ": str(settings.max_dataset_nnz),
        "HINGE_MAX_DATASET_BYTES": str(settings.max_dataset_bytes),
        "HINGE_MAX_MEMORY_DATASET_BYTES": str(settings.max_memory_dataset_bytes),
        "HINGE_SHARD_BYTES": str(settings.shard_bytes),
        "HINGE_DISK_RESERVE_BYTES": str(settings.disk_reserve_bytes),
        "HINGE_IMPORT_ROOTS": ",".join(settings.import_roots),
        "HINGE_IMPORT_SHARD_TEXT_BYTES": str(settings.import_shard_text_bytes),
        "HINGE_IMPORT_HELPERS": str(settings.import_helpers),
        "PYTHONUNBUFFERED": "1",
    })
    if settings.dask_scheduler:
        env["HINGE_DASK_SCHEDULER"] = settings.dask_scheduler
    if settings.worker_memory_bytes:
        env["HINGE_WORKER_MEMORY_BYTES"] = str(settings.worker_memory_bytes)
    if settings.secret_key.get_secret_value():
        env["HINGE_SECRET_KEY"] = settings.secret_key.get_secret_value()
    env.update(blob_env(settings))
    return env


def process_env(settings: Settings, python: str | None = None) -> dict[str, str]:
    """settings_env for a child process run by `python`: another interpreter (a runtime
    virtualenv, testkit.runtime_venv) gets no PYTHONPATH/PYTHONHOME, so that it imports
    what is installed in it and nothing from this checkout."""
    env = settings_env(settings)
    if python is not None and python != sys.executable:
        env.pop("PYTHONPATH", None)
        env.pop("PYTHONHOME", None)
    return env


def migrate_with(python: str, settings: Settings, cwd: Path, revision: str = "head") -> None:
    """`alembic upgrade` as a deployment runs it (docker-compose's `migrate` service):
    the command of `python`'s install, this repository's alembic.ini and scripts, the
    database of `settings` (migrations/env.py reads HINGE_DATABASE_URL), in `cwd`."""
    done = subprocess.run([python, "-m", "alembic", "-c", str(REPO / "alembic.ini"),
                           "upgrade", revision], cwd=cwd, env=process_env(settings, python),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"alembic upgrade failed ({done.returncode}):\n{done.stdout}")


def blob_env(settings: Settings) -> dict[str, str]:
    """The blob-storage variables of `settings` (HINGE_BLOB_BACKEND and, for s3, where)."""
    env = {"HINGE_BLOB_BACKEND": settings.blob_backend,
           "HINGE_BLOB_CACHE_BYTES": str(settings.blob_cache_bytes),
           "HINGE_MODEL_BLOB_MIN_BYTES": str(settings.model_blob_min_bytes)}
    if settings.blob_backend == "s3":
        env.update({
            "HINGE_S3_ENDPOINT_URL": settings.s3_endpoint_url,
            "HINGE_S3_BUCKET": settings.s3_bucket,
            "HINGE_S3_PREFIX": settings.s3_prefix,
            "HINGE_S3_REGION": settings.s3_region,
            "HINGE_S3_ACCESS_KEY_ID": settings.s3_access_key_id,
            "HINGE_S3_SECRET_ACCESS_KEY": settings.s3_secret_access_key.get_secret_value(),
        })
    return env


# -- a local S3-compatible server (moto's standalone server) for the s3 blob backend -----

S3_TEST_KEY = ("hinge-test", "hinge-test-secret")


@contextlib.contextmanager
def moto_server(log_dir: Path, host: str = "127.0.0.1") -> Iterator[str]:
    """moto's S3-compatible server as a child process on `host`; yields its endpoint URL."""
    port = free_port()
    server = ServiceProcess([sys.executable, "-m", "moto.server", "-H", host, "-p", str(port)],
                            dict(os.environ), log_dir / f"moto-{port}.log")
    endpoint = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{endpoint}/moto-api/", timeout=2).status_code < 500:
                    break
            if server.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not start:\n{server.log()[-4000:]}")
            time.sleep(0.1)
        yield endpoint
    finally:
        server.stop()


def s3_overrides(endpoint: str) -> dict[str, Any]:
    """Settings for the s3 blob backend on a fresh bucket of the server at `endpoint`;
    every model's arrays go to the store too (model_blob_min_bytes 0), so tests on this
    backend exercise that path."""
    import boto3

    bucket = f"hinge-test-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                 aws_access_key_id=S3_TEST_KEY[0],
                 aws_secret_access_key=S3_TEST_KEY[1]).create_bucket(Bucket=bucket)
    return {"blob_backend": "s3", "s3_endpoint_url": endpoint, "s3_bucket": bucket,
            "s3_access_key_id": S3_TEST_KEY[0], "s3_secret_access_key": S3_TEST_KEY[1],
            "model_blob_min_bytes": 0}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServiceProcess:
    """A real child process (API server or Celery worker) with its log in a file."""

    def __init__(self, args: list[str], env: dict[str, str], log_path: Path,
                 cwd: Path | None = None) -> None:
        """`cwd`: the working directory (default: the repository)."""
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(args, env=env, cwd=cwd or REPO, stdout=self._log,
                                        stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, needle: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.log():
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"process exited ({self.process.returncode}):\n{self.log()}")
            time.sleep(0.1)
        raise TimeoutError(f"{needle!r} not seen in {timeout} s:\n{self.log()[-4000:]}")

    def stop(self, graceful: bool = True) -> None:
        """SIGTERM and wait (15 s, then SIGKILL); with graceful False, SIGKILL to its whole
        process group at once (a Celery worker's warm shutdown takes 5-6 s on the embedded
        broker: up to 2 s until its event loop sees the signal, then the pool's join; a
        test's teardown needs none of it, tests/e2e/test_worker_readiness.py tests it)."""
        if self.process.poll() is None:
            if not graceful:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
            else:
                self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def start_worker(settings: Settings, log_dir: Path, kill_worker_on: str | None = None, *,
                 name: str | None = None, prefix: tuple[str, ...] = (), wait: bool = True,
                 python: str | None = None, cwd: Path | None = None,
                 ready_timeout: float = 120) -> ServiceProcess:
    """A Celery worker process of the production app (workers.celery_app); with
    `kill_worker_on`, the crash tests' app instead (testkit.crashing_worker), whose process
    SIGKILLs itself whenever it claims a job on a dataset of that name. `prefix` runs it
    under a command (e.g. `ip netns exec NAME`); without `wait`, call
    `wait_for_log("ready.", ...)` before using it. `python` and `cwd`: the interpreter
    that runs it (default: this one) and its working directory (default: the repository);
    see process_env."""
    name = name or f"hinge-test-{uuid.uuid4().hex[:6]}@%h"
    env = process_env(settings, python)
    app = "workers.celery_app"
    if kill_worker_on:
        from testkit.crashing_worker import KILL_WORKER_ON

        app = "testkit.crashing_worker"
        env[KILL_WORKER_ON] = kill_worker_on
    worker = ServiceProcess(
        [*prefix, python or sys.executable, "-m", "celery", "-A", app, "worker",
         "--loglevel", "INFO", "--concurrency", "1", "--queues", settings.queue,
         "--hostname", name, "--without-gossip", "--without-mingle", "--without-heartbeat"],
        env,
        log_dir / f"worker-{uuid.uuid4().hex[:6]}.log",
        cwd,
    )
    if wait:
        worker.wait_for_log("ready.", timeout=ready_timeout)
    return worker


def start_api(settings: Settings, log_dir: Path, *, python: str | None = None,
              cwd: Path | None = None, timeout: float = 60) -> tuple[ServiceProcess, str]:
    """An API server process (uvicorn) on a free port; returns it and its base URL once
    /healthz answers. `python`, `cwd`: as for start_worker."""
    port = free_port()
    api = ServiceProcess(
        [python or sys.executable, "-m", "uvicorn", "--factory", "app.api.main:create_app",
         "--host", "127.0.0.1", "--port", str(port)],
        process_env(settings, python),
        log_dir / f"api-{port}.log",
        cwd,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                return api, base
        if api.process.poll() is not None:
            raise RuntimeError(api.log())
        time.sleep(0.2)
    api.stop()
    raise TimeoutError(api.log())


def wait_for_job(get: Any, job_id: str, timeout: float = 120.0,
                 statuses: tuple[str, ...] = ("succeeded", "failed", "cancelled"),
                 collection: str = "jobs") -> dict:
    """Poll /v1/<collection>/<id> (a job, or another work item: "predictions") until its
    status is one of `statuses`."""
    deadline = time.monotonic() + timeout
    body: dict = {}
    while time.monotonic() < deadline:
        response = get(f"/v1/{collection}/{job_id}")
        assert response.status_code == 200, response.text
        body = response.json()
        if body["status"] in statuses:
            return body
        time.sleep(0.1)
    raise TimeoutError(f"{collection} {job_id} still {body.get('status')} after {timeout} s: "
                       f"{body}")


@contextlib.contextmanager
def running_service(settings: Settings, log_dir: Path, workers: int = 1,
                    kill_worker_on: str | None = None, *, python: str | None = None,
                    cwd: Path | None = None, ready_timeout: float | None = None
                    ) -> Iterator[tuple[httpx.Client, list[ServiceProcess]]]:
    """Migrated database, `workers` Celery worker processes and an API server process
    (`kill_worker_on`: see start_worker); the client carries an admin key of tenant
    "default". With `python` (another interpreter, e.g. testkit.runtime_venv's) the
    migration, the workers and the API all run on it, in `cwd` (see process_env);
    `ready_timeout` overrides how long a worker (120 s) and the API (60 s) may take to
    start."""
    settings.ensure_dirs()
    if python is None:
        migrate(settings.database_url)
    else:
        migrate_with(python, settings, cwd or REPO)
    key = make_key(settings)
    started: list[ServiceProcess] = []
    try:
        # The API starts while the first worker warms up (a start is mostly imports and
        # loading kernels), and the other workers side by side once it is ready: on the
        # embedded broker (kombu's sqlalchemy transport) two workers that start together
        # both insert the queue's row, and the second exits ("UNIQUE constraint failed:
        # kombu_queue.name").
        def start(wait: bool) -> ServiceProcess:
            started.append(start_worker(settings, log_dir, kill_worker_on, python=python,
                                        cwd=cwd, wait=wait, ready_timeout=ready_timeout
                                        or 120))
            return started[-1]

        first = start(wait=False) if workers else None
        api, base = start_api(settings, log_dir, python=python, cwd=cwd,
                              timeout=ready_timeout or 60)
        try:
            if first is not None:
                first.wait_for_log("ready.", timeout=ready_timeout or 120)
            for _ in range(workers - 1):
                start(wait=False)
            for worker in started[1:]:
                worker.wait_for_log("ready.", timeout=ready_timeout or 120)
            with httpx.Client(base_url=base, timeout=60, headers=bearer(key)) as client:
                yield client, started
        finally:
            api.stop()
    finally:
        for worker in started:
            worker.stop(graceful=False)


def child_pids(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in path.read_text().split()] if path.exists() else []
