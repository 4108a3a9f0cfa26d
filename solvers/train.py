"""`fit`: validate the input, split it into binary problems, run a solver on each, build
the FitResult with its servable model; and `warmup`, which compiles every solver.

A solver module (registered in `solvers.params.SOLVERS`, imported on first use) exposes
`solve(problem, params, monitor) -> BinarySolution` (solvers/backbone.py). How a training
set becomes binary problems and the solutions become a model follows the registry entry's
`kind`: "linear", `LINEAR` here (one-vs-rest `LinearProblem`s, each certified and
continued by the fallback rule, a LinearModel); "kernel", a `KernelSolverModule` with its
own `ASSEMBLY` and `solve_all` (SMO: one-vs-one or one-vs-rest kernel problems, a
KernelModel). What else a fit does (warm starts, how `converged` is decided) the entry's
capabilities say (SolverSpec). This module owns the rest:
validation, the wall-clock limit, throttled progress and cancellation (one
ProgressMonitor per fit), and the summed result.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import math
import time
from collections.abc import Mapping
from typing import Any, Protocol, cast

import numpy as np
import scipy.sparse as sp

from solvers import workflow
from solvers._kernel_helpers import mt_state
from solvers.auto import DataShape, choose
from solvers.backbone import (
    PROGRESS_INTERVAL_S,
    BinarySolution,
    CsrArrays,
    LinearProblem,
    ProgressCallback,
    ProgressMonitor,
    SolverModule,
    worst_exit,
)
from solvers.certificate import Certificate, problem_loss, warning_text
from solvers.continuation import solve_certified
from solvers.inputs import TrainingSet, as_csr_arrays, as_float64, training_set
from solvers.models import Calibration, LinearModel, Pipeline
from solvers.objectives import primal_objective
from solvers.params import (
    FORMULATIONS,
    L1R_PREFIX,
    SOLVERS,
    ParamError,
    task_of,
    validate_params,
)
from solvers.result import FitResult

_STOPPED = ("cancelled", "max_seconds")  # a fit stopped: the remaining problems are skipped


class Assembly(Protocol):
    """How a training set becomes binary problems, and their solutions a FitResult."""

    def problems(self, data: TrainingSet, applied: dict[str, Any]) -> list[Any]: ...

    def untrained(self, problem: Any, applied: dict[str, Any],
                  reason: str) -> BinarySolution: ...

    def result(self, solver: str, data: TrainingSet, problems: list[Any],
               solutions: list[BinarySolution], applied: dict[str, Any],
               timings: dict[str, float]) -> FitResult: ...


class KernelSolverModule(SolverModule, Protocol):
    """A solver of kind "kernel": it builds its own problems and model, and schedules the
    solves of its problems itself."""

    ASSEMBLY: Assembly

    def solve_all(self, problems: list[Any], params: dict[str, Any],
                  monitor: ProgressMonitor) -> list[BinarySolution]: ...


def solver_module(name: str) -> SolverModule:
    if name not in SOLVERS:
        raise ParamError(f"unknown solver {name!r}; choose one of: "
                         f"{', '.join(sorted(SOLVERS))}", "solver")
    return cast(SolverModule, importlib.import_module(SOLVERS[name].module))


def fit(
    X: Any, y: Any, solver: str = "dcd", progress: ProgressCallback | None = None,
    warm_start: FitResult | None = None, keep_solver_state: bool = False,
    progress_interval: float = PROGRESS_INTERVAL_S, sample_weight: Any = None,
    applied: Mapping[str, Any] | None = None, **params: Any,
) -> FitResult:
    """Train an SVM with `solver`; binary, or several binary problems for more classes.

    Linear solvers: output positive for classes[1] (the larger label) for two classes,
    one-vs-rest ("class k vs the rest", sorted class order) for more; each output is
    certified and continued by the fallback rule (solvers/continuation.py). "auto" (the
    service's default for jobs; this function keeps "dcd" for its callers) picks a linear
    solver from the data (solvers/auto.py). SMO: one-vs-one (or one-vs-rest) kernel
    problems. C_i = C * class_weight[label of row i].

    `warm_start`: an earlier fit of the same rows and classes by a dual CD solver (dcd,
    acf; typically at a smaller C, as along a C path): each output's dual CD starts from a
    multiple of that fit's dual solution (solvers/dual_cd.py). Outputs without one (the
    earlier fit ended in another solver of the fallback path) start cold; the result is
    certified exactly as a cold fit's. SMO: an earlier SMO fit of the same rows, classes
    and kernel made with `keep_solver_state=True` (typically at a smaller C, along the C
    values of one gamma): each binary problem continues from that fit's solver state -
    its alphas (feasible for a larger C; scaled into the box for a smaller one), its
    kernel-column cache and row layout -, consumed by this fit; the stop rule is the cold
    fit's. `keep_solver_state` keeps each problem's SMO state in `kernel_states` for the
    next fit (the fit's cache_mb is then shared by its problems, all kept alive). No
    effect with other solvers or with scale / probability (the workflow's fits start
    cold).

    Formulations (solvers whose registry entry lists several, SMO): `formulation` in the
    params picks LIBSVM's svm_type, whose task (params.task_of) says what y is: class
    labels (c_svc, nu_svc), real targets (epsilon_svr, nu_svr) or ignored (one_class: y
    may be None).

    `sample_weight`: one weight >= 0 per row (solvers whose entry has sample_weights):
    C_i = C * class_weight * w_i (the upper bound w_i * class_weight for nu_svc, w_i for
    one_class), as scikit-learn's LIBSVM; rows of weight 0 are left out.

    `progress_interval`: the least number of seconds between two `progress` events (an
    event is sent between two compiled calls of a solver, once that long has passed since
    the last one; 0: between every two calls).

    `applied`: the parameters as `validate_params(solver, ...)` returned them (a job's
    stored spec, validated once at the API; the workflow's inner fits), taken as they
    are (a parameter the solver has gained since takes its default), instead of
    `params`, which are validated here.
    """
    t0 = time.perf_counter()
    if not 0.0 <= progress_interval < math.inf:
        raise ValueError(f"progress_interval must be a number of seconds >= 0, not "
                         f"{progress_interval!r}")
    if applied is None:
        applied = validate_params(solver, params)
    elif params:
        raise TypeError("fit takes validated `applied` parameters or `params`, not both")
    else:  # validated where the spec entered (the API's edge); a parameter added since
        # it was stored takes its default
        applied = {**{p.name: p.default for p in SOLVERS[solver].params}, **applied}
    if sample_weight is not None and not SOLVERS[solver].sample_weights:
        weighted = ", ".join(n for n, s in SOLVERS.items() if s.sample_weights)
        raise ParamError(f"solver {solver!r} takes no sample_weight; these do: {weighted}",
                         "sample_weight")
    formulation = FORMULATIONS.get(str(applied.get("formulation", "c_svc")))
    if applied.get("probability") and formulation is not None and (
            formulation.probability is None):
        raise ParamError(f"probability is not available for formulation {formulation.name!r} "
                         "yet (Platt sigmoids for c_svc and nu_svc, the Laplace noise width "
                         "for epsilon_svr and nu_svr, density marks for one_class)",
                         "probability")
    if workflow.requested(applied):  # scale and/or probability around the plain fit
        if sample_weight is not None and applied.get("probability"):
            raise ParamError("sample_weight with probability is not supported yet",
                             "sample_weight")
        # the scaled rows keep their order: the weights go with them into the plain fit
        return workflow.fit_workflow(X, y, solver, progress, applied,
                                     functools.partial(fit, progress_interval=progress_interval,
                                                       sample_weight=sample_weight))
    # float32 values stay float32 for a solver that reads them (and for auto until it
    # has chosen one); anything else gets the float64 copy here
    data = training_set(X, y, applied, sample_weight, task_of(solver, applied),
                        SOLVERS[solver].reads_float32 or SOLVERS[solver].chooses)
    auto = None
    if SOLVERS[solver].chooses:
        solver, applied, auto = _resolve_auto(data, applied)
    spec = SOLVERS[solver]
    if not spec.reads_float32:
        data = dataclasses.replace(data, X=as_float64(data.X))
    module = solver_module(solver)
    # a module with its own ASSEMBLY (kernel solvers, the linear formulations of
    # solvers/linear_tasks.py) builds its problems and model and schedules its solves
    kernel = cast(KernelSolverModule, module) if hasattr(module, "ASSEMBLY") else None
    assembly: Assembly = LINEAR if kernel is None else kernel.ASSEMBLY
    problems = assembly.problems(data, applied)
    if spec.warm_start == "state" and (keep_solver_state or warm_start is not None):
        problems = _kernel_warm_problems(problems, warm_start, keep_solver_state)
    validate_s = time.perf_counter() - t0

    monitor = ProgressMonitor(progress, applied.get("max_seconds"), n_classes=len(problems),
                              interval=progress_interval)
    solutions: list[BinarySolution] = []
    if kernel is not None:  # it schedules its problems itself
        solutions = kernel.solve_all(problems, applied, monitor)
    rng_state = _liblinear_rng(applied)
    for k, problem in enumerate(problems if kernel is None else ()):
        started = time.perf_counter()
        stopped = solutions[-1].exit_reason if solutions else None
        if stopped in _STOPPED:
            solution = LINEAR.untrained(problem, applied, cast(str, stopped))
        else:
            monitor.class_index = k
            output_params = _warm_params(applied, warm_start, k)
            if rng_state is not None:
                output_params = {**output_params, "rng_state": rng_state}
            solution = solve_certified(solver, solver_module, problem, output_params,
                                       monitor)
        solution.details["train_seconds"] = time.perf_counter() - started
        solutions.append(solution)
    solve_s = time.perf_counter() - t0 - validate_s
    timings = {"validate_s": validate_s, "solve_s": solve_s,
               "progress_s": monitor.progress_seconds}
    for solution in solutions:
        for key, value in solution.timings.items():
            timings[key] = timings.get(key, 0.0) + value
    result = assembly.result(solver, data, problems, solutions, applied, timings)
    result.warnings.extend(workflow.fit_warnings(data.X, solver, applied, result))
    result.auto = auto
    if spec.certificate == "duality_gap":  # certified per output (solvers/continuation.py)
        result.dual_solutions = [s.alpha if _dual_warm_start(s) else None for s in solutions]
    else:  # "kkt": the solver's own stop rule decides
        result.converged = result.exit_reason == "converged"
    if spec.warm_start == "state" and keep_solver_state:
        result.kernel_states = [s.state for s in solutions]
    for solution in solutions:
        solution.state = None
    return result


def _kernel_warm_problems(problems: list[Any], warm_start: FitResult | None,
                          keep: bool) -> list[Any]:
    """The kernel problems with the earlier fit's solver states (an output whose state is
    missing or not finite starts cold) and the keep flag."""
    states: list[Any] = list(warm_start.kernel_states) if warm_start is not None else []
    if warm_start is not None and len(states) != len(problems):
        raise ValueError("warm_start has no solver state for every binary problem of "
                         "this fit; it must be a fit of the same rows and classes made "
                         "with keep_solver_state=True")
    warm = [s if s is not None and s.finite() else None for s in states] or [None] * len(
        problems)
    return [dataclasses.replace(p, warm=w, keep_state=keep, cache_share=len(problems))
            for p, w in zip(problems, warm, strict=True)]


def _dual_warm_start(solution: BinarySolution) -> bool:
    """Whether the output ended in a solver whose dual solution can warm-start another fit
    (the last solver of its fallback path)."""
    last = solution.details.get("solver")
    return last in SOLVERS and SOLVERS[last].warm_start == "dual"


def _liblinear_rng(applied: dict[str, Any]) -> np.ndarray | None:
    """With `sweeps` "sklearn": the one MT19937 state all outputs of the fit draw from
    in turn, as scikit-learn's LIBLINEAR seeds its generator once per train call (the
    outputs are solved one after the other, in class order)."""
    if applied.get("sweeps") != "sklearn":
        return None
    return mt_state(int(applied.get("seed") or 0))


def _warm_params(applied: dict[str, Any], warm_start: FitResult | None, output: int
                 ) -> dict[str, Any]:
    """The output's parameters, with `alpha0` from the earlier fit when it has one."""
    if warm_start is None or not warm_start.dual_solutions:
        return applied
    if len(warm_start.dual_solutions) <= output:
        raise ValueError("warm_start has fewer outputs than this fit; it must come from "
                         "the same rows and classes")
    alpha0 = warm_start.dual_solutions[output]
    return applied if alpha0 is None else {**applied, "alpha0": alpha0}


