"""Predict throughput: Hinge's single-row predict against a bare FastAPI JSON route.

1. `wrk` on loopback, 8 connections, a POST of one JSON row: Hinge's
   POST /v1/models/{id}/predict (a linear model trained on a9a, SQLite database, one
   uvicorn process; the per-tenant rate limit turned off, HINGE_RATE_PER_SECOND=0, since
   it would answer 429 by design) against `bench.bare_app` (a bare FastAPI route that
   parses a JSON body and returns a JSON document), both started by the same uvicorn from
   the same virtualenv with the same flags (`--no-access-log`). The servers are measured
   in turns (bare, Hinge, bare, Hinge, ...) and each figure is the median over the rounds.
   Also Hinge with HINGE_API_WORKERS=2 (uvicorn --workers 2).
   Targets: Hinge >= half the bare route's requests/s; Hinge's p99 < 10 ms.
   Then under `make run`, as users run it: `python -m app.run` on a fresh embedded
   HINGE_HOME (the API, a Celery worker measured once ready, i.e. idle, and the
   supervisor), with the bare route served beside it by a lone uvicorn, the two in turns;
   each round's ratio is Hinge's req/s over the bare route's. Then the same with an RBF
   smo job on a9a training on the worker. The load average is kept with every run (the
   host may be shared: read the ratios). Targets with the idle worker: ratio >= 0.5 and
   p99 < 10 ms; with training, reported. Between the two phases, wrk on
   `bench@production` while the alias is promoted and rolled back (1 -> 2 -> 1 -> 2):
   0 non-2xx answers, each naming a version the alias held (wrk's response() hook).
2. Batch linear predict in-process: the servable model's labels and decision values for
   a9a's test rows (CSR, 100,000 rows per call), rows/s. Target >= 1,000,000 rows/s.

`--before PATH` also serves Hinge from another source tree (e.g. `git archive` of an
older commit) in the same rounds, for a side-by-side before/after table.

wrk is required for part 1: without it the benchmark says so in its table and in a
failed row (install: `apt-get install -y wrk`).

    python -m bench.predict_bench [--quick] [--before PATH] [--make-run]
    (python -m bench.run --only predict; --make-run: only the `make run` part and the
    in-process figure; --quick: a smoke run, every server and phase once, wrk runs of 1 s)
Writes bench/results/predict.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import numpy as np  # noqa: E402

from bench.paths import DATA_DIR, results_dir, smaller  # noqa: E402

CONNECTIONS = 8
THROUGHPUT_SHARE = 0.5  # Hinge >= half the bare route
P99_TARGET_MS = 10.0
BATCH_TARGET = 1_000_000.0  # rows/s in-process
BATCH_ROWS = 100_000
UVICORN_FLAGS = ["--no-access-log", "--log-level", "warning"]


def row(metric: str, hinge: float, reference: float = math.nan, target: str = "—",
        met: bool | None = None) -> dict[str, Any]:
    ratio = hinge / reference if reference and math.isfinite(reference) else math.nan
    return {"experiment": "predict", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(ratio), "target": target,
            "met": bool(met) if met is not None else True}


# -- the model ------------------------------------------------------------------------

def a9a(name: str) -> Any:
    from solvers.svmlight import load_svmlight

    path = DATA_DIR / f"{name}.xz"
    if not path.exists():
        path = DATA_DIR / name
    return load_svmlight(path)


def trained_model() -> tuple[Any, Any]:
    """A linear model of a9a (dcd, C=1) and a9a's test rows as CSR."""
    from solvers import fit

    train = a9a("a9a")
    result = fit(train.to_csr(), train.y, solver="dcd", C=1.0)
    test = a9a("a9a.t")
    return result.model, test.to_csr(result.model.n_features)


def store_model(settings: Any, model: Any, scopes: tuple[str, ...]) -> str:
    """Migrate the settings' database, store `model` as MODEL_ID of tenant "default" and
    make a key of `scopes` (returned)."""
    from app.domain.orm import Model
    from app.domain.services import tenants
    from app.infra.db import session_scope
    from solvers.models import model_to_bytes
    from testkit.service import make_key, migrate

    settings.ensure_dirs()
    migrate(settings.database_url)
    key = make_key(settings, scopes=scopes)
    payload = model_to_bytes(model)
    with session_scope(settings.database_url) as session:
        tenant = tenants.tenant_by_name(session, "default")
        assert tenant is not None
        session.add(Model(id=MODEL_ID, tenant_id=tenant.id, job_id=None, dataset_id=None,
                          kind=model.kind, solver="dcd", params={"C": 1.0},
                          labels=[float(v) for v in model.classes],
                          n_features=int(model.n_features), result={}, converged=True,
                          arrays=payload, size_bytes=len(payload), train_accuracy=None))
    return key


