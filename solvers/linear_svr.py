"""The linear SVR of solvers/linear_tasks.py (Ho & Lin 2012): LIBLINEAR's dual coordinate
descent (-s 13 l1, -s 12 l2) and the l2 loss's primal Newton (-s 11), each certified."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from solvers import _linear_tasks_kernels as kernels
from solvers import _tron_kernels as tron_kernels
from solvers import parallel, tron
from solvers.backbone import BinarySolution, ProgressMonitor
from solvers.linear_task_loop import (
    TaskProblem,
    drive,
    drive_liblinear,
    relative,
    seed_rng,
    stop_reason,
)

# -s 11's CG stop rule: newton.cpp's quadratic-model rule with cgtol 0.1 instead of its 0.5.
# The certificate asks for 1e-3 more often than LIBLINEAR's ||g|| <= 0.001 ||g0|| does, and
# the more exact Newton steps get there in fewer steps and less time (CPU s, certified:
# a9a 8 steps 0.041 s -> 4 steps 0.033 s, mushrooms 26 -> 10 steps 0.033 -> 0.022 s).
_SVR_EPS_CG = 0.1


def _svr_limits(problem: TaskProblem, loss: str) -> tuple[np.ndarray, np.ndarray]:
    if loss == "l1":
        return problem.cost.copy(), np.zeros_like(problem.cost)
    return np.full_like(problem.cost, np.inf), 0.5 / problem.cost


def solve_svr_dual(
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
    # Gmax_old, Gnorm1_init, active size, sweeps done
    state = np.array([np.inf, -1.0, float(n), 0.0])
    rng = seed_rng(params)
    sklearn = params.get("sweeps", "hinge") == "sklearn"
    args = (X.data, X.indices, X.indptr, problem.target, upper, lam, epsilon, qd, beta, w)

    def sweeps(budget: int, eps: float) -> tuple[int, bool, float]:
        if state[2] < 0:  # the inner rule held before: sweep the full set again
            state[0], state[2] = np.inf, float(n)
        before = int(state[3])
        held = bool(kernels.svr_sweeps(*args, budget, eps, rng, index, state, sklearn))
        if held:
            state[2] = -1.0
        if sklearn:  # the sweeps that ran
            return int(state[3]) - before, held, math.nan
        return budget, held, math.nan  # an early stop counts the budget: a bound

    scratch = np.zeros_like(w)

    def objectives() -> tuple[float, float]:
        primal, dual = kernels.svr_certificate(
            X.data, X.indices, X.indptr, problem.target, problem.cost, beta, w, loss == "l1",
            epsilon, scratch,
        )
        return float(primal), float(dual)

    if sklearn:  # scikit-learn's LIBLINEAR's loop: its stop rule ends the fit
        return drive_liblinear(sweeps, objectives, w.copy, params, monitor).solution(beta)
    run = drive(sweeps, objectives, w.copy, params, monitor,
                lambda: float(state[2]) / n if state[2] > 0 else 1.0)  # (-1: held)
    return run.solution(beta)


def solve_svr_primal(
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
            if relative(self.f, bound) <= tol:
                if exact:
                    exit_reason = "converged"
                    break
                self.evaluate()  # confirm with residuals recomputed from w
                exact, bound = True, self.bound()
                continue
            if iterations >= max_iter:
                break
            stop = stop_reason(monitor, iterations, self.f, bound)
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

