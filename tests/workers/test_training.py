"""The worker's claim, lease and finish, called directly (no Celery, no eager mode) on a
real SQLite file and on a real PostgreSQL schema.

A job's row is the truth: a claim is a conditional update (a second delivery gets
nothing), progress and heartbeats count only while the claiming attempt holds the job,
and the outcome of a fit is stored only by that attempt, the model in the same
transaction as `succeeded`.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sqlalchemy import func, select, update

from app.domain.job_status import JobStatus
from app.domain.lifecycle import Claim, NotAdmitted
from app.domain.orm import Dataset, Job, JobEvent, Model, Tenant, new_id, utcnow
from app.domain.services import datasets as dataset_service
from app.domain.services import jobs as job_service
from app.domain.services.jobs import JOBS, JobWork
from app.infra.db import session_scope
from app.infra.storage import blob_store, load_dataset
from app.settings import Settings
from solvers.svmlight import ParseLimits, load_svmlight
from testkit import bundled
from tests.support import BACKENDS, BLOB_BACKENDS, migrated_settings
from workers.runner import Heartbeat
from workers.training import ProgressRecorder, claim, finish, run_claimed

WORKER = "celery@test pid 1"


TENANT = "t" * 32


@pytest.fixture(params=BLOB_BACKENDS)
def blob_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=BACKENDS)
def settings(request: pytest.FixtureRequest, tmp_path: Path, blob_overrides: dict[str, Any]
             ) -> Iterator[Settings]:
    with migrated_settings(request.param, tmp_path / "home", job_lease_seconds=0.8,
                           **blob_overrides) as configured:
        with session_scope(configured.database_url) as session:
            session.add(Tenant(id=TENANT, name="test"))
        yield configured


@pytest.fixture
def cancer(settings: Settings, tmp_path: Path) -> str:
    """scikit-learn's breast_cancer scaled to [-1, 1] (testkit.bundled), as an upload."""
    parsed = load_svmlight(bundled.write_xz("cancer", tmp_path / "data"))
    with session_scope(settings.database_url) as session:
        return dataset_service.create_dataset(session, settings, TENANT, parsed, "cancer").id


FEATURES = bundled.load("cancer")[0].shape[1]


def _queued_job(settings: Settings, dataset_id: str | None, solver: str = "dcd",
                **params: Any) -> str:
    now = utcnow()
    job_id = new_id()
    with session_scope(settings.database_url) as session:
        session.add(Job(id=job_id, tenant_id=TENANT, dataset_id=dataset_id, solver=solver,
                        params={"eps": 0.1, **params}, status=JobStatus.QUEUED,
                        attempt=0, cancel_requested=False, queued_at=now,
                        status_history=[job_service.history_entry(JobStatus.QUEUED, now)]))
    return job_id


def _job(settings: Settings, job_id: str) -> Job:
    with session_scope(settings.database_url) as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def _models_of(settings: Settings, job_id: str) -> list[Model]:
    with session_scope(settings.database_url) as session:
        return list(session.scalars(select(Model).where(Model.job_id == job_id)))


def _claimed(settings: Settings, job_id: str) -> Claim[JobWork]:
    claimed = claim(settings, job_id, WORKER)
    assert claimed is not None
    return claimed


def _requeue_and_claim_again(settings: Settings, job_id: str) -> Claim[JobWork]:
    """What the sweep does to a job whose worker went silent, then a second worker."""
    with session_scope(settings.database_url) as session:
        assert job_service.transition(session, job_id, (JobStatus.RUNNING,), JobStatus.QUEUED)
    return _claimed(settings, job_id)


def _fit(settings: Settings, claimed: Claim[JobWork], progress: Any = None) -> Any:
    from solvers import fit

    job = claimed.work
    assert job.blob_path is not None
    X, y = load_dataset(blob_store(settings), job.blob_path, job.features)
    return X, y, fit(X, y, solver=job.solver, progress=progress,
                     progress_interval=settings.progress_interval_seconds, **job.params)


# -- claim -----------------------------------------------------------------------------