def seed_database(home: Path, model: Any) -> tuple[dict[str, str], str]:
    """A migrated SQLite HINGE_HOME holding `model` for tenant "default"; the environment
    of a server on it and an API key."""
    from testkit.service import embedded_settings, settings_env

    settings = embedded_settings(home, rate_per_second=0.0, sweep_interval_seconds=3600.0)
    key = store_model(settings, model, ("read",))
    env = settings_env(settings)
    # both budgets off: over them the answers are 429s, by design (and fast)
    env.update(HINGE_RATE_PER_SECOND="0", HINGE_PREDICT_RATE_PER_SECOND="0")
    return env, key


MODEL_ID = "b" * 32
NEW_SETTINGS = ("HINGE_WORKER_CONCURRENCY", "HINGE_SOLVER_THREADS", "HINGE_KEY_CACHE_SECONDS",
                "HINGE_MODEL_CACHE_CHECK_SECONDS")


def one_row_body(X: Any) -> bytes:
    start, end = X.indptr[0], X.indptr[1]
    instance = {"indices": [int(i) + 1 for i in X.indices[start:end]],
                "values": [float(v) for v in X.data[start:end]]}
    return json.dumps({"instances": [instance]}).encode()


# -- servers and wrk --------------------------------------------------------------------

def wait_for(ready: Any, process: subprocess.Popen[bytes], log: Path, timeout: float,
             pause: float, what: str) -> None:
    """Poll `ready()` (an HTTP error counts as not yet) until true; raise `what` with the
    log's tail once `process` exits or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(httpx.HTTPError):
            if ready():
                return
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what}: {log.read_text()[-3000:]}")
        time.sleep(pause)


def stop_group(process: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM to the process group of `process`, SIGKILL after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, 15)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, 9)
        process.wait()


@contextlib.contextmanager
def server(target: list[str], env: dict[str, str], cwd: Path, log: Path,
           probe: tuple[str, dict[str, str], bytes]) -> Iterator[str]:
    """A uvicorn process; yields its base URL once `probe` (path, headers, body) gets 200."""
    from testkit.service import free_port

    port = free_port()
    env = dict(env, PYTHONPATH=str(cwd))
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", *target, "--host", "127.0.0.1",
             "--port", str(port), *UVICORN_FLAGS], env=env, cwd=cwd, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            def answers() -> bool:
                path, headers, body = probe
                answer = httpx.post(base + path, content=body, headers=headers, timeout=5)
                if answer.status_code == 200:
                    return True
                raise RuntimeError(f"{target}: {answer.status_code} {answer.text[:300]}")

            wait_for(answers, process, log, 90, 0.2, f"{target} did not start")
            yield base
        finally:
            stop_group(process, 15)


LATENCY_LINE = re.compile(r"^\s*(50|75|90|99)%\s+([0-9.]+)(us|ms|s)\s*$", re.M)
UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def wrk(url: str, headers: dict[str, str], body: bytes, seconds: float, work: Path
        ) -> dict[str, float]:
    """One wrk run of POSTs: requests/s, latency percentiles (ms) and error counts."""
    script = work / "post.lua"
    lines = ['wrk.method = "POST"', f"wrk.body = {json.dumps(body.decode())}"]
    lines += [f"wrk.headers[{json.dumps(k)}] = {json.dumps(v)}" for k, v in headers.items()]
    script.write_text("\n".join(lines) + "\n")
    out = subprocess.run(
        ["wrk", "-t", "2", "-c", str(CONNECTIONS), "-d", f"{seconds:g}s", "--latency",
         "-s", str(script), url], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", out).group(1))  # type: ignore[union-attr]
    found = {f"p{q}": float(v) * UNITS[u] for q, v, u in LATENCY_LINE.findall(out)}
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)",
                       out)
    return {"rps": rps, **found, "non_2xx": float(bad.group(1)) if bad else 0.0,
            "socket_errors": float(sum(map(int, errors.groups()))) if errors else 0.0}


def http_rounds(X: Any, model: Any, rounds: int, seconds: float, before: Path | None,
                work: Path) -> dict[str, list[dict[str, float]]]:
    """wrk on each server in turns; every server's runs."""
    env, key = seed_database(work / "home", model)
    body = one_row_body(X)
    auth = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    plain = {"Content-Type": "application/json"}
    predict = f"/v1/models/{MODEL_ID}/predict"
    hinge = ["--factory", "app.api.main:create_app"]
    servers: list[tuple[str, list[str], dict[str, str], Path, str, dict[str, str]]] = [
        ("bare FastAPI route", ["bench.bare_app:app"], dict(os.environ), REPO, "/predict",
         plain),
        ("Hinge predict", hinge, env, REPO, predict, auth),
        ("Hinge predict, HINGE_API_WORKERS=2", [*hinge, "--workers", "2"], env, REPO,
         predict, auth),
    ]
    if before is not None:  # an older tree knows only the settings it had
        old_env = {k: v for k, v in env.items() if k not in NEW_SETTINGS}
        servers.insert(1, ("Hinge predict (before)", hinge, old_env, before, predict, auth))
    runs: dict[str, list[dict[str, float]]] = {name: [] for name, *_ in servers}
    for round_ in range(rounds):
        for name, target, server_env, cwd, path, headers in servers:
            log = work / f"{re.sub(r'[^a-z0-9]+', '-', name.lower())}-{round_}.log"
            with server(target, server_env, cwd, log, (path, headers, body)) as base:
                wrk(base + path, headers, body, 1.0, work)  # warm up
                measured = wrk(base + path, headers, body, seconds, work)
            runs[name].append(measured)
            print(f"  round {round_ + 1}: {name}: {measured['rps']:.0f} req/s, "
                  f"p99 {measured.get('p99', math.nan):.2f} ms", flush=True)
    return runs


