"""/metrics after real work on a live service (API server + Celery worker processes on
SQLite): every metric docs/operations.md documents is there, with the values the work implies."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.client import Event, HingeClient
from testkit import bundled
from tests.e2e.long_fit import DATASET as LONG_DATASET
from tests.e2e.long_fit import long_job
from tests.support import embedded_settings, running_service

LONG_JOB = long_job(60.0)  # runs until cancelled (tests/e2e/long_fit.py)
LEASE_SECONDS = 10.0


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    tmp = tmp_path_factory.mktemp("metrics")
    settings = embedded_settings(tmp / "home", job_lease_seconds=LEASE_SECONDS)
    with running_service(settings, tmp) as (http, _workers):
        yield http


def _scrape(http: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = http.get("/metrics")
    assert response.status_code == 200, response.text
    found = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def _value(samples: dict, name: str, **labels: str) -> float:
    return float(samples[(name, tuple(sorted(labels.items())))])


def _seconds(job: dict) -> float:
    started = datetime.fromisoformat(job["started_at"])
    return (datetime.fromisoformat(job["finished_at"]) - started).total_seconds()


def test_metrics_after_uploads_jobs_streams_and_predictions(service: httpx.Client,
                                                           tmp_path: Path) -> None:
    base = str(service.base_url).rstrip("/")
    key = service.headers["Authorization"].removeprefix("Bearer ")
    long_file = bundled.write_xz(LONG_DATASET, tmp_path)
    small_file = bundled.write_xz("cancer", tmp_path)
    small_text = bundled.svmlight_bytes("cancer")
    with HingeClient(base, key) as client:
        big = client.upload(long_file)["id"]
        small = client.upload(small_file)["id"]
        samples = _scrape(service)
        sent = long_file.stat().st_size + small_file.stat().st_size
        assert _value(samples, "hinge_upload_bytes_total") == sent

        # a long job, followed live over SSE from another thread, and one queued behind it
        long_job = client.train(big, "dcd", LONG_JOB)["id"]
        events: list[Event] = []
        follower = threading.Thread(target=lambda: events.extend(client.events(long_job)))
        follower.start()
        deadline = time.monotonic() + 120
        while not (client.job(long_job).get("progress") or {}).get("iteration"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        queued_job = client.train(small, "dcd", {"C": 1})["id"]
        time.sleep(1.0)
        samples = _scrape(service)
        running = client.job(long_job)
        assert _value(samples, "hinge_jobs", status="running") == 1
        assert _value(samples, "hinge_jobs", status="queued") == 1
        assert _value(samples, "hinge_queue_depth") == 1
        assert 0.5 <= _value(samples, "hinge_queue_oldest_seconds") < 60
        age = _value(samples, "hinge_worker_heartbeat_age_seconds", worker=running["worker"])
        assert 0 <= age < LEASE_SECONDS

        client.cancel(long_job)
        follower.join(timeout=60)
        assert events and events[-1].data["status"] == "cancelled"
        cancelled = client.job(long_job)
        finished = client.wait(queued_job, timeout=120)
        assert finished["status"] == "succeeded"
        client.predict(finished["model_id"], small_text[:2000].rsplit(b"\n", 1)[0])

        samples = _scrape(service)
    assert _value(samples, "hinge_jobs", status="succeeded") == 1
    assert _value(samples, "hinge_jobs", status="cancelled") == 1
    assert _value(samples, "hinge_jobs", status="running") == 0
    assert _value(samples, "hinge_queue_depth") == 0
    # the idle worker still heartbeats (workers table), and says it is ready
    assert 0 <= _value(samples, "hinge_worker_heartbeat_age_seconds",
                       worker=running["worker"]) < LEASE_SECONDS
    assert _value(samples, "hinge_workers", state="ready") >= 1
    for job, status in ((finished, "succeeded"), (cancelled, "cancelled")):
        labels = {"solver": "dcd", "status": status}
        assert _value(samples, "hinge_job_duration_seconds_count", **labels) == 1
        assert _value(samples, "hinge_job_duration_seconds_sum", **labels) == pytest.approx(
            _seconds(job), abs=0.01)
        assert _value(samples, "hinge_job_duration_seconds_bucket", le="+Inf", **labels) == 1
    # the cancelled job ran for seconds; the bucket counts are cumulative
    assert _value(samples, "hinge_job_duration_seconds_bucket", le="0.5", solver="dcd",
                  status="cancelled") == 0
    assert _value(samples, "hinge_predict_seconds_count", model_kind="linear") == 1
    assert 0 < _value(samples, "hinge_predict_seconds_sum", model_kind="linear") < 5
    lag_count = _value(samples, "hinge_sse_progress_lag_seconds_count")
    live_progress = [e for e in events if e.kind == "progress"]
    assert 1 <= lag_count <= len(live_progress)
    # the embedded service polls every 0.1 s: a lag of seconds would be a broken stream
    assert 0 <= _value(samples, "hinge_sse_progress_lag_seconds_sum") / lag_count < 2.0
