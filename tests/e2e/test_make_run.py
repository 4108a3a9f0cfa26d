"""`make run` (python -m app.run) on a fresh home: it prints the first admin key once, the
API answers with it (and refuses without it), and when the Celery worker is killed with
SIGKILL the API keeps serving and a new worker trains the next job."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from alembic.config import Config
from alembic.script import ScriptDirectory

from tests.support import REPO, child_pids, free_port, wait_for_job

KEY = re.compile(rb"hk_[0-9a-f]{12}_[A-Za-z0-9_\-]{20,}")


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    return ""


def _worker_pid(run_pid: int) -> int | None:
    return next((p for p in child_pids(run_pid) if "celery" in _cmdline(p)), None)


def _wait(predicate: object, timeout: float, what: str) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()  # type: ignore[operator]
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(what)


def test_make_run_prints_a_key_and_survives_a_killed_worker(tmp_path: Path,
                                                             cancer_bytes: bytes) -> None:
    port = free_port()
    env = dict(os.environ, HINGE_HOME=str(tmp_path / "home"), HINGE_PORT=str(port),
               HINGE_QUEUE=f"hinge.test.{uuid.uuid4().hex[:8]}", PYTHONUNBUFFERED="1")
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        # started as a script's background job would be: SIGINT ignored (Ctrl-C must work
        # anyway, below)
        run = subprocess.Popen([sys.executable, "-m", "app.run"], cwd=REPO, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    base = f"http://127.0.0.1:{port}"
    try:
        match = _wait(lambda: KEY.search(log_path.read_bytes()), 60, "no key printed")
        key = match.group(0).decode()  # type: ignore[attr-defined]

        def healthy() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
            return False

        _wait(healthy, 60, "the API did not start")
        assert httpx.get(f"{base}/v1/datasets").status_code == 401
        with httpx.Client(base_url=base, timeout=60,
                          headers={"Authorization": f"Bearer {key}"}) as client:
            assert client.get("/v1/datasets").status_code == 200
            worker = _wait(lambda: _worker_pid(run.pid), 60, "no worker")
            # training yields the CPU to the API's requests (HINGE_WORKER_NICE, 10)
            assert os.getpriority(os.PRIO_PROCESS, int(worker)) == min(  # type: ignore[call-overload]
                19, os.getpriority(os.PRIO_PROCESS, run.pid) + 10)
            _wait(lambda: b"ready." in log_path.read_bytes(), 120, "worker not ready")
            os.kill(int(worker), signal.SIGKILL)  # type: ignore[call-overload]
            assert healthy()
            replaced = _wait(lambda: (_worker_pid(run.pid) or worker) != worker, 30,
                             "the worker was not restarted")
            assert replaced and healthy()
            dataset = client.post("/v1/datasets", content=cancer_bytes).json()["id"]
            job = client.post("/v1/jobs", json={"dataset_id": dataset}).json()["id"]
            assert wait_for_job(client.get, job, timeout=120)["status"] == "succeeded"
        assert log_path.read_bytes().count(b"hk_") == 1  # printed once
        # Ctrl-C: SIGINT to the process group stops the API and the worker for good (none
        # is restarted) and the supervisor exits 0
        before = log_path.read_bytes().count(b"starting it again")
        os.killpg(run.pid, signal.SIGINT)
        assert run.wait(timeout=30) == 0
        assert log_path.read_bytes().count(b"starting it again") == before
        assert not healthy()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGTERM)
        try:
            run.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()


# How make was started decides how it ends on Ctrl-C (README, "The two commands"). From a terminal
# (SIGINT at its default), make gets the SIGINT with its process group, waits for app.run
# (which stops the service and exits 0, so make prints no `make: *** ... Error`), then
# re-raises the signal: killed by SIGINT, status 130 in a shell. A POSIX shell starts a
# script's background job (`make run &`) with SIGINT ignored, and make keeps a signal it
# found ignored ignored: no Ctrl-C reaches it, and a `kill -INT` to its group ends it with
# app.run's status, 0. The disposition is set explicitly here because the test's own is
# inherited: a suite started as a background job of a script (`make test &`, a CI runner's
# shell) ran make with SIGINT ignored, and make then exited 0 where the test expected the
# terminal's -SIGINT.
STARTED_FROM = {
    "terminal": (signal.SIG_DFL, -signal.SIGINT),
    "background-job": (signal.SIG_IGN, 0),
}


@pytest.mark.parametrize("started_from", list(STARTED_FROM))
def test_ctrl_c_ends_make_run_without_an_error(tmp_path: Path, started_from: str) -> None:
    """`make run` itself (in this environment: its install stamp is taken as up to date),
    SIGINT to its process group once the API answers, as Ctrl-C sends it: the service
    stops, app.run exits 0 so make prints no `make: *** ... Error`, and make ends as
    STARTED_FROM says: from a terminal, as an interrupted command does (killed by the
    SIGINT it re-raises: status 130 in a shell)."""
    disposition, status = STARTED_FROM[started_from]
    venv = Path(sys.prefix)
    port = free_port()
    env = dict(os.environ, HINGE_HOME=str(tmp_path / "home"), HINGE_PORT=str(port),
               HINGE_QUEUE=f"hinge.test.{uuid.uuid4().hex[:8]}", PYTHONUNBUFFERED="1")
    log_path = tmp_path / "make.log"
    with open(log_path, "wb") as log:
        make = subprocess.Popen(["make", f"VENV={venv}", "-o", f"{venv}/.installed-run",
                                 "run"], cwd=REPO, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        with contextlib.suppress(httpx.HTTPError):
            return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
        return False

    try:
        _wait(healthy, 120, "the API did not start")
        _wait(lambda: b"ready." in log_path.read_bytes(), 120, "worker not ready")
        os.killpg(make.pid, signal.SIGINT)
        assert make.wait(timeout=60) == status
        output = log_path.read_text(errors="replace")
        assert "make: ***" not in output and "Traceback" not in output, output[-3000:]
        assert "starting it again" not in output
        assert not healthy()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(make.pid, signal.SIGTERM)
        try:
            make.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()


def test_ctrl_c_during_the_start_exits_0_without_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C while `make run` migrates the database (the first thing it does): the
    migration finishes (it is not cut in half), then the supervisor stops quietly with 0
    before starting anything, so make reports no error either."""
    env = dict(os.environ, HINGE_HOME=str(tmp_path / "home"), HINGE_PORT=str(free_port()),
               HINGE_QUEUE=f"hinge.test.{uuid.uuid4().hex[:8]}", PYTHONUNBUFFERED="1")
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        run = subprocess.Popen([sys.executable, "-m", "app.run"], cwd=REPO, env=env,
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait(lambda: b"alembic" in log_path.read_bytes(), 60, "the migration did not start")
        os.killpg(run.pid, signal.SIGINT)
        assert run.wait(timeout=60) == 0, log_path.read_text()
        output = log_path.read_text()
        assert "Traceback" not in output, output
        if "Hinge is starting" not in output:  # the usual case: Ctrl-C came mid-migration
            assert "stopped before the service started" in output, output
        # the migration was not cut in half: the database is at the head revision
        head = ScriptDirectory.from_config(Config(str(REPO / "alembic.ini"))).get_current_head()
        with sqlite3.connect(tmp_path / "home" / "hinge.sqlite") as database:
            assert database.execute("SELECT version_num FROM alembic_version").fetchall() \
                == [(head,)]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        run.wait()