def errors(runs: list[dict[str, float]]) -> float:
    """Non-2xx answers and socket errors over the runs."""
    return sum(r["non_2xx"] + r["socket_errors"] for r in runs)


def median(runs: list[dict[str, float]], key: str) -> float:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else math.nan


# -- `make run`: the API, an idle worker and the supervisor, as users run it ---------------

def run_env(home: Path, port: int) -> dict[str, str]:
    """The environment of `make run` on a fresh HINGE_HOME: nothing of Hinge's set but the
    home, the port and the predict budget (HINGE_PREDICT_RATE_PER_SECOND=0: the default
    1,000/s per key would answer wrk's excess with 429 by design)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HINGE_")}
    env.update(HINGE_HOME=str(home), HINGE_PORT=str(port), HINGE_PREDICT_RATE_PER_SECOND="0",
               PYTHONUNBUFFERED="1", PYTHONPATH=str(REPO))
    return env


def seed_run_home(home: Path, model: Any) -> str:
    """A migrated embedded HINGE_HOME (as `make run` makes it) holding `model` as MODEL_ID
    of tenant "default"; a read+train key."""
    from app.settings import Settings

    return store_model(Settings(home=home), model, ("read", "train"))


@contextlib.contextmanager
def make_run(env: dict[str, str], log: Path, key: str, warm_timeout: float
             ) -> Iterator[str]:
    """`python -m app.run` (what `make run` runs); yields its base URL once the API
    answers and the worker is ready (its kernels loaded: idle from then on)."""
    base = f"http://127.0.0.1:{env['HINGE_PORT']}"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "app.run"], env=env, cwd=REPO,
                                   stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            def ready() -> bool:
                status = httpx.get(base + "/v1/status", timeout=5,
                                   headers={"Authorization": f"Bearer {key}"})
                return status.status_code == 200 and bool(status.json().get("ready_workers"))

            wait_for(ready, process, log, warm_timeout, 0.5, "make run did not come up")
            yield base
        finally:
            stop_group(process, 30)


def training_body() -> bytes:
    """a9a's training rows as svmlight text: an RBF smo job on them runs for minutes."""
    import lzma

    path = DATA_DIR / "a9a.xz"
    return lzma.decompress(path.read_bytes()) if path.exists() else (DATA_DIR / "a9a").read_bytes()


