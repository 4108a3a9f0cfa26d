"""Inexact augmented-Lagrangian (ALM) primal solver for the Lp-loss linear SVM, p >= 1.

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight[label of row i]):

    min_{w,b}  P(w, b) = 1/2 ||w||^2 + sum_i C_i max(0, 1 - y_i (w.x_i + b))^p

with a free, unregularised bias b (bias="free"; bias="none" fixes b = 0).

Algorithm: Nie, Huang, Wang & Huang, "New Primal SVM Solver with Linear Computational Cost
for Big Data Classifications", ICML 2014, Algorithm 2 (inexact SVM-ALM). With auxiliary
variables e_i = y_i - (w.x_i + b) (so that y_i e_i = 1 - y_i (w.x_i + b)) the augmented
Lagrangian is (Eq. 8, per-example C_i)

    AL = 1/2 ||w||^2 + sum_i C_i (y_i e_i)_+^p + mu/2 ||X w + 1 b - y + e + lambda/mu||^2,

and one iteration is
  1. e_i = argmin_e gamma_i (y_i e)_+^p + 1/2 (e - t_i)^2, gamma_i = C_i/mu,
     t_i = y_i - w.x_i - b - lambda_i/mu: closed form for p = 1 (Eq. 12) and p = 2 (Eq. 13),
     otherwise the root of Eq. 11 by a bracketed (bisection-safeguarded) Newton search;
  2. one descent step on the least-squares subproblem in (w, b) (Eq. 14) with the optimal
     step size of Eq. 18: gradient w_g = X'(Xw + 1b - z) + w/mu, b_g = 1'(Xw + 1b - z),
     z = y - e - lambda/mu; direction d = D^-1 (w_g, b_g) with D the diagonal of the
     subproblem's Hessian (squared column norms of X + 1/mu; n for b), and
     s = (w_g'd_w + b_g d_b) / (||X d_w + 1 d_b||^2 + d_w'd_w/mu) (Eq. 18 with D = I);
  3. lambda += mu (X w + 1 b - y + e) (Eq. 9), and mu grows geometrically.
w = 0, b = 0, lambda = 0 at the start (the paper starts from w = 1; 0 is scale-free).

The schedule of mu: mu_k = min(c_k * mean(C_i) / L, 1e5) with L the squared spectral norm of
[X 1] (a few power iterations), c_0 = 1, c_{k+1} = min(1.1 c_k, 1e3). The paper caps mu at
1e5 for precision; we also cap it relative to L because mu L measures the conditioning of
the (w, b) subproblem, which step 2 solves with a single gradient step: with mu L ~ 1e9 (the
absolute cap on typical data) the iterates freeze far from the optimum. The diagonal
scaling D of step 2 (Jacobi preconditioning) is ours as well: with the paper's plain
gradient (D = I) sparse data whose column norms differ widely (text) converge an order of
magnitude slower; every step still costs the same two products.

Stop rule (checked every CHECK_EVERY iterations):
  - p > 1: ||grad P(w, b)|| <= eps ||grad P(0, 0)|| (eps default 0.01, relative as LIBLINEAR);
  - p = 1: the hinge loss has no gradient; we stop on the relative duality gap
    (P - D) / P <= eps / 10 (1e-3 at the default), D the dual value at the multipliers:
    a_i = -y_i lambda_i clipped to [0, C_i], the larger class side scaled down so that
    sum_i y_i a_i = 0 (free bias);
  - any p: once mu has reached its cap, P(w, b) stayed within a relative band of
    min(1e-4, eps/100) over the last STALL_WINDOW iterations (the paper's "objective
    change < 1e-4" at the default eps; smaller eps asks for more): exit "stalled", never
    "converged" (a small objective change certifies nothing).
Whether the returned model is converged is decided by the backbone from the reported dual
(solvers/certificate.py): relative gap (P - D) / P <= tol.
The returned (w, b) is the iterate with the best primal value seen (ALM iterates are not
monotone in P). The dual of the Lp-SVM, D(a) = sum a_i - 1/2 ||sum a_i y_i x_i||^2
- sum_i (p-1) C_i (a_i/(p C_i))^(p/(p-1)) (p > 1; 0 <= a_i <= C_i for p = 1), at the
best of two feasible dual points (the multipliers, and the slacks: see `certificate`) is
reported as `dual`, so gap = P - D >= 0 is a certificate for every p.

Parallelism: each iteration is two sparse products (X'r with one accumulator per row chunk,
reduced after the loop in chunk order, each thread owning a slice of the output; X d_w
row-parallel) and one fused element-wise pass, all Numba `prange` loops over row chunks of
equal nnz. The paper's third product X w is replaced by the update X w - s X d_w (recomputed
exactly every RECOMPUTE_EVERY iterations); a stop-rule check every CHECK_EVERY iterations
costs one more (class-split X'v). The chunks depend on the data only, not on the thread
count, so the result is bit-identical for any `threads` (set with numba.set_num_threads
for the call, restored afterwards).
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

import numpy as np

from solvers import parallel
from solvers._alm_kernels import (
    _alm_elementwise,
    _bias_terms_kernel,
    _certificate_products,
    _dual_point,
    _x_times,
    _xt_times,
)
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = (
    {"p": 1.0},
    {"p": 2.0, "bias": "none"},
    {"p": 1.5},
)

MU_GROWTH = 1.1
MU_SCALE_START, MU_SCALE_CAP = 1.0, 1e3  # c_k: mu = c_k * mean(C_i) / L
MU_MAX = 1e5  # the paper's absolute cap
POWER_ITERATIONS = 8
CHECK_EVERY = 10  # iterations between stop-rule checks (a check costs one X'v product)
STALL_WINDOW = 50
STALL_TOLERANCE = 1e-4  # at the default eps; min(1e-4, eps / 100) in general
RECOMPUTE_EVERY = 50  # exact X w against the drift of the incremental update

# sums[] slots of the fused element-wise pass
_SUM_R, _LOSS, _N_LOSS = 0, 1, 2


def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Solve one binary problem with ALM; `params` as filled by validate_params("alm")."""
    t_start = time.perf_counter()
    p = float(params.get("p", 2.0))
    if not p >= 1.0:
        raise ValueError(f"p must be >= 1 (the loss max(0, 1 - y f)^p is convex), got {p}")
    free_bias = params.get("bias", "free") == "free"
    with parallel.numba_threads(int(params.get("threads", 1))) as threads:
        state = _AlmState(problem, p, free_bias)
        t_iterate = time.perf_counter()
        exit_reason = _iterate(state, float(params["eps"]), int(params["max_iter"]), monitor)
        t_objective = time.perf_counter()
        final = state.final_report()
    t_end = time.perf_counter()
    if not (np.all(np.isfinite(state.w_best)) and math.isfinite(state.b_best)):
        exit_reason = "numerical_error"
    timings = {"setup_s": t_iterate - t_start, "iterate_s": t_objective - t_iterate,
               "objective_s": t_end - t_objective}
    timings.update(state.timings)
    return BinarySolution(
        w=state.w_best[: problem.n_weights].copy(),
        iterations=state.iteration,
        exit_reason=exit_reason,
        primal=final["primal"],
        dual=final["dual"],
        gap=final["gap"],
        violation=final["violation"],
        intercept=state.b_best if free_bias else None,
        details={"active_size": final["active_size"], "p": p, "mu": state.mu,
                 "spectral_norm_sq": state.spectral, "threads": threads},
        timings=timings,
    )


