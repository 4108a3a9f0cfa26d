"""A real Dask cluster for tests and benchmarks: a `dask scheduler` process and `dask
worker` processes talking TCP (on loopback, or across testkit.netns hosts when the caller
gives a `prefix` per process).

The processes run this repository's code (PYTHONPATH = the repository), one thread each
unless told otherwise, no dashboards. `DaskCluster.kill_worker` SIGKILLs one (the failure
tests); `stop` ends every process this module started, by its own pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from testkit.paths import REPO
from testkit.service import free_port

DASK = str(Path(sys.executable).with_name("dask"))


def dask_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO)
    env["NUMBA_NUM_THREADS"] = env.get("NUMBA_NUM_THREADS", "2")
    env.setdefault("DASK_DISTRIBUTED__WORKER__DAEMON", "False")
    return env


@dataclass
class DaskProcess:
    process: subprocess.Popen[bytes]
    log_path: Path
    name: str

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for_log(self, needle: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log()
            if needle in text:
                return text
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}):\n{text}")
            time.sleep(0.05)
        raise TimeoutError(f"{needle!r} not seen in {timeout} s:\n{self.log()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@dataclass
class DaskCluster:
    address: str  # tcp://host:port of the scheduler
    scheduler: DaskProcess
    workers: list[DaskProcess] = field(default_factory=list)
    log_dir: Path = Path(".")

    def start_worker(self, *, nthreads: int = 1, memory_limit: str = "0",
                     prefix: Sequence[str] = (), host: str = "127.0.0.1",
                     wait: bool = True, env: dict[str, str] | None = None) -> DaskProcess:
        name = f"w{len(self.workers)}-{uuid.uuid4().hex[:4]}"
        log_path = self.log_dir / f"dask-worker-{name}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [*prefix, DASK, "worker", self.address, "--name", name, "--nthreads",
                 str(nthreads), "--nworkers", "1", "--memory-limit", memory_limit,
                 "--no-dashboard", "--host", host, "--death-timeout", "60",
                 "--no-nanny"],
                env={**dask_env(), **(env or {})}, cwd=REPO, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        worker = DaskProcess(process, log_path, name)
        self.workers.append(worker)
        if wait:
            worker.wait_for_log("Registered to:", timeout=60)
        return worker

    def kill_worker(self, index: int) -> None:
        """SIGKILL one worker process (no goodbye to the scheduler)."""
        worker = self.workers[index]
        if worker.process.poll() is None:
            os.kill(worker.process.pid, signal.SIGKILL)
            worker.process.wait()

    def stop(self) -> None:
        """SIGTERM every process at once, then wait for each (SIGKILL after 10 s)."""
        processes = [*self.workers, self.scheduler]
        for process in processes:
            if process.process.poll() is None:
                process.process.send_signal(signal.SIGTERM)
        for process in processes:
            process.stop()


def start_scheduler(log_dir: Path, *, host: str = "127.0.0.1",
                    prefix: Sequence[str] = ()) -> DaskCluster:
    port = free_port()
    log_path = log_dir / f"dask-scheduler-{port}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*prefix, DASK, "scheduler", "--host", host, "--port", str(port),
             "--no-dashboard", "--no-show"],
            env=dask_env(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
    scheduler = DaskProcess(process, log_path, "scheduler")
    cluster = DaskCluster(f"tcp://{host}:{port}", scheduler, log_dir=log_dir)
    try:
        scheduler.wait_for_log("Scheduler at:", timeout=60)
    except BaseException:
        scheduler.stop()
        raise
    return cluster


@contextlib.contextmanager
def dask_cluster(log_dir: Path, workers: int = 2, nthreads: int = 1,
                 memory_limit: str = "0") -> Iterator[DaskCluster]:
    """A scheduler and `workers` workers on loopback, stopped at the end."""
    cluster = start_scheduler(log_dir)
    try:
        started = [cluster.start_worker(nthreads=nthreads, memory_limit=memory_limit,
                                        wait=False) for _ in range(workers)]
        for worker in started:
            worker.wait_for_log("Registered to:", timeout=60)
        yield cluster
    finally:
        cluster.stop()
