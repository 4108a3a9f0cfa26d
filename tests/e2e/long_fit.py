"""A job that runs for a set wall-clock time on any machine, for the tests that watch, cancel
or kill a running job, with data from the repository (testkit.bundled).

The fit: DCD on `onehot` (8,000 x 142 one-hot rows, a9a-like, 8% label noise) with C =
1000, l1 loss, eps = 1e-9, tol = 1e-9 (the certificate's relative gap: at the default 1e-3
a quiet machine's 6 s certified the model, and the fit ended converged) and no fallback.
That dual converges very slowly: on a busy 2-core machine its 3 s reach about 2,200 sweeps,
and 44,000 sweeps (20 times as many) still end on max_iter. So the fit ends on
`max_seconds` on a machine up to ~20 times faster, and runs `seconds` long (progress events
every 0.2 s) however fast or loaded the machine is: unlike a sweep budget, a wall-clock
budget does not shrink to a handful of events on a quick machine nor grow without bound on
a slow one. The model so far is kept (exit reason max_seconds, status succeeded).
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from testkit import bundled

DATASET = "onehot"
MAX_ITER = 100_000_000  # the schema's maximum: max_seconds ends the fit, never max_iter


def long_fit_bytes() -> bytes:
    """The data of the long fit, as svmlight text."""
    return bundled.svmlight_bytes(DATASET)


def long_job(seconds: float) -> dict[str, Any]:
    """DCD parameters of a fit that ends on max_seconds after `seconds`."""
    return {"C": 1000.0, "loss": "l1", "eps": 1e-9, "tol": 1e-9, "fallback": False,
            "max_iter": MAX_ITER, "max_seconds": float(seconds)}


def wait_running_with_progress(client: httpx.Client, job_id: str, timeout: float = 90
                               ) -> dict[str, Any]:
    """The job once it runs and has reported progress (fails if it ends first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["status"] == "running" and job["progress"]:
            return job
        assert job["status"] in ("queued", "running"), job
        time.sleep(0.05)
    raise TimeoutError(job_id)
