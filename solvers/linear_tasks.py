"""Linear formulations beyond the binary SVM, each as LIBLINEAR 2.50 defines it and each
with a certificate (a dual value at a feasible dual point: the gap P - D >= 0 bounds the
distance of the returned model from the optimum; `converged` only when gap / |P| <= tol):

- `crammer_singer` (LIBLINEAR -s 4; Keerthi, Sundararajan, Chang, Hsieh & Lin 2008, the
  sequential dual method): one weight vector per class, trained jointly,
      P(W) = 1/2 sum_m ||w_m||^2 + sum_i C_i max_m (e_i^m + w_m.x_i - w_yi.x_i),
      e_i^m = 0 for m = y_i else 1; dual  min f(a) = 1/2 sum_m ||w_m(a)||^2 +
      sum_{i, m != yi} a_i^m, sum_m a_i^m = 0, a_i^m <= C_i [m = y_i], gap P + f.
  Predicts the class of the largest w_m.x (also for two classes: two weight vectors).
- `linear_svr` (Ho & Lin 2012): epsilon-insensitive regression,
      P(w) = 1/2 ||w||^2 + sum_i C_i max(0, |w.x_i - y_i| - epsilon)^p, p = 1 (l1) or 2 (l2);
  method "dual" runs LIBLINEAR's dual coordinate descent (-s 13 l1, -s 12 l2) on
      min_b 1/2 ||sum b_i x_i||^2 + sum_i (lam_i / 2 b_i^2 - y_i b_i + epsilon |b_i|),
      |b_i| <= U_i (l1: lam_i = 0, U_i = C_i; l2: lam_i = 1 / (2 C_i), U_i = inf);
  method "primal" (l2 only, -s 11) Newton steps with conjugate gradient and a line search,
  certified by the dual point b_i = -2 C_i sign(r_i) max(0, |r_i| - epsilon) of its w.
- `linear_one_class` (LIBLINEAR -s 21, 2.42+): min_{w, rho} 1/2 ||w||^2 - rho nu sum U_i +
  sum_i U_i max(0, rho - w.x_i) (U_i = sample weight, 1 by default; LIBLINEAR's scaling of
  Schölkopf's problem by nu l), dual min 1/2 ||X'a||^2, 0 <= a_i <= U_i, sum a = nu sum U,
  solved by LIBLINEAR's pair updates; rho as LIBLINEAR computes it. Predicts +1 (inlier)
  when w.x - rho > 0, else -1. No bias (LIBLINEAR ignores -B here).

C_i = C * class_weight[y_i] * sample_weight_i; rows of weight 0 are left out.
`bias="augment"` appends the constant feature of value bias_scale (LIBLINEAR's -B,
regularised). The solvers share one assembly (`ASSEMBLY`, solvers/train.py): a fit is one
problem, not one binary problem per class. The loop the dual methods share is
solvers/linear_task_loop.py, the linear SVR solvers/linear_svr.py.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers import _linear_tasks_kernels as kernels
from solvers.backbone import BinarySolution, CsrArrays, ProgressMonitor
from solvers.certificate import Certificate, warning_text
from solvers.inputs import TrainingSet, as_csr_arrays
from solvers.linear_svr import solve_svr_dual, solve_svr_primal
from solvers.linear_task_loop import TaskProblem, drive, seed_rng
from solvers.models import LinearModel
from solvers.result import FitResult

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = ({},)


def augmented(X: CsrArrays, bias_scale: float) -> CsrArrays:
    """X with one more column of constant value bias_scale (none when 0)."""
    if bias_scale <= 0.0:
        return X
    data, indices, indptr = kernels.augment_rows(
        X.data, X.indices, X.indptr, X.n_features, float(bias_scale)
    )
    return CsrArrays(data, indices, indptr, X.n_features + 1)


def _rows(X: CsrArrays, keep: np.ndarray) -> CsrArrays:
    if bool(np.all(keep)):
        return X
    kept = sp.csr_matrix((X.data, X.indices, X.indptr), shape=(X.n_rows, X.n_features))[keep]
    return CsrArrays(
        np.ascontiguousarray(kept.data, dtype=np.float64),
        np.ascontiguousarray(kept.indices, dtype=np.int32),
        np.ascontiguousarray(kept.indptr, dtype=np.int64),
        X.n_features,
    )


class _Assembly:
    """A training set as one TaskProblem, its solution as a FitResult."""

    def problems(self, data: TrainingSet, applied: dict[str, Any]) -> list[TaskProblem]:
        formulation = str(applied["formulation"])
        weights = data.weights()
        if formulation == "one_class":
            cost = weights.astype(np.float64)
        else:
            cost = data.class_cost[data.label_index] * weights
        keep = cost > 0
        if not bool(np.any(keep)):
            raise ValueError("every row has weight 0: nothing to train")
        bias_scale = float(applied["bias_scale"]) if applied.get("bias") == "augment" else 0.0
        n = data.X.n_rows
        target = data.targets if data.targets is not None else np.zeros(n)
        return [
            TaskProblem(
                X=augmented(_rows(data.X, keep), bias_scale),
                cost=np.ascontiguousarray(cost[keep]),
                label=np.ascontiguousarray(data.label_index[keep], dtype=np.int64),
                target=np.ascontiguousarray(target[keep], dtype=np.float64),
                n_outputs=data.n_classes if formulation == "crammer_singer" else 1,
                n_features=data.X.n_features,
                bias_scale=bias_scale,
            )
        ]

    def untrained(
        self, problem: TaskProblem, applied: dict[str, Any], reason: str
    ) -> BinarySolution:
        w = np.zeros((problem.n_outputs, problem.X.n_features))
        return BinarySolution(w=w, iterations=0, exit_reason=reason, primal=math.inf)

    def result(
        self,
        solver: str,
        data: TrainingSet,
        problems: list[TaskProblem],
        solutions: list[BinarySolution],
        applied: dict[str, Any],
        timings: dict[str, float],
    ) -> FitResult:
        problem, solution = problems[0], solutions[0]
        W = np.asarray(solution.w).reshape(problem.n_outputs, -1)
        d = problem.n_features
        formulation = str(applied["formulation"])
        if formulation == "one_class":
            intercept = np.array([-float(solution.intercept or 0.0)])
        elif problem.bias_scale > 0:
            intercept = W[:, d] * problem.bias_scale
        else:
            intercept = np.zeros(problem.n_outputs)
        task = {
            "crammer_singer": "classification",
            "epsilon_svr": "regression",
            "one_class": "outlier",
        }[formulation]
        classes = np.array([-1.0, 1.0]) if task == "outlier" else data.classes
        model = LinearModel(
            classes=classes, coef=np.ascontiguousarray(W[:, :d]), intercept=intercept, task=task
        )
        primal = float(solution.primal) if solution.primal is not None else math.inf
        dual = float(solution.dual) if solution.dual is not None else -math.inf
        certificate = Certificate(primal, dual, "dual")
        tol = float(applied["tol"])
        converged = certificate.holds(tol) and solution.exit_reason == "converged"
        warnings = (
            [] if converged else [warning_text(solver, solution.exit_reason, certificate, tol)]
        )
        return FitResult(  # solver, model, primal, dual, gap, iterations, exit, seconds
            solver,
            model,
            primal,
            dual,
            certificate.gap,
            solution.iterations,
            solution.exit_reason,
            timings["solve_s"],
            params=applied,
            timings=timings,
            per_output=[
                {
                    "primal_objective": primal,
                    "dual_objective": dual,
                    "duality_gap": certificate.gap,
                    "violation": solution.violation,
                    "iterations": solution.iterations,
                    "exit_reason": solution.exit_reason,
                    **solution.details,
                }
            ],
            converged=converged,
            relative_gap=certificate.relative_gap,
            tol=tol,
            warnings=warnings,
            path=[
                {
                    "solver": solver,
                    "exit": solution.exit_reason,
                    "iterations": solution.iterations,
                    "seconds": timings["solve_s"],
                    "relative_gap": certificate.relative_gap,
                    "reason": "requested",
                }
            ],
        )


ASSEMBLY = _Assembly()


def solve_all(
    problems: list[TaskProblem], params: dict[str, Any], monitor: ProgressMonitor
) -> list[BinarySolution]:
    return [solve(problem, params, monitor) for problem in problems]


def solve(problem: TaskProblem, params: dict[str, Any], monitor: ProgressMonitor) -> BinarySolution:
    formulation = str(params["formulation"])
    started = time.perf_counter()
    if formulation == "crammer_singer":
        solution = _solve_cs(problem, params, monitor)
    elif formulation == "one_class":
        solution = _solve_one_class(problem, params, monitor)
    elif params.get("method", "dual") == "primal":
        solution = solve_svr_primal(problem, params, monitor)
    else:
        solution = solve_svr_dual(problem, params, monitor)
    solution.timings["solver_s"] = time.perf_counter() - started
    return solution



# --------------------------------------------------------------------------------------
# Crammer-Singer


def cs_objectives(problem: TaskProblem, alpha: np.ndarray, W: np.ndarray) -> tuple[float, float]:
    """(P(W), the dual lower bound -f(alpha)) for W = W(alpha)."""
    X = problem.X
    primal, f = kernels.cs_objectives(
        X.data, X.indices, X.indptr, problem.label, problem.cost, alpha, W, problem.n_outputs
    )
    return float(primal), -float(f)


def _solve_cs(
    problem: TaskProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    X, k = problem.X, problem.n_outputs
    n, d = X.n_rows, X.n_features
    alpha = np.zeros(n * k)
    W = np.zeros(d * k)
    qd = kernels.row_sq_norms(X.data, X.indptr)
    index = np.arange(n, dtype=np.int64)
    rng = seed_rng(params)
    args = (X.data, X.indices, X.indptr, problem.label, problem.cost, qd, alpha, W, k)
    state = np.zeros(3)  # active rows, eps_shrink, started from all (cs_sweeps)
    held_before = [True]

    def sweeps(budget: int, eps: float) -> tuple[int, bool, float]:
        """LIBLINEAR's sweeps with shrinking until its rule holds at eps, at most budget;
        after the rule held, a new run at the new eps (all rows, eps_shrink reset)."""
        if held_before[0]:
            state[:] = (n, max(10.0 * eps, 1.0), 0.0)
        done, held, violation = kernels.cs_sweeps(*args, budget, rng, index, state, eps)
        held_before[0] = bool(held)
        return int(done), bool(held), float(violation)

    run = drive(
        sweeps,
        lambda: cs_objectives(problem, alpha, W),
        lambda: W.reshape(d, k).T.copy(),
        params,
        monitor,
        lambda: float(state[0]) / n if state[0] > 0 else 1.0,  # rows left active
    )
    return run.solution(alpha.reshape(n, k))


# --------------------------------------------------------------------------------------
# Linear one-class SVM


def _solve_one_class(
    problem: TaskProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    X = problem.X
    nu = float(params["nu"])
    upper = problem.cost
    # LIBLINEAR's start: the first rows at their upper bound until nu sum U is spent
    before = np.cumsum(upper) - upper  # sum of U_j over the rows j < i
    alpha = np.minimum(upper, np.maximum(nu * float(upper.sum()) - before, 0.0))
    w = kernels.rows_transpose_times(X.data, X.indices, X.indptr, alpha, X.n_features)
    qd = kernels.row_sq_norms(X.data, X.indptr)
    nu_total, tol = nu * float(upper.sum()), float(params["tol"])
    certificate = np.zeros(3)  # (P, D, rho) of the current alpha, from the kernel

    def sweeps(budget: int, eps: float) -> tuple[int, bool, float]:
        status, done, violation = kernels.oneclass_sweeps(
            X.data, X.indices, X.indptr, upper, qd, alpha, w, budget, eps, nu_total, tol,
            certificate,
        )
        return int(done), int(status) == 1, float(violation)

    sweeps(0, 0.0)  # the certificate of the start
    rho = certificate[2:3]

    def objectives() -> tuple[float, float]:
        return float(certificate[0]), float(certificate[1])

    run = drive(sweeps, objectives, lambda: np.append(w, rho[0]), params, monitor)
    solution = run.solution(alpha)
    solution.w, solution.intercept = run.best[:-1], float(run.best[-1])
    solution.details["rho"] = solution.intercept
    return solution


def warm_rare_kernels() -> None:
    """Compile (or load) what the warm-up fits of the module's defaults do not reach: the
    -s 11 Newton (linear_svr, method 'primal')."""
    X = augmented(as_csr_arrays(np.round(np.random.default_rng(0).normal(size=(12, 3)), 2)), 1.0)
    target = np.linspace(-1.0, 1.0, 12)
    problem = TaskProblem(X, np.ones(12), np.zeros(12, dtype=np.int64), target, 1, 3, 1.0)
    solve_svr_primal(
        problem,
        {"loss": "l2", "epsilon": 0.1, "tol": 1e-3, "max_iter": 50},
        ProgressMonitor(None, None),
    )
