"""The service end to end: a real API server and Celery worker on the embedded default.

Starts the service (tests.support.running_service: SQLite database, SQLite broker, one
worker, uvicorn) in a temporary HINGE_HOME and measures, on loopback only:

1. upload -> model: POST /v1/datasets (the shared .xz file), POST /v1/jobs (dcd, l1, C=1),
   polling GET /v1/jobs/{id} every 20 ms until it succeeds; against the bare in-process
   `solvers.fit` of the same problem (parsed and warmed beforehand). Alternated, medians.
2. the cold start of a worker: process start to Celery's `ready.` and to the warm solver
   kernels (the worker logs "solver kernels ready in X s"); with the Numba cache on disk
   (every restart) and, in full mode, with an empty cache (the first start after a deploy).
3. predict latency p50/p99 and throughput (rows/s) with 1, 4 and 8 concurrent clients
   (threads, one httpx client each; bounded by a request count and a time limit), batches
   of 1 and 1000 svmlight rows, for the linear model of step 1 and, if GET /v1/solvers
   lists "smo", for an RBF model.
4. the cost of progress reporting: the same dcd fit with and without
   workers.training.ProgressRecorder writing to a throwaway SQLite job row, alternated;
   target < 5% of training time.

    .venv/bin/python bench/service_bench.py [--quick]    (or python -m bench.run --only service)
Writes bench/results/service.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import lzma
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench.paths import DATA_DIR, SMOKE, results_dir  # noqa: E402

RESULT = results_dir() / "service.md"
POLL_S = 0.02
PROGRESS_TARGET = 0.05  # progress reporting must cost < 5% of training time
KERNELS_READY = re.compile(r"solver kernels ready in ([0-9.]+) s")
LOG_STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})")


@dataclass
class Config:
    reps: int
    e2e_datasets: tuple[str, ...]
    cold_starts: int
    cold_start_empty_cache: bool
    clients: tuple[int, ...]
    batches: tuple[int, ...]
    max_requests: dict[int, int]  # per batch size, per (clients, batch) measurement
    max_seconds: float
    rbf_dataset: str
    rbf_test: str
    progress_reps: int
    progress_c: float  # a larger C than the default: a9a fits of 1.4 s (C=32), 2.7 s (C=64)
    # False: the cold start is read from the log of the service's own worker (one start
    # fewer), not from starts of their own (cold_starts of them)
    own_cold_starts: bool = True


# --quick is a smoke run (make bench-quick, 5 minutes in all): every step of the full run,
# once each, with short predict loads: upload -> model on a9a only, the cold start read from
# the service's worker (no start of its own), progress fits at C = 8 (a9a, ~0.4 s); the
# figures of record are the full run's
QUICK = Config(reps=1, e2e_datasets=("a9a",), cold_starts=1,
               cold_start_empty_cache=False, clients=(1, 4, 8), batches=(1, 1000),
               max_requests={1: 100, 1000: 20}, max_seconds=1.0, rbf_dataset="heart_scale",
               rbf_test="heart_scale", progress_reps=2, progress_c=8.0,
               own_cold_starts=False)
SMOKE_CONFIG = Config(reps=1, e2e_datasets=("a9a",), cold_starts=1,
                      cold_start_empty_cache=False, clients=(1, 4), batches=(1, 1000),
                      max_requests={1: 40, 1000: 8}, max_seconds=1.0, rbf_dataset="heart_scale",
                      rbf_test="heart_scale", progress_reps=2, progress_c=32.0)
FULL = Config(reps=5, e2e_datasets=("a9a", "ijcnn1"), cold_starts=3,
              cold_start_empty_cache=True, clients=(1, 4, 8), batches=(1, 1000),
              max_requests={1: 3000, 1000: 300}, max_seconds=20.0, rbf_dataset="a9a",
              rbf_test="a9a.t", progress_reps=7, progress_c=64.0)


def row(metric: str, hinge: float, reference: float = math.nan, target: str = "—",
        met: bool | None = None) -> dict[str, Any]:
    ratio = hinge / reference if reference and math.isfinite(reference) else math.nan
    return {"experiment": "service", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(ratio), "target": target,
            "met": bool(met) if met is not None else True}


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else math.nan


# --------------------------------------------------------------------------------------
# 2. cold start of a worker


def log_times(text: str, needle: str | re.Pattern[str]) -> float | None:
    """Epoch seconds of the first log line containing `needle` (Celery's timestamps)."""
    for line in text.splitlines():
        found = needle.search(line) if isinstance(needle, re.Pattern) else needle in line
        if found:
            stamp = LOG_STAMP.match(line)
            if stamp:
                return dt.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            return None
    return None


def prime_numba_cache() -> float:
    """Run warmup() in a fresh process, so the on-disk Numba cache has every kernel.

    A solver whose source changed since the cache was written recompiles here, not in the
    measured worker starts. Returns the seconds it took.
    """
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", "from solvers.warmup import warmup; warmup()"],
                          cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"solvers.warmup.warmup() failed: {done.stderr.strip()[-1500:]}")
    return time.perf_counter() - started


