from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from tests.support import SharedService, embedded_settings, running_service


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


@pytest.fixture(scope="session")
def shared_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedService]:
    """One API server and one Celery worker on the embedded default (SQLite database and
    broker), started on first use and shared by the tests, in every module, that only need
    a running service: they used to start one each (a few seconds of two processes'
    imports and kernel loading per test, on a loaded machine twenty). Each test process
    (pytest-xdist) has its own. A 10 s lease, as the CLI's and the estimators' tests had:
    a job whose worker is gone is taken back within seconds, not a minute."""
    home = tmp_path_factory.mktemp("shared-service")
    settings = embedded_settings(home / "home", job_lease_seconds=10.0)
    with running_service(settings, home) as (client, workers):
        yield SharedService(settings, str(client.base_url), workers, home)


@pytest.fixture
def tenant(shared_service: SharedService) -> Iterator[httpx.Client]:
    """An admin client of `shared_service`, as a tenant of this test's own."""
    with shared_service.tenant() as client:
        yield client
