"""A job's result (workers.training._summary) as the dashboard reads it (issue 31)."""

from __future__ import annotations

import numpy as np
import pytest

from app.domain.job_result import JobResult, result_keys
from app.domain.schemas import JobPublic
from solvers import fit
from testkit import bundled
from workers.training import _summary


def test_a_binary_kernel_result_carries_its_final_violation() -> None:
    X, y = bundled.load("cancer")
    result = fit(X, y, solver="smo", eps=1e-3)
    summary = _summary(result, float(np.mean(result.predict(X) == y)))
    assert summary["converged"] is True
    # SMO's stop rule: m - M below eps at the end, the plot's last violation point
    assert 0 < summary["violation"] <= 1e-3
    assert summary["violation"] == result.per_output[0]["violation"]
    assert "problems" not in summary


def test_several_kernel_problems_list_their_violations_not_one() -> None:
    X, y = bundled.load("wine")
    result = fit(X, y, solver="smo")
    summary = _summary(result, 1.0)
    assert "violation" not in summary and len(summary["problems"]) == 3
    assert all(0 < p["violation"] <= 1e-3 for p in summary["problems"])


@pytest.mark.parametrize(("data", "solver", "params"), [
    ("cancer", "dcd", {}),
    ("cancer", "l1_cd", {"penalty": "l1"}),
    ("cancer", "tron", {"threads": 2}),
    ("wine", "smo", {}),
    ("cancer", "smo", {}),
])
def test_every_key_the_worker_writes_is_declared(data: str, solver: str,
                                                 params: dict[str, object]) -> None:
    X, y = bundled.load(data)
    result = fit(X, y, solver=solver, **params)
    summary = _summary(result, float(np.mean(result.predict(X) == y)))
    assert set(summary) <= result_keys(), set(summary) - result_keys()
    assert "code_version" in summary
    if solver == "tron":  # what it ran with (threads capped by the machine)
        assert 1 <= summary["threads"] <= 2
    # what GET /v1/jobs/{id} answers: every key, the same values
    answered = JobResult.model_validate(summary).model_dump(exclude_unset=True)
    assert answered == summary


def test_a_key_a_newer_worker_writes_passes_through_the_answer() -> None:
    stored = {"iterations": 3, "data_plan": {"shards": 2}, "not_yet_declared": {"a": 1}}
    job = JobPublic.model_validate({
        "id": "job_1", "dataset_id": None, "solver": "dcd", "params": {},
        "status": "succeeded", "error": None, "model_id": None, "result": stored,
        "progress": None, "status_history": [], "attempt": 1, "worker": None,
        "cancel_requested": False, "created_at": "2026-01-01T00:00:00Z",
        "started_at": None, "finished_at": None})
    answered = job.model_dump(mode="json")["result"]
    assert answered["data_plan"] == {"shards": 2}
    assert answered["not_yet_declared"] == {"a": 1}
