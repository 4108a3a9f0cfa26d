"""Pegasos: primal estimated sub-gradient solver for the L1-loss (hinge) linear SVM.

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight[label of row i]):

    min_w  P(w) = 1/2 ||w||^2 + sum_i C_i max(0, 1 - y_i w.x_i)

which, with lambda = 1/(C n), is C n times Pegasos' objective
f(w) = lambda/2 ||w||^2 + 1/n sum_i (C_i / C) max(0, 1 - y_i w.x_i): the per-example cost
enters as the weight C_i / C of example i's sub-gradient (1 without class weights).
With bias="augment" every x_i carries one more constant feature of value B, regularised
like any other weight; bias="none" has no intercept (Pegasos' own setting).

Algorithm: Shalev-Shwartz, Singer & Srebro, "Pegasos: Primal Estimated sub-GrAdient
SOlver for SVM", ICML 2007, mini-batch version: w_1 = 0; at step t = 1, 2, ... draw a
batch A_t of k examples uniformly at random (independently, with replacement), let
A_t+ = {i in A_t : y_i w_t.x_i < 1}, eta_t = 1/(lambda t),

    w_{t+1/2} = (1 - eta_t lambda) w_t + eta_t / k  sum_{i in A_t+} (C_i / C) y_i x_i
    w_{t+1}   = min(1, R / ||w_{t+1/2}||) w_{t+1/2}

with R = sqrt(sum_i C_i / (C n)) / sqrt(lambda) = sqrt(sum_i C_i): the paper's radius
1/sqrt(lambda) without class weights; with them, the bound ||w*||^2 <= mean(C_i/C) /
lambda of the paper's Theorem 1 argument (dual variables in [0, C_i/C]). The last iterate
is returned. w is kept as scale * v with ||v||^2 maintained, so a step costs O(nnz of the
batch); the scale is folded into v once per epoch and whenever it falls below 1e-9.

Stop rule: none in the optimisation sense. The solver runs `epochs` epochs of ceil(n / k)
steps (exit "epochs_done", never "converged": it has no stop rule), unless `max_iter`
steps come first ("max_iter"); it reports the primal objective P(w) of the w it returns
(there is no dual: dual and gap are None; the backbone bounds the optimum from w).
`iterations` counts sub-gradient steps (what max_iter bounds); progress events (throttled
like every solver's, each costs a pass over the data for P(w)) carry iteration = steps
and epoch = steps / ceil(n / k).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from numba import njit

from solvers._kernel_helpers import next_below, row_dot
from solvers.backbone import (
    BinarySolution,
    Budget,
    LinearProblem,
    ProgressMonitor,
    drive,
    seed_state,
)
from solvers.objectives import primal_objective

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = (
    {},
    {"bias": "augment", "batch_size": 2},
)

# Kernel status codes.
_PAUSED, _DONE, _NON_FINITE = 0, 1, 2
_STATUS_EXIT = {_DONE: "epochs_done", _NON_FINITE: "numerical_error"}

# counters[] slot (int64) and gauges[] slots (float64) of the kernel state.
_STEP = 0
_SCALE, _NORM2 = 0, 1

# The scale of w = scale * v is folded into v when it falls below this.
_MIN_SCALE = 1e-9

BUDGET = Budget()  # nonzeros visited per kernel call


def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Run Pegasos on one binary problem; `params` as filled by validate_params("pegasos")."""
    t_start = time.perf_counter()
    state = _PegasosState(problem, float(params["C"]), int(params["batch_size"]),
                          params["seed"])
    total_steps = int(params["epochs"]) * state.steps_per_epoch
    state.step_limit = min(total_steps, int(params["max_iter"]))
    t_iterate = time.perf_counter()
    exit_reason = drive(state, BUDGET, monitor, _STATUS_EXIT)
    if exit_reason == "epochs_done" and state.step_limit < total_steps:
        exit_reason = "max_iter"
    t_objective = time.perf_counter()
    w = state.weights()
    if not np.all(np.isfinite(w)):
        exit_reason = "numerical_error"
    primal = primal_objective(problem, w, "l1")
    t_end = time.perf_counter()
    return BinarySolution(
        w=w,
        iterations=state.step,
        exit_reason=exit_reason,
        primal=primal,
        details={"epochs": state.step / state.steps_per_epoch,
                 "batch_size": state.batch_size, "lambda": state.lam},
        timings={"setup_s": t_iterate - t_start, "iterate_s": t_objective - t_iterate,
                 "objective_s": t_end - t_objective},
    )