def cold_start(settings: Any, log_dir: Path, empty_cache: bool) -> dict[str, float]:
    """Start a worker, time process start -> `ready.` and -> kernels warm, stop it."""
    from testkit.service import start_worker

    saved = os.environ.get("NUMBA_CACHE_DIR")
    cache = tempfile.TemporaryDirectory(prefix="hinge-numba-empty-") if empty_cache else None
    if cache is not None:
        os.environ["NUMBA_CACHE_DIR"] = cache.name
    try:
        started_epoch = time.time()
        started = time.perf_counter()
        worker = start_worker(settings, log_dir)  # returns once "ready." is in the log
        ready_polled = time.perf_counter() - started
        try:
            deadline = time.monotonic() + 300
            match = None
            while time.monotonic() < deadline:
                match = KERNELS_READY.search(worker.log())
                if match:
                    break
                time.sleep(POLL_S)
            warm_polled = time.perf_counter() - started
            if match is None:
                raise TimeoutError("the worker never logged 'solver kernels ready'")
            text = worker.log()
        finally:
            worker.stop()
    finally:
        if cache is not None:
            cache.cleanup()
        if saved is None:
            os.environ.pop("NUMBA_CACHE_DIR", None)
        else:
            os.environ["NUMBA_CACHE_DIR"] = saved
    return start_times(text, started_epoch, ready_polled, warm_polled, match)


OWN_WORKER_NOTE = "; --quick: the start of the service's own worker, not one of its own"


def start_times(text: str, started_epoch: float, ready_polled: float, warm_polled: float,
                match: re.Match[str]) -> dict[str, float]:
    """A worker's start from its log: -> `ready.`, -> kernels warm, the logged warm-up."""
    ready_at = log_times(text, " ready.")
    warm_at = log_times(text, KERNELS_READY)
    return {
        # log timestamps (ms) when present; the 0.1 s / 20 ms polls otherwise
        "ready_s": ready_at - started_epoch if ready_at else ready_polled,
        "warm_s": warm_at - started_epoch if warm_at else warm_polled,
        "kernels_s": float(match.group(1)),
    }


# --------------------------------------------------------------------------------------
# 1. upload -> model, and the bare fit


def wait_job(client: httpx.Client, job_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = client.get(f"/v1/jobs/{job_id}").raise_for_status().json()
        if body["status"] in ("succeeded", "failed", "cancelled"):
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"job {job_id} still {body['status']} after {timeout:.0f} s")
        time.sleep(POLL_S)


def upload_and_train(client: httpx.Client, path: Path, solver: str, params: dict[str, Any],
                     timeout: float = 600.0) -> dict[str, Any]:
    started = time.perf_counter()
    with open(path, "rb") as handle:
        response = client.post("/v1/datasets", files={"file": (path.name, handle)},
                               data={"name": path.name.split(".")[0]})
    response.raise_for_status()
    uploaded = time.perf_counter()
    dataset = response.json()
    response = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": solver,
                                             "params": params})
    response.raise_for_status()
    job = wait_job(client, response.json()["id"], timeout)
    done = time.perf_counter()
    if job["status"] != "succeeded":
        raise RuntimeError(f"{solver} job on {path.name} {job['status']}: {job.get('error')}")
    return {"total_s": done - started, "upload_s": uploaded - started,
            "job_s": done - uploaded, "train_s": float(job["result"]["train_seconds"]),
            "model_id": job["model_id"], "features": dataset["features"]}


