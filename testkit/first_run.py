"""A newcomer's first minutes, shared by tests/e2e/test_first_run.py and
bench/first_run_bench.py: `python -m app.run` (or `make run` in a fresh clone) on a new,
empty HINGE_HOME; as soon as /healthz answers, upload a dataset and train on it with no
solver named, while the worker may still be compiling its kernels."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from testkit.paths import REPO
from testkit.service import free_port

KEY = re.compile(rb"hk_[0-9a-f]{12}_[A-Za-z0-9_\-]{20,}")


def first_job(content: bytes, work: Path, command: list[str] | None = None,
              cwd: Path = REPO, env: dict[str, str] | None = None,
              healthz_timeout: float = 180.0, job_timeout: float = 300.0,
              request_timeout: float = 120.0) -> dict[str, Any]:
    """Start `make run`'s service (`command`, default `python -m app.run`, in `cwd`) with
    its home in `work`, and time a first job once /healthz answers.

    Returns the times (to_healthz: process start -> /healthz; upload; to_model: /healthz
    -> the job's end), the job as last read, what it said it waited for while queued
    (waiting_for, in order, without repeats), the worker states seen while it waited
    (states), /v1/status at /healthz and at the end, and the service's log. The service
    is stopped with Ctrl-C (SIGINT to its group); raises RuntimeError when it does not come
    up."""
    port = free_port()
    env = dict(env if env is not None else os.environ, HINGE_HOME=str(work / "home"),
               HINGE_PORT=str(port), HINGE_QUEUE=f"hinge.first.{uuid.uuid4().hex[:8]}",
               PYTHONUNBUFFERED="1")
    log_path = work / "run.log"
    base = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        run = subprocess.Popen(command or [sys.executable, "-m", "app.run"], cwd=cwd, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    started = time.monotonic()
    try:
        healthy_at = None
        while time.monotonic() - started < healthz_timeout and run.poll() is None:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    healthy_at = time.monotonic()
                    break
            time.sleep(0.05)
        if healthy_at is None:
            raise RuntimeError(f"/healthz never answered:\n{log_path.read_text()[-3000:]}")
        match = KEY.search(log_path.read_bytes())
        if match is None:
            raise RuntimeError(f"no admin key printed:\n{log_path.read_text()[-3000:]}")
        headers = {"Authorization": f"Bearer {match.group(0).decode()}"}
        with httpx.Client(base_url=base, timeout=request_timeout, headers=headers) as client:
            status_at_start = client.get("/v1/status").json()
            upload = client.post("/v1/datasets?name=first", content=content)
            upload.raise_for_status()
            uploaded_at = time.monotonic()
            job = client.post("/v1/jobs", json={"dataset_id": upload.json()["id"]}).json()
            reasons: list[Any] = []
            states: list[list[str]] = []
            while time.monotonic() - healthy_at < job_timeout:
                job = client.get(f"/v1/jobs/{job['id']}").json()
                if job["status"] == "queued" and (not reasons or _reason(reasons[-1])
                                                  != _reason(job["waiting_for"])):
                    reasons.append(job["waiting_for"])
                shown = sorted(w["state"] for w in client.get("/v1/status").json()["workers"])
                if not states or states[-1] != shown:
                    states.append(shown)
                if job["status"] in ("succeeded", "failed", "cancelled"):
                    break
                time.sleep(0.05)
            done_at = time.monotonic()
            status_at_end = client.get("/v1/status").json()
        return {"to_healthz": healthy_at - started, "upload": uploaded_at - healthy_at,
                "to_model": done_at - healthy_at, "job": job, "waiting_for": reasons,
                "states": states,
                "status_at_start": status_at_start, "status_at_end": status_at_end,
                "log": log_path.read_text(errors="replace")}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGINT)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


def _reason(text: str | None) -> str | None:
    """A waiting_for without its running clock ("a worker (warming up, 12 s)")."""
    return re.sub(r"\d+(\.\d+)? ?(s|min|h)\b", "", text) if text else text
