"""The database-side Prometheus metrics (app/domain/metrics.py, JobsCollector) on SQLite and
PostgreSQL: job rows with known times give known gauges and histogram buckets."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.domain.job_status import JobStatus
from app.domain.metrics import DURATION_BUCKETS, exposition
from app.domain.orm import Job, Tenant, WorkerProcess, utcnow
from app.infra.db import session_scope
from app.settings import Settings
from tests.support import BACKENDS, migrated_settings


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Settings]:
    with migrated_settings(request.param, tmp_path / "home") as settings:
        yield settings


def _samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_jobs_queue_durations_and_heartbeats_come_from_the_database(backend: Settings
                                                                    ) -> None:
    now = utcnow()
    # (solver, status, seconds run, queued/heartbeat age): two tenants, counted together
    rows = [("dcd", JobStatus.SUCCEEDED, 0.3, None), ("dcd", JobStatus.SUCCEEDED, 4.0, None),
            ("dcd", JobStatus.FAILED, 40.0, None), ("smo", JobStatus.SUCCEEDED, 700.0, None),
            ("smo", JobStatus.RUNNING, None, 3.0), ("dcd", JobStatus.QUEUED, None, 30.0),
            ("dcd", JobStatus.QUEUED, None, 5.0), ("dcd", JobStatus.CANCELLED, None, None)]
    with session_scope(backend.database_url) as session:
        tenants = [Tenant(name="a"), Tenant(name="b")]
        session.add_all(tenants)
        session.flush()
        for index, (solver, status, seconds, age) in enumerate(rows):
            job = Job(tenant_id=tenants[index % 2].id, solver=solver, params={},
                      status=status, status_history=[], attempt=1)
            if seconds is not None:
                job.started_at = now - timedelta(seconds=seconds + 10)
                job.finished_at = now - timedelta(seconds=10)
            if status == JobStatus.QUEUED:
                job.queued_at = now - timedelta(seconds=age or 0)
            if status == JobStatus.RUNNING:
                job.started_at = now - timedelta(seconds=60)
                job.heartbeat_at = now - timedelta(seconds=age or 0)
                job.worker = "celery@host pid 42"
            session.add(job)
        session.add(WorkerProcess(hostname="celery@host", pid=42, concurrency=1, state="ready",
                                  state_since=now - timedelta(seconds=50),
                                  started_at=now - timedelta(seconds=60),
                                  heartbeat_at=now - timedelta(seconds=3)))

    samples = _samples(exposition(backend.database_url))

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert value("hinge_jobs", status="succeeded") == 3
    assert value("hinge_jobs", status="running") == 1
    assert value("hinge_jobs", status="queued") == 2
    assert value("hinge_jobs", status="failed") == 1
    assert value("hinge_jobs", status="cancelled") == 1
    assert value("hinge_queue_depth") == 2
    assert 30 <= value("hinge_queue_oldest_seconds") < 60
    assert 3 <= value("hinge_worker_heartbeat_age_seconds", worker="celery@host pid 42") < 30
    assert value("hinge_workers", state="ready") == 1
    assert value("hinge_workers", state="warming") == 0

    name = "hinge_job_duration_seconds"
    assert value(f"{name}_count", solver="dcd", status="succeeded") == 2
    assert value(f"{name}_sum", solver="dcd", status="succeeded") == pytest.approx(4.3,
                                                                                    abs=0.01)
    assert value(f"{name}_count", solver="dcd", status="failed") == 1
    assert value(f"{name}_count", solver="smo", status="succeeded") == 1
    expected = {0.25: 0, 0.5: 1, 2.5: 1, 5.0: 2, 600.0: 2, 86400.0: 2}
    for bound, count in expected.items():
        assert bound in DURATION_BUCKETS
        assert value(f"{name}_bucket", solver="dcd", status="succeeded", le=str(bound)) == count
    assert value(f"{name}_bucket", solver="smo", status="succeeded", le="600.0") == 0
    assert value(f"{name}_bucket", solver="smo", status="succeeded", le="1800.0") == 1
    assert value(f"{name}_bucket", solver="smo", status="succeeded", le="+Inf") == 1
    # a running or cancelled-while-queued job has no duration yet
    assert not any(key[0].startswith(name) and ("status", "cancelled") in key[1]
                   for key in samples)


def test_an_empty_database_exposes_zeros(backend: Settings) -> None:
    samples = _samples(exposition(backend.database_url))
    assert samples[("hinge_queue_depth", ())] == 0
    assert samples[("hinge_queue_oldest_seconds", ())] == 0
    assert all(samples[("hinge_jobs", (("status", s.value),))] == 0 for s in JobStatus)
