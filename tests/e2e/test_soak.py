"""The chaos soak (issues 15 and 24): four tenants upload, train, predict, cancel and delete
for HINGE_SOAK_SECONDS (default 600) against a real API process and two real Celery worker
processes, loopback only, on each deployment: the embedded default (SQLite + the SQLite
broker), PostgreSQL + Redis and PostgreSQL + RabbitMQ. `make test-slow` runs it.

Meanwhile a chaos thread, on a schedule spread over the first 85% of the soak:
- SIGKILLs a worker's pool process (the job it runs comes back through the sweep);
- SIGKILLs a whole worker (its process group, as a machine dies) and starts another;
- SIGKILLs the API process and starts it again on the same port;
- fires bursts of 50 concurrent submissions of one tenant.
Leases are short (8 s, swept every 2 s, re-sent after 10 s), so recovery happens within
the soak. Clients retry transport errors (the API is down, or died mid-request): every
upload and submission carries an Idempotency-Key, reused by its retries, and a retry that
finds its key still in progress tries again for up to IN_PROGRESS_SECONDS.

At the end: no 5xx; no transport error outside the API's down windows; every accepted
job terminal within a grace period; each tenant's GET /v1/jobs lists exactly the jobs it
was answered 202 for (none lost, none extra); in the database, one job row per accepted
id and none other (a request whose answer was lost and retried created one job, not two),
at most one model per job and at most one `succeeded` in each status_history; idempotent
replays answered with the first answer; every cross-tenant read or write answered 404.
429s are allowed (counted and reported, then retried after Retry-After). The data: sets
the repository ships (testkit.bundled), never ../shared.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from app.settings import Settings
from testkit import bundled
from tests.support import (
    ServiceProcess,
    bearer,
    drop_queue,
    embedded_settings,
    free_port,
    make_key,
    migrate,
    postgres_schema,
    require_rabbitmq,
    require_redis,
    settings_env,
    start_worker,
)

SOAK_SECONDS = float(os.environ.get("HINGE_SOAK_SECONDS", "600"))
TENANTS = 4
WORKERS = 2
JOB_TIMEOUT = 120.0  # one job, polled by its tenant, before the loop moves on
GRACE = 240.0  # after the soak, for every accepted job still active
MAX_ROUNDS = 10_000  # per tenant: the loops are bounded in count as well as in time
TERMINAL = ("succeeded", "failed", "cancelled")
BURST = 50  # concurrent submissions of one burst
RETRY_SECONDS = 120.0  # how long a client retries transport errors (the API restarting)
IN_PROGRESS_SECONDS = 60.0  # how long a retry waits for its key's dead holder to let go
CHAOS_END = 0.85  # share of the soak during which chaos happens; then it settles
# Short leases: a killed job comes back within about 20 s, inside the soak.
LEASES = {"job_lease_seconds": 8.0, "sweep_interval_seconds": 2.0,
          "requeue_after_seconds": 10.0}

# (solver, params): linear solvers on either data; SMO (kernel) with scaling/probability
JOB_SPECS: list[tuple[str, dict[str, Any]]] = [
    ("auto", {}),
    ("auto", {"C": 0.5, "scale": "minmax"}),
    ("dcd", {"C": 1.0}),
    ("dcd", {"C": 2.0, "loss": "l1", "scale": "standard"}),
    ("smo", {"C": 1.0}),
    ("smo", {"C": 1.0, "probability": True}),
    ("smo", {"C": 4.0, "scale": "maxabs", "probability": True}),
]
BURST_SPEC: dict[str, Any] = {"solver": "dcd", "params": {"C": 1.0}}
# binary sets the repository ships, rows in no particular order (any slice has both labels)
DATA_SETS = ("cancer", "onehot")


def specs_for(source: str) -> list[tuple[str, dict[str, Any]]]:
    """JOB_SPECS for a data set: `onehot` is sparse (10% non-zero), and scale `standard`
    needs dense data (a 422 says so), so it gets `maxabs` instead."""
    if source == "cancer":
        return JOB_SPECS
    return [(solver, {**params, "scale": "maxabs"} if params.get("scale") == "standard"
             else params) for solver, params in JOB_SPECS]


class Recorder:
    """Every answer's status and latency, by route; transport errors with their times
    (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.statuses: dict[str, collections.Counter[int]] = collections.defaultdict(
            collections.Counter)
        self.latencies: dict[str, list[float]] = collections.defaultdict(list)
        self.server_errors: list[str] = []
        self.transport_errors: list[tuple[float, float, str]] = []  # (sent, failed, what)
        self.rate_limited: collections.Counter[str] = collections.Counter()
        self.in_progress_waits = 0

    def record(self, tenant: str, route: str, status: int, seconds: float, text: str) -> None:
        with self.lock:
            self.statuses[route][status] += 1
            self.latencies[route].append(seconds)
            if status >= 500:
                self.server_errors.append(f"{tenant} {route} {status}: {text[:300]}")
            if status == 429:
                self.rate_limited[tenant] += 1

    def transport(self, tenant: str, route: str, error: Exception, sent: float) -> None:
        with self.lock:
            self.transport_errors.append(
                (sent, time.monotonic(), f"{tenant} {route}: {type(error).__name__}: {error}"))

    def all_latencies(self) -> list[float]:
        with self.lock:
            return [v for values in self.latencies.values() for v in values]


@dataclass
class Registry:
    """Ids each tenant owns, for the cross-tenant probes (thread-safe)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    ids: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def add(self, tenant: str, kind: str, value: str) -> None:
        with self.lock:
            self.ids.setdefault(tenant, {}).setdefault(kind, []).append(value)

    def foreign(self, tenant: str, kind: str, rng: random.Random) -> str | None:
        with self.lock:
            pool = [v for t, kinds in self.ids.items() if t != tenant
                    for v in kinds.get(kind, [])]
        return rng.choice(pool) if pool else None


class TenantClient:
    """One tenant's client: httpx against the API, every answer recorded. Its loop (`run`)
    uploads, submits, polls, predicts, cancels and deletes; `burst` submits 50 at once."""

    def __init__(self, name: str, base: str, key: str, recorder: Recorder,
                 registry: Registry, lines: dict[str, list[bytes]], seed: int,
                 end: float) -> None:
        self.name = name
        self.http = httpx.Client(base_url=base, headers=bearer(key), timeout=60,
                                 limits=httpx.Limits(max_connections=BURST + 10))
        self.recorder = recorder
        self.registry = registry
        self.lines = lines
        self.rng = random.Random(seed)
        self.end = end
        self.lock = threading.Lock()  # accepted, problems, counts: bursts run beside run()
        self.accepted: set[str] = set()
        self.final: dict[str, str] = {}
        self.problems: list[str] = []
        self.counts: collections.Counter[str] = collections.Counter()

    def problem(self, text: str) -> None:
        with self.lock:
            self.problems.append(text)

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def accept(self, job_id: str) -> None:
        with self.lock:
            self.accepted.add(job_id)

    # -- requests ---------------------------------------------------------------------
    def call(self, method: str, route: str, url: str, **kwargs: Any
             ) -> tuple[httpx.Response | None, bool]:
        """One request and whether it had to be sent again after a transport error. 429:
        again after Retry-After (at most 5 times). A transport error: again, for up to
        RETRY_SECONDS (every write this client makes is safe to repeat: uploads and
        submissions carry an Idempotency-Key). After one, a 409 "still in progress" for
        the key: again, for up to IN_PROGRESS_SECONDS."""
        limited = 0
        retried = False
        first_failure: float | None = None
        waiting_since: float | None = None
        while True:
            started = time.perf_counter()
            sent = time.monotonic()
            try:
                response = self.http.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                self.recorder.transport(self.name, route, exc, sent)
                first_failure = first_failure or time.monotonic()
                if time.monotonic() - first_failure > RETRY_SECONDS:
                    self.problem(f"{self.name} {route}: no answer for {RETRY_SECONDS:g} s")
                    return None, True
                retried = True
                time.sleep(0.5)
                continue
            self.recorder.record(self.name, route, response.status_code,
                                 time.perf_counter() - started, response.text)
            if response.status_code == 429 and limited < 5:
                limited += 1
                time.sleep(min(float(response.headers.get("Retry-After", "1")), 5.0))
                continue
            if retried and response.status_code == 409 and "in progress" in response.text:
                waiting_since = waiting_since or time.monotonic()
                if time.monotonic() - waiting_since < IN_PROGRESS_SECONDS:
                    with self.recorder.lock:
                        self.recorder.in_progress_waits += 1
                    time.sleep(1.0)
                    continue
            return response, retried

    def expect(self, response: httpx.Response | None, statuses: tuple[int, ...],
               what: str) -> bool:
        if response is None:
            return False
        if response.status_code not in statuses:
            self.problem(f"{self.name} {what}: {response.status_code} (expected {statuses}): "
                         f"{response.text[:300]}")
            return False
        return True

    # -- steps ------------------------------------------------------------------------
    def upload(self, size: int | None = None) -> tuple[str, list[bytes], str] | None:
        source = self.rng.choice(sorted(self.lines))
        rows = self.lines[source]
        size = size or self.rng.choice((40, 80, 150, 250))
        start = self.rng.randrange(0, max(1, len(rows) - size))
        chosen = rows[start:start + size]
        body = b"".join(chosen)
        name = f"{self.name}-{source}-{size}-{start}"
        headers = {"Idempotency-Key": f"up-{uuid.uuid4().hex}"}
        url = f"/v1/datasets?name={name}"
        response, _ = self.call("POST", "POST /v1/datasets", url, content=body,
                                headers=headers)
        if not self.expect(response, (201,), "upload"):
            return None
        assert response is not None
        dataset_id = str(response.json()["id"])
        if self.rng.random() < 0.3:
            again, _ = self.call("POST", "POST /v1/datasets (replay)", url, content=body,
                                 headers=headers)
            if self.expect(again, (201,), "upload replay") and again is not None:
                self.count("upload replays")
                if again.json()["id"] != dataset_id or \
                        again.headers.get("Idempotent-Replay") != "true":
                    self.problem(f"{self.name} upload replay answered {again.json()['id']} "
                                 f"for {dataset_id}")
        self.registry.add(self.name, "dataset", dataset_id)
        self.count("uploads")
        return dataset_id, chosen, source

    def submit(self, dataset_id: str, source: str, spec: dict[str, Any] | None = None,
               route: str = "POST /v1/jobs", replay: float = 0.3) -> str | None:
        if spec is None:
            solver, params = self.rng.choice(specs_for(source))
            spec = {"solver": solver, "params": params}
        spec = {"dataset_id": dataset_id, **spec}
        headers = {"Idempotency-Key": f"job-{uuid.uuid4().hex}"}
        response, _ = self.call("POST", route, "/v1/jobs", json=spec, headers=headers)
        if response is not None and response.status_code == 429:
            self.count("submissions refused 429")
            return None  # a tenant limit: allowed, counted
        if not self.expect(response, (202,), f"submit {spec}"):
            return None
        assert response is not None
        job_id = str(response.json()["id"])
        self.accept(job_id)
        self.registry.add(self.name, "job", job_id)
        self.count("jobs submitted")
        if self.rng.random() < replay:
            again, _ = self.call("POST", f"{route} (replay)", "/v1/jobs", json=spec,
                                 headers=headers)
            if self.expect(again, (202,), "submit replay") and again is not None:
                self.count("job replays")
                if again.json()["id"] != job_id or \
                        again.headers.get("Idempotent-Replay") != "true":
                    self.problem(f"{self.name} job replay answered {again.json()['id']} "
                                 f"for {job_id}")
        return job_id

    def poll(self, job_id: str, timeout: float) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            response, _ = self.call("GET", "GET /v1/jobs/{id}", f"/v1/jobs/{job_id}")
            if not self.expect(response, (200,), f"poll {job_id}"):
                return None
            assert response is not None
            job: dict[str, Any] = response.json()
            if job["status"] in TERMINAL:
                self.final[job_id] = job["status"]
                return job
            time.sleep(0.2)
        return None

    def predict(self, model_id: str, rows: list[bytes]) -> None:
        sample = self.rng.sample(rows, min(len(rows), self.rng.choice((1, 5, 20))))
        if self.rng.random() < 0.5:
            # text/plain: svmlight rows, labels ignored
            response, _ = self.call("POST", "POST /v1/models/{id}/predict",
                                    f"/v1/models/{model_id}/predict",
                                    content=b"".join(sample),
                                    headers={"Content-Type": "text/plain"})
        else:
            instances = []
            for row in sample:
                pairs = [p.split(b":") for p in row.split()[1:]]
                instances.append({"indices": [int(i) for i, _ in pairs],
                                  "values": [float(v) for _, v in pairs]})
            response, _ = self.call("POST", "POST /v1/models/{id}/predict",
                                    f"/v1/models/{model_id}/predict",
                                    json={"instances": instances})
        if self.expect(response, (200,), f"predict {model_id}") and response is not None:
            self.count("predictions")
            if len(response.json()["labels"]) != len(sample):
                self.problem(f"{self.name} predict {model_id}: "
                             f"{len(response.json()['labels'])} labels for "
                             f"{len(sample)} rows")

    def probe_other_tenants(self) -> None:
        """Another tenant's ids: every read or write must be 404."""
        checks = [
            ("job", "GET", "/v1/jobs/{}", "GET /v1/jobs/{id} (foreign)", {}),
            ("job", "POST", "/v1/jobs/{}/cancel", "POST /v1/jobs/{id}/cancel (foreign)", {}),
            ("dataset", "GET", "/v1/datasets/{}", "GET /v1/datasets/{id} (foreign)", {}),
            ("dataset", "DELETE", "/v1/datasets/{}", "DELETE /v1/datasets/{id} (foreign)",
             {}),
            ("dataset", "POST", "/v1/jobs", "POST /v1/jobs (foreign dataset)", {}),
            ("model", "GET", "/v1/models/{}", "GET /v1/models/{id} (foreign)", {}),
            ("model", "POST", "/v1/models/{}/predict",
             "POST /v1/models/{id}/predict (foreign)",
             {"json": {"instances": [{"indices": [1], "values": [0.5]}]}}),
        ]
        kind, method, template, route, kwargs = self.rng.choice(checks)
        foreign = self.registry.foreign(self.name, kind, self.rng)
        if foreign is None:
            return
        if route == "POST /v1/jobs (foreign dataset)":
            # someone else's dataset does not exist for this tenant: 422 like a missing one
            response, _ = self.call(method, route, "/v1/jobs",
                                    json={"dataset_id": foreign, "solver": "auto"},
                                    headers={"Idempotency-Key": f"x-{uuid.uuid4().hex}"})
            if response is not None and response.status_code == 202:
                self.accept(str(response.json()["id"]))
            self.expect(response, (404, 422), f"{route} {foreign}")
        else:
            response, _ = self.call(method, route, template.format(foreign), **kwargs)
            self.expect(response, (404,), f"{route} {foreign}")
        self.count("cross-tenant probes")

    def delete_dataset(self, dataset_id: str, statuses: tuple[int, ...], what: str
                       ) -> httpx.Response | None:
        response, retried = self.call("DELETE", "DELETE /v1/datasets/{id}",
                                      f"/v1/datasets/{dataset_id}")
        # a retry after a lost answer finds it deleted by the first try
        self.expect(response, (*statuses, 404) if retried else statuses, what)
        return response

    def round(self) -> None:
        uploaded = self.upload()
        if uploaded is None:
            return
        dataset_id, rows, source = uploaded
        jobs = [j for j in (self.submit(dataset_id, source)
                            for _ in range(self.rng.randint(1, 3))) if j is not None]
        if jobs and self.rng.random() < 0.25:
            victim = self.rng.choice(jobs)
            response, _ = self.call("POST", "POST /v1/jobs/{id}/cancel",
                                    f"/v1/jobs/{victim}/cancel")
            # 409: it had already finished
            if self.expect(response, (202, 409), f"cancel {victim}"):
                self.count("cancels")
        if jobs and self.rng.random() < 0.15:
            # 409 while a job is queued or running; 204 if they all finished already
            response = self.delete_dataset(dataset_id, (204, 409), "delete with jobs")
            if response is not None and response.status_code in (204, 404):
                return  # all its jobs had finished: the grace period below reads them
        for job_id in jobs:
            job = self.poll(job_id, JOB_TIMEOUT)
            if job is not None and job["status"] == "succeeded":
                self.registry.add(self.name, "model", str(job["model_id"]))
                for _ in range(self.rng.randint(1, 3)):
                    self.predict(str(job["model_id"]), rows)
        if self.rng.random() < 0.5:
            self.probe_other_tenants()
        if self.rng.random() < 0.2:
            response, _ = self.call("GET", "GET /v1/jobs", "/v1/jobs?limit=20")
            self.expect(response, (200,), "list jobs")
        if all(self.final.get(j) in TERMINAL for j in jobs) and self.rng.random() < 0.6:
            response = self.delete_dataset(dataset_id, (204,), f"delete {dataset_id}")
            if response is not None and response.status_code in (204, 404):
                self.count("deletes")

    def run(self) -> None:
        try:
            for _ in range(MAX_ROUNDS):
                if time.monotonic() >= self.end:
                    break
                self.round()
                self.count("rounds")
        except Exception as exc:  # reported by the test, never swallowed
            self.problem(f"{self.name} loop crashed: {type(exc).__name__}: {exc}")

    def burst(self) -> None:
        """BURST submissions at once (each with its own Idempotency-Key) on a new small
        dataset of this tenant: 202 or 429 (a queue limit), never a 5xx."""
        try:
            uploaded = self.upload(size=80)
            if uploaded is None:
                return
            dataset_id, _rows, source = uploaded
            gate = threading.Barrier(BURST)

            def one() -> None:
                gate.wait()
                self.submit(dataset_id, source, BURST_SPEC, route="POST /v1/jobs (burst)",
                            replay=0.0)

            threads = [threading.Thread(target=one, daemon=True) for _ in range(BURST)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(timeout=RETRY_SECONDS + IN_PROGRESS_SECONDS + 120)
            self.count("bursts")
        except Exception as exc:
            self.problem(f"{self.name} burst crashed: {type(exc).__name__}: {exc}")

    def listed_job_ids(self) -> set[str]:
        ids: set[str] = set()
        offset = 0
        for _ in range(100):
            response, _ = self.call("GET", "GET /v1/jobs",
                                    f"/v1/jobs?limit=1000&offset={offset}")
            assert response is not None and response.status_code == 200, response
            page = response.json()["data"]
            ids.update(str(job["id"]) for job in page)
            if len(page) < 1000:
                break
            offset += 1000
        return ids


# -- the service and the chaos -----------------------------------------------------------

class Api:
    """The API process on a fixed port, so that it can be SIGKILLed and started again at
    the same address (the clients keep theirs)."""

    def __init__(self, settings: Settings, log_dir: Path) -> None:
        self.settings = settings
        self.log_dir = log_dir
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.process: ServiceProcess | None = None
        self.starts = 0

    def start(self, timeout: float = 120.0) -> None:
        self.starts += 1
        self.process = ServiceProcess(
            [sys.executable, "-m", "uvicorn", "--factory", "app.api.main:create_app",
             "--host", "127.0.0.1", "--port", str(self.port)],
            settings_env(self.settings), self.log_dir / f"api-{self.port}-{self.starts}.log")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base}/healthz", timeout=2).status_code == 200:
                    return
            if self.process.process.poll() is not None:
                raise RuntimeError(self.process.log()[-4000:])
            time.sleep(0.1)
        raise TimeoutError(self.process.log()[-4000:])

    def kill(self) -> None:
        assert self.process is not None
        self.process.process.send_signal(signal.SIGKILL)
        self.process.process.wait()
        self.process.stop()  # closes its log

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


class Chaos:
    """Kills and bursts on a schedule spread over the first CHAOS_END of the soak."""

    def __init__(self, settings: Settings, log_dir: Path, api: Api,
                 workers: list[ServiceProcess], clients: list[TenantClient],
                 started: float, seconds: float, seed: int) -> None:
        self.settings, self.log_dir, self.api = settings, log_dir, api
        self.workers, self.clients = workers, clients
        self.rng = random.Random(seed)
        self.started = started
        self.events = self.schedule(seconds)
        self.api_down: list[tuple[float, float]] = []  # from the kill to /healthz again
        self.counts: collections.Counter[str] = collections.Counter()
        self.problems: list[str] = []
        self.bursts: list[threading.Thread] = []

    def schedule(self, seconds: float) -> list[tuple[float, str]]:
        events: list[tuple[float, str]] = []
        for kind, every, least in (("pool", 45, 2), ("worker", 200, 1), ("api", 150, 1),
                                   ("burst", 120, 1)):
            n = max(least, int(seconds // every))
            for i in range(n):
                at = 0.05 + (CHAOS_END - 0.05) * (i + self.rng.random()) / n
                events.append((at * seconds, kind))
        return sorted(events)

    def run(self) -> None:
        try:
            for at, kind in self.events:
                delay = self.started + at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                getattr(self, f"_{kind}")()
        except Exception as exc:  # reported by the test
            self.problems.append(f"chaos crashed: {type(exc).__name__}: {exc}")
        for thread in self.bursts:
            thread.join()

    def _pool(self) -> None:
        """SIGKILL one worker's pool process: one that runs a job (waiting up to 10 s for
        one to run), else any."""
        live = [w for w in self.workers if w.process.poll() is None]
        pools = {pid for w in live for pid in _children(w.process.pid)}
        busy = self._running_pids(pools, wait=10.0)
        if not (busy or pools):
            self.counts["pool kills skipped"] += 1
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.rng.choice(sorted(busy or pools)), signal.SIGKILL)
            self.counts["pool process SIGKILLs (mid-job)" if busy else
                        "pool process SIGKILLs (idle)"] += 1

    def _running_pids(self, pools: set[int], wait: float) -> set[int]:
        """The pool processes among `pools` that the database shows running a job."""
        engine = sa.create_engine(self.settings.database_url)
        deadline = time.monotonic() + wait
        try:
            while True:
                with engine.connect() as connection:
                    workers = connection.execute(sa.text(
                        "SELECT worker FROM jobs WHERE status = 'running'")).scalars().all()
                busy = {int(w.rsplit(" ", 1)[1]) for w in workers if w} & pools
                if busy or time.monotonic() > deadline:
                    return busy
                time.sleep(0.1)
        finally:
            engine.dispose()

    def _worker(self) -> None:
        """SIGKILL a whole worker (its process group), one running a job if any within
        10 s, then start another one."""
        live = [w for w in self.workers if w.process.poll() is None]
        busy = self._running_pids({p for w in live for p in _children(w.process.pid)},
                                  wait=10.0)
        victim = self.rng.choice([w for w in live if busy & _children(w.process.pid)]
                                 or live)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(victim.process.pid, signal.SIGKILL)
        victim.process.wait()
        victim.stop()
        self.counts["worker SIGKILLs"] += 1
        self.workers.append(start_worker(self.settings, self.log_dir))

    def _api(self) -> None:
        killed = time.monotonic()
        self.api.kill()
        self.counts["API SIGKILLs"] += 1
        time.sleep(self.rng.uniform(0.5, 3.0))  # down for a moment: clients keep trying
        self.api.start()
        self.api_down.append((killed, time.monotonic()))

    def _burst(self) -> None:
        client = self.rng.choice(self.clients)
        thread = threading.Thread(target=client.burst, name=f"burst-{client.name}",
                                  daemon=True)
        thread.start()
        self.bursts.append(thread)

    def expected(self, sent: float, failed: float) -> bool:
        """Whether a request's transport error falls in a window in which the API was down
        (sent before it was back, failed after it was killed)."""
        return any(sent <= up + 0.5 and failed >= down - 0.1 for down, up in self.api_down)


def _children(pid: int) -> set[int]:
    """A process's children, whichever of its threads forked them (a Celery worker forks a
    replacement pool process from another thread than the first one: child_pids, which
    reads the main thread's list, misses it)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found.update(int(p) for p in (task / "children").read_text().split())
    return found


def _svmlight_lines(name: str) -> list[bytes]:
    text = bundled.svmlight_bytes(name)
    return [line + b"\n" for line in text.splitlines() if line.strip()]


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


@contextlib.contextmanager
def _deployment(name: str, tmp_path: Path) -> Iterator[Settings]:
    home = tmp_path / "home"
    if name == "embedded":
        yield embedded_settings(home, **LEASES)
        return
    broker = require_redis() if name == "postgres-redis" else require_rabbitmq()
    with postgres_schema() as database_url:
        settings = embedded_settings(home, database_url=database_url, broker_url=broker,
                                     **LEASES)
        try:
            yield settings
        finally:
            drop_queue(settings.broker_url, settings.queue)


DEPLOYMENTS = [
    pytest.param("embedded", id="embedded"),
    pytest.param("postgres-redis", id="postgres-redis",
                 marks=[pytest.mark.postgres, pytest.mark.redis]),
    pytest.param("postgres-rabbitmq", id="postgres-rabbitmq",
                 marks=[pytest.mark.postgres, pytest.mark.rabbitmq]),
]


@pytest.mark.slow
@pytest.mark.parametrize("deployment", DEPLOYMENTS)
@pytest.mark.timeout(int(SOAK_SECONDS + 4 * JOB_TIMEOUT + GRACE + 900))  # not the 300 s
def test_chaos_soak_four_tenants_no_5xx_no_lost_or_duplicated_jobs(
    deployment: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = {name: _svmlight_lines(name) for name in DATA_SETS}
    with _deployment(deployment, tmp_path) as settings:
        settings.ensure_dirs()
        migrate(settings.database_url)
        admin_key = make_key(settings)
        workers: list[ServiceProcess] = []
        api = Api(settings, tmp_path)
        try:
            for _ in range(WORKERS):
                workers.append(start_worker(settings, tmp_path))
            api.start()
            clients, tenant_ids = _tenants(api.base, admin_key, lines)
            soaked, chaos, listed, recorder = _soak(settings, tmp_path, api, workers,
                                                    clients)
        finally:
            api.stop()
            for worker in workers:
                worker.stop()
        jobs, models = _database_rows(settings.database_url)

    problems = [p for c in clients for p in c.problems] + chaos.problems
    accepted: dict[str, set[str]] = {}
    for client in clients:
        accepted.setdefault(client.name, set()).update(client.accepted)
    unexpected = [what for sent, failed, what in recorder.transport_errors
                  if not chaos.expected(sent, failed)]
    _report(capsys, deployment, soaked, recorder, clients, chaos, jobs, unexpected,
            problems)

    assert recorder.server_errors == []
    assert unexpected == []
    assert problems == []
    assert sum(len(ids) for ids in accepted.values()) > 0
    for name, ids in accepted.items():
        assert listed[name] == ids, (name, ids ^ listed[name])
    # in the database: one row per accepted job, in its tenant, none other; terminal
    by_id = {job.id: job for job in jobs}
    every = set().union(*accepted.values())
    assert set(by_id) == every, ("jobs nobody was answered 202 for", set(by_id) - every,
                                 "accepted jobs without a row", every - set(by_id))
    for name, ids in accepted.items():
        for job_id in ids:
            job = by_id[job_id]
            assert job.tenant_id == tenant_ids[name]
            assert job.status in TERMINAL, (job_id, job.status)
            history = [entry["status"] for entry in job.status_history]
            assert history.count("succeeded") <= 1, (job_id, history)
            assert (job.model_id is not None) == (job.status == "succeeded"), job
    assert all(count == 1 for _job, count in models), models
    with_model = {job_id for job_id, _count in models}
    assert with_model == {job.id for job in jobs if job.status == "succeeded"}


def _tenants(base: str, admin_key: str, lines: dict[str, list[bytes]]
             ) -> tuple[list[TenantClient], dict[str, str]]:
    """TENANTS tenants, a train key each, and their clients (not started)."""
    recorder, registry = Recorder(), Registry()
    clients: list[TenantClient] = []
    tenant_ids: dict[str, str] = {}
    with httpx.Client(base_url=base, headers=bearer(admin_key), timeout=60) as admin:
        for index in range(TENANTS):
            name = f"soak-{index}"
            tenant = admin.post("/v1/admin/tenants", json={"name": name})
            assert tenant.status_code == 201, tenant.text
            tenant_ids[name] = tenant.json()["id"]
            key = admin.post("/v1/admin/keys", json={
                "tenant_id": tenant_ids[name], "scopes": ["train"], "name": "soak"})
            assert key.status_code == 201, key.text
            clients.append(TenantClient(name, base, key.json()["key"], recorder, registry,
                                        lines, seed=index, end=0.0))
    return clients, tenant_ids


def _soak(settings: Settings, log_dir: Path, api: Api, workers: list[ServiceProcess],
          clients: list[TenantClient]
          ) -> tuple[float, Chaos, dict[str, set[str]], Recorder]:
    recorder = clients[0].recorder
    started = time.monotonic()
    end = started + SOAK_SECONDS
    for client in clients:
        client.end = end
    chaos = Chaos(settings, log_dir, api, workers, clients, started, SOAK_SECONDS, seed=99)
    threads = [threading.Thread(target=c.run, name=c.name, daemon=True) for c in clients]
    threads.append(threading.Thread(target=chaos.run, name="chaos", daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        # a round ends within a few job timeouts of the end
        thread.join(timeout=SOAK_SECONDS + 4 * JOB_TIMEOUT + 300)
    assert not any(t.is_alive() for t in threads), "a tenant loop or the chaos did not stop"
    soaked = time.monotonic() - started

    # Grace: every accepted job reaches a terminal state.
    grace_end = time.monotonic() + GRACE
    for client in clients:
        for job_id in sorted(client.accepted - set(client.final)):
            client.poll(job_id, max(1.0, grace_end - time.monotonic()))
    # None lost, none extra: each tenant lists exactly the jobs it was answered 202 for.
    listed = {c.name: c.listed_job_ids() for c in clients}
    for client in clients:
        client.http.close()
    return soaked, chaos, listed, recorder


def _database_rows(database_url: str) -> tuple[list[Any], list[Any]]:
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as connection:
            jobs = connection.execute(sa.text(
                "SELECT id, tenant_id, status, status_history, model_id, attempt, error "
                "FROM jobs")).all()
            models = connection.execute(sa.text(
                "SELECT job_id, count(*) FROM models WHERE job_id IS NOT NULL "
                "GROUP BY job_id")).all()
    finally:
        engine.dispose()
    rows = [SimpleNamespace(**row._asdict()) for row in jobs]
    for row in rows:  # SQLite gives the JSON column as text through a raw query
        if isinstance(row.status_history, str):
            row.status_history = json.loads(row.status_history)
    return rows, list(models)


def _report(capsys: pytest.CaptureFixture[str], deployment: str, soaked: float,
            recorder: Recorder, clients: list[TenantClient], chaos: Chaos, jobs: list[Any],
            unexpected: list[str], problems: list[str]) -> None:
    final_statuses = collections.Counter(job.status for job in jobs)
    statuses = collections.Counter[int]()
    for counter in recorder.statuses.values():
        statuses.update(counter)
    counts = collections.Counter[str]()
    for c in clients:
        counts.update(c.counts)
    everything = recorder.all_latencies()
    submits = recorder.latencies.get("POST /v1/jobs", []) + \
        recorder.latencies.get("POST /v1/jobs (burst)", [])
    errors = collections.Counter(str(job.error)[:80] for job in jobs if job.status == "failed")
    attempts = collections.Counter(int(job.attempt) for job in jobs)
    summary = [
        f"soak [{deployment}]: {soaked:.0f} s, {TENANTS} tenants, {WORKERS} workers, "
        f"{sum(statuses.values())} answers; latency p50/p95/p99 "
        f"{_quantile(everything, 0.5) * 1000:.0f}/{_quantile(everything, 0.95) * 1000:.0f}/"
        f"{_quantile(everything, 0.99) * 1000:.0f} ms; POST /v1/jobs p99 "
        f"{_quantile(submits, 0.99) * 1000:.0f} ms",
        f"chaos: {dict(sorted(chaos.counts.items()))}; API down windows: "
        f"{[round(up - down, 1) for down, up in chaos.api_down]} s",
        f"statuses: {dict(sorted(statuses.items()))}; 429 by tenant: "
        f"{dict(recorder.rate_limited)}; transport errors: "
        f"{len(recorder.transport_errors)} ({len(unexpected)} outside the API's down "
        f"windows); in-progress retries: {recorder.in_progress_waits}",
        f"jobs accepted: {sum(len(c.accepted) for c in clients)}; by final status: "
        f"{dict(final_statuses)}; attempts: {dict(sorted(attempts.items()))}",
        f"actions: {dict(sorted(counts.items()))}",
        *(f"  failed: {n} x {error}" for error, n in errors.most_common(5)),
        *(f"  {route}: {dict(sorted(answers.items()))}"
          for route, answers in sorted(recorder.statuses.items())),
        *(f"  5xx: {error}" for error in recorder.server_errors[:10]),
        *(f"  unexpected transport error: {error}" for error in unexpected[:10]),
        *(f"  problem: {problem}" for problem in problems[:20]),
    ]
    with capsys.disabled():  # shown by `make test-slow` too, passed or failed
        print("\n" + "\n".join(summary))
