from __future__ import annotations

import time

import pytest


@pytest.fixture(scope="session", autouse=True)
def compiled_solver_kernels() -> None:
    """Fill Numba's on-disk cache once, before any worker process starts.

    A fresh checkout has no cache: the first worker would compile every solver while a test
    waits for its job. Compiling here makes every worker start in about a second and keeps
    the tests' timeouts about the service, not the compiler.
    """
    from solvers.warmup import warmup

    started = time.perf_counter()
    warmup()
    print(f"\nsolver kernels compiled or loaded in {time.perf_counter() - started:.1f} s")
