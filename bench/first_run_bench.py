"""The first minute of `make run`: from /healthz's first answer to a newcomer's first model.

Starts `python -m app.run` (API + one worker on the embedded default) in a new, empty
HINGE_HOME, with the solver kernels already in Numba's on-disk cache, as `make run`'s
install step leaves them. As soon as /healthz answers: upload a9a (the shared .xz file,
32,561 rows), POST a job with no solver named (auto), poll every 50 ms until it succeeds.
Repeated (3 times; once with --quick), a new home each time; medians. Issue 16's target:
the first job succeeds within 10 s of /healthz first answering.

    .venv/bin/python -m bench.first_run_bench [--quick]   (or python -m bench.run --only first_run)
Writes bench/results/first_run.md.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.paths import DATA_DIR, REPO, results_dir

KEY = re.compile(rb"hk_[0-9a-f]{12}_[A-Za-z0-9_\-]{20,}")
TARGET_S = 10.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_run(a9a: bytes, work: Path) -> dict[str, Any]:
    """Times of one fresh start: to /healthz, and from /healthz to the job's success."""
    port = _free_port()
    env = dict(os.environ, HINGE_HOME=str(work / "home"), HINGE_PORT=str(port),
               HINGE_QUEUE=f"hinge.bench.{uuid.uuid4().hex[:8]}", PYTHONUNBUFFERED="1")
    log_path = work / "run.log"
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        run = subprocess.Popen([sys.executable, "-m", "app.run"], cwd=REPO, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    try:
        healthy_at = None
        while time.monotonic() - started < 180 and run.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    healthy_at = time.monotonic()
                    break
            time.sleep(0.05)
        if healthy_at is None:
            raise RuntimeError(f"/healthz never answered: {log_path.read_text()[-2000:]}")
        match = KEY.search(log_path.read_bytes())
        if match is None:
            raise RuntimeError(f"no admin key printed: {log_path.read_text()[-2000:]}")
        headers = {"Authorization": f"Bearer {match.group(0).decode()}"}
        with httpx.Client(base_url=base, timeout=120, headers=headers) as client:
            upload = client.post("/v1/datasets?name=a9a", content=a9a)
            upload.raise_for_status()
            uploaded_at = time.monotonic()
            job = client.post("/v1/jobs", json={"dataset_id": upload.json()["id"]}).json()
            while time.monotonic() - healthy_at < 300:
                job = client.get(f"/v1/jobs/{job['id']}").json()
                if job["status"] in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(0.05)
            done_at = time.monotonic()
        if job["status"] != "succeeded":
            raise RuntimeError(f"the first job ended {job['status']}: {job.get('error')}")
        return {"to_healthz": healthy_at - started, "upload": uploaded_at - healthy_at,
                "to_model": done_at - healthy_at, "train": job["result"]["train_seconds"],
                "solver": (job["result"].get("path") or [{}])[0].get("solver", "?")}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def main(quick: bool = False) -> list[dict[str, Any]]:
    a9a = (DATA_DIR / "a9a.xz").read_bytes()
    runs = []
    for _ in range(1 if quick else 3):
        with tempfile.TemporaryDirectory(prefix="hinge-first-run-") as work:
            runs.append(one_run(a9a, Path(work)))
        print(f"first run: {runs[-1]}", flush=True)
    to_model = statistics.median(r["to_model"] for r in runs)
    rows = [
        {"experiment": "first_run", "metric": "first a9a job: /healthz -> succeeded (s)",
         "hinge": to_model, "reference": float("nan"), "ratio": float("nan"),
         "target": f"< {TARGET_S:g} s", "met": to_model < TARGET_S},
        {"experiment": "first_run", "metric": "make run: process start -> /healthz (s)",
         "hinge": statistics.median(r["to_healthz"] for r in runs),
         "reference": float("nan"), "ratio": float("nan"), "target": "—", "met": True},
    ]
    write_report(runs, rows)
    return rows


def write_report(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    out = results_dir() / "first_run.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# The first run", "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}); "
        "`python -m bench.first_run_bench` (see its docstring for the method). "
        "Each run: a new HINGE_HOME, `python -m app.run`, a9a uploaded as soon as /healthz "
        "answers, one job with no solver named.", "",
        "| run | start -> /healthz (s) | upload (s) | /healthz -> job succeeded (s) "
        "| train (s) | solver |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for k, r in enumerate(runs, 1):
        lines.append(f"| {k} | {r['to_healthz']:.1f} | {r['upload']:.1f} | "
                     f"{r['to_model']:.1f} | {r['train']:.2f} | {r['solver']} |")
    lines += ["", "| metric | Hinge | target | met |", "|---|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r['metric']} | {r['hinge']:.1f} | {r['target']} | "
                     f"{'yes' if r['met'] else 'NO'} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", flush=True)


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    main(quick=parser.parse_args().quick)


if __name__ == "__main__":
    _cli()
