from __future__ import annotations

import time

import pytest

from testkit import runtime_venv


@pytest.fixture(scope="session")
def runtime_python() -> str:
    """The python of the runtime-only virtualenv (`pip install .`, as the Dockerfile
    installs, kernels compiled as it compiles them; testkit.runtime_venv), built or
    refreshed here when missing or stale. The checkout's kernels are compiled first (as
    tests/e2e does for its workers), so that the virtualenv can start from that cache."""
    from solvers.warmup import warmup

    started = time.perf_counter()
    compiled = warmup()
    python = runtime_venv.ensure()
    print(f"\ncheckout's kernels ready in {compiled:.1f} s; runtime virtualenv ready in "
          f"{time.perf_counter() - started - compiled:.1f} s: {python}")
    return str(python)
