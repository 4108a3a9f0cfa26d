"""The first minute of `make run` (python -m app.run) on a fresh home, with the solver
kernels already in Numba's cache (as `make run`'s install step and the Docker build leave
them): as soon as /healthz answers, a newcomer uploads a9a and trains on it; the job
succeeds, and while it waits it says what for.

How long it takes (issue 16's target: under 10 s from /healthz) is measured by `make
bench` (bench/first_run_bench.py, the same steps from testkit/first_run.py), not here.
"""

from __future__ import annotations

from pathlib import Path

from testkit.first_run import first_job
from tests.support import data_file


def test_first_a9a_job_right_after_healthz_answers(tmp_path: Path) -> None:
    run = first_job(data_file("a9a.xz").read_bytes(), tmp_path)
    job = run["job"]
    assert job["status"] == "succeeded", (job, run["log"][-3000:])
    assert job["result"]["converged"] is True
    assert all(run["waiting_for"]), run["waiting_for"]  # a queued job always says why
    assert [w["state"] for w in run["status_at_end"]["workers"]] == ["ready"]
    print(f"\nfirst run: /healthz {run['to_healthz']:.1f} s after start; the job "
          f"succeeded {run['to_model']:.1f} s after /healthz; it waited for "
          f"{run['waiting_for']}")