def test_a_claim_runs_the_next_attempt_and_a_second_delivery_gets_nothing(
    settings: Settings, cancer: str
) -> None:
    job_id = _queued_job(settings, cancer, C=2.0)
    with session_scope(settings.database_url) as session:
        blob_path = dataset_service.get_dataset(session, TENANT, cancer).blob_path
    assert claim(settings, job_id, WORKER) == Claim(JOBS, job_id, 1, JobWork(
        tenant_id=TENANT, solver="dcd", params={"eps": 0.1, "C": 2.0}, dataset_id=cancer,
        dataset_name="cancer", blob_path=blob_path, features=FEATURES, classes=2))
    assert claim(settings, job_id, "celery@other pid 2") is None  # duplicate delivery
    job = _job(settings, job_id)
    assert job.status == JobStatus.RUNNING and job.attempt == 1 and job.worker == WORKER
    assert isinstance(job.heartbeat_at, datetime) and job.started_at is not None
    assert [h["status"] for h in job.status_history] == ["queued", "running"]


def test_a_tenant_at_its_running_limit_is_not_claimed_until_a_job_ends(
    settings: Settings, cancer: str
) -> None:
    """Admission is part of the claim's conditional UPDATE: with the tenant running as
    many jobs as it may, the claim changes nothing (the job stays queued, its attempt
    uncounted) and says so (NotAdmitted); once a running job ends, the claim succeeds."""
    with session_scope(settings.database_url) as session:
        session.execute(update(Tenant).where(Tenant.id == TENANT).values(max_running_jobs=2))
    running = [_claimed(settings, _queued_job(settings, cancer)) for _ in range(2)]
    waiting = _queued_job(settings, cancer)
    for _ in range(2):
        with pytest.raises(NotAdmitted):
            claim(settings, waiting, WORKER)
    job = _job(settings, waiting)
    assert job.status == JobStatus.QUEUED and job.attempt == 0 and job.worker is None
    assert [h["status"] for h in job.status_history] == ["queued"]
    with session_scope(settings.database_url) as session:
        assert running[0].fail(session, "done")
    assert _claimed(settings, waiting).attempt == 1
    other = _queued_job(settings, cancer)
    with session_scope(settings.database_url) as session:  # without settings: no admission
        assert job_service.claim_job(session, other, WORKER) is not None


def test_nothing_to_claim_for_a_missing_or_cancelled_job(settings: Settings,
                                                         cancer: str) -> None:
    assert claim(settings, new_id(), WORKER) is None
    job_id = _queued_job(settings, cancer)
    with session_scope(settings.database_url) as session:
        job_service.cancel(session, settings, TENANT, job_id)
    assert claim(settings, job_id, WORKER) is None
    assert run_claimed(settings, job_id, None) == "skipped"
    assert _job(settings, job_id).status == JobStatus.CANCELLED


def test_a_job_whose_dataset_is_gone_fails_with_the_reason(settings: Settings,
                                                           cancer: str) -> None:
    job_id = _queued_job(settings, cancer)
    with session_scope(settings.database_url) as session:  # as a racing delete could
        session.delete(session.get(Dataset, cancer))
    claimed = _claimed(settings, job_id)
    assert claimed.work.dataset_id is None and claimed.work.blob_path is None
    assert run_claimed(settings, job_id, claimed) == "failed"
    job = _job(settings, job_id)
    assert job.status == JobStatus.FAILED
    assert job.error == "the dataset was deleted before the job started"
    assert job.finished_at is not None and _models_of(settings, job_id) == []


def test_a_job_over_the_worker_memory_is_refused_with_the_figure(settings: Settings,
                                                                  cancer: str) -> None:
    # cancer: 569 rows x 30 features; smo's kernel cache of 64 MB dominates the estimate
    limited = settings.model_copy(update={"worker_memory_bytes": 32 << 20})
    job_id = _queued_job(limited, cancer, "smo", cache_mb=64)
    assert run_claimed(limited, job_id, _claimed(limited, job_id)) == "failed"
    job = _job(limited, job_id)
    assert job.error is not None and job.error.startswith(
        "this job needs an estimated 64 MiB (dataset 0 MiB, kernel cache 64 MiB, working "
        "arrays 0 MiB); a worker may use 32 MiB (HINGE_WORKER_MEMORY_BYTES)"), job.error
    assert _models_of(limited, job_id) == []
    fits = _queued_job(limited, cancer, "smo", cache_mb=8)
    assert run_claimed(limited, fits, _claimed(limited, fits)) == "succeeded"


