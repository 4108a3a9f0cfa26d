"""Every LIBLINEAR formulation streams progress events with its certified bounds (primal,
dual, gap), as dcd does: the job page plots the certified gap of each. Each event's dual
is a true lower bound (at most the final primal, hence at most the optimum plus the
final gap) and its primal an upper bound (at least the final dual)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from solvers.train import fit
from testkit import bundled

CASES = [
    ("tron", {"loss": "logistic"}),  # -s 0
    ("tron", {"loss": "l2"}),  # -s 2
    ("logistic_dcd", {}),  # -s 7
    ("l1_cd", {"loss": "l2"}),  # -s 5
    ("l1_cd", {"loss": "logistic"}),  # -s 6
    ("crammer_singer", {}),  # -s 4
    ("linear_svr", {"loss": "l2", "method": "primal"}),  # -s 11
    ("linear_svr", {"loss": "l2"}),  # -s 12
    ("linear_svr", {"loss": "l1"}),  # -s 13
    ("linear_one_class", {"nu": 0.2}),  # -s 21
]


@pytest.mark.parametrize(("solver", "params"), CASES)
def test_events_carry_certified_bounds(solver: str, params: dict[str, Any]) -> None:
    X, y = bundled.load("text")
    target = None if solver == "linear_one_class" else np.where(y == y.max(), 1.0, -1.0)
    events: list[dict[str, Any]] = []
    result = fit(X, target, solver=solver, progress=lambda e: events.append(e) or False,
                 progress_interval=0.0, tol=1e-6, **params)
    assert result.converged
    assert events
    scale = abs(result.primal_objective) + 1.0
    for event in events:
        primal, dual, gap = event["primal"], event["dual"], event["gap"]
        assert all(isinstance(v, float) and np.isfinite(v) for v in (primal, dual, gap)), event
        assert gap == pytest.approx(primal - dual, abs=1e-9 * scale)
        assert gap >= -1e-9 * scale
        assert dual <= result.primal_objective + 1e-9 * scale
        # the fit's certified lower bound L, relative_gap = (P - L) / P
        lower = result.primal_objective - result.relative_gap * abs(result.primal_objective)
        assert primal >= lower - 1e-9 * scale
