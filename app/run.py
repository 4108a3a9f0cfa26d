"""`make run`: migrate, then start the API and one Celery worker; Ctrl-C stops both."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from app.settings import Settings


def main() -> int:
    settings = Settings()
    settings.ensure_dirs()
    env = dict(os.environ, HINGE_HOME=str(settings.home))
    python = sys.executable
    subprocess.run([python, "-m", "alembic", "upgrade", "head"], check=True, env=env)
    api = subprocess.Popen(
        [python, "-m", "uvicorn", "--factory", "app.main:create_app",
         "--host", settings.host, "--port", str(settings.port)],
        env=env,
    )
    worker = subprocess.Popen(
        [python, "-m", "celery", "-A", "workers.celery_app", "worker",
         "--loglevel", "INFO", "--concurrency", "1", "--queues", settings.queue],
        env=env,
    )
    children = [api, worker]
    print(f"\nHinge is starting at http://{settings.host}:{settings.port}/  "
          f"(API docs: /docs; data in {settings.home}); Ctrl-C stops it.\n", flush=True)

    def stop(*_args: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    try:
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        stop()
        deadline = time.monotonic() + 15
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
    failed = [c.returncode for c in children if c.returncode not in (0, -signal.SIGTERM, None)]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
