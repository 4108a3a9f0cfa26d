"""Jobs out of core through the real service: API and Celery worker processes on the
embedded default (SQLite), a worker whose memory budget (HINGE_WORKER_MEMORY_BYTES, 3.5
MB) is below what a generated set needs in memory, so its jobs train in blocks
(app/domain/memory.py plan_fit, solvers/out_of_core.py).

- a dcd job (l2 loss) succeeds, converged true (the certificate of one streaming pass), with its
  data plan: mode "blocks", several blocks, the passes and bytes read;
- a long dcd job (tests/e2e/long_fit.py's settings: C = 1000, eps = tol = 1e-9) is
  cancelled while it trains a block, and ends cancelled without a model;
- the same job's pool process SIGKILLed mid-fit: the recovery sweep gives the job to a
  second attempt, which trains it again from the start and succeeds (attempt 2);
- a set whose per-row arrays alone are over the budget is refused with the figures.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from testkit.bundled import dump_svmlight
from testkit.datagen import text_like
from tests.e2e.long_fit import MAX_ITER, wait_running_with_progress
from tests.support import child_pids, embedded_settings, running_service, wait_for_job

BUDGET = 3_500_000
LEASE = {"job_lease_seconds": 2.0, "sweep_interval_seconds": 0.5,
         "requeue_after_seconds": 3.0, "max_attempts": 3}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[httpx.Client, list[Any], str]]:
    home = tmp_path_factory.mktemp("ooc")
    settings = embedded_settings(home / "home", worker_memory_bytes=BUDGET, **LEASE)
    X, y = text_like(12_000, 3_000, seed=11, nnz_per_row=25)
    with running_service(settings, home) as (client, workers):
        upload = client.post("/v1/datasets?name=blocks", content=dump_svmlight(X, y))
        assert upload.status_code == 201, upload.text
        yield client, workers, upload.json()["id"]


def _submit(client: httpx.Client, dataset_id: str, params: dict[str, Any]) -> str:
    submitted = client.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd",
                                              "params": params})
    assert submitted.status_code == 202, submitted.text
    return str(submitted.json()["id"])


def _wait_for_block_progress(client: httpx.Client, job_id: str) -> dict[str, Any]:
    """The job once a progress event from within a block has been recorded."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        job = wait_running_with_progress(client, job_id, timeout=120)
        progress = job["progress"]
        if "block" in progress and progress["block"] < progress["blocks"]:
            return job
        time.sleep(0.05)
    raise TimeoutError(job_id)


def _long(seconds: float) -> dict[str, Any]:
    return {"C": 1000.0, "loss": "l1", "eps": 1e-9, "tol": 1e-9, "fallback": False,
            "max_iter": MAX_ITER, "max_seconds": seconds}


def test_a_job_over_the_budget_trains_in_blocks_and_converges(service: Any) -> None:
    client, _, dataset_id = service
    job = wait_for_job(client.get, _submit(client, dataset_id, {"loss": "l2"}), timeout=300)
    assert job["status"] == "succeeded", (job["error"], job)
    result = job["result"]
    assert result["converged"] is True and result["relative_gap"] <= 1e-3, result
    plan = result["data_plan"]
    assert plan["mode"] == "blocks" and plan["blocks"] >= 2, plan
    assert plan["budget_bytes"] == BUDGET and plan["estimate_bytes"] > BUDGET
    assert plan["max_block_bytes"] * 2 + plan["working_bytes"] <= BUDGET
    # fit passes + the certificate's + the training accuracy's, each reading the set
    assert plan["passes"] >= plan["certificate_passes"] + 2
    assert plan["bytes_read"] >= plan["passes"] * 0.9 * plan["dataset_bytes"]
    assert 0.5 < result["train_accuracy"] <= 1.0


def test_cancel_within_a_block(service: Any) -> None:
    client, _, dataset_id = service
    job_id = _submit(client, dataset_id, _long(120.0))
    _wait_for_block_progress(client, job_id)
    assert client.post(f"/v1/jobs/{job_id}/cancel").status_code == 202
    job = wait_for_job(client.get, job_id, timeout=60)
    assert job["status"] == "cancelled", job
    assert [m for m in client.get("/v1/models").json()["data"]
            if m["job_id"] == job_id] == []


def test_a_sigkilled_fit_in_blocks_is_trained_again_from_the_start(service: Any) -> None:
    client, workers, dataset_id = service
    job_id = _submit(client, dataset_id, _long(4.0))
    job = _wait_for_block_progress(client, job_id)
    pid = int(job["worker"].rsplit(" ", 1)[1])
    assert pid in child_pids(workers[0].process.pid)
    os.kill(pid, signal.SIGKILL)
    job = wait_for_job(client.get, job_id, timeout=240)
    assert job["status"] == "succeeded", (job["error"], job)
    assert job["attempt"] == 2, job
    assert job["result"]["exit_reason"] == "max_seconds", job["result"]
    assert job["result"]["converged"] is False
    assert job["result"]["data_plan"]["mode"] == "blocks"


def test_a_set_whose_row_arrays_exceed_the_budget_is_refused_with_the_figures(
        service: Any) -> None:
    client, _, _ = service
    X, y = text_like(70_000, 50, seed=12, nnz_per_row=2)  # 70,000 x 65 bytes > 3.5 MB
    upload = client.post("/v1/datasets?name=many-rows", content=dump_svmlight(X, y))
    assert upload.status_code == 201, upload.text
    job = wait_for_job(client.get, _submit(client, upload.json()["id"], {}), timeout=120)
    assert job["status"] == "failed", job
    error = job["error"]
    assert "a worker may use 3 MiB (HINGE_WORKER_MEMORY_BYTES)" in error, error
    assert "out of core it needs at least 6 MiB" in error, error
    assert "70,000 rows x 65 bytes" in error, error
