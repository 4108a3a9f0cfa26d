"""`make run`: migrate, make the first admin key (printed once), then start the API
(HINGE_API_WORKERS uvicorn processes) and a Celery worker (HINGE_WORKER_CONCURRENCY
processes) and keep them running: a child that dies (a crash, an OOM kill, `kill -9`)
is started again, so a lost worker never takes the API down with it. Ctrl-C or SIGTERM
stops both.

Exit status 0 after Ctrl-C or SIGTERM, also when Ctrl-C comes before the service started
(a migration under way finishes first): stopping is what was asked, so make prints no
"Error". `make run`
itself ends with the shell's status for an interrupted command, 130 (GNU make re-raises
the SIGINT it got with the process group), and no message."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from app.domain.services.tenants import bootstrap_admin_key
from app.infra.db import session_scope
from app.settings import Settings

RESTART_DELAY_SECONDS = 1.0
MAX_DELAY_SECONDS = 30.0
STABLE_SECONDS = 60.0  # a child that ran this long restarts without backing off


def announce_key(settings: Settings) -> None:
    """On a database without keys: create tenant "default" an admin key and print it,
    once (like Jupyter's token). It is stored only as a keyed hash."""
    with session_scope(settings.database_url) as session:
        key = bootstrap_admin_key(session, settings.hmac_key())
    if key is None:
        return
    line = "=" * 78
    print(f"\n{line}\nHinge's first API key (admin scope, tenant \"default\"); it is shown "
          f"only now:\n\n    {key}\n\nUse it as `Authorization: Bearer <key>`, or paste it "
          f"into the dashboard's sign-in page.\nMore keys: python -m app.admin keys create "
          f"--tenant NAME --scopes read,train\n{line}\n", flush=True)


class Child:
    """A supervised child process: started again whenever it exits on its own."""

    def __init__(self, name: str, start: Callable[[], subprocess.Popen[bytes]]) -> None:
        self.name = name
        self.start = start
        self.process = start()
        self.started_at = time.monotonic()
        self.delay = RESTART_DELAY_SECONDS
        self.restart_at: float | None = None

    def check(self, now: float) -> None:
        if self.restart_at is not None:
            if now >= self.restart_at:
                self.process = self.start()
                self.started_at = now
                self.restart_at = None
            return
        code = self.process.poll()
        if code is None:
            return
        if now - self.started_at > STABLE_SECONDS:
            self.delay = RESTART_DELAY_SECONDS
        print(f"hinge: the {self.name} (pid {self.process.pid}) exited with {code}; "
              f"starting it again in {self.delay:.0f} s", file=sys.stderr, flush=True)
        self.restart_at = now + self.delay
        self.delay = min(MAX_DELAY_SECONDS, self.delay * 2)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def wait(self, deadline: float) -> None:
        try:
            self.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def api_command(settings: Settings, python: str = sys.executable) -> list[str]:
    """uvicorn serving the API; with HINGE_API_WORKERS > 1 its own supervisor runs that
    many processes on one listening socket (and replaces one that dies). Its access log
    only with HINGE_ACCESS_LOG=true."""
    command = [python, "-m", "uvicorn", "--factory", "app.api.main:create_app",
               "--host", settings.host, "--port", str(settings.port)]
    if settings.api_workers > 1:
        command += ["--workers", str(settings.api_workers)]
    if not settings.access_log:
        command.append("--no-access-log")
    return command


def worker_priority(settings: Settings) -> Callable[[], None]:
    """What the worker's process runs before Celery starts: it becomes
    HINGE_WORKER_NICE (default 10) nicer than `make run`. On one host a training job then
    takes the CPU that requests leave, rather than an equal share against the API (its
    solver threads on every core would otherwise cut single-row predict to a third); a
    worker alone on an idle host trains as fast as before."""
    steps = settings.worker_nice

    def lower() -> None:
        if steps:
            os.nice(steps)

    return lower


def main() -> int:
    try:
        return serve()
    except KeyboardInterrupt:  # Ctrl-C before the supervisor's own handler was installed
        print("hinge: stopped before the service started", file=sys.stderr, flush=True)
        return 0


def serve() -> int:
    settings = Settings()
    settings.ensure_dirs()
    env = dict(os.environ, HINGE_HOME=str(settings.home))
    python = sys.executable
    stopping = False

    def stop(*_args: object) -> None:
        nonlocal stopping
        stopping = True

    # Ctrl-C (SIGINT to the whole process group) and SIGTERM both stop everything: the
    # children get the signal too, and must not be restarted. An explicit SIGINT handler,
    # because a `make run &` from a script starts with SIGINT ignored (no KeyboardInterrupt).
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # The migration runs in a session of its own, out of Ctrl-C's reach: SQLite's DDL is
    # not transactional, so a migration cut in half could leave a schema between two
    # revisions. A Ctrl-C meanwhile stops the start once it is done.
    subprocess.run([python, "-m", "alembic", "upgrade", "head"], check=True, env=env,
                   start_new_session=True)
    if stopping:
        print("hinge: stopped before the service started", file=sys.stderr, flush=True)
        return 0
    announce_key(settings)

    def api() -> subprocess.Popen[bytes]:
        return subprocess.Popen(api_command(settings, python), env=env)

    def worker() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [python, "-m", "celery", "-A", "workers.celery_app", "worker",
             "--loglevel", "INFO", "--concurrency", str(settings.worker_concurrency),
             "--queues", settings.queue], env=env, preexec_fn=worker_priority(settings))

    children = [Child("API", api), Child("worker", worker)]
    print(f"\nHinge is starting at http://{settings.host}:{settings.port}/  "
          f"(API docs: /docs; data in {settings.home}); Ctrl-C stops it.\nThe API answers "
          "at once; the worker is `warming` (GET /v1/status) until its solver kernels are "
          "loaded: seconds, or minutes the first time, when it compiles them.\n", flush=True)
    try:
        while not stopping:
            now = time.monotonic()
            for child in children:
                child.check(now)
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for child in children:
            child.stop()
        deadline = time.monotonic() + 15
        for child in children:
            child.wait(deadline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
