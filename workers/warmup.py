"""A worker process's warm-up: the kernels of `auto` and `smo` loaded (or compiled) before
the first job, and helper processes that compile the other warm-up groups into Numba's
on-disk cache meanwhile (solvers/warmup.py schedules the groups)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
import time

from app.settings import Settings, available_cores

log = logging.getLogger("hinge.worker")


_COMPILERS: list[subprocess.Popen[bytes]] = []  # this process's kernel-compiling helpers


def warm_up(settings: Settings) -> float:
    """Load the kernels that `auto` and `smo` use before the first job; returns seconds.

    When the on-disk cache lacks kernels (a new install; solvers changed), helper
    processes compile the other warm-up groups into it meanwhile (solvers.warmup:
    compile_groups, one group per process at a time under a file lock), and go on with
    the rest (acf, alm, pegasos, scaling, probability) after this process is ready; a job
    that needs one of those before they are done loads it from the cache, or compiles it."""
    import numba

    from solvers.warmup import PRIORITY_GROUPS, cache_is_complete, warmup

    budget = settings.solver_thread_budget()
    numba.set_num_threads(min(budget, numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    started = time.perf_counter()
    helpers = 0 if cache_is_complete() else start_kernel_compilers(settings)
    warmup(PRIORITY_GROUPS)
    seconds = time.perf_counter() - started
    # "solver kernels ready in X s": bench/service_bench.py reads it
    log.info("solver kernels ready in %.2f s (those of auto and smo%s)", seconds,
             f"; {helpers} helper process(es) compile the rest into the cache" if helpers
             else "")
    return seconds


def compiler_count(settings: Settings, cores: int | None = None) -> int:
    """Helper processes per worker process: this process's share of the cores, less the
    one it compiles on itself; at least one, at most one per other warm-up group."""
    from solvers.warmup import WARMUP_GROUPS

    share = (cores or available_cores()) // settings.worker_concurrency
    return max(1, min(len(WARMUP_GROUPS) - 1, share - 1))


def start_kernel_compilers(settings: Settings) -> int:
    """Start the helpers: helper k warms every group, starting from group k + 1 (the
    calling process starts from the first), so that each compiles another group first;
    the last helper to finish marks the cache complete. Returns how many started."""
    from solvers.warmup import WARMUP_GROUPS

    groups = list(WARMUP_GROUPS)
    count = compiler_count(settings)
    for k in range(count):
        order = groups[k + 1:] + groups[:k + 1]
        helper = subprocess.Popen(
            [sys.executable, "-c", "from workers.warmup import kernel_compiler; "
             "kernel_compiler()", str(os.getpid()), *order])
        _COMPILERS.append(helper)
        threading.Thread(target=helper.wait, name="kernel-compiler-wait", daemon=True).start()
    return count


def kernel_compiler() -> None:
    """A helper's main: `<parent pid> <group>...` on the command line. Ctrl-C and SIGTERM
    end it (a Celery pool process, its parent, ignores SIGINT, and an ignored signal stays
    ignored across exec), and so does its parent's end."""
    import signal

    from solvers.warmup import warmup

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = int(sys.argv[1])

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)  # the worker process is gone: nobody needs these kernels now

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    groups = tuple(sys.argv[2:])
    print(f"kernel groups {', '.join(groups)} warm in {warmup(groups):.1f} s", flush=True)


def stop_kernel_compilers() -> None:
    """End the helpers still compiling (this worker process stops); the kernels they
    finished stay in the cache, the next start compiles the rest."""
    while _COMPILERS:
        helper = _COMPILERS.pop()
        if helper.poll() is None:
            helper.terminate()