def warm_dcd() -> None:
    """Compile (or load from the Numba cache) the dcd kernels of this process."""
    import scipy.sparse as sp

    from solvers import fit

    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [-1.0, 0.5]]))
    y = np.array([1.0, -1.0, 1.0, -1.0])
    for loss in ("l1", "l2"):
        fit(X, y, solver="dcd", loss=loss, progress=lambda event: None)


def bare_fit(X: Any, y: np.ndarray, params: dict[str, Any]) -> float:
    from solvers import fit

    started = time.perf_counter()
    fit(X, y, solver="dcd", **params)
    return time.perf_counter() - started


def end_to_end(client: httpx.Client, name: str, reps: int) -> dict[str, Any]:
    from solvers.svmlight import load_svmlight

    path = DATA_DIR / f"{name}.xz"
    params = {"C": 1.0, "loss": "l1"}
    started = time.perf_counter()
    parsed = load_svmlight(path)
    parse_s = time.perf_counter() - started
    X, y = parsed.to_csr(), parsed.y
    bare_fit(X, y, params)  # warm (kernels, caches)
    runs: list[dict[str, Any]] = []
    bare: list[float] = []
    for _ in range(reps):  # alternate service and in-process
        runs.append(upload_and_train(client, path, "dcd", params))
        bare.append(bare_fit(X, y, params))
    median = {key: statistics.median(r[key] for r in runs)
              for key in ("total_s", "upload_s", "job_s", "train_s")}
    return {"name": name, **median, "bare_s": statistics.median(bare), "parse_s": parse_s,
            "model_id": runs[-1]["model_id"], "features": runs[-1]["features"], "reps": reps}


# --------------------------------------------------------------------------------------
# 3. predict load


def svmlight_lines(name: str, count: int) -> list[bytes]:
    with lzma.open(DATA_DIR / f"{name}.xz") as handle:
        lines = [line for line in handle.read().splitlines() if line.strip()]
    return [lines[i % len(lines)] for i in range(count)]


def load_test(base_url: str, model_id: str, body: bytes, clients: int, max_requests: int,
              max_seconds: float) -> dict[str, Any]:
    """`clients` threads post `body` until max_requests in total or max_seconds pass."""
    url = f"/v1/models/{model_id}/predict"
    headers = {"content-type": "text/plain"}
    latencies: list[float] = []
    errors: list[str] = []
    issued = 0
    lock = threading.Lock()
    barrier = threading.Barrier(clients + 1)
    deadline = [math.inf]

    def post(http: httpx.Client) -> str | None:
        """None on success, else what went wrong."""
        try:
            response = http.post(url, content=body, headers=headers)
        except Exception as exc:  # connection reset, timeout, ...: counted, never fatal
            return type(exc).__name__
        return None if response.status_code == 200 else f"HTTP {response.status_code}"

    def work() -> None:
        nonlocal issued
        with httpx.Client(base_url=base_url, timeout=60) as http:
            for _ in range(2):  # per-client warm-up: connection, model cache
                post(http)
            try:
                barrier.wait(timeout=300)
            except threading.BrokenBarrierError:
                return
            while True:
                with lock:
                    if issued >= max_requests or time.perf_counter() > deadline[0]:
                        return
                    issued += 1
                started = time.perf_counter()
                problem = post(http)
                elapsed = time.perf_counter() - started
                with lock:
                    if problem is None:
                        latencies.append(elapsed)
                    else:
                        errors.append(problem)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    # a client that never gets through its warm-up breaks the barrier: measure the others
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=300)
    started = time.perf_counter()
    deadline[0] = started + max_seconds
    for thread in threads:
        thread.join(timeout=max_seconds + 120)
    wall = time.perf_counter() - started
    return {"requests": len(latencies), "errors": len(errors),
            "error_kinds": sorted(set(errors))[:3], "wall_s": wall,
            "p50_ms": percentile(latencies, 50) * 1e3, "p99_ms": percentile(latencies, 99) * 1e3,
            "requests_per_s": len(latencies) / wall if wall > 0 else math.nan}


def probe_predict(base_url: str, model_id: str, body: bytes) -> str | None:
    """None if one predict request succeeds, else why not (status and message)."""
    try:
        response = httpx.post(f"{base_url}/v1/models/{model_id}/predict", content=body,
                              headers={"content-type": "text/plain"}, timeout=120)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if response.status_code == 200:
        return None
    return f"HTTP {response.status_code}: {response.text[:200]}"


