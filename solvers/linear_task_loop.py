"""The loop the dual methods of solvers/linear_tasks.py share (Crammer-Singer, the linear
SVR's dual coordinate descent, the linear one-class SVM): sweeps between certificates,
the certificate of the best model seen, the progress events and the stops; and the
problem they all solve (`TaskProblem`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers.backbone import BinarySolution, CsrArrays, ProgressMonitor, rng_of

# Sweeps between two certificates when the inner rule has not held: the first 10, then as
# many as keep the certificate's cost near a quarter of the sweeps' (a certificate is one or
# two passes over X, a shrunk sweep can cost far less), 1 to 100.
_CHECK_EVERY, _CHECK_MAX, _CHECK_SHARE = 10, 100, 0.25


@dataclass(frozen=True)
class TaskProblem:
    """One linear problem of a formulation: rows (with the bias feature when augmented),
    per-row costs, and the class index (crammer_singer) or target (linear_svr) of a row."""

    X: CsrArrays
    cost: np.ndarray
    label: np.ndarray  # int64 class index (crammer_singer), else zeros
    target: np.ndarray  # float64 targets (linear_svr), else zeros
    n_outputs: int
    n_features: int  # without the bias feature
    bias_scale: float  # 0.0: no bias feature


def stop_reason(
    monitor: ProgressMonitor, iteration: int, primal: float, dual: float
) -> str | None:
    """ "max_seconds" or "cancelled" when the fit must stop now, else None (throttled
    progress events in between)."""
    if monitor.out_of_time():
        return "max_seconds"
    if monitor.event_due() and monitor.report(
        lambda: {
            "iteration": iteration,
            "primal": primal,
            "dual": dual,
            "gap": primal - dual,
            "violation": None,
            "active_size": None,
        }
    ):
        return "cancelled"
    return None


def relative(primal: float, dual: float) -> float:
    return (primal - dual) / max(abs(primal), 1e-300)


def seed_rng(params: dict[str, Any]) -> np.ndarray:
    """Hinge's xorshift64* state from `seed`, or with `sweeps` "sklearn" scikit-learn's
    LIBLINEAR generator, std::mt19937(seed) (solvers.backbone.rng_of)."""
    return rng_of({**params, "seed": int(params.get("seed") or 0)})


@dataclass
class Run:
    iterations: int
    exit_reason: str
    primal: float
    dual: float
    violation: float
    eps: float
    best: np.ndarray  # the snapshot of the model with the smallest primal so far

    def solution(self, dual_point: np.ndarray) -> BinarySolution:
        return BinarySolution(
            w=self.best,
            iterations=self.iterations,
            exit_reason=self.exit_reason,
            primal=self.primal,
            dual=self.dual,
            gap=self.primal - self.dual,
            violation=None if math.isnan(self.violation) else self.violation,
            alpha=dual_point,
            details={"eps_final": self.eps},
        )


def drive(
    sweeps: Callable[[int, float], tuple[int, bool, float]],
    objectives: Callable[[], tuple[float, float]],
    snapshot: Callable[[], np.ndarray],
    params: dict[str, Any],
    monitor: ProgressMonitor,
    active_share: Callable[[], float] | None = None,
) -> Run:
    """The loop of the dual methods: `sweeps(budget, eps)` runs at most budget sweeps and
    says how many ran, whether its inner rule held (at eps) and its violation; after each
    call the certificate `objectives()` = (P, D) is checked. Converged when (P - D) / |P|
    <= tol; an inner rule that holds first is tightened tenfold (as the fallback rule of
    the binary solvers continues with eps / 10). The certificate pairs the smallest primal
    value seen (of the model `snapshot()` returned then, the one kept) with the largest dual
    value seen: every dual value bounds the optimum, and on a non-smooth loss the primal
    value at the current dual point can jump up and down while both converge.

    The certificate costs about one pass over the data and a sweep about the share of the
    rows shrinking left active (`active_share()`), so the sweeps between two checks are
    as many as keep the checks near _CHECK_SHARE of the sweeps' work (1 to _CHECK_MAX);
    without `active_share` the sweeps compute the certificate themselves and run
    _CHECK_MAX between checks. The rule counts work, not time: the same problem gives
    the same iterates and the same model on every run."""
    eps, tol, max_iter = float(params["eps"]), float(params["tol"]), int(params["max_iter"])
    run = Run(0, "max_iter", *objectives(), math.inf, eps, snapshot())
    budget = _CHECK_EVERY
    while run.iterations < max_iter:
        done, held, run.violation = sweeps(min(budget, max_iter - run.iterations), eps)
        run.iterations += done
        primal, dual = objectives()
        budget = (_CHECK_MAX if active_share is None else int(min(max(
            1.0 / (_CHECK_SHARE * max(active_share(), 1e-9)), 1.0), _CHECK_MAX)))
        run.dual = max(run.dual, dual)
        if primal < run.primal:
            run.primal, run.best = primal, snapshot()
        if relative(run.primal, run.dual) <= tol:
            run.exit_reason = "converged"
            break
        if held:
            eps /= 10.0
            run.eps = eps
        stop = stop_reason(monitor, run.iterations, run.primal, run.dual)
        if stop is not None:
            run.exit_reason = stop
            break
    return run


def drive_liblinear(
    sweeps: Callable[[int, float], tuple[int, bool, float]],
    objectives: Callable[[], tuple[float, float]],
    snapshot: Callable[[], np.ndarray],
    params: dict[str, Any],
    monitor: ProgressMonitor,
) -> Run:
    """`sweeps="sklearn"`: the loop of scikit-learn's LIBLINEAR, so that the sweeps are its
    epochs: `sweeps(budget, eps)` (returning the sweeps that ran) until its inner rule
    holds at eps or max_iter; the model is the last iterate, certified once at the end:
    "converged" when (P - D) / |P| <= tol, "stalled" when the rule held without it."""
    eps, tol, max_iter = float(params["eps"]), float(params["tol"]), int(params["max_iter"])
    iterations, exit_reason, violation = 0, "max_iter", math.nan
    while iterations < max_iter:
        done, held, violation = sweeps(min(_CHECK_MAX, max_iter - iterations), eps)
        iterations += done
        if held:
            exit_reason = "stalled"
            break
        stop = stop_reason(monitor, iterations, math.nan, math.nan)
        if stop is not None:
            exit_reason = stop
            break
    primal, dual = objectives()
    if exit_reason == "stalled" and relative(primal, dual) <= tol:
        exit_reason = "converged"
    return Run(iterations, exit_reason, primal, dual, violation, eps, snapshot())