def test_a_regression_set_is_planned_as_one_output_not_one_per_distinct_target(
        settings: Settings, tmp_path: Path) -> None:
    # 3,000 distinct targets x 4,000 features: planned as one weight vector per distinct
    # value (what reading y counted), its working arrays alone would be 366 MiB
    rng = np.random.default_rng(7)
    X = sp.random(3000, 4000, density=0.002, format="csr", random_state=rng)
    path = tmp_path / "targets.svm"
    dump_svmlight_file(X, rng.normal(size=3000), str(path), zero_based=False)
    with session_scope(settings.database_url) as session:
        dataset_id = dataset_service.create_dataset(
            session, settings, TENANT, load_svmlight(path, ParseLimits(max_classes=None)),
            "targets", task="regression").id
    limited = settings.model_copy(update={"worker_memory_bytes": 16 << 20})
    job_id = _queued_job(limited, dataset_id, "linear_svr")
    claimed = _claimed(limited, job_id)
    assert claimed.work.classes == 0
    assert run_claimed(limited, job_id, claimed) == "succeeded", _job(limited, job_id).error


# -- lease -----------------------------------------------------------------------------

def _progress(iteration: int) -> dict[str, Any]:
    return {"iteration": iteration, "violation": 1.0 / iteration, "primal": 1.0}


def test_progress_counts_only_while_the_attempt_holds_the_job(settings: Settings,
                                                              cancer: str) -> None:
    job_id = _queued_job(settings, cancer)
    first = _claimed(settings, job_id)
    recorder = ProgressRecorder(settings, job_id, first.attempt, 0.1)
    assert recorder(_progress(1)) is False  # go on
    job = _job(settings, job_id)
    assert job.progress is not None and job.progress["iteration"] == 1

    with session_scope(settings.database_url) as session:
        job_service.cancel(session, settings, TENANT, job_id)
    assert recorder(_progress(2)) is True  # a cancel was requested: stop

    second = _requeue_and_claim_again(settings, job_id)
    assert second.attempt == 2
    assert recorder(_progress(3)) is True  # the lease is lost: stop, write nothing
    assert _job(settings, job_id).progress["iteration"] == 2  # type: ignore[index]
    assert ProgressRecorder(settings, job_id, 2, 0.1)(_progress(4)) is True  # cancelled
    assert _job(settings, job_id).progress["iteration"] == 4  # type: ignore[index]


def _heartbeat(settings: Settings, job_id: str) -> datetime:
    with session_scope(settings.database_url) as session:
        beat = session.scalar(select(Job.heartbeat_at).where(Job.id == job_id))
        assert beat is not None
        return beat


def test_the_heartbeat_renews_the_lease_of_its_own_attempt_only(settings: Settings,
                                                                cancer: str) -> None:
    job_id = _queued_job(settings, cancer)
    first = _claimed(settings, job_id)
    claimed_at = _heartbeat(settings, job_id)
    with Heartbeat(settings, JOBS, job_id, first.attempt):  # beats every 0.2 s here
        time.sleep(0.7)
    assert _heartbeat(settings, job_id) > claimed_at

    second = _requeue_and_claim_again(settings, job_id)
    with session_scope(settings.database_url) as session:
        assert not job_service.renew_lease(session, job_id, first.attempt)
        assert job_service.renew_lease(session, job_id, second.attempt)
    reclaimed_at = _heartbeat(settings, job_id)
    with Heartbeat(settings, JOBS, job_id, first.attempt):
        time.sleep(0.7)
    assert _heartbeat(settings, job_id) == reclaimed_at