def predict_matrix(base_url: str, model_id: str, test_name: str, config: Config
                   ) -> tuple[list[dict[str, Any]], str]:
    """Every (batch, clients) measurement, and a note ('' if all went well)."""
    lines = svmlight_lines(test_name, max(config.batches))
    problem = probe_predict(base_url, model_id, b"\n".join(lines[:1]) + b"\n")
    if problem:
        return [], f"predict does not work on this model: {problem}"
    results = []
    for batch in config.batches:
        body = b"\n".join(lines[:batch]) + b"\n"
        for clients in config.clients:
            measured = load_test(base_url, model_id, body, clients, config.max_requests[batch],
                                 config.max_seconds)
            measured.update(batch=batch, clients=clients,
                            rows_per_s=measured["requests_per_s"] * batch)
            print(f"  batch {batch:>4}, {clients} clients: p50 {measured['p50_ms']:.1f} ms, "
                  f"p99 {measured['p99_ms']:.1f} ms, {measured['rows_per_s']:.0f} rows/s "
                  f"({measured['requests']} requests, {measured['errors']} errors)", flush=True)
            results.append(measured)
            if measured["requests"] == 0:
                return results, (f"stopped after batch {batch}, {clients} clients: every "
                                 f"request failed ({', '.join(measured['error_kinds'])})")
    return results, ""


def rbf_model(client: httpx.Client, config: Config) -> tuple[str | None, str]:
    """(model id, note): an RBF model trained by the service, if it lists solver smo."""
    listed = client.get("/v1/solvers").raise_for_status().json()
    names = [solver["name"] for solver in listed.get("data", [])]
    if "smo" not in names:
        return None, f"skipped: GET /v1/solvers lists {', '.join(names)}, not smo"
    path = DATA_DIR / f"{config.rbf_dataset}.xz"
    try:
        run = upload_and_train(client, path, "smo", {"kernel": "rbf", "C": 1.0},
                               timeout=1800)
    except (RuntimeError, TimeoutError, httpx.HTTPError) as exc:
        return None, f"the smo job failed: {exc}"[:300]
    return run["model_id"], (f"smo, rbf, C = 1, gamma = 1/features on {config.rbf_dataset} "
                             f"(trained by the service in {run['train_s']:.1f} s)")


# --------------------------------------------------------------------------------------
# 4. progress reporting


@contextlib.contextmanager
def throwaway_job(home: Path) -> Iterator[tuple[Any, str]]:
    """A migrated SQLite database in `home` with one `running` job row (attempt 1)."""
    from app.domain.orm import Job, new_id, utcnow
    from app.domain.services.tenants import DEFAULT_TENANT, create_tenant
    from app.infra.db import session_scope
    from testkit.service import embedded_settings, migrate

    settings = embedded_settings(home)
    settings.ensure_dirs()
    migrate(settings.database_url)
    job_id = new_id()
    with session_scope(settings.database_url) as session:
        tenant = create_tenant(session, DEFAULT_TENANT)
        session.add(Job(id=job_id, tenant_id=tenant.id, solver="dcd", params={},
                        status="running", attempt=1,
                        status_history=[], started_at=utcnow(), heartbeat_at=utcnow()))
    yield settings, job_id


def progress_cost(home: Path, config: Config) -> dict[str, Any]:
    from solvers import fit
    from solvers.svmlight import load_svmlight
    from workers.training import ProgressRecorder

    parsed = load_svmlight(DATA_DIR / "a9a.xz")
    X, y = parsed.to_csr(), parsed.y
    params = {"C": config.progress_c, "loss": "l1", "eps": 0.1, "max_iter": 100_000}
    with throwaway_job(home) as (settings, job_id):
        calls = [0]

        def with_recorder() -> Any:
            recorder = ProgressRecorder(settings, job_id, 1, params["eps"])

            def progress(event: dict[str, Any]) -> bool:
                calls[0] += 1
                return recorder(event)

            calls[0] = 0
            return fit(X, y, solver="dcd", progress=progress, **params)

        def without() -> Any:
            return fit(X, y, solver="dcd", **params)

        with_recorder()  # warm: kernels, SQLAlchemy engine, the SQLite file
        timed: dict[str, list[float]] = {"with": [], "without": []}
        shares: list[float] = []
        events: list[int] = []
        exits: set[str] = set()
        iterations = 0
        makers: dict[str, Callable[[], Any]] = {"with": with_recorder, "without": without}
        for _ in range(config.progress_reps):  # alternate
            for name, make in makers.items():
                started = time.perf_counter()
                result = make()
                timed[name].append(time.perf_counter() - started)
                if result.exit_reason not in ("converged", "max_iter"):
                    raise RuntimeError(f"progress fit ended {result.exit_reason}")
                exits.add(result.exit_reason)
                if name == "with":
                    shares.append(result.timings.get("progress_s", math.nan)
                                  / result.train_seconds)
                    events.append(calls[0])
                iterations = result.iterations
    with_s, without_s = statistics.median(timed["with"]), statistics.median(timed["without"])
    return {"with_s": with_s, "without_s": without_s, "share": statistics.median(shares),
            "iterations": iterations, "reps": config.progress_reps, "C": params["C"],
            "events": statistics.median(events), "exit": "/".join(sorted(exits))}


