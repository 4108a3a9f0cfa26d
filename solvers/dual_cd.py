"""What the dual coordinate-descent solvers (`dcd`, `acf`) share: the dual variables and
w(a), the objectives of the current iterate, and the wrapper around their kernels.

Both solve the dual of solvers/objectives.py (0 <= a_i <= U_i, Qbar = Q + diag(D_ii)) one
variable at a time, keeping w(a) = sum_i y_i a_i x_i; both kernels return the status
codes 0 paused, 1 converged, 2 max_iter, 3 non-finite gradient.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from solvers.backbone import (
    BinarySolution,
    Budget,
    LinearProblem,
    ProgressMonitor,
    drive,
    seed_state,
)
from solvers.objectives import (
    check_loss,
    dual_box,
    dual_objective,
    primal_objective,
    qbar_diagonal,
    transpose_times,
)

STATUS_EXIT = {1: "converged", 2: "max_iter", 3: "numerical_error"}
BUDGET = Budget()  # nonzeros visited per kernel call


class DualState:
    """The arrays both kernels work on; subclasses add their own state and `run`."""

    def __init__(self, problem: LinearProblem, params: dict[str, Any]) -> None:
        check_loss(params["loss"])
        X = problem.X
        self.problem, self.loss = problem, params["loss"]
        self.eps, self.max_iter = float(params["eps"]), int(params["max_iter"])
        self.upper, self.diag = dual_box(problem.cost, self.loss)
        self.qbar_diag = qbar_diagonal(problem, self.diag)
        self.alpha = np.zeros(X.n_rows)
        self.w = np.zeros(X.n_features + 1)  # last slot: the bias feature (stays 0 if none)
        self.w_view = self.w[: problem.n_weights]
        self.rng = np.array([seed_state(params["seed"])], dtype=np.uint64)
        start = params.get("alpha0")
        if start is not None:  # warm start (solvers/continuation.py): a, then w(a)
            start = np.asarray(start, dtype=np.float64)
            if start.shape != (X.n_rows,) or not np.all(np.isfinite(start)):
                raise ValueError(f"alpha0 must be {X.n_rows} finite dual values")
            self.alpha[:] = np.clip(start, 0.0, self.upper)
            self.w_view[:] = transpose_times(problem, problem.y * self.alpha)

    @property
    def iteration(self) -> int:
        raise NotImplementedError

    def run(self, budget: int) -> int:
        raise NotImplementedError

    def progress(self) -> dict[str, Any]:
        """violation and active_size of the current iterate (cheap)."""
        raise NotImplementedError

    def details(self) -> dict[str, Any]:
        return {"n_support": int(np.count_nonzero(self.alpha))}

    def snapshot(self) -> dict[str, Any]:
        """Objectives of the current iterate (a pass over the data)."""
        primal = primal_objective(self.problem, self.w_view, self.loss)
        dual = dual_objective(self.problem, self.alpha, self.w_view, self.loss)
        return {"iteration": self.iteration, "primal": primal, "dual": dual,
                "gap": primal - dual, **self.progress()}


def solve_dual(state_type: type[DualState], problem: LinearProblem, params: dict[str, Any],
               monitor: ProgressMonitor) -> BinarySolution:
    """Run a dual CD kernel to its stop rule (or the monitor's) and report the iterate."""
    t_start = time.perf_counter()
    state = state_type(problem, params)
    t_iterate = time.perf_counter()
    exit_reason = drive(state, BUDGET, monitor, STATUS_EXIT)
    t_objective = time.perf_counter()
    if not np.all(np.isfinite(state.w)):
        exit_reason = "numerical_error"
    final = state.snapshot()
    t_end = time.perf_counter()
    return BinarySolution(
        w=state.w_view.copy(),
        iterations=final["iteration"],
        exit_reason=exit_reason,
        primal=final["primal"],
        dual=final["dual"],
        gap=final["gap"],
        violation=final["violation"],
        alpha=state.alpha,
        details={"active_size": final["active_size"], **state.details()},
        timings={"setup_s": t_iterate - t_start, "iterate_s": t_objective - t_iterate,
                 "objective_s": t_end - t_objective},
    )