class Trainer:
    """Keeps one long training job running on the service (another when one ends)."""

    def __init__(self, base: str, key: str) -> None:
        self.base = base
        self.headers = {"Authorization": f"Bearer {key}"}
        upload = httpx.post(base + "/v1/datasets", headers=self.headers, timeout=300,
                            files={"file": ("a9a.txt", training_body())})
        upload.raise_for_status()
        self.dataset_id = upload.json()["id"]
        self.job_id: str | None = None
        self.jobs = 0

    def state(self) -> str:
        if self.job_id is None:
            return "none"
        answer = httpx.get(f"{self.base}/v1/jobs/{self.job_id}", headers=self.headers,
                           timeout=30)
        return str(answer.json().get("status", answer.json().get("state", "?")))

    def ensure_running(self, timeout: float = 120.0) -> None:
        """A job in the `running` state (a new one if the last one ended)."""
        if self.state() not in ("queued", "running"):
            answer = httpx.post(self.base + "/v1/jobs", headers=self.headers, timeout=30,
                                json={"dataset_id": self.dataset_id, "solver": "smo",
                                      "params": {"C": 100.0, "gamma": 0.5}})
            answer.raise_for_status()
            self.job_id = answer.json()["id"]
            self.jobs += 1
        deadline = time.monotonic() + timeout
        while self.state() != "running":
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {self.job_id} did not start: {self.state()}")
            time.sleep(0.2)

    def cancel(self) -> None:
        if self.job_id is not None and self.state() in ("queued", "running"):
            httpx.post(f"{self.base}/v1/jobs/{self.job_id}/cancel", headers=self.headers,
                       timeout=30)


ALIAS_LUA = """
wrk.method = "POST"
wrk.body = %s
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = %s
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) answers = {} end
function response(status, headers, body)
  local served = headers["hinge-model-version"] or headers["Hinge-Model-Version"] or "none"
  local key = status .. " " .. served
  answers[key] = (answers[key] or 0) + 1
end
function done(summary, latency, requests)
  for _, thread in ipairs(threads) do
    for key, count in pairs(thread:get("answers")) do
      io.write("ANSWER " .. key .. " " .. count .. "\\n")
    end
  end
end
"""