# --------------------------------------------------------------------------------------


def main(quick: bool = False) -> list[dict[str, Any]]:
    """Run the service benchmark, write bench/results/service.md, return summary rows."""
    config = (SMOKE_CONFIG if SMOKE else QUICK) if quick else FULL
    rows: list[dict[str, Any]] = []
    facts: dict[str, Any] = {"quick": quick, "config": config}
    warm_dcd()
    with tempfile.TemporaryDirectory(prefix="hinge-bench-service-") as tmp:
        from testkit.service import embedded_settings, migrate, running_service

        log_dir = Path(tmp) / "logs"
        log_dir.mkdir()
        settings = embedded_settings(Path(tmp) / "home")
        settings.ensure_dirs()
        migrate(settings.database_url)

        print("worker cold start", flush=True)
        facts["prime_s"] = prime_numba_cache()
        if config.own_cold_starts:
            starts = [cold_start(settings, log_dir, empty_cache=False)
                      for _ in range(config.cold_starts)]
            facts["cold"] = {key: statistics.median(s[key] for s in starts)
                             for key in starts[0]}
            facts["cold_n"] = len(starts)
        if config.cold_start_empty_cache:
            facts["cold_empty"] = cold_start(settings, log_dir, empty_cache=True)

        started_epoch, started = time.time(), time.perf_counter()
        with running_service(settings, log_dir) as (client, workers):
            ready_polled = time.perf_counter() - started  # the API's start included
            deadline = time.monotonic() + 300
            while not (match := KERNELS_READY.search(workers[0].log())):  # its warm-up
                if time.monotonic() > deadline:
                    raise TimeoutError("the worker never logged 'solver kernels ready'")
                time.sleep(POLL_S)
            if not config.own_cold_starts:  # the service's worker: its log's timestamps
                facts["cold"] = start_times(workers[0].log(), started_epoch, ready_polled,
                                            time.perf_counter() - started, match)
                facts["cold_n"] = 1
            # one untimed round trip: the API's parser kernels, connections, first queries
            upload_and_train(client, DATA_DIR / f"{config.e2e_datasets[0]}.xz", "dcd",
                             {"C": 1.0, "loss": "l1"})
            facts["e2e"] = []
            for name in config.e2e_datasets:
                print(f"upload -> model: {name}", flush=True)
                facts["e2e"].append(end_to_end(client, name, config.reps))
            base_url = str(client.base_url)
            linear = facts["e2e"][0]
            print(f"predict, linear model ({linear['name']})", flush=True)
            facts["predict_linear"], facts["linear_problem"] = predict_matrix(
                base_url, linear["model_id"], f"{linear['name']}.t", config)
            model_id, facts["rbf_note"] = rbf_model(client, config)
            print(f"predict, rbf model: {facts['rbf_note']}", flush=True)
            facts["predict_rbf"], facts["rbf_problem"] = [], ""
            if model_id:
                facts["predict_rbf"], facts["rbf_problem"] = predict_matrix(
                    base_url, model_id, config.rbf_test, config)

        print("progress reporting cost", flush=True)
        facts["progress"] = progress_cost(Path(tmp) / "progress-home", config)

    cold = facts["cold"]
    rows.append(row("worker cold start: process start -> `ready.` (s)", cold["ready_s"]))
    rows.append(row("worker cold start: process start -> solver kernels warm (s)",
                    cold["warm_s"]))
    rows.append(row("worker warm-up of every solver's kernels, Numba cache on disk (s)",
                    cold["kernels_s"]))
    if "cold_empty" in facts:
        rows.append(row("worker first start, empty Numba cache: -> kernels warm (s, one-off)",
                        facts["cold_empty"]["warm_s"]))
    for e2e in facts["e2e"]:
        rows.append(row(f"{e2e['name']}: upload -> model (s) vs the bare in-process fit",
                        e2e["total_s"], e2e["bare_s"]))
    for measured in facts["predict_linear"]:
        if measured["batch"] == 1 and measured["clients"] == 1:
            rows.append(row("predict, linear, 1 row, 1 client: p50 latency (ms)",
                            measured["p50_ms"]))
            rows.append(row("predict, linear, 1 row, 1 client: p99 latency (ms)",
                            measured["p99_ms"]))
        if measured["clients"] == max(config.clients):
            rows.append(row(f"predict, linear, {measured['batch']} rows, "
                            f"{measured['clients']} clients: throughput (rows/s)",
                            measured["rows_per_s"]))
    for measured in facts["predict_rbf"]:
        if measured["batch"] == 1 and measured["clients"] == 1:
            rows.append(row("predict, rbf, 1 row, 1 client: p50 latency (ms)",
                            measured["p50_ms"]))
        if measured["clients"] == max(config.clients):
            rows.append(row(f"predict, rbf, {measured['batch']} rows, "
                            f"{measured['clients']} clients: throughput (rows/s)",
                            measured["rows_per_s"]))
    if facts["linear_problem"]:
        rows.append(row(f"predict, linear: {facts['linear_problem']}", math.nan,
                        target="answers", met=False))
    if facts["rbf_problem"] or (model_id and not facts["predict_rbf"]):
        rows.append(row(f"predict, rbf: {facts['rbf_problem']}", math.nan, target="answers",
                        met=False))
    elif not model_id:
        trained = not facts["rbf_note"].startswith("skipped")
        rows.append(row(f"predict, rbf: {facts['rbf_note']}", math.nan,
                        target="answers" if trained else "—", met=not trained))
    progress = facts["progress"]
    ratio = progress["with_s"] / progress["without_s"]
    rows.append(row("dcd fit with / without progress written to the database (s)",
                    progress["with_s"], progress["without_s"], f"<= {1 + PROGRESS_TARGET:g}",
                    ratio <= 1 + PROGRESS_TARGET))
    rows.append(row("share of training time in progress snapshots + callback (%)",
                    100 * progress["share"], math.nan, f"< {100 * PROGRESS_TARGET:g}",
                    progress["share"] < PROGRESS_TARGET))
    write_report(facts)
    return rows