def _resolve_auto(data: TrainingSet, applied: dict[str, Any]
                  ) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The solver "auto" chooses for this training set, its applied parameters, and the
    record {"chosen", "reason"} (with "settings": what auto set for its choice, as the
    SVR's method or a sweep limit, when it set any)."""
    X = data.X
    # max |x| from the two extremes: no temporary the size of the values
    shape = DataShape(X.n_rows, X.n_features, int(X.data.shape[0]),
                      max(-float(X.data.min()), float(X.data.max()))
                      if X.data.shape[0] else 0.0)
    chosen, reason, chosen_settings = choose(
        shape, applied["loss"], float(applied["C"]), applied["bias"],
        applied.get("penalty", "l2"), applied.get("formulation", "c_svc"))
    accepted = {p.name for p in SOLVERS[chosen].params if p.from_auto}
    given = {key: value for key, value in applied.items()
             if key in accepted and not (key == "max_iter" and value is None)
             and not (key == "seed" and not SOLVERS[chosen].randomized)}
    given = {**chosen_settings, **given}
    record: dict[str, Any] = {"chosen": chosen, "reason": reason}
    if chosen_settings:
        record["settings"] = dict(chosen_settings)
    return chosen, validate_params(chosen, given), record


# --------------------------------------------------------------------------------------
# Linear solvers: one-vs-rest LinearProblems, a LinearModel


class _LinearAssembly:
    def problems(self, data: TrainingSet, applied: dict[str, Any]) -> list[LinearProblem]:
        X, label_index, cost = _weighted_rows(data)
        bias_scale = float(applied["bias_scale"]) if applied.get("bias") == "augment" else 0.0
        return [LinearProblem(X, np.where(label_index == positive, 1.0, -1.0), cost,
                              bias_scale)
                for positive in _positives(data)]

    def untrained(self, problem: LinearProblem, applied: dict[str, Any],
                  reason: str) -> BinarySolution:
        """An output never trained because the fit was stopped: w = 0, alpha = 0."""
        w = np.zeros(problem.n_weights)
        loss = problem_loss(applied)
        primal = primal_objective(problem, w, loss if loss in ("l1", "l2") else "l1")
        return BinarySolution(w=w, iterations=0, exit_reason=reason, primal=primal,
                              dual=0.0, gap=primal,
                              details={"path": [], "converged": False, "relative_gap": 1.0,
                                       "certified_gap": primal, "tol": applied.get("tol")})

    def result(self, solver: str, data: TrainingSet, problems: list[LinearProblem],
               solutions: list[BinarySolution], applied: dict[str, Any],
               timings: dict[str, float]) -> FitResult:
        n_features = data.X.n_features
        weights = [cast(np.ndarray, s.w) for s in solutions]
        coef = np.vstack([w[:n_features] for w in weights])
        intercept = np.array([_intercept(s, w, problems[0].bias_scale, n_features)
                              for s, w in zip(solutions, weights, strict=True)])
        per_output = [{
            "positive_class": float(data.classes[positive]),
            "primal_objective": s.primal, "dual_objective": s.dual, "duality_gap": s.gap,
            "violation": s.violation, "iterations": s.iterations,
            "exit_reason": s.exit_reason, **s.details,
        } for positive, s in zip(_positives(data), solutions, strict=True)]
        converged = all(s.details.get("converged", False) for s in solutions)
        gaps = [float(s.details.get("certified_gap", math.inf)) for s in solutions]
        primals = sum(abs(cast(float, s.primal)) for s in solutions)
        warnings = [
            warning_text(s.details["path"][-1]["solver"] if s.details.get("path") else solver,
                         s.exit_reason, Certificate(cast(float, s.primal),
                                                    cast(float, s.primal) - gap, ""),
                         float(applied["tol"]),
                         f"class {row['positive_class']:g} vs rest" if len(solutions) > 1
                         else None)
            for s, gap, row in zip(solutions, gaps, per_output, strict=True)
            if not s.details.get("converged", False)]
        path = [{**step, **({"output": k} if len(solutions) > 1 else {})}
                for k, s in enumerate(solutions) for step in s.details.get("path", [])]
        linear = LinearModel(classes=data.classes, coef=coef, intercept=intercept)
        return FitResult(
            converged=converged,
            relative_gap=sum(gaps) / max(primals, 1e-300),
            tol=float(applied["tol"]),
            warnings=warnings,
            path=path,
            solver=solver,
            model=_with_logistic_probabilities(linear, problem_loss(applied)),
            primal_objective=float(sum(cast(float, s.primal) for s in solutions)),
            dual_objective=_sum_or_none([s.dual for s in solutions]),
            duality_gap=_sum_or_none([s.gap for s in solutions]),
            iterations=int(sum(s.iterations for s in solutions)),
            exit_reason=worst_exit(s.exit_reason for s in solutions),
            train_seconds=timings["solve_s"],
            params=applied,
            timings=timings,
            per_output=per_output,
        )


LINEAR = _LinearAssembly()


def _weighted_rows(data: TrainingSet) -> tuple[CsrArrays, np.ndarray, np.ndarray]:
    """X, label index and C_i = C * class_weight * w_i of the rows of weight w_i > 0."""
    cost = data.class_cost[data.label_index]
    if data.sample_weight is None:
        return data.X, data.label_index, cost
    keep = np.flatnonzero(data.sample_weight > 0)
    cost = cost[keep] * data.sample_weight[keep]
    if keep.shape[0] == data.X.n_rows:
        return data.X, data.label_index, cost
    X = data.X
    rows = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.n_rows, X.n_features))[keep]
    return (as_csr_arrays(rows, keep_float32=X.data.dtype == np.float32),
            data.label_index[keep], cost)


