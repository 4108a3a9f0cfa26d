"""The thread budget: worker processes x solver threads stay within the host's cores, and a
job's `threads` is capped by the worker's settings (it used to override them).

The jobs run through the worker's own code path (claim, fit, finish) on a real SQLite
file; the solver reports the threads it ran with in every progress event.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numba
import pytest

from app.domain.job_status import JobStatus
from app.domain.orm import Job, Tenant, new_id, utcnow
from app.domain.services import datasets as dataset_service
from app.domain.services import jobs as job_service
from app.infra.db import session_scope
from app.settings import Settings
from solvers.svmlight import load_svmlight
from testkit import bundled
from tests.support import migrated_settings
from workers.celery_app import make_celery
from workers.training import claim, job_threads, run_claimed

TENANT = "b" * 32


def test_default_budget_shares_the_cores_among_worker_processes() -> None:
    assert Settings(worker_concurrency=1).solver_thread_budget(cores=8) == 8
    assert Settings(worker_concurrency=2).solver_thread_budget(cores=8) == 4
    assert Settings(worker_concurrency=3).solver_thread_budget(cores=8) == 2
    assert Settings(worker_concurrency=16).solver_thread_budget(cores=8) == 1  # at least 1
    for concurrency in range(1, 9):
        budget = Settings(worker_concurrency=concurrency).solver_thread_budget(cores=8)
        assert concurrency * budget <= 8
    # set explicitly, HINGE_SOLVER_THREADS is the budget
    assert Settings(solver_threads=3, worker_concurrency=2).solver_thread_budget(cores=8) == 3


def test_worker_concurrency_setting_reaches_celery() -> None:
    assert make_celery(Settings(worker_concurrency=3)).conf.worker_concurrency == 3


def test_a_jobs_threads_are_capped_by_the_budget() -> None:
    capped = Settings(solver_threads=2)
    assert job_threads(capped, {"threads": 8}) == 2
    assert job_threads(capped, {"threads": 1}) == 1
    assert job_threads(capped, {}) == 1
    assert job_threads(Settings(solver_threads=8), {"threads": 4}) == 4


@pytest.fixture
def settings(tmp_path: Path) -> Iterator[Settings]:
    with migrated_settings("sqlite", tmp_path / "home") as configured:
        with session_scope(configured.database_url) as session:
            session.add(Tenant(id=TENANT, name="threads"))
        yield configured


def _run_ocas_job(settings: Settings, dataset_id: str, threads: int) -> int:
    """Run a queued ocas job asking for `threads` through the worker; the threads the
    solver reports it ran with (in the job's result)."""
    now = utcnow()
    job_id = new_id()
    with session_scope(settings.database_url) as session:
        session.add(Job(id=job_id, tenant_id=TENANT, dataset_id=dataset_id, solver="ocas",
                        params={"threads": threads, "C": 1.0}, status=JobStatus.QUEUED,
                        attempt=0, cancel_requested=False, queued_at=now,
                        status_history=[job_service.history_entry(JobStatus.QUEUED, now)]))
    assert run_claimed(settings, job_id, claim(settings, job_id, "celery@test pid 1")) \
        == "succeeded"
    with session_scope(settings.database_url) as session:
        job = session.get(Job, job_id)
        assert job is not None
        assert job.params["threads"] == threads  # the spec is kept as asked
        return int(job.result["threads"])


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs 2 Numba threads")
def test_a_job_asking_for_more_threads_runs_with_the_workers_budget(settings: Settings,
                                                                    tmp_path: Path) -> None:
    parsed = load_svmlight(bundled.write_xz("cancer", tmp_path / "upload"))
    with session_scope(settings.database_url) as session:
        dataset_id = dataset_service.create_dataset(session, settings, TENANT, parsed,
                                                    "cancer").id
    one = settings.model_copy(update={"solver_threads": 1})
    two = settings.model_copy(update={"solver_threads": 2})
    assert _run_ocas_job(one, dataset_id, threads=2) == 1  # capped
    assert _run_ocas_job(two, dataset_id, threads=2) == 2  # within the budget
    assert _run_ocas_job(two, dataset_id, threads=1) == 1  # never raised
