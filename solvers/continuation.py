"""One binary linear problem, solved until a certificate holds: the path of solvers.

`solve_certified` runs the requested solver, certifies the model it returns
(solvers/certificate.py) and, while the certificate fails and the budget lasts, runs the
next step of the one fallback rule below, warm-started from the last w. Every step is
recorded in `details["path"]`: {"solver", "exit", "iterations", "seconds",
"relative_gap", "reason"}. `details["converged"]` is true exactly when the certificate
holds at the returned model (relative gap <= tol). The exit reason says why the last
solver stopped; a solver's own "converged" that the certificate does not confirm becomes
"stalled", so exit "converged" always comes with converged true (a limit such as max_iter
may still be hit by a model that is certified: converged true, exit "max_iter").

The rule, as LIBLINEAR switches -s 1 to -s 2 at its sweep limit (each solver's steps are
its registry entry's `fallback`, solvers/params.py; `next_step` takes the first that
applies):
- dcd / acf whose own stop rule held without a certificate: the same solver again from
  its dual point a with eps / 10 (the cheap way on scaled data: a few more sweeps);
- dcd / acf, not certified (sweep limit), on few wide examples (solvers.auto.gram_suits:
  n <= 2000 and n <= 4 d, as unscaled madelon, where tron and ocas crawl from the dual
  CD's w): gram;
- dcd / acf, loss l2, not certified (sweep limit):
  tron warm-started from w (Newton on the primal: indifferent to feature scaling);
  every follow-up starts from w = 0 instead when P(w) >= P(0) (a stalled dual CD on
  unscaled data can end there, and Newton then crawls from it);
- dcd / acf, loss l1, not certified (sweep limit): ocas warm-started from w (its
  cutting-plane model starts at w); its eps is the fit's tol, the same relative gap;
- tron at max_iter or stalled, with at most 2000 weights: newton (exact Newton steps,
  solvers/dense_newton.py), which TRON's conjugate gradient cannot match on unscaled data;
- ocas at max_iter or stalled, with at most GRAM_MAX_ROWS examples: gram (an interior-
  point method on the dual's Gram matrix, solvers/gram.py), indifferent to the scaling
  that makes cutting planes crawl (unscaled madelon);
- tron, ocas that stopped by their own rule but are not certified: the same solver again
  from w with eps / 10 (tron's eps bounds the gradient relative to ||grad P(0)||, ocas's
  the gap of its reduced problem);
- nothing after alm, pegasos, a limit (max_iter of the follow-up, max_seconds),
  cancellation or a numerical error; at most MAX_STEPS steps.
`fallback=False` (dcd, acf, tron, ocas) turns the switches off.
Time share: with a wall-clock limit (max_seconds; jobs always have one), a step that has a
follow-up in the rule above gets at most SHARE of the time left; when it runs out of its
share, the follow-up runs (the path records the step's exit as "max_seconds" and the
reason of the next step says so), so a solver that crawls does not use the whole budget
and end uncertified while a method that suits the data was never tried. max_seconds
covers the whole path (one ProgressMonitor); max_iter bounds the first solver in its own
unit, and a follow-up solver of another kind runs with its own default limit, the steps
of one solver sharing it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

from solvers.auto import GRAM_MAX_ROWS, NEWTON_MAX_WEIGHTS, gram_suits
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor, SolverModule
from solvers.certificate import Certificate, certify, problem_loss
from solvers.inputs import as_float64
from solvers.params import SOLVERS, Size, validate_params

MAX_STEPS = 8
MIN_EPS = 1e-12  # continuation stops tightening below this
_FINAL = ("max_seconds", "cancelled", "numerical_error")
SHARE = 0.5  # of the time left, for a step that has a follow-up


def _size_suits(size: Size, n_rows: int, n_weights: int) -> bool:
    """Whether a problem of n_rows examples and n_weights weights suits a Step's target."""
    if size == "few_weights":
        return n_weights <= NEWTON_MAX_WEIGHTS
    if size == "few_rows":
        return n_rows <= GRAM_MAX_ROWS
    if size == "few_wide_rows":
        return gram_suits(n_rows, n_weights - 1)
    return True


def next_step(solver: str, loss: str, solution: BinarySolution, params: dict[str, Any],
              tol: float) -> tuple[str, dict[str, Any], str] | None:
    """(next solver, its parameter overrides, why) after an uncertified step, or None: the
    first of the solver's registered fallback steps (SolverSpec.fallback) that applies."""
    exit_reason = solution.exit_reason
    if exit_reason in _FINAL or not params.get("fallback", True):
        return None
    spec = SOLVERS[solver]
    for step in spec.fallback:
        if step.on is not None and exit_reason not in step.on:
            continue
        if step.target is None:  # the same solver, tighter
            eps = float(params["eps"]) / 10.0
            if eps < MIN_EPS:
                continue
            why = f"{solver}'s stop rule held at eps {params['eps']:g} without a certificate"
            if spec.warm_start == "dual":
                why += ": continued from its dual point with eps / 10"
            return solver, {"eps": eps}, why
        if loss in step.losses and _size_suits(step.size,
                                               params.get("n_rows", GRAM_MAX_ROWS + 1),
                                               params.get("n_weights", 1)):
            return step.target, {"eps": tol} if step.eps_from_tol else {}, (
                f"{solver} stopped at {exit_reason} without a certificate"
                + step.note.format(tol=tol))
    return None


