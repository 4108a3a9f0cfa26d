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
problem, not one binary problem per class.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers import _linear_tasks_kernels as kernels
from solvers import _tron_kernels as tron_kernels
from solvers import parallel, tron
from solvers.backbone import BinarySolution, CsrArrays, ProgressMonitor, seed_state
from solvers.certificate import Certificate, warning_text
from solvers.inputs import TrainingSet, as_csr_arrays
from solvers.models import LinearModel
from solvers.result import FitResult

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = ({},)
# Sweeps between two certificates when the inner rule has not held: the first 10, then as
# many as keep the certificate's cost near a quarter of the sweeps' (a certificate is one or
# two passes over X, a shrunk sweep can cost far less), 1 to 100.
_CHECK_EVERY, _CHECK_MAX, _CHECK_SHARE = 10, 100, 0.25
# -s 11's CG stop rule: newton.cpp's quadratic-model rule with cgtol 0.1 instead of its 0.5.
# The certificate asks for 1e-3 more often than LIBLINEAR's ||g|| <= 0.001 ||g0|| does, and
# the more exact Newton steps get there in fewer steps and less time (CPU s, certified:
# a9a 8 steps 0.041 s -> 4 steps 0.033 s, mushrooms 26 -> 10 steps 0.033 -> 0.022 s).
_SVR_EPS_CG = 0.1


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
        solution = _solve_svr_primal(problem, params, monitor)
    else:
        solution = _solve_svr_dual(problem, params, monitor)
    solution.timings["solver_s"] = time.perf_counter() - started
    return solution


