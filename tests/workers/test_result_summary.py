"""A job's result (workers.training._summary) as the dashboard reads it (issue 31)."""

from __future__ import annotations

import numpy as np

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
