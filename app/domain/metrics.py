"""Prometheus metrics beyond HTTP: what the service is doing, not only what it answered.

Two kinds, by where the truth lives:

- **From the database, at scrape time** (`JobsCollector`): jobs by status, queue depth and
  the oldest queued job's age, job duration by solver (a histogram of `finished_at -
  started_at`), and each worker process's heartbeat age and state (the workers table).
  Jobs finish in worker processes, often on other hosts; the database is the one place
  that knows every job.
  Prometheus' multiprocess mode would need a directory shared by the API and every worker
  (so one host), loses nothing only if no one wipes it, and counts per API replica; the
  database gives every API process the same service-wide totals, survives restarts and
  needs nothing from the workers. The totals are tenant-agnostic (an admin key reads
  /metrics). The duration histogram counts the finished jobs the database holds: it only
  grows, unless jobs are deleted from it (a drop reads as a counter reset).
- **In the API process** (prometheus_client's default registry, like the HTTP metrics):
  bytes received by uploads, predict latency by model kind, and the lag between a progress
  event (stamped by the worker) and its delivery to an SSE client.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from datetime import datetime

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Float, and_, case, cast, extract, func, select
from sqlalchemy.orm import Session

from app.domain.job_status import JobStatus
from app.domain.orm import Job, WorkerProcess, utcnow
from app.infra.db import read_sessionmaker_for

UPLOAD_BYTES = Counter(
    "hinge_upload_bytes", "Bytes received by dataset uploads (request bodies, as sent)")
PREDICT_SECONDS = Histogram(
    "hinge_predict_seconds", "Time to predict a request's rows (successful predictions)",
    ["model_kind"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0))
SSE_LAG_SECONDS = Histogram(
    "hinge_sse_progress_lag_seconds",
    "From a worker's progress event to its delivery to an SSE client (live events only)",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0))

# finished_at - started_at of a job: seconds to hours
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
                    1800.0, 3600.0, 7200.0, 21600.0, 86400.0)
FINISHED = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


def observe_progress_lag(payload: dict, stream_started: float) -> None:
    """A progress event's lag from its `at` (the worker's wall clock) to now, for events
    made after the stream started (replayed history is not lag)."""
    at = payload.get("at")
    if isinstance(at, int | float) and at >= stream_started:
        SSE_LAG_SECONDS.observe(max(0.0, time.time() - at))


def _seconds_between(session: Session, start: object, end: object) -> object:
    """`end - start` in seconds as a SQL expression (SQLite stores ISO text)."""
    if session.get_bind().dialect.name == "sqlite":
        return (func.julianday(end) - func.julianday(start)) * 86400.0
    return extract("epoch", end - start)  # type: ignore[operator]


class JobsCollector(Collector):
    """Job metrics read from the database at each scrape (see the module's docstring)."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    def collect(self) -> Iterator[Metric]:
        with read_sessionmaker_for(self.database_url)() as session:
            counts = dict(session.execute(
                select(Job.status, func.count()).group_by(Job.status)).all())
            oldest_queued = session.scalar(
                select(func.min(Job.queued_at)).where(Job.status == JobStatus.QUEUED))
            durations = self._durations(session)
            heartbeats = session.execute(
                select(WorkerProcess.hostname, WorkerProcess.pid, WorkerProcess.state,
                       WorkerProcess.heartbeat_at)).all()
        now = utcnow()

        jobs = GaugeMetricFamily("hinge_jobs", "Jobs by status (every tenant)",
                                 labels=["status"])
        for status in JobStatus:
            jobs.add_metric([status.value], counts.get(status, 0))
        yield jobs
        yield GaugeMetricFamily("hinge_queue_depth", "Jobs queued, waiting for a worker",
                                value=counts.get(JobStatus.QUEUED, 0))
        yield GaugeMetricFamily(
            "hinge_queue_oldest_seconds", "Age of the oldest queued job (0: none queued)",
            value=_age(now, oldest_queued))
        yield self._duration_family(durations)
        ages = GaugeMetricFamily(
            "hinge_worker_heartbeat_age_seconds",
            "Seconds since each worker process's last heartbeat (the workers table, busy or "
            "idle); beyond HINGE_WORKER_STALE_SECONDS it shows as stale in GET /v1/status",
            labels=["worker"])
        states: dict[str, int] = {}
        for hostname, pid, state, beat in sorted(heartbeats, key=lambda r: (r[0], r[1])):
            # the same name a job records as its `worker` (workers/training.py)
            ages.add_metric([f"{hostname} pid {pid}"], _age(now, beat))
            states[state] = states.get(state, 0) + 1
        yield ages
        workers = GaugeMetricFamily("hinge_workers", "Worker processes by state, as they "
                                    "last reported it (warming or ready)", labels=["state"])
        for state in ("warming", "ready"):
            workers.add_metric([state], states.get(state, 0))
        yield workers

    @staticmethod
    def _durations(session: Session) -> list[tuple[str, str, int, float, list[int]]]:
        """Per (solver, status): count, sum and cumulative bucket counts, in one query."""
        seconds = _seconds_between(session, Job.started_at, Job.finished_at)
        finished = select(Job.solver.label("solver"), Job.status.label("status"),
                          cast(seconds, Float).label("seconds")).where(
            and_(Job.status.in_(FINISHED), Job.started_at.is_not(None),
                 Job.finished_at.is_not(None))).subquery()
        buckets = [func.sum(case((finished.c.seconds <= bound, 1), else_=0))
                   for bound in DURATION_BUCKETS]
        rows = session.execute(
            select(finished.c.solver, finished.c.status, func.count(),
                   func.coalesce(func.sum(finished.c.seconds), 0.0), *buckets)
            .group_by(finished.c.solver, finished.c.status)).all()
        return [(row[0], JobStatus(row[1]).value, int(row[2]), float(row[3]),
                 [int(v or 0) for v in row[4:]]) for row in rows]

    @staticmethod
    def _duration_family(durations: Iterable[tuple[str, str, int, float, list[int]]]
                         ) -> HistogramMetricFamily:
        family = HistogramMetricFamily(
            "hinge_job_duration_seconds",
            "Run time of finished jobs (started to finished, by solver as submitted and "
            "final status), from the database", labels=["solver", "status"])
        for solver, status, count, total, cumulative in durations:
            buckets = [(_bound(b), float(c)) for b, c in zip(DURATION_BUCKETS, cumulative,
                                                             strict=True)]
            buckets.append(("+Inf", float(count)))
            family.add_metric([solver, status], buckets, total)
        return family


def _bound(value: float) -> str:
    return str(value)


def _age(now: datetime, then: datetime | None) -> float:
    return 0.0 if then is None else max(0.0, (now - then).total_seconds())


def exposition(database_url: str) -> bytes:
    """The /metrics body: this process's metrics, then the database's."""
    from_database = CollectorRegistry(auto_describe=False)
    from_database.register(JobsCollector(database_url))
    return generate_latest(REGISTRY) + generate_latest(from_database)