def _stop_reason(
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


def _relative(primal: float, dual: float) -> float:
    return (primal - dual) / max(abs(primal), 1e-300)


def _rng(params: dict[str, Any]) -> np.ndarray:
    return np.array([seed_state(int(params.get("seed") or 0))], dtype=np.uint64)


@dataclass
class _Run:
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


def _drive(
    sweeps: Callable[[int, float], tuple[int, bool, float]],
    objectives: Callable[[], tuple[float, float]],
    snapshot: Callable[[], np.ndarray],
    params: dict[str, Any],
    monitor: ProgressMonitor,
    active_share: Callable[[], float] | None = None,
) -> _Run:
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
    run = _Run(0, "max_iter", *objectives(), math.inf, eps, snapshot())
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
        if _relative(run.primal, run.dual) <= tol:
            run.exit_reason = "converged"
            break
        if held:
            eps /= 10.0
            run.eps = eps
        stop = _stop_reason(monitor, run.iterations, run.primal, run.dual)
        if stop is not None:
            run.exit_reason = stop
            break
    return run


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
    rng = _rng(params)
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

    run = _drive(
        sweeps,
        lambda: cs_objectives(problem, alpha, W),
        lambda: W.reshape(d, k).T.copy(),
        params,
        monitor,
        lambda: float(state[0]) / n if state[0] > 0 else 1.0,  # rows left active
    )
    return run.solution(alpha.reshape(n, k))


# --------------------------------------------------------------------------------------
# Linear SVR


def _svr_limits(problem: TaskProblem, loss: str) -> tuple[np.ndarray, np.ndarray]:
    if loss == "l1":
        return problem.cost.copy(), np.zeros_like(problem.cost)
    return np.full_like(problem.cost, np.inf), 0.5 / problem.cost


def _solve_svr_dual(
    problem: TaskProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    X = problem.X
    loss, epsilon = str(params["loss"]), float(params["epsilon"])
    upper, lam = _svr_limits(problem, loss)
    n = X.n_rows
    beta = np.zeros(n)
    w = np.zeros(X.n_features)
    qd = kernels.row_sq_norms(X.data, X.indptr)
    index = np.arange(n, dtype=np.int64)
    state = np.array([np.inf, -1.0, float(n)])  # Gmax_old, Gnorm1_init, active size
    rng = _rng(params)
    args = (X.data, X.indices, X.indptr, problem.target, upper, lam, epsilon, qd, beta, w)

    def sweeps(budget: int, eps: float) -> tuple[int, bool, float]:
        if state[2] < 0:  # the inner rule held before: sweep the full set again
            state[0], state[2] = np.inf, float(n)
        held = bool(kernels.svr_sweeps(*args, budget, eps, rng, index, state))
        if held:
            state[2] = -1.0
        return budget, held, math.nan  # an early stop counts the budget: a bound

    scratch = np.zeros_like(w)

    def objectives() -> tuple[float, float]:
        primal, dual = kernels.svr_certificate(
            X.data, X.indices, X.indptr, problem.target, problem.cost, beta, w, loss == "l1",
            epsilon, scratch,
        )
        return float(primal), float(dual)

    run = _drive(sweeps, objectives, w.copy, params, monitor,
                 lambda: float(state[2]) / n if state[2] > 0 else 1.0)  # (-1: held)
    return run.solution(beta)


def _solve_svr_primal(
    problem: TaskProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Newton steps on the l2-loss SVR primal (generalised Hessian I + 2 X_I' C X_I on the
    rows I outside the tube), directions by tron's preconditioned conjugate gradient with
    newton.cpp's quadratic-model stop rule, then the Armijo line search of newton.cpp
    (LIBLINEAR 2.40+ -s 11; Galli & Lin 2021), all in compiled kernels (tron's CG, gradient
    and Hessian products on the active rows; solvers/_linear_tasks_kernels.py the residuals,
    the active set and the loss changes). Certified after every step by the larger of two
    lower bounds of P*: the dual value at beta_i = -2 C_i e_i(w) and P(w) - ||grad||^2 / 2
    (P is 1-strongly convex); a certificate that holds with the residuals carried over
    from the line search is confirmed with residuals recomputed from w."""
    if params["loss"] != "l2":
        raise ValueError("method 'primal' trains the l2 loss only (LIBLINEAR -s 11)")
    with parallel.numba_threads(1):
        return _SvrNewton(problem, float(params["epsilon"])).run(
            float(params["tol"]), int(params["max_iter"]), monitor
        )


class _SvrNewton:
    """The arrays of the -s 11 Newton iteration (w carries tron's bias slot, unused: the
    rows are augmented already, so bias_scale 0 there)."""

    def __init__(self, problem: TaskProblem, epsilon: float) -> None:
        X = problem.X
        n, size = X.n_rows, X.n_features + 1
        self.problem, self.epsilon = problem, epsilon
        self.rows = (X.data, X.indices, X.indptr)
        self.bounds = np.array([0, n], dtype=np.int64)  # one chunk: one thread
        self.active = (
            np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n), np.zeros(1, dtype=np.int64)
        )
        self.chunk_acc, self.group_sums = np.zeros((2, 1, 1)), np.zeros(1)
        self.w, self.grad, self.precond = np.zeros(size), np.zeros(size), np.ones(size)
        self.resid, self.steps, self.beta = np.zeros(n), np.zeros(n), np.zeros(n)
        self.cg_vectors = tuple(np.zeros(size) for _ in range(6))  # s, r, z, d, Hd, M^-1
        self.cg_scalars = np.zeros(tron_kernels.N_CG_SCALARS)
        self.cg_counters = np.array([0, max(size, 5), tron.CG_RULE], dtype=np.int64)
        self.eps_cg = _SVR_EPS_CG
        self.f = 0.0
        self.grad_norm = 0.0

    def evaluate(self) -> None:
        """Residuals and P(w) exactly from w, then the gradient."""
        problem = self.problem
        loss = kernels.svr_residuals(
            *self.rows, self.w, problem.target, problem.cost, self.epsilon, self.resid
        )
        self.f = 0.5 * float(self.w @ self.w) + float(loss)
        self.gradient()

    def gradient(self) -> None:
        kernels.svr_select_active(
            self.problem.cost, self.resid, self.epsilon, self.rows[2], *self.active
        )
        self.grad_norm = float(
            tron_kernels.gradient_and_preconditioner(
                self.rows, 0.0, self.bounds, self.active, 1, self.chunk_acc, self.w,
                tron.ALPHA_PCG, self.grad, self.precond,
            )
        )

    def bound(self) -> float:
        """The larger lower bound of P*: the dual value of beta(w), P - ||grad||^2 / 2."""
        problem = self.problem
        dual = float(
            kernels.svr_newton_dual(
                self.w, self.grad, problem.cost, problem.target, self.resid, self.epsilon,
                self.beta,
            )
        )
        return max(dual, self.f - 0.5 * self.grad_norm * self.grad_norm)

    def direction(self) -> None:
        tron_kernels.cg_start(
            self.grad, self.precond, self.eps_cg, math.inf, self.cg_vectors, self.cg_scalars,
            self.cg_counters,
        )
        while (
            tron_kernels.cg_steps(
                self.rows, 0.0, self.bounds, self.active, 1, self.chunk_acc, self.group_sums,
                self.precond, self.cg_vectors, self.cg_scalars, self.cg_counters, 1 << 20,
            )
            == tron_kernels.CG_RUNNING
        ):
            pass

    def line_search(self) -> str | None:
        """newton.cpp's step along the CG direction s: the first of 1, 1/2, 1/4, ... with
        P(w + a s) - P(w) <= 0.01 a g's. None when taken, else why the run stalls."""
        s, r = self.cg_vectors[0], self.cg_vectors[1]
        gs, _, _, ws, ss, _ = tron_kernels.step_quantities(self.w, self.grad, self.precond, s, r)
        if not gs < 0.0:
            return "the Newton direction is not a descent direction"
        kernels.svr_row_products(*self.rows, s, self.steps)
        alpha = 1.0
        for _ in range(tron.LINE_SEARCH_HALVINGS):
            change = alpha * ws + 0.5 * alpha * alpha * ss + float(
                kernels.svr_line_change(
                    self.problem.cost, self.resid, self.steps, alpha, self.epsilon
                )
            )
            if change <= tron.ETA_LINE_SEARCH * alpha * gs:
                if not tron_kernels.take_step(self.w, s, self.resid, self.steps, alpha):
                    return "the step no longer changes w in float64"
                self.f += change
                self.gradient()
                return None
            alpha *= 0.5
        return "the line search found no decrease in 20 halvings of the step"

    def run(self, tol: float, max_iter: int, monitor: ProgressMonitor) -> BinarySolution:
        self.evaluate()
        iterations, exit_reason, exact = 0, "max_iter", True
        bound = self.bound()
        while True:
            if not (math.isfinite(self.f) and math.isfinite(self.grad_norm)):
                exit_reason = "numerical_error"
                break
            if _relative(self.f, bound) <= tol:
                if exact:
                    exit_reason = "converged"
                    break
                self.evaluate()  # confirm with residuals recomputed from w
                exact, bound = True, self.bound()
                continue
            if iterations >= max_iter:
                break
            stop = _stop_reason(monitor, iterations, self.f, bound)
            if stop is not None:
                exit_reason = stop
                break
            self.direction()
            stall = self.line_search()
            if stall is not None:
                exit_reason = "stalled"
                break
            iterations += 1
            exact, bound = False, self.bound()
        if not exact:
            self.evaluate()
            bound = self.bound()
        size = self.problem.X.n_features
        return BinarySolution(
            w=self.w[:size].copy(),
            iterations=iterations,
            exit_reason=exit_reason,
            primal=self.f,
            dual=bound,
            gap=self.f - bound,
            alpha=self.beta.copy(),
        )


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

    run = _drive(sweeps, objectives, lambda: np.append(w, rho[0]), params, monitor)
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
    _solve_svr_primal(
        problem,
        {"loss": "l2", "epsilon": 0.1, "tol": 1e-3, "max_iter": 50},
        ProgressMonitor(None, None),
    )