def alias_promotion(base: str, key: str, body: bytes, seconds: float, work: Path
                    ) -> dict[str, Any]:
    """wrk on `bench@production` while the alias moves 1 -> 2 -> 1 -> 2 (a move every
    seconds / 4): every answer's status and the version it names (Hinge-Model-Version),
    counted in wrk's own response() hook, and the versions the alias held."""
    import threading

    headers = {"Authorization": f"Bearer {key}"}
    assert httpx.post(base + "/v1/registry/models", headers=headers, timeout=30,
                      json={"name": "bench"}).status_code == 201
    for _ in range(2):  # two versions of the one model: the header tells them apart
        assert httpx.post(base + "/v1/registry/models/bench/versions", headers=headers,
                          timeout=30, json={"model_id": MODEL_ID}).status_code == 201
    moves: list[int] = []

    def promote(version: int) -> None:
        answer = httpx.put(base + "/v1/registry/models/bench/aliases/production",
                           headers=headers, timeout=30, json={"version": version})
        assert answer.status_code == 200, answer.text
        moves.append(version)

    promote(1)
    script = work / "alias.lua"
    script.write_text(ALIAS_LUA % (json.dumps(body.decode()), json.dumps(f"Bearer {key}")))
    url = base + "/v1/models/bench@production/predict"

    def mover() -> None:
        for version in (2, 1, 2):
            time.sleep(seconds / 4)
            promote(version)

    thread = threading.Thread(target=mover)
    thread.start()
    out = subprocess.run(["wrk", "-t", "2", "-c", str(CONNECTIONS), "-d", f"{seconds:g}s",
                          "-s", str(script), url], capture_output=True, text=True,
                         check=True).stdout
    thread.join()
    answers: dict[str, int] = {}
    for status, served, count in re.findall(r"^ANSWER (\d+) (\S+) (\d+)$", out, re.M):
        answers[f"{status} {served}"] = answers.get(f"{status} {served}", 0) + int(count)
    held = {f"bench/versions/{v}" for v in moves}
    return {"answers": answers, "moves": moves,
            "non_2xx": sum(c for k, c in answers.items() if not k.startswith("2")),
            "foreign": sum(c for k, c in answers.items() if k.split(" ")[1] not in held),
            "total": sum(answers.values())}


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def run_rounds(X: Any, model: Any, rounds: int, seconds: float, work: Path,
               warm_timeout: float) -> dict[str, Any]:
    """Under `make run`: the bare route and Hinge's predict in turns, first with the worker
    idle, then with a training job running beside them. Runs per server, and the load
    average before each Hinge run."""
    from testkit.service import free_port

    home = work / "run-home"
    key = seed_run_home(home, model)
    body = one_row_body(X)
    auth = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    plain = {"Content-Type": "application/json"}
    predict = f"/v1/models/{MODEL_ID}/predict"
    names = ("bare FastAPI route (make run, idle worker)", "Hinge predict (make run, idle worker)",
             "bare FastAPI route (make run, training)", "Hinge predict (make run, training)")
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    loads: dict[str, list[str]] = {name: [] for name in names}
    env = run_env(home, free_port())
    bare_log = work / "bare-run.log"
    with make_run(env, work / "make-run.log", key, warm_timeout) as base, \
            server(["bench.bare_app:app"], dict(os.environ), REPO, bare_log,
                   ("/predict", plain, body)) as bare:
        first = httpx.post(base + predict, content=body, headers=auth, timeout=30)
        first.raise_for_status()  # loads the model into the API's cache
        targets = {"bare": (bare + "/predict", plain), "hinge": (base + predict, auth)}
        trainer: Trainer | None = None
        for phase in ("idle worker", "training"):
            if phase == "training":
                alias = alias_promotion(base, key, body, 2 * seconds, work)
                print(f"  alias moved {alias['moves']} under wrk: {alias['answers']}",
                      flush=True)
                trainer = Trainer(base, key)
            for round_ in range(rounds):
                for which in ("bare", "hinge"):
                    if trainer is not None:
                        trainer.ensure_running()
                    name = next(n for n in names if phase in n and
                                n.startswith("bare" if which == "bare" else "Hinge"))
                    url, headers = targets[which]
                    wrk(url, headers, body, 1.0, work)  # warm up
                    loads[name].append(load_average())
                    measured = wrk(url, headers, body, seconds, work)
                    runs[name].append(measured)
                    print(f"  {phase}, round {round_ + 1}: {name}: {measured['rps']:.0f} "
                          f"req/s, p99 {measured.get('p99', math.nan):.2f} ms "
                          f"(load {loads[name][-1]})", flush=True)
        if trainer is not None:
            still = trainer.state()
            trainer.cancel()
            print(f"  training jobs started: {trainer.jobs}; the last one {still} at the end",
                  flush=True)
    return {"runs": runs, "loads": loads, "alias": alias}


# -- batch predict in-process -------------------------------------------------------------

def batch_rows_per_second(model: Any, X: Any, reps: int) -> float:
    import scipy.sparse as sp

    from app.domain.predict import ModelCache  # noqa: F401  (the API's own import path)

    repeats = max(1, math.ceil(BATCH_ROWS / X.shape[0]))
    big = sp.vstack([X] * repeats, format="csr")[:BATCH_ROWS]
    model.predict(big)  # warm
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        labels, values = model.predict(big)
        times.append(time.perf_counter() - started)
        assert len(labels) == BATCH_ROWS and np.all(np.isfinite(values))
    return BATCH_ROWS / statistics.median(times)


# -- report -----------------------------------------------------------------------------

def make_run_rows(facts: dict[str, Any]) -> list[dict[str, Any]]:
    runs = facts["make_run"]["runs"]
    rows = []
    for phase in ("idle worker", "training"):
        bare_runs = runs[f"bare FastAPI route (make run, {phase})"]
        hinge_runs = runs[f"Hinge predict (make run, {phase})"]
        ratios = [h["rps"] / b["rps"] for b, h in zip(bare_runs, hinge_runs, strict=True)]
        ratio = statistics.median(ratios)
        p99 = median(hinge_runs, "p99")
        judged = phase == "idle worker"  # the target; with training it is reported
        rows += [
            row(f"make run, {phase}: predict, 1 row, {CONNECTIONS} connections, req/s over "
                "the bare route's in the same round (median ratio)", ratio,
                target=f">= {THROUGHPUT_SHARE:g}" if judged else "—",
                met=ratio >= THROUGHPUT_SHARE if judged else None),
            row(f"make run, {phase}: predict p99 latency (ms; reference: bare route)", p99,
                median(bare_runs, "p99"), target=f"< {P99_TARGET_MS:g}" if judged else "—",
                met=p99 < P99_TARGET_MS if judged else None),
        ]
    errors = sum(r["non_2xx"] + r["socket_errors"] for rs in runs.values() for r in rs)
    rows.append(row("make run: non-2xx answers and socket errors", errors, target="0",
                    met=errors == 0))
    alias = facts["make_run"]["alias"]
    rows.append(row(f"make run: wrk on bench@production while the alias moves "
                    f"{' -> '.join(map(str, alias['moves']))} ({alias['total']:,} answers): "
                    "non-2xx answers, and answers naming a version the alias never held",
                    alias["non_2xx"] + alias["foreign"], target="0",
                    met=alias["non_2xx"] + alias["foreign"] == 0 and alias["total"] > 0))
    return rows