def _with_logistic_probabilities(model: LinearModel, loss: str) -> LinearModel | Pipeline:
    """A logistic regression model with its probabilities, 1 / (1 + exp(-f)) per output
    (one-vs-rest: divided by their sum, as LIBLINEAR's predict_probability), as the
    sigmoids A = -1, B = 0 of a Calibration; other losses: the model itself."""
    if loss.removeprefix(L1R_PREFIX) != "logistic":
        return model
    outputs = model.coef.shape[0]
    # two classes: the "pairwise" sigmoid gives P(classes[0]) from minus the decision value
    layout = "pairwise" if outputs == 1 else "ovr"
    return Pipeline(model, None, Calibration(layout, np.full(outputs, -1.0),
                                             np.zeros(outputs)))


def _positives(data: TrainingSet) -> list[int]:
    """The class of each output's +1 side: classes[1] for two classes, else every class."""
    return [1] if data.n_classes == 2 else list(range(data.n_classes))


def _sum_or_none(values: list[float | None]) -> float | None:
    if any(v is None for v in values):
        return None
    return float(sum(cast(list[float], values)))


def _intercept(solution: BinarySolution, w: np.ndarray, bias_scale: float,
               n_features: int) -> float:
    if solution.intercept is not None:
        return float(solution.intercept)
    if bias_scale > 0:
        return float(w[n_features] * bias_scale)
    return 0.0