class _PegasosState:
    """The arrays the kernel works on: problem data, v and its scale, RNG state."""

    def __init__(self, problem: LinearProblem, C: float, batch_size: int, seed: int) -> None:
        X = problem.X
        self.problem = problem
        n_rows = X.n_rows
        self.batch_size = batch_size
        self.steps_per_epoch = -(-n_rows // batch_size)  # ceil(n / k)
        self.lam = 1.0 / (C * n_rows)
        weight = np.ascontiguousarray(problem.cost / C, dtype=np.float64)  # C_i / C
        radius = math.sqrt(float(np.sum(problem.cost)))  # = 1/sqrt(lambda) if C_i = C
        self.v = np.zeros(X.n_features + 1)  # last slot: the bias feature (stays 0 if none)
        self.counters = np.zeros(1, dtype=np.int64)
        self.gauges = np.array([1.0, 0.0])  # scale, ||v||^2
        rng = np.array([seed_state(seed)], dtype=np.uint64)
        batch = np.zeros(batch_size, dtype=np.int64)
        self.kernel_args = (
            (X.data, X.indices, X.indptr),
            (problem.y, weight),
            (self.v, batch),
            (self.counters, self.gauges, rng),
        )
        self.settings = (float(problem.bias_scale), self.lam, radius, self.steps_per_epoch)
        self.step_limit = 0  # set by solve: min(epochs * steps_per_epoch, max_iter)

    @property
    def step(self) -> int:
        return int(self.counters[_STEP])

    @property
    def iteration(self) -> int:
        return self.step

    def run(self, work_budget: int) -> int:
        settings = (*self.settings, self.step_limit, work_budget)
        return int(_pegasos_steps(*self.kernel_args, settings))

    def weights(self) -> np.ndarray:
        """w = scale * v (feature weights, then the bias-feature weight if any)."""
        return self.gauges[_SCALE] * self.v[: self.problem.n_weights]

    def snapshot(self) -> dict[str, Any]:
        """The primal objective of the current w (a pass over the data)."""
        primal = primal_objective(self.problem, self.weights(), "l1")
        return {"iteration": self.step, "epoch": self.step / self.steps_per_epoch,
                "primal": primal, "dual": None, "gap": None, "violation": None,
                "active_size": self.problem.X.n_rows}


# Row loops and the RNG: solvers/_kernel_helpers.py. Unsigned counters and indices: no
# negative-index wraparound code.
_U1 = np.uint64(1)


@njit(cache=True, inline="always")
def _row_axpy_norm(scale, data, indices, start, end, v):
    """v[indices[start:end]] += scale * data[start:end]; returns the change of ||v||^2."""
    change = 0.0
    for k in range(start, end):
        j = np.uint32(indices[k])
        old = v[j]
        new = old + scale * data[k]
        v[j] = new
        change += new * new - old * old
    return change


@njit(cache=True)
def _fold_scale(v, gauges):
    """v *= scale; scale = 1; ||v||^2 recomputed exactly."""
    scale = gauges[_SCALE]
    norm2 = 0.0
    for j in range(v.shape[0]):
        v[j] *= scale
        norm2 += v[j] * v[j]
    gauges[_SCALE] = 1.0
    gauges[_NORM2] = norm2


@njit(cache=True, error_model="numpy")
def _pegasos_steps(rows, labels, variables, state, settings):
    """Run Pegasos steps until step_limit, a non-finite margin or the work budget.

    rows = (data, indices, indptr) of X; labels = (y, C_i / C); variables = (v, batch) with
    v[-1] the bias-feature weight and batch a buffer of k indices; state = (counters,
    gauges, rng) as described by the _STEP and _SCALE/_NORM2 slots; settings = (B, lambda,
    R, steps per epoch, step_limit, work_budget). Returns a status code.
    """
    data, indices, indptr = rows
    y, weight = labels
    v, batch = variables
    counters, gauges, rng = state
    bias_scale, lam, radius, steps_per_epoch, step_limit, work_budget = settings

    n_rows = indptr.shape[0] - 1
    batch_size = batch.shape[0]
    bias_slot = v.shape[0] - 1
    t = counters[_STEP]
    work = 0
    status = _DONE

    while t < step_limit:
        if work >= work_budget:
            status = _PAUSED
            break
        t += 1
        scale = gauges[_SCALE]
        # A_t+ = {i in A_t : y_i w.x_i < 1}, w = scale * v (margins before the step)
        violators = 0
        for _ in range(batch_size):
            i = np.uint64(next_below(rng, n_rows))
            start = np.uint64(indptr[i])
            end = np.uint64(indptr[i + _U1])
            work += indptr[i + _U1] - indptr[i] + 1
            margin = y[i] * scale * (
                row_dot(v, data, indices, start, end) + v[bias_slot] * bias_scale
            )
            if not np.isfinite(margin):
                status = _NON_FINITE
                break
            if margin < 1.0:
                batch[violators] = np.int64(i)
                violators += 1
        if status == _NON_FINITE:
            t -= 1  # the step was not taken
            break

        # w <- (1 - eta_t lambda) w = (1 - 1/t) w   (w_1 = 0, so v stays 0 at t = 1)
        scale = scale * (1.0 - 1.0 / t) if t > 1 else 1.0
        # w += eta_t / k sum_{A_t+} (C_i/C) y_i x_i, i.e. v += that / scale
        eta = 1.0 / (lam * t)
        norm2 = gauges[_NORM2]
        for b in range(violators):
            i = np.uint64(batch[b])
            coefficient = eta * weight[i] * y[i] / (batch_size * scale)
            start = np.uint64(indptr[i])
            end = np.uint64(indptr[i + _U1])
            work += indptr[i + _U1] - indptr[i]
            norm2 += _row_axpy_norm(coefficient, data, indices, start, end, v)
            old = v[bias_slot]
            new = old + coefficient * bias_scale
            v[bias_slot] = new
            norm2 += new * new - old * old
        norm2 = max(norm2, 0.0)
        # w <- min(1, R / ||w||) w
        norm = scale * math.sqrt(norm2)
        if norm > radius:
            scale *= radius / norm
        gauges[_SCALE] = scale
        gauges[_NORM2] = norm2
        if scale < _MIN_SCALE or t % steps_per_epoch == 0:
            _fold_scale(v, gauges)
            work += v.shape[0]

    counters[_STEP] = t
    return status