def main(quick: bool = False, before: Path | None = None, only_make_run: bool = False,
         ) -> list[dict[str, Any]]:
    rounds, seconds, reps = ((1, 1, smaller(3, 2)) if quick else (3, 10.0, 15))
    # --quick is a smoke run (make bench-quick, 5 minutes in all): every server and phase
    # once, wrk runs of 1 s after the 1 s warm-up (whole seconds: wrk's -d takes no
    # fractions), the alias run 2 s
    run_rounds_n, run_seconds = (1, 1.0) if quick else (5, 10.0)
    print("training the a9a model...", flush=True)
    model, X = trained_model()
    rows_per_s = batch_rows_per_second(model, X, reps)
    facts: dict[str, Any] = {"only_make_run": only_make_run, "rows_per_s": rows_per_s,
                             "rounds": rounds, "seconds": seconds, "runs": {},
                             "wrk": shutil.which("wrk")}
    rows = [row(f"predict in-process, linear, {BATCH_ROWS:,} rows per call (rows/s)",
                rows_per_s, target=f">= {BATCH_TARGET:,.0f}",
                met=rows_per_s >= BATCH_TARGET)]
    facts["make_run"] = None
    if facts["wrk"] is not None:
        with tempfile.TemporaryDirectory(prefix="hinge-predict-run-") as tmp:
            facts["make_run"] = run_rounds(X, model, run_rounds_n, run_seconds, Path(tmp),
                                           warm_timeout=900.0)
            facts["make_run"]["seconds"] = run_seconds
            facts["make_run"]["rounds"] = run_rounds_n
        rows += make_run_rows(facts)
    if only_make_run:
        pass
    elif facts["wrk"] is None:
        print("wrk is NOT installed: the HTTP part of the predict benchmark did not run "
              "(apt-get install -y wrk)", flush=True)
        rows.append(row("predict over HTTP: NOT MEASURED, wrk is not installed "
                        "(apt-get install -y wrk)", math.nan, target="wrk installed",
                        met=False))
    else:
        with tempfile.TemporaryDirectory(prefix="hinge-predict-bench-") as tmp:
            facts["runs"] = http_rounds(X, model, rounds, seconds, before, Path(tmp))
        runs = facts["runs"]
        bare = median(runs["bare FastAPI route"], "rps")
        hinge = median(runs["Hinge predict"], "rps")
        p99 = median(runs["Hinge predict"], "p99")
        errors = sum(r["non_2xx"] + r["socket_errors"] for rs in runs.values() for r in rs)
        rows += [
            row(f"predict, 1 row, {CONNECTIONS} connections (req/s; reference: bare FastAPI "
                "route)", hinge, bare, target=f">= {THROUGHPUT_SHARE:g} x bare",
                met=hinge >= THROUGHPUT_SHARE * bare),
            row(f"predict, 1 row, {CONNECTIONS} connections: p99 latency (ms; reference: "
                "bare route)", p99, median(runs["bare FastAPI route"], "p99"),
                target=f"< {P99_TARGET_MS:g}", met=p99 < P99_TARGET_MS),
            row("predict, 1 row, HINGE_API_WORKERS=2 (req/s; reference: bare route)",
                median(runs["Hinge predict, HINGE_API_WORKERS=2"], "rps"), bare),
            row("predict over HTTP: non-2xx answers and socket errors", errors,
                target="0", met=errors == 0),
        ]
    write_report(facts, rows)
    return rows