def _wait_for(condition: Any, timeout: float) -> float:
    """Seconds until `condition()` held (fails after `timeout`)."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout, "condition not met in time"
        time.sleep(0.02)
    return time.monotonic() - started


def test_a_heartbeat_that_finds_its_lease_gone_stops_the_fit(settings: Settings,
                                                             cancer: str) -> None:
    job_id = _queued_job(settings, cancer)
    first = _claimed(settings, job_id)
    with Heartbeat(settings, JOBS, job_id, first.attempt) as heartbeat:
        assert heartbeat.interval <= settings.job_lease_seconds / 3  # well inside the lease
        time.sleep(2 * heartbeat.interval)
        assert not heartbeat.lost
        recorder = ProgressRecorder(settings, job_id, first.attempt, 0.1, heartbeat=heartbeat)
        assert recorder(_progress(1)) is False
        _requeue_and_claim_again(settings, job_id)  # the sweep, then another worker
        # the next beat sees it: within one interval (and the time a beat takes)
        _wait_for(lambda: heartbeat.lost, timeout=heartbeat.interval + 2.0)
        assert heartbeat.gone
        assert recorder(_progress(2)) is True and recorder.lease_lost  # stop, write nothing
    job = _job(settings, job_id)
    assert job.attempt == 2 and job.status == JobStatus.RUNNING
    assert job.progress is not None and job.progress["iteration"] == 1


def test_a_heartbeat_that_cannot_renew_for_a_whole_lease_counts_the_lease_lost(
    settings: Settings, cancer: str
) -> None:
    """Renewals blocked (the job's row locked by another transaction: a busy SQLite file, a
    long PostgreSQL transaction) for longer than the lease: the sweep may have taken the job
    meanwhile, so the attempt stops; once a renewal succeeds again, it holds the job."""
    job_id = _queued_job(settings, cancer)
    first = _claimed(settings, job_id)
    lease = settings.job_lease_seconds
    with Heartbeat(settings, JOBS, job_id, first.attempt) as heartbeat:
        recorder = ProgressRecorder(settings, job_id, first.attempt, 0.1, heartbeat=heartbeat)
        with session_scope(settings.database_url) as session:  # holds the row's write lock
            session.execute(select(Job).where(Job.id == job_id).with_for_update())
            session.execute(update(Job).where(Job.id == job_id).values(heartbeat_at=utcnow()))
            took = _wait_for(lambda: heartbeat.lost, timeout=lease + 5.0)
            assert took >= lease - 2 * heartbeat.interval, took  # not before a lease
            assert not heartbeat.gone  # not known to be taken, only not renewed
            started = time.monotonic()
            assert recorder(_progress(1)) is True and recorder.lease_lost
            assert time.monotonic() - started < 0.5  # without waiting for the lock
        _wait_for(lambda: not heartbeat.lost, timeout=lease + 5.0)  # renewed again
    assert _job(settings, job_id).progress is None


def test_an_attempt_that_loses_its_lease_mid_fit_stops_and_writes_nothing(
    settings: Settings, tmp_path: Path
) -> None:
    """The whole attempt (run_claimed): a long fit stops within about a lease of the job
    being taken from it, and ends `lost` without touching the job or storing a model."""
    parsed = load_svmlight(bundled.write_xz("onehot", tmp_path / "data"))
    with session_scope(settings.database_url) as session:
        onehot = dataset_service.create_dataset(session, settings, TENANT, parsed, "onehot").id
    # DCD with C = 1000 and eps = 1e-9 on onehot ends on max_seconds (tests/e2e/long_fit)
    job_id = _queued_job(settings, onehot, C=1000.0, loss="l1", eps=1e-9, fallback=False,
                         max_iter=100_000_000, max_seconds=60.0)
    first = _claimed(settings, job_id)
    outcome: list[str] = []
    thread = threading.Thread(target=lambda: outcome.append(
        run_claimed(settings, job_id, first)))
    thread.start()
    try:
        _wait_for(lambda: _job(settings, job_id).progress is not None, timeout=60)
        _requeue_and_claim_again(settings, job_id)
        taken = time.monotonic()
    finally:
        thread.join(timeout=90)
    assert outcome == ["lost"]
    assert time.monotonic() - taken < settings.job_lease_seconds + 5.0
    job = _job(settings, job_id)
    assert job.status == JobStatus.RUNNING and job.attempt == 2
    assert job.model_id is None and _models_of(settings, job_id) == []


def test_a_job_reports_progress_at_the_configured_interval(settings: Settings,
                                                            tmp_path: Path) -> None:
    """HINGE_PROGRESS_INTERVAL_SECONDS reaches the fit and the kept history: a fit that
    ends on max_seconds after 1 s keeps more than the 5 points 0.2 s apart that the
    default allows, each at least the interval after the one before. (The long fit of the
    e2e tests, on `onehot`: on cancer a quiet machine reached eps = 1e-9 within the
    second.)"""
    parsed = load_svmlight(bundled.write_xz("onehot", tmp_path / "data"))
    with session_scope(settings.database_url) as session:
        onehot = dataset_service.create_dataset(session, settings, TENANT, parsed, "onehot").id
    job_id = _queued_job(settings, onehot, C=1000.0, loss="l1", eps=1e-9, tol=1e-9,
                         fallback=False, max_iter=100_000_000, max_seconds=1.0)
    settings = settings.model_copy(update={"progress_interval_seconds": 0.05})
    assert run_claimed(settings, job_id, _claimed(settings, job_id)) == "succeeded"
    with session_scope(settings.database_url) as session:
        kept = [e.payload for e in session.scalars(
            select(JobEvent).where(JobEvent.job_id == job_id, JobEvent.kind == "progress")
            .order_by(JobEvent.seq))]
    assert _job(settings, job_id).result["exit_reason"] == "max_seconds"  # type: ignore[index]
    assert len(kept) > 5, kept
    times = [event["elapsed_s"] for event in kept]
    assert all(b - a >= 0.05 for a, b in itertools.pairwise(times))


# -- finish ----------------------------------------------------------------------------

def test_finish_stores_a_linear_model_with_the_succeeded_status(settings: Settings,
                                                                cancer: str) -> None:
    job_id = _queued_job(settings, cancer, loss="l1", eps=0.01)
    claimed = _claimed(settings, job_id)
    X, y, result = _fit(settings, claimed)
    assert finish(settings, claimed, result, X, y) == "succeeded"
    assert finish(settings, claimed, result, X, y) == "lost"  # no second model
    job = _job(settings, job_id)
    [model] = _models_of(settings, job_id)
    assert job.status == JobStatus.SUCCEEDED and job.model_id == model.id
    assert [h["status"] for h in job.status_history] == ["queued", "running", "succeeded"]
    assert model.kind == "linear" and model.n_features == FEATURES and model.solver == "dcd"
    assert model.labels == [-1.0, 1.0] and model.dataset_id == cancer
    assert job.result == model.result
    assert model.result["exit_reason"] == "converged" and model.converged
    for key in ("primal_objective", "dual_objective", "duality_gap", "train_accuracy"):
        assert isinstance(model.result[key], float), key
    assert model.train_accuracy is not None and model.train_accuracy > 0.8


def test_finish_stores_a_kernel_model(settings: Settings, cancer: str) -> None:
    job_id = _queued_job(settings, cancer, solver="smo", kernel="rbf", eps=0.001)
    claimed = _claimed(settings, job_id)
    X, y, result = _fit(settings, claimed)
    assert finish(settings, claimed, result, X, y) == "succeeded"
    [model] = _models_of(settings, job_id)
    assert model.kind == "kernel" and model.n_features == FEATURES
    assert model.result["n_support"] > 0
    assert model.result["primal_objective"] is None and model.result["duality_gap"] is None
    assert model.train_accuracy is not None and model.train_accuracy > 0.8


def test_an_old_attempt_cannot_finish_a_job_claimed_again(settings: Settings,
                                                          cancer: str) -> None:
    job_id = _queued_job(settings, cancer)
    first = _claimed(settings, job_id)
    X, y, result = _fit(settings, first)
    second = _requeue_and_claim_again(settings, job_id)
    assert finish(settings, first, result, X, y) == "lost"
    assert _models_of(settings, job_id) == []
    assert _job(settings, job_id).status == JobStatus.RUNNING
    assert finish(settings, second, result, X, y) == "succeeded"
    assert len(_models_of(settings, job_id)) == 1


def test_a_cancelled_fit_ends_cancelled_without_a_model(settings: Settings,
                                                        cancer: str) -> None:
    # a fit of more than one compiled call; its first event (interval 0) sees the cancel
    job_id = _queued_job(settings, cancer, C=1000.0, eps=1e-9, max_iter=1_000_000)
    claimed = _claimed(settings, job_id)
    with session_scope(settings.database_url) as session:
        job_service.cancel(session, settings, TENANT, job_id)
    settings = settings.model_copy(update={"progress_interval_seconds": 0.0})
    recorder = ProgressRecorder(settings, job_id, claimed.attempt, 1e-9)
    X, y, result = _fit(settings, claimed, progress=recorder)
    assert result.exit_reason == "cancelled"
    assert finish(settings, claimed, result, X, y) == "cancelled"
    job = _job(settings, job_id)
    assert job.status == JobStatus.CANCELLED and job.model_id is None
    assert _models_of(settings, job_id) == []
    with session_scope(settings.database_url) as session:
        count = session.scalar(select(func.count()).select_from(Model))
    assert count == 0


def test_a_failed_job_keeps_its_error_and_no_model(settings: Settings, cancer: str) -> None:
    job_id = _queued_job(settings, cancer)
    claimed = _claimed(settings, job_id)
    with session_scope(settings.database_url) as session:
        assert claimed.fail(session, "x" * 5000)
    job = _job(settings, job_id)
    assert job.status == JobStatus.FAILED and job.error == "x" * 2000
