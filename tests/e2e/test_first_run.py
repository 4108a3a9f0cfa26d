"""The first minutes of `make run` (python -m app.run) on a fresh home: as soon as /healthz
answers, a newcomer uploads an a9a-like set (testkit.bundled `onehot`: 8,000 rows of 0/1
one-hot features; nothing from ../shared) and trains on it with no solver named; the job
succeeds, and while it waits it says what for.

- with the solver kernels in Numba's cache (the e2e conftest fills it): the default suite;
- with an empty cache (a new machine): the API answers at once, the worker reports
  `warming` while it compiles, the job waits for it and says so, then succeeds. Slow: the
  compilation takes minutes of CPU.

How long it takes is measured by bench/first_run_bench.py (the same steps, from
testkit/first_run.py; its figures: bench/results/first_run.md), not here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from testkit.bundled import svmlight_bytes
from testkit.first_run import first_job


def test_first_a9a_like_job_right_after_healthz_answers(tmp_path: Path) -> None:
    run = first_job(svmlight_bytes("onehot"), tmp_path)
    job = run["job"]
    assert job["status"] == "succeeded", (job, run["log"][-3000:])
    assert job["result"]["converged"] is True
    assert all(run["waiting_for"]), run["waiting_for"]  # a queued job always says why
    assert [w["state"] for w in run["status_at_end"]["workers"]] == ["ready"]
    print(f"\nfirst run: /healthz {run['to_healthz']:.1f} s after start; the job "
          f"succeeded {run['to_model']:.1f} s after /healthz; it waited for "
          f"{run['waiting_for']}")


@pytest.mark.slow
def test_with_an_empty_kernel_cache_the_api_answers_while_the_worker_compiles(
        tmp_path: Path) -> None:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"))
    run = first_job(svmlight_bytes("onehot"), tmp_path, env=env, job_timeout=1800)
    job = run["job"]
    assert job["status"] == "succeeded", (job, run["log"][-3000:])
    # /healthz answered before any worker was ready: the API did not wait for the compiler
    assert run["status_at_start"]["ready_workers"] == 0, run["status_at_start"]
    assert any(states and set(states) == {"warming"} for states in run["states"]), run
    # the job waited for the warming worker and said so, then ran on it
    assert any(reason.startswith("a worker (warming up, ") for reason in run["waiting_for"]), \
        run["waiting_for"]
    [worker] = run["status_at_end"]["workers"]
    assert worker["state"] == "ready" and worker["warming_s"] > 0
    assert "solver kernels ready in" in run["log"], run["log"][-3000:]
    assert "helper process(es) compile the rest into the cache" in run["log"]
    print(f"\nempty cache: /healthz {run['to_healthz']:.1f} s after start; the worker warmed "
          f"up in {worker['warming_s']:.0f} s; the job succeeded {run['to_model']:.1f} s "
          f"after /healthz; it waited for {run['waiting_for']}")
