"""What the dual coordinate-descent solvers (`dcd`, `acf`) share: the dual variables and
w(a), the objectives of the current iterate, the wrapper around their kernels and the
compiled steps both kernels inline (the visit of a variable, its one-variable step, the
status at the end of a sweep).

Both solve the dual of solvers/objectives.py (0 <= a_i <= U_i, Qbar = Q + diag(D_ii)) one
variable at a time, keeping w(a) = sum_i y_i a_i x_i; both kernels return the status
codes 0 paused, 1 converged, 2 max_iter, 3 non-finite gradient.

Warm start (`params["alpha0"]`, set by `solvers.train.fit(warm_start=...)` for a C path,
as LIBLINEAR -C): the dual solution `a0` of the same rows at a smaller C. The start is the
best feasible multiple of it, a = t a0 with t in [0, t_max] (t_max = min_i U_i / a0_i, so
t a0 stays in the box) minimising D(t a0) = t^2 A - t B, A = 1/2 ||w(a0)||^2 + 1/2 sum_i
D_ii a0_i^2, B = sum_i a0_i: t = min(B / (2A), t_max). At small C, where every a_i sits at
its bound C_i, t follows C (t = C_new / C_old); at large C, where the solution stops
changing, t stays near 1. Any feasible start is valid for the coordinate descent, so the
stop rule and the certificate are the cold start's.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from numba import njit

from solvers._kernel_helpers import row_axpy, row_dot
from solvers.backbone import (
    BinarySolution,
    Budget,
    LinearProblem,
    ProgressMonitor,
    drive,
    rng_of,
)
from solvers.objectives import (
    check_loss,
    dual_box,
    dual_objective,
    primal_objective,
    qbar_diagonal,
    transpose_times,
)

# The kernels' status codes.
PAUSED, CONVERGED, MAX_ITER, NON_FINITE = 0, 1, 2, 3
STATUS_EXIT = {CONVERGED: "converged", MAX_ITER: "max_iter", NON_FINITE: "numerical_error"}
BUDGET = Budget()  # nonzeros visited per kernel call
# What solvers.train warms both kernels with.
WARMUP_VARIANTS: tuple[dict[str, Any], ...] = (
    {"loss": "l1"},
    {"loss": "l2", "bias": "none"},
)


class DualState:
    """The arrays both kernels work on; subclasses add their own state and `run`."""

    def __init__(self, problem: LinearProblem, params: dict[str, Any]) -> None:
        check_loss(params["loss"])
        X = problem.X
        self.problem, self.loss = problem, params["loss"]
        self.eps, self.max_iter = float(params["eps"]), int(params["max_iter"])
        self.upper, self.diag = dual_box(problem.cost, self.loss)
        self.qbar_diag = qbar_diagonal(problem, self.diag)
        self.sklearn = params.get("sweeps", "hinge") == "sklearn"
        if self.sklearn:  # LIBLINEAR's order: D_ii + x_i1^2 + ... + B^2
            sklearn_qbar(X.data, X.indptr, self.diag, float(problem.bias_scale),
                          self.qbar_diag)
        self.alpha = np.zeros(X.n_rows)
        self.w = np.zeros(X.n_features + 1)  # last slot: the bias feature (stays 0 if none)
        self.w_view = self.w[: problem.n_weights]
        self.rng = rng_of(params)
        alpha0 = params.get("alpha0")
        if alpha0 is not None:
            self._warm_start(np.asarray(alpha0, dtype=np.float64))

    def _warm_start(self, alpha0: np.ndarray) -> None:
        """alpha = t alpha0 with the best feasible t (module docstring); w = w(alpha)."""
        if alpha0.shape != self.alpha.shape or not np.all(np.isfinite(alpha0)):
            raise ValueError(f"alpha0 must be {self.alpha.shape[0]} finite values")
        start = np.maximum(alpha0, 0.0)
        w_start = self._w_of(start)
        quadratic = 0.5 * float(w_start @ w_start) + 0.5 * float(self.diag @ (start * start))
        linear = float(start.sum())
        if quadratic <= 0.0 or linear <= 0.0:
            return  # a zero start: the cold start
        positive = start > 0
        t_max = float(np.min(self.upper[positive] / start[positive]))
        t = min(linear / (2.0 * quadratic), t_max)
        # a = t a0; w(a) = t w(a0) = sum_i y_i a_i x_i (+ the bias feature's weight)
        self.alpha[:] = np.minimum(t * start, self.upper)  # (rounding: stay in the box)
        self.w[:] = 0.0
        self.w_view[:] = self._w_of(self.alpha)

    def _w_of(self, alpha: np.ndarray) -> np.ndarray:
        """w(a) = X' (y * a), with the bias feature B * sum_i y_i a_i last if there is one
        (one compiled pass: no temporary the size of X's values)."""
        return transpose_times(self.problem, self.problem.y * alpha)

    def _use_kernel(self, sweeps: Any, variables: tuple[np.ndarray, ...],
                    state: tuple[np.ndarray, ...]) -> None:
        """The subclass's compiled sweeps, called as sweeps(rows, labels, variables, state,
        settings): rows = (data, indices, indptr) of X, labels = (y, U, D, Qbar_ii),
        variables start with (alpha, w), state starts with the int64 counters, whose slot
        0 is the iteration; settings = (B, eps, max_iter, work_budget)."""
        X = self.problem.X
        self.sweeps = sweeps
        self.counters = state[0]
        self.kernel_args = (
            (X.data, X.indices, X.indptr),
            (self.problem.y, self.upper, self.diag, self.qbar_diag),
            variables,
            state,
        )

    @property
    def iteration(self) -> int:
        return int(self.counters[0])

    def run(self, budget: int) -> int:
        settings = (float(self.problem.bias_scale), self.eps, self.max_iter, budget)
        return int(self.sweeps(*self.kernel_args, settings))

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


@njit(cache=True)
def sklearn_qbar(data, indptr, diag, bias_scale, out):
    """out[i] = Qbar_ii summed as scikit-learn's LIBLINEAR does (solve_l2r_l1l2_svc):
    D_ii, then x_ij^2 in row order, then the bias feature's B^2 last."""
    for i in range(indptr.shape[0] - 1):
        total = diag[i]
        for k in range(indptr[i], indptr[i + 1]):
            value = np.float64(data[k])  # float32 values: squared in float64
            total += value * value
        if bias_scale > 0.0:
            total += bias_scale * bias_scale
        out[i] = total


# -- compiled steps both kernels take (inlined; unsigned row bounds: no negative-index
# wraparound code in the row loops)

_U1 = np.uint64(1)


@njit(cache=True, inline="always")
def visit(rows, labels, alpha, w, bias_scale, i):
    """What both kernels read for coordinate i: the bounds of row i (np.uint64), the work
    of the visit (nnz + 1), G = y_i w.x_i - 1 + D_ii a_i (the gradient of D along a_i;
    w[-1] is the bias feature's weight, B its value), a_i and U_i."""
    data, indices, indptr = rows
    y, upper, diag, _ = labels
    row_start = indptr[i]
    row_end = indptr[i + _U1]
    start = np.uint64(row_start)
    end = np.uint64(row_end)
    a_i = alpha[i]
    dot = row_dot(w, data, indices, start, end)
    dot += w[w.shape[0] - 1] * bias_scale
    g = y[i] * dot - 1.0 + a_i * diag[i]
    return start, end, row_end - row_start + 1, g, a_i, upper[i]


@njit(cache=True, inline="always", error_model="numpy")
def coordinate_step(rows, labels, alpha, w, bias_scale, i, start, end, g):
    """a_i <- min(max(a_i - G / Qbar_ii, 0), U_i) and w += (a_i_new - a_i) y_i x_i;
    returns the step a_i_new - a_i."""
    data, indices, _ = rows
    y, upper, _, qbar_diag = labels
    a_i = alpha[i]
    a_new = min(max(a_i - g / qbar_diag[i], 0.0), upper[i])
    alpha[i] = a_new
    step = a_new - a_i
    scaled = step * y[i]
    row_axpy(scaled, data, indices, start, end, w)
    w[w.shape[0] - 1] += scaled * bias_scale
    return step


@njit(cache=True, inline="always")
def sweep_status(status, position, length):
    """The status after a sweep's inner loop: NON_FINITE stays, PAUSED when the budget
    ran out in the middle of the sweep; otherwise the sweep ended and `status` (MAX_ITER:
    go on) is returned."""
    if status != NON_FINITE and position < length:
        return PAUSED
    return status