def write_report(facts: dict[str, Any]) -> None:
    config: Config = facts["config"]
    load = os.getloadavg()
    cold = facts["cold"]
    lines = [
        "# The service end to end",
        "",
        f"Generated by `bench/service_bench.py`{' --quick' if facts['quick'] else ''} on "
        f"{dt.date.today().isoformat()} ({platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; load average at the end {load[0]:.2f}/"
        f"{load[1]:.2f}/{load[2]:.2f}). A real API server (uvicorn) and one Celery worker "
        "(concurrency 1, HINGE_SOLVER_THREADS=1) on the embedded default (SQLite database "
        "and SQLite broker) in a temporary HINGE_HOME, started by "
        "`tests.support.running_service`; every request goes over loopback. The benchmark "
        "process, the API and the worker share the machine's cores.",
        "",
        "## Upload -> model",
        "",
        "*service* = POST /v1/datasets (the shared `.xz`, decompressed and parsed by the API) "
        "+ POST /v1/jobs (dcd, l1-loss, C = 1, eps 0.1) + polling GET /v1/jobs/{id} every "
        f"{POLL_S * 1e3:.0f} ms until `succeeded`; *bare fit* = `solvers.fit` on the "
        "already-parsed CSR matrix in this process, kernels warm; the two alternate; "
        "medians, after the worker logged its warm solver kernels and one untimed round "
        "trip. *worker train s* is the job's own `result.train_seconds`.",
        "",
        "| data | runs | service s | upload s | job s (queue, load, train, store) | worker "
        "train s | bare fit s | service / bare | overhead s | in-process parse s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in facts["e2e"]:
        lines.append(
            f"| {e['name']} | {e['reps']} | {e['total_s']:.3f} | {e['upload_s']:.3f} | "
            f"{e['job_s']:.3f} | {e['train_s']:.3f} | {e['bare_s']:.3f} | "
            f"{e['total_s'] / e['bare_s']:.1f} | {e['total_s'] - e['bare_s']:.3f} | "
            f"{e['parse_s']:.3f} |")
    lines += [
        "",
        "## Cold start of a worker",
        "",
        "From `Popen` of `celery -A workers.celery_app worker --concurrency 1` to Celery's "
        "`ready.` line and to the pool process's \"solver kernels ready in X s\" line (times "
        "from the log's millisecond timestamps), median of "
        f"{facts['cold_n']} starts with the Numba cache on disk (a restart"
        f"{'' if facts['config'].own_cold_starts else OWN_WORKER_NOTE}"
        "). Before them, "
        "`warmup()` in a fresh process filled the cache with whatever it lacked (solver "
        f"sources edited since the last run are recompiled): {facts['prime_s']:.1f} s this "
        "run.",
        "",
        "| start | -> ready. s | -> kernels warm s | warm-up X s (logged) |",
        "|---|---:|---:|---:|",
        f"| Numba cache on disk | {cold['ready_s']:.2f} | {cold['warm_s']:.2f} | "
        f"{cold['kernels_s']:.2f} |",
    ]
    if "cold_empty" in facts:
        empty = facts["cold_empty"]
        lines.append(f"| empty Numba cache (first start) | {empty['ready_s']:.2f} | "
                     f"{empty['warm_s']:.2f} | {empty['kernels_s']:.2f} |")
    else:
        lines.append("| empty Numba cache (first start) | not measured in quick mode | | |")
    lines += [
        "",
        "## Predict",
        "",
        "`clients` threads in this process, one `httpx.Client` each (2 warm-up requests "
        "each), post the same `text/plain` body of `batch` svmlight rows (from the test "
        "split) to POST /v1/models/{id}/predict until "
        + " / ".join(f"{n} requests (batch {b})" for b, n in config.max_requests.items())
        + f" in total, or {config.max_seconds:g} s. Latency per request; "
        "throughput = rows answered / wall time. Clients, API and worker share 2 cores: at 4 "
        "and 8 clients the client threads (one GIL) compete with the server.",
        "",
    ]
    for title, results, notes in (
            ("linear (dcd, a9a)", facts["predict_linear"], [facts["linear_problem"]]),
            ("rbf", facts["predict_rbf"], [facts["rbf_note"], facts["rbf_problem"]])):
        lines.append(f"### {title}")
        lines.append("")
        lines += [f"{note}\n" for note in notes if note]
        if not results:
            continue
        lines += ["| batch | clients | requests | errors | p50 ms | p99 ms | requests/s | "
                  "rows/s |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for m in results:
            errors = f"{m['errors']} {' '.join(m['error_kinds'])}".strip()
            lines.append(f"| {m['batch']} | {m['clients']} | {m['requests']} | {errors} | "
                         f"{m['p50_ms']:.1f} | {m['p99_ms']:.1f} | {m['requests_per_s']:.0f} | "
                         f"{m['rows_per_s']:.0f} |")
        lines.append("")
    p = facts["progress"]
    lines += [
        "## Cost of progress reporting",
        "",
        f"The same fit (a9a, dcd, l1-loss, C = {p['C']:g}, eps 0.1, {p['iterations']} "
        f"iterations, {p['exit']}) with and without `workers.training.ProgressRecorder` as "
        "its progress callback, writing the job's latest progress (and a throttled history) to a "
        "throwaway SQLite job row, exactly as a worker does; alternated, medians of "
        f"{p['reps']} wall-clock runs. The solver calls back at most every 0.2 s "
        f"({p['events']:g} calls per fit here). The share is "
        "the solver's own account (`timings['progress_s']`: snapshots of the objective + "
        f"the callback) over its training time. Target: < {100 * PROGRESS_TARGET:g}%.",
        "",
        "| with progress s | without s | with / without | share of training time |",
        "|---:|---:|---:|---:|",
        f"| {p['with_s']:.3f} | {p['without_s']:.3f} | {p['with_s'] / p['without_s']:.3f} | "
        f"{100 * p['share']:.2f}% |",
        "",
    ]
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text("\n".join(lines))
    print(f"wrote {RESULT}", flush=True)


def _cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    main(quick=parser.parse_args().quick)


if __name__ == "__main__":
    _cli()