def write_report(facts: dict[str, Any], rows: list[dict[str, Any]]) -> None:
    out = results_dir() / "predict.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Predict throughput",
        "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}); "
        "`python -m bench.predict_bench` (see its docstring for the method).",
        "",
    ]
    if facts["wrk"] is None:
        lines += ["**wrk is not installed: the HTTP figures were NOT measured** "
                  "(`apt-get install -y wrk`).", ""]
    elif facts["runs"]:
        lines += [
            f"wrk, {CONNECTIONS} connections, {facts['seconds']:g} s per run, "
            f"{facts['rounds']} round(s), servers in turns; one uvicorn process each "
            "unless stated; medians over the rounds. Body: one a9a row as JSON.",
            "",
            "| server | requests/s | p50 (ms) | p90 (ms) | p99 (ms) | runs (req/s) | errors |",
            "|---|---:|---:|---:|---:|---|---:|",
        ]
        for name, runs in facts["runs"].items():
            lines.append(
                f"| {name} | {median(runs, 'rps'):,.0f} | {median(runs, 'p50'):.2f} | "
                f"{median(runs, 'p90'):.2f} | {median(runs, 'p99'):.2f} | "
                f"{', '.join(format(r['rps'], ',.0f') for r in runs)} | {errors(runs):,.0f} |")
        lines.append("")
    if facts.get("make_run"):
        made = facts["make_run"]
        lines += [
            "## Under `make run`",
            "",
            "`python -m app.run` on a fresh embedded HINGE_HOME (SQLite database and broker), "
            "as users run it: the API (one uvicorn process), a Celery worker (concurrency 1, "
            "measured once it is ready: idle) and the supervisor, on this host, with "
            "HINGE_PREDICT_RATE_PER_SECOND=0 and nothing else set. The bare route is served "
            "beside it by a lone uvicorn; bare and Hinge in turns, "
            f"{made['rounds']} round(s) of {made['seconds']:g} s each, wrk -t 2 -c "
            f"{CONNECTIONS}. Then the same with an RBF smo training job on a9a running on "
            "the worker (its solver threads on every core). `ratio` is Hinge's req/s over "
            "the bare route's in the same round; load = the 1/5/15-minute load average "
            "before each Hinge run.",
            "",
            "| server | requests/s | p50 (ms) | p90 (ms) | p99 (ms) | runs (req/s) | errors "
            "| load |",
            "|---|---:|---:|---:|---:|---|---:|---|",
        ]
        for name, runs in made["runs"].items():
            lines.append(
                f"| {name} | {median(runs, 'rps'):,.0f} | {median(runs, 'p50'):.2f} | "
                f"{median(runs, 'p90'):.2f} | {median(runs, 'p99'):.2f} | "
                f"{', '.join(format(r['rps'], ',.0f') for r in runs)} | "
                f"{errors(runs):,.0f} | {'; '.join(made['loads'][name])} |")
        alias = made["alias"]
        lines += ["", "Between the two phases, wrk (same flags) on "
                  "`POST /v1/models/bench@production/predict` while the alias is moved "
                  f"{' -> '.join(map(str, alias['moves']))} through the API (a move every "
                  "quarter of the run); its response() hook counts every answer by status "
                  "and `Hinge-Model-Version`: "
                  + ", ".join(f"{k}: {v:,}" for k, v in sorted(alias["answers"].items()))
                  + "."]
        lines.append("")
    lines += [f"In-process batch linear predict: {facts['rows_per_s']:,.0f} rows/s "
              f"({BATCH_ROWS:,} a9a test rows per call, median).", "",
              "| metric | Hinge | reference | target | met |", "|---|---:|---:|---|---|"]
    for r in rows:
        ref = "" if math.isnan(r["reference"]) else f"{r['reference']:,.2f}"
        lines.append(f"| {r['metric']} | {r['hinge']:,.2f} | {ref} | {r['target']} | "
                     f"{'yes' if r['met'] else 'NO'} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", flush=True)


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--before", type=Path, default=None,
                        help="also serve Hinge from this source tree (before/after table)")
    parser.add_argument("--make-run", action="store_true",
                        help="only the `make run` part (with the in-process batch figure)")
    args = parser.parse_args()
    main(quick=args.quick, before=args.before, only_make_run=args.make_run)


if __name__ == "__main__":
    _cli()