def solve_certified(
    name: str, module_for: Callable[[str], SolverModule], problem: LinearProblem,
    applied: dict[str, Any], monitor: ProgressMonitor,
) -> BinarySolution:
    """Solve `problem` with `name`, then follow the fallback rule until certified."""
    tol = float(applied["tol"])
    loss = problem_loss(applied)
    free_bias = applied.get("bias") == "free"
    path: list[dict[str, Any]] = []
    solver, params, reason = name, applied, "requested"
    iterations: dict[str, int] = {}
    limits = {name: int(applied["max_iter"])}
    total_iterations = 0
    float64_problem: LinearProblem | None = None  # for a step that reads no float32
    while True:
        started = time.perf_counter()
        monitor.solver, monitor.iteration_offset = solver, total_iterations
        deadline = monitor.deadline
        if deadline is not None and _has_follow_up(solver, loss, params, problem):
            monitor.deadline = started + SHARE * max(deadline - started, 0.0)
        if not (SOLVERS[solver].reads_float32 or float64_problem is not None):
            float64_problem = _with_float64_values(problem)
        try:
            solution = module_for(solver).solve(
                problem if SOLVERS[solver].reads_float32 else float64_problem, params,
                monitor)
        finally:
            monitor.deadline = deadline
        shared_out = (solution.exit_reason == "max_seconds" and deadline is not None
                      and time.perf_counter() < deadline)
        certificate = certify(problem, solution, loss, free_bias)
        iterations[solver] = iterations.get(solver, 0) + solution.iterations
        total_iterations += solution.iterations
        path.append({"solver": solver, "exit": solution.exit_reason,
                     "iterations": solution.iterations,
                     "seconds": time.perf_counter() - started,
                     "relative_gap": certificate.relative_gap, "reason": reason})
        if certificate.holds(tol) or len(path) >= MAX_STEPS:
            break
        context = {**params, "n_weights": problem.n_weights, "n_rows": problem.X.n_rows}
        if shared_out:  # out of its share of the time: as if at its iteration limit
            solution.exit_reason = "max_iter"
            step = next_step(solver, loss, solution, context, tol)
            solution.exit_reason = "max_seconds"
        else:
            step = next_step(solver, loss, solution, context, tol)
        if step is None:
            break
        following, overrides, reason = step
        if shared_out:
            reason = reason.replace(f"{solver} stopped at max_iter",
                                    f"{solver} used its share ({SHARE:g}) of the time left")
        params = _follow_up_params(following, applied, loss, overrides)
        limits.setdefault(following, int(params["max_iter"]))
        params["max_iter"] = limits[following] - iterations.get(following, 0)
        if params["max_iter"] <= 0:
            break
        # warm start only from a w better than w = 0 (P(0) = sum_i C_i for both losses):
        # on unscaled data a stalled dual CD can end above it, a bad start for Newton
        better = solution.primal is not None and solution.primal < float(problem.cost.sum())
        params["w0"] = solution.w if better else None
        if following == solver and SOLVERS[solver].warm_start == "dual":
            params["alpha0"] = solution.alpha  # the dual CD continues from its dual point
        solver = following
    monitor.solver, monitor.iteration_offset = None, 0
    read = problem if SOLVERS[solver].reads_float32 else float64_problem
    return _finish(solution, certificate, tol, path, total_iterations,
                   str(cast(LinearProblem, read).X.data.dtype))


def _with_float64_values(problem: LinearProblem) -> LinearProblem:
    """The problem with float64 values (a copy of float32 ones, made once a path): for a
    step whose solver does not read float32 (SolverSpec.reads_float32). The certificate
    is still computed on the stored values, the same numbers."""
    return problem._replace(X=as_float64(problem.X))


def _has_follow_up(solver: str, loss: str, params: dict[str, Any], problem: LinearProblem
                   ) -> bool:
    """Whether the rule has a next step for `solver` when it stops at a limit."""
    return bool(params.get("fallback", True)) and any(
        step.target is not None and (step.on is None or "max_iter" in step.on)
        and loss in step.losses
        and _size_suits(step.size, problem.X.n_rows, problem.n_weights)
        for step in SOLVERS[solver].fallback)


def _follow_up_params(solver: str, applied: dict[str, Any], loss: str,
                      overrides: dict[str, Any]) -> dict[str, Any]:
    """The follow-up's parameters: its defaults, the loss (of the problem), bias, threads,
    tol and time limit of the fit, and the eps of the rule."""
    accepted = {param.name for param in SOLVERS[solver].params}
    shared = {"threads", "bias", "bias_scale", "tol", "max_seconds"} & accepted
    given = {key: applied[key] for key in shared if key in applied}
    if "loss" in accepted:  # the fit's own loss param (the problem's loss may add a penalty)
        given["loss"] = applied.get("loss", loss)
    return validate_params(solver, {**given, **overrides})


def _finish(solution: BinarySolution, certificate: Certificate, tol: float,
            path: list[dict[str, Any]], iterations: int, value_dtype: str
            ) -> BinarySolution:
    """The solution of the path, with its certificate; `value_dtype`: the values the last
    solver read ("float32": the stored ones as they are, "float64")."""
    converged = certificate.holds(tol)
    if solution.exit_reason == "converged" and not converged:
        solution.exit_reason = "stalled"
    solution.iterations = iterations
    solution.details.update({
        "path": path, "converged": converged, "relative_gap": certificate.relative_gap,
        "certified_gap": certificate.gap, "lower_bound": certificate.lower_bound,
        "bound": certificate.source, "solver": path[-1]["solver"], "tol": tol,
        "value_dtype": value_dtype,
    })
    return solution