def chunk_bounds(indptr: np.ndarray, n_weights: int) -> np.ndarray:
    """Row chunks of the parallel loops (4 accumulator vector(s) per chunk)."""
    return parallel.chunk_bounds(indptr, n_weights, accumulators=4)


class _AlmState:
    """Iterates (w, b, e, lambda), the products X w and X d_w, and the best iterate."""

    def __init__(self, problem: LinearProblem, p: float, free_bias: bool) -> None:
        X = problem.X
        self.problem, self.p, self.free_bias = problem, p, free_bias
        self.rows = (X.data, X.indices, X.indptr)
        self.bias_scale = float(problem.bias_scale)  # an appended (regularised) feature
        self.y = problem.y
        self.cost = problem.cost
        n, size = X.n_rows, X.n_features + 1  # last slot: the bias feature (0 if none)
        self.bounds = chunk_bounds(X.indptr, size)
        n_chunks = self.bounds.shape[0] - 1
        self.chunk_acc = np.zeros((n_chunks, size))
        self.chunk_acc_by_class = np.zeros((3 * n_chunks, size))
        self.chunk_sums = np.zeros((n_chunks, 4))
        self.w = np.zeros(size)
        self.b = 0.0
        self.w_grad = np.zeros(size)
        self.w_best = np.zeros(size)
        self.b_best = 0.0
        self.xw = np.zeros(n)  # x_i . w (bias feature included, free b not)
        self.xg = np.zeros(n)  # x_i . d_w, d_w the step direction
        self.lam = np.zeros(n)
        self.e = np.zeros(n)
        self.r = np.zeros(n)  # X w + 1 b - z, the residual of the (w, b) subproblem
        self.coef = np.zeros(n)  # d/db of C_i slack_i^p: -C_i p slack^(p-1) y_i
        self.timings = {"products_s": 0.0, "elementwise_s": 0.0, "check_s": 0.0}
        self.iteration = 0
        self.spectral = self._spectral_norm_sq()
        self.n_rows = max(n, 1)
        # the diagonal of the (w, b) subproblem's Hessian A'A (+ I/mu for w): squared column
        # norms of X, B^2 n for the bias feature, n for the free bias
        self.column_sq = np.zeros(size)
        self.column_sq[: X.n_features] = np.bincount(
            X.indices, weights=X.data * X.data, minlength=X.n_features)[: X.n_features]
        self.column_sq[X.n_features] = self.bias_scale * self.bias_scale * n
        self.mean_cost = float(np.mean(self.cost))
        self.mu_scale = MU_SCALE_START
        self.mu = self._mu()
        self.primal = math.inf
        self.best_primal = math.inf
        self.history: deque[float] = deque(maxlen=STALL_WINDOW)  # P(w, b) of the iterates
        self.n_loss = n
        self.violation = math.nan
        self.gap = math.nan
        self.dual: float | None = None
        self.grad_zero = self._gradient_norm_at_zero()
        # the first e and residual, at w = 0, b = 0, lambda = 0
        self._elementwise(0.0, 0.0, self.mu)

    # ---- the iteration

    def _mu(self) -> float:
        return min(self.mu_scale * self.mean_cost / self.spectral, MU_MAX)

    def _spectral_norm_sq(self) -> float:
        """||[X 1]||_2^2 (1 only with the free bias) by power iteration on [X 1]'[X 1]."""
        n, size = self.problem.X.n_rows, self.w.shape[0]
        v = np.ones(size) / math.sqrt(size)
        v_b = 1.0 if self.free_bias else 0.0
        estimate = 0.0
        for _ in range(POWER_ITERATIONS):
            norm = math.sqrt(float(v @ v) + v_b * v_b)
            if norm == 0.0:
                break
            v /= norm
            v_b /= norm
            Av = np.empty(n)
            _x_times(self.rows, v, self.bias_scale, v_b, self.bounds, Av, self.chunk_sums)
            estimate = float(self.chunk_sums[:, 0].sum())  # ||A v||^2, v a unit vector
            Av += v_b
            _xt_times(self.rows, Av, self.bias_scale, self.bounds, self.chunk_acc, v)
            v_b = float(Av.sum()) if self.free_bias else 0.0
        return max(estimate, 1e-12)

    def _gradient_norm_at_zero(self) -> float:
        """||grad P(0, 0)||: w-part -X'(C p y), b-part -sum C_i p y_i."""
        coef = -self.cost * self.p * self.y
        out = np.empty_like(self.w)
        _xt_times(self.rows, coef, self.bias_scale, self.bounds, self.chunk_acc, out)
        b_part = float(coef.sum()) if self.free_bias else 0.0
        return math.sqrt(float(out @ out) + b_part * b_part)

    def _elementwise(self, step: float, mu_old: float, mu_new: float) -> None:
        started = time.perf_counter()
        _alm_elementwise(
            (self.y, self.cost, self.xw, self.xg, self.lam, self.e, self.r, self.coef),
            (step, self.b, mu_old, mu_new, self.p),
            self.bounds, self.chunk_sums,
        )
        sums = self.chunk_sums.sum(axis=0)
        self.sum_r = float(sums[_SUM_R])
        self.primal = 0.5 * float(self.w @ self.w) + float(sums[_LOSS])
        self.n_loss = int(sums[_N_LOSS])
        self.timings["elementwise_s"] += time.perf_counter() - started

    def step(self) -> None:
        """One iteration of Algorithm 2 (the e-step of the next one is fused in)."""
        started = time.perf_counter()
        # w_g = X'r + w/mu, b_g = sum r; the direction (d_w, d_b) = D^-1 (w_g, b_g)
        _xt_times(self.rows, self.r, self.bias_scale, self.bounds, self.chunk_acc, self.w_grad)
        self.w_grad += self.w / self.mu
        b_grad = self.sum_r if self.free_bias else 0.0
        direction = self.w_grad / (self.column_sq + 1.0 / self.mu)
        b_direction = b_grad / self.n_rows
        # ||X d_w + 1 d_b||^2 (X d_w stored without d_b)
        _x_times(self.rows, direction, self.bias_scale, b_direction, self.bounds, self.xg,
                 self.chunk_sums)
        xd_norm = float(self.chunk_sums[:, 0].sum())
        self.timings["products_s"] += time.perf_counter() - started
        # Eq. 18 along the direction: s = g'd / (||X d_w + 1 d_b||^2 + d_w'd_w / mu)
        denominator = xd_norm + float(direction @ direction) / self.mu
        numerator = float(self.w_grad @ direction) + b_grad * b_direction
        step = numerator / denominator if denominator > 0.0 else 0.0
        self.w -= step * direction
        self.b -= step * b_direction
        self.iteration += 1
        mu_old = self.mu
        self.mu_scale = min(self.mu_scale * MU_GROWTH, MU_SCALE_CAP)
        self.mu = self._mu()
        if self.iteration % RECOMPUTE_EVERY == 0:
            started = time.perf_counter()
            _x_times(self.rows, self.w, self.bias_scale, 0.0, self.bounds, self.xw,
                     self.chunk_sums)
            self.timings["products_s"] += time.perf_counter() - started
            step = 0.0  # X w is exact already
        # X w -= s X d_w; lambda += mu_old (X w + b - y + e); P(w, b); next e and r
        self._elementwise(step, mu_old, self.mu)
        if self.primal < self.best_primal:
            self.best_primal = self.primal
            self.w_best[:] = self.w
            self.b_best = self.b
        self.history.append(self.primal)

    def stalled(self, tolerance: float) -> bool:
        """mu at its cap, and P(w, b) within a relative band of `tolerance` over the last
        STALL_WINDOW iterations (the iterates are not monotone: the whole window counts)."""
        if not self.mu_at_cap or len(self.history) < STALL_WINDOW:
            return False
        return max(self.history) - min(self.history) < tolerance * abs(self.best_primal)

    @property
    def mu_at_cap(self) -> bool:
        return self.mu_scale >= MU_SCALE_CAP or self.mu >= MU_MAX

    # ---- certificates

    def _polish_bias(self) -> float:
        """b* = argmin_b P(w, b) for the current w (p > 1: P is differentiable in b).

        Safeguarded Newton on the increasing derivative h'(b), bisection once the root is
        bracketed; each step is an O(n) pass over the margins. Leaves coef at (w, b*), and
        takes (w, b*) as the best iterate when it has the best primal value.
        """
        b = self.b
        lo, hi = -math.inf, math.inf
        for _ in range(100):
            loss, slope, curvature, scale = self._bias_terms(b)
            if slope == 0.0 or abs(slope) <= 1e-12 * scale:
                break
            if slope < 0.0:
                lo = b
            else:
                hi = b
            candidate = b - slope / curvature if curvature > 0.0 else math.nan
            if not (lo < candidate < hi) or candidate == b:
                if math.isfinite(lo) and math.isfinite(hi):
                    candidate = 0.5 * (lo + hi)
                else:  # expand towards the root
                    candidate = b + math.copysign(max(1.0, abs(b)), -slope)
            if candidate == b or hi - lo <= 1e-15 * max(1.0, abs(b)):
                break
            b = candidate
        loss, _, _, _ = self._bias_terms(b)
        primal = 0.5 * float(self.w @ self.w) + loss
        if primal < self.best_primal:
            self.best_primal = primal
            self.w_best[:] = self.w
            self.b_best = b
        return b

    def _bias_terms(self, b: float) -> tuple[float, float, float, float]:
        """(h, h', h'', sum |h'_i|) of h(b) = sum_i C_i slack_i(b)^p; coef = h'_i."""
        _bias_terms_kernel(self.xw, self.y, self.cost, self.p, b, self.bounds,
                           self.chunk_sums, self.coef)
        sums = self.chunk_sums.sum(axis=0)
        return float(sums[0]), float(sums[1]), float(sums[2]), float(sums[3])

    def certificate(self) -> None:
        """Dual value, relative gap and the stop-rule quantity at the current iterate.

        The dual value is the best of two feasible dual points, each made feasible (a >= 0,
        a <= C_i for p = 1; with the free bias the larger class side scaled down so that
        sum_i y_i a_i = 0) and then scaled by the best factor t (`_scaled_dual`): the
        multipliers, a_i = -y_i lambda_i; and the slacks, a_i = p C_i slack_i^(p-1) (the
        exact optimal multipliers at the optimum; C_i [slack_i > 0] for p = 1), at
        (w, b*), b* = argmin_b P(w, b) for p > 1 with the free bias. The gradient (p > 1)
        is taken at (w, b*) too: grad_w P = w + X' coef, coef_i = -C_i p slack_i^(p-1) y_i.
        """
        started = time.perf_counter()
        smooth = self.p > 1.0
        b = self.b
        if smooth and self.free_bias:
            b = self._polish_bias()  # coef at (w, b*); (w, b*) may become the best iterate
        multipliers = np.empty_like(self.lam)
        _dual_point(self.y, self.cost, self.lam, self.p, multipliers)
        slack = np.maximum(0.0, 1.0 - self.y * (self.xw + (b if self.free_bias else 0.0)))
        from_slacks = self.p * self.cost * (slack ** (self.p - 1.0) if smooth else
                                            (slack > 0.0))
        dual = -math.inf
        products = np.empty((3, self.w.shape[0]))
        for alpha in (multipliers, from_slacks):
            _certificate_products(self.rows, (alpha, self.coef, self.y, smooth),
                                  self.bias_scale, self.bounds, self.chunk_acc_by_class,
                                  products)
            if alpha is multipliers:
                v_coef = products[2].copy()
            dual = max(dual, self._scaled_dual(alpha, products[0], products[1]))
        self.dual = dual
        self.gap = (self.best_primal - dual) / max(abs(self.best_primal), 1e-300)
        if smooth:
            grad = self.w + v_coef
            grad_b = float(self.coef.sum()) if self.free_bias else 0.0
            norm = math.sqrt(float(grad @ grad) + grad_b * grad_b)
            self.violation = norm / max(self.grad_zero, 1e-300)
        else:
            self.violation = self.gap
        self.timings["check_s"] += time.perf_counter() - started

    def _scaled_dual(self, alpha: np.ndarray, v_pos: np.ndarray, v_neg: np.ndarray
                     ) -> float:
        """max_t D(t a') over t >= 0 (t <= min C_i / a'_i for p = 1), a' = a with the
        larger class side scaled down for y'a' = 0 (free bias). The dual of the Lp-SVM:
        D(a) = sum a_i - 1/2 ||sum a_i y_i x_i||^2 - sum_i (p-1) C_i (a_i/(p C_i))^q,
        q = p/(p-1); along a ray, D(t a') = t S - t^2 V / 2 - t^q K is concave in t."""
        positive = self.y > 0
        s_pos, s_neg = float(alpha[positive].sum()), float(alpha[~positive].sum())
        scale_pos = scale_neg = 1.0
        if self.free_bias:
            if s_pos > s_neg:
                scale_pos = s_neg / s_pos
            elif s_neg > s_pos:
                scale_neg = s_pos / s_neg
        v = scale_pos * v_pos - scale_neg * v_neg  # sum_i a'_i y_i x_i
        total, vv = scale_pos * s_pos + scale_neg * s_neg, float(v @ v)
        if total <= 0.0:
            return 0.0
        scaled = alpha * np.where(positive, scale_pos, scale_neg)
        if self.p == 1.0:
            ratio = float(np.max(scaled / self.cost))
            t = min(1.0 / ratio, total / vv if vv > 0.0 else math.inf)
            return t * total - 0.5 * t * t * vv
        q = self.p / (self.p - 1.0)
        k = float(np.sum((self.p - 1.0) * self.cost * (scaled / (self.p * self.cost)) ** q))

        def value(t: float) -> float:
            return t * total - 0.5 * t * t * vv - t ** q * k

        lo, hi = 0.0, 1.0
        while total - hi * vv - q * hi ** (q - 1.0) * k > 0.0 and hi < 1e300:
            lo, hi = hi, 2.0 * hi  # D'(t) > 0: the maximiser lies beyond hi
        for _ in range(100):  # bisection on D'(t) = S - t V - q t^(q-1) K
            mid = 0.5 * (lo + hi)
            if total - mid * vv - q * mid ** (q - 1.0) * k > 0.0:
                lo = mid
            else:
                hi = mid
        return max(value(lo), value(1.0))

    def converged(self, eps: float) -> bool:
        """p > 1: gradient <= eps ||grad P(0)|| and gap <= eps/10; p = 1: gap <= eps/10."""
        self.certificate()
        return self.violation <= (eps if self.p > 1.0 else eps / 10.0) and (
            self.gap <= eps / 10.0)

    def snapshot(self) -> dict[str, Any]:
        self.certificate()
        assert self.dual is not None
        return {"iteration": self.iteration, "primal": self.best_primal, "dual": self.dual,
                "gap": self.best_primal - self.dual, "violation": self.violation,
                "active_size": self.n_loss}

    def final_report(self) -> dict[str, Any]:
        """P, D, gap and the stop-rule quantity at the returned (best) iterate."""
        self.w, self.b = self.w_best.copy(), self.b_best
        _x_times(self.rows, self.w, self.bias_scale, 0.0, self.bounds, self.xw,
                 self.chunk_sums)
        self._elementwise(0.0, 0.0, self.mu)  # P and the loss derivative at the best
        self.best_primal = self.primal
        self.certificate()  # p > 1, free bias: b_best may improve to argmin_b P(w_best, b)
        assert self.dual is not None
        primal = self.best_primal
        return {"primal": primal, "dual": self.dual, "gap": primal - self.dual,
                "violation": self.violation, "active_size": self.n_loss}


def _iterate(state: _AlmState, eps: float, max_iter: int, monitor: ProgressMonitor) -> str:
    while True:
        state.step()
        if not math.isfinite(state.primal):
            return "numerical_error"
        if state.iteration % CHECK_EVERY == 0:
            if state.converged(eps):
                return "converged"
            if state.stalled(min(STALL_TOLERANCE, eps / 100.0)):
                return "stalled"
        stop = monitor.stop_reason(state.iteration, max_iter, state.snapshot)
        if stop is not None:
            return stop
