"""TRON: truncated Newton method for the primal L2-loss SVM (and L2-regularised logistic
regression), with a line search (default, LIBLINEAR >= 2.40) or a trust region (method
"trust_region", LIBLINEAR <= 2.30).

Problem (per binary problem; y_i in {-1, +1}, C_i = C * class_weight[label of row i]):

    min_w  f(w) = 1/2 ||w||^2 + sum_i C_i loss(m_i),   m_i = y_i w.x_i,
    loss = "l2":       max(0, 1 - m)^2          (LIBLINEAR -s 2)
    loss = "logistic": log(1 + exp(-m))         (LIBLINEAR -s 0)

With bias="augment" every x_i carries one more constant feature of value B (regularised,
like LIBLINEAR -B with its default -R off); bias="none" fits no intercept. f is strongly
convex and once (l2) or twice (logistic) differentiable; for l2 the generalised Hessian is
H = I + 2 X_I' diag(C_I) X_I over the active set I = {i : m_i < 1}, for logistic
H = I + X' diag(C_i s_i (1 - s_i)) X, s_i = 1 / (1 + exp(-m_i)).

method="trust_region": Lin, Weng & Keerthi, "Trust Region Newton Method for Large-Scale Logistic
Regression", JMLR 2008 (Algorithm 1 with the Steihaug conjugate-gradient inner solver,
Algorithm 2), in the form of LIBLINEAR's tron.cpp of versions 2.20-2.30 (`TRON::tron`,
`TRON::trpcg`), which adds the diagonal preconditioner of Hsia, Chiang & Lin,
"Preconditioned Conjugate Gradient Methods in Truncated Newton Frameworks for Large-scale
Linear Classification", ACML 2018: M = (1 - a) I + a diag(H), a = 0.01, and measures the
trust region in the M-norm ||s||_M = sqrt(s'Ms). One iteration:
  1. M from diag(H) at w; on the first iteration delta = ||g||_M;
  2. PCG on H s = -g from s = 0 until the quadratic-model rule of LIBLINEAR >= 2.40's
     newton.cpp (Nash & Sofer; Galli & Lin 2021) holds, i (Q_i - Q_{i-1}) >= cgtol Q_i
     with Q_i = g's_i + s_i'Hs_i / 2 and cgtol = min(0.5, sqrt(||g||_{M^-1})), or ||s||_M
     reaches delta (the step then ends on the boundary);
  3. prered = -(g's + s'Hs/2), actred = f(w) - f(w + s); on the first iteration
     delta = min(delta, ||s||_M);
  4. delta update with eta0 = 1e-4, eta1 = 0.25, eta2 = 0.75, sigma1 = 0.25,
     sigma2 = 0.5, sigma3 = 4 and the interpolation alpha = max(sigma1, -g's / (2 (f(w+s)
     - f(w) - g's))) (sigma3 when that denominator is <= 0), exactly as tron.cpp;
  5. accept w + s when actred > eta0 prered.

Stop rule: LIBLINEAR's ||grad f(w)|| <= eps' ||grad f(0)||, eps' = eps * max(min(#pos,
#neg), 1) / n (LIBLINEAR's primal_solver_tol; eps default 0.01), and, when the fit gives
`tol` (it always does through solvers.train), also the gradient certificate
||grad f(w)||^2 <= 2 tol f(w): f is 1-strongly convex, so f(w) - f* <= ||grad f(w)||^2 / 2
<= tol f(w). LIBLINEAR's test alone can stop 1e-3..0.7 above the optimum (mushrooms at eps
0.01); restarting TRON with a smaller eps instead (warm, inexact CG) crawls on unscaled
data, so the certificate is part of the one run's stop rule. The event and result
`violation` is ||grad f(w)|| / ||grad f(0)||; `converged` is claimed only after the test
also holds with margins recomputed exactly from the returned w.

method="line_search" (the default): LIBLINEAR >= 2.40 (2.50 is what `liblinear-official`
installs here) replaced TRON by a line-search Newton method (newton.cpp; Galli & Lin, "A
study on truncated Newton methods for linear classification", 2021) with the same
preconditioner: PCG on H s = -g with no radius (the same CG stop rule), then w + a s for
the first a of 1, 1/2, 1/4, ... (at most 20) with f(w + a s) - f(w) <= 0.01 a g's; the
margin changes y_i x_i.s are computed once per direction, so each trial a costs O(n). On
news20 (one-vs-rest output 1, unscaled word counts) at eps 1e-4 the trust region crawled:
1000 iterations (331 rejected, 2.5 CG steps each) ended far above the optimum, and 20000
did not reach the stop rule; the line search converges in 597 steps (LIBLINEAR: 849), and
it certifies mushrooms-x5 where the trust region ended at max_iter. On the scaled sets
both take the same steps (a9a, ijcnn1) or nearly (w8a: the line search takes LIBLINEAR's
8 steps / 46 CG steps exactly). No trust-region step is ever rejected, so max_iter counts
line searches; a line search that finds no decrease ends the run as stalled.

The CG stop rule (both methods) is newton.cpp's: tron.cpp's residual rule ||r||_{M^-1} <=
0.1 ||g||_{M^-1} solved each Newton system more exactly than the step needs (a9a at eps
0.01: 28 CG steps in 4 Newton steps, newton.cpp 16 in 4; with this rule 16 in 4, ijcnn1
21 in 5 as LIBLINEAR). The same rule and cgtol serve a warm start (tron.cpp's residual
rule with 0.5 there crawled from a stalled dual CD's w on unscaled data; `RESIDUAL_RULE`
stays in the kernels).

Where we depart from LIBLINEAR:
  - actred is summed per example from the margin change y_i x_i.s (the loss differences
    (d_new - d_old)(d_new + d_old), log1p(sigma(-m) expm1(-step))), not as the difference
    of two objective values, so it keeps its relative precision near the optimum. The
    margins of w + s are carried over instead of recomputed (as LIBLINEAR's line search
    does); the convergence test is confirmed with exact margins.
  - LIBLINEAR's guard "|actred|, |prered| <= 1e-12 |f|: stop" (which would end small-eps
    runs before the gradient test holds) is replaced by stall guards: prered <= 0, or a
    step that leaves w unchanged in float64, end the run with exit reason
    stalled (the honest violation is reported, details["stall"] says why).
  - delta = ||g||_M is set once, before the first iteration. tron.cpp resets it at the top
    of every iteration while no step has been accepted yet (`if (iter == 1)`), so a
    rejected first step is retried with the same radius and rejected again.
  - max_iter bounds all trust-region iterations, accepted or not (LIBLINEAR counts only
    accepted steps, so repeated rejections are unbounded there); CG stops after
    max(n_weights, 5) steps (newton.cpp's cap; tron.cpp has none).
  - Q_i of the CG rule by the CG recurrence Q_i = Q_{i-1} - alpha_i z'r / 2 (newton.cpp
    recomputes -(s'r - s'g) / 2 with two more passes over the weights).
  - Arithmetic, same quantities: z = r * (1/M); d'Hd = d'd + sum_A h_i (x_i.d)^2 from the
    rows of the Hessian product; ||s + a d||_M^2 = s'Ms + 2a s'Md + a^2 d'Md with s'Md,
    d'Md accumulated in the CG update loops (Steihaug's recurrence; tron.cpp recomputes
    the three M-products at the boundary); split partial sums in the O(n) loops.
  - Logistic: the sigmoid, its complement and the loss use overflow-free forms.

Parallelism: X s (with the loss change), the gradient and diag(H) products X_A'u, X_A'^2 h
and every Hessian-vector product X_A'(h_A * X_A d) run in Numba `prange` loops over row
chunks of equal nnz (`solvers.parallel`); each chunk lists its active rows A compactly.
The X_A' products accumulate per group of consecutive chunks, as many groups as the active
nnz warrants (group accumulators cost n_weights each to clear and reduce: with a small
active set on wide data, one group, no reduction), summed in group order. Chunks and
groups depend on the data and the iterate only, so the result is bit-identical for any
`threads`. The line search's X s and its per-step loss sums run over the same chunks,
summed in chunk order. The CG vector updates are serial. Whether these loops run on the
`threads` or on one is measured as the fit runs (solvers/grain.py: the CG calls probe the
other mode; the other passes follow the choice): on a busy machine a parallel region
waits for a descheduled thread, and the result is the same either way.
Scaling past 8 threads (issues 30, 46): the row chunks, and with them the accumulator
groups of the X_A' products, are max(parallel.MAX_CHUNKS, threads) (threads as asked, not
as the machine has), fewer where rows or accumulator memory (parallel.CHUNK_MEMORY) run
out, so up to `threads` threads share a Hessian-vector product. Summation order: every
product and loss sum adds its per-chunk (per-group) partial sums in chunk order, so a fit
is bit-identical for every `threads` <= MAX_CHUNKS (8 chunks, as before), and above it
differs from a one-thread fit only by the rounding of its chunk boundaries: each sum
changes by a few ulps of the sum of magnitudes, and the iterates of the Newton method stay
within that (tests/solvers/test_tron.py: 12 threads against one, both to a gradient
certificate of 1e-12: primal values within 1e-9 relative, w within 1e-6). The CG vector
updates (about six O(n_weights) passes per CG step) are still serial: on the 400k x 100k
set about a tenth of a one-thread CG step by our estimate, so Amdahl caps 16 threads near
5x; chunked parallel CG updates are the next step, to be measured on a 16-core machine
(bench/many_cores.py).

The CG inner loop runs in bounded calls (adaptive number of steps), so max_seconds,
progress events and cancellation act within a long CG solve too; the returned w is always
the last accepted iterate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numba
import numpy as np

from solvers import _tron_kernels as kernels
from solvers import parallel
from solvers._kernel_helpers import signed_margins
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor
from solvers.grain import GrainMeter
from solvers.objectives import checked_weights

WARMUP_VARIANTS: tuple[dict[str, Any], ...] = (
    {"loss": "l2"},
    {"loss": "l2", "bias": "none"},
    {"loss": "logistic"},
)

LOSSES = ("l2", "logistic")
DEFAULTS: dict[str, Any] = {"eps": 0.01, "max_iter": 1000, "loss": "l2", "threads": 1,
                            "method": "line_search"}
METHODS = ("line_search", "trust_region")

# tron.cpp's trust-region constants
ETA0, ETA1, ETA2 = 1e-4, 0.25, 0.75
SIGMA1, SIGMA2, SIGMA3 = 0.25, 0.5, 4.0
# newton.cpp's line search: Armijo constant, at most this many halvings of the step
ETA_LINE_SEARCH, LINE_SEARCH_HALVINGS = 0.01, 20
ALPHA_PCG = 0.01  # M = (1 - a) I + a diag(H)
# CG stop rule and its eps_cg (newton.cpp: quadratic-model rule, eps_cg = 0.5, cold or
# warm); tron.cpp's residual rule used 0.1 (0.5 with a warm start)
CG_RULE, EPS_CG = kernels.QUADRATIC_RULE, 0.5

# CG steps per kernel call: adapted so that a call takes about _CALL_SECONDS
_CALL_SECONDS = 0.02
_INITIAL_CG_BUDGET, _MAX_CG_BUDGET = 4, 1 << 20


class CsrRows(Protocol):
    """The CSR arrays of X (LinearProblem.X): float64 or float32 data, int32 indices,
    int64 indptr."""

    @property
    def data(self) -> np.ndarray: ...

    @property
    def indices(self) -> np.ndarray: ...

    @property
    def indptr(self) -> np.ndarray: ...

    @property
    def n_features(self) -> int: ...

    @property
    def n_rows(self) -> int: ...


class Supervisor(Protocol):
    """What the iteration needs from its caller (ProgressMonitor satisfies it)."""

    def out_of_time(self) -> bool: ...

    def event_due(self) -> bool: ...

    def report(self, make_event: Callable[[], dict[str, Any]]) -> bool: ...


@dataclass
class TronOutcome:
    """Result of `tron` on one binary problem."""

    w: np.ndarray  # (n_features + 1,): the last slot is the bias-feature weight (0 if none)
    exit_reason: str
    iterations: int  # trust-region iterations (one CG solve each), accepted or not
    newton_steps: int  # accepted iterations
    cg_iterations: int
    primal: float  # f(w), exact (margins recomputed from the returned w)
    grad_norm: float
    grad_norm0: float  # ||grad f(0)||
    tolerance: float  # eps' of the stop rule ||g|| <= eps' ||g0||
    active_size: int
    stall: str | None = None
    threads: int = 1
    fine_share: float = 0.0  # the share of CG steps run on `threads` (the rest on one)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def violation(self) -> float:
        return _relative(self.grad_norm, self.grad_norm0)


def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor,
    w0: np.ndarray | None = None,
) -> BinarySolution:
    """Solve one binary problem with TRON.

    params: eps, max_iter, loss ("l2" / "logistic"), threads, and optionally w0 (a warm
    start of problem.n_weights entries; the argument w0 takes precedence). C and the class
    weights are already in problem.cost, the bias in problem.bias_scale.
    """
    t_start = time.perf_counter()
    settings = {**DEFAULTS, **{k: v for k, v in params.items() if v is not None}}
    start = w0 if w0 is not None else params.get("w0")
    outcome = tron(problem.X, problem.y, problem.cost, float(problem.bias_scale),
                   loss=str(settings["loss"]), eps=float(settings["eps"]),
                   tol=settings.get("tol"),
                   max_iter=int(settings["max_iter"]), supervisor=monitor,
                   w0=_warm_start(problem, start), threads=int(settings["threads"]),
                   method=str(settings["method"]))
    timings = dict(outcome.timings)
    timings["setup_s"] = time.perf_counter() - t_start - sum(outcome.timings.values())
    return BinarySolution(
        w=outcome.w[: problem.n_weights].copy(),
        iterations=outcome.iterations,
        exit_reason=outcome.exit_reason,
        primal=outcome.primal,
        dual=None,
        gap=None,
        violation=outcome.violation,
        details={"active_size": outcome.active_size, "grad_norm": outcome.grad_norm,
                 "grad_norm0": outcome.grad_norm0, "tolerance": outcome.tolerance,
                 "newton_steps": outcome.newton_steps, "cg_iterations": outcome.cg_iterations,
                 "loss": settings["loss"], "stall": outcome.stall,
                 "threads": outcome.threads, "fine_grained_share": outcome.fine_share},
        timings=timings,
    )


def _warm_start(problem: LinearProblem, w0: Any) -> np.ndarray | None:
    if w0 is None:
        return None
    start = checked_weights(problem, w0, "w0")
    if not np.all(np.isfinite(start)):
        raise ValueError("w0 contains NaN or infinity; pass a finite warm start")
    padded = np.zeros(problem.X.n_features + 1)
    padded[: problem.n_weights] = start
    return padded


def tron(
    X: CsrRows, y: np.ndarray, cost: np.ndarray, bias_scale: float, *, loss: str,
    eps: float, max_iter: int, supervisor: Supervisor, w0: np.ndarray | None = None,
    threads: int = 1, tol: float | None = None, method: str = "line_search",
) -> TronOutcome:
    """Minimise f(w) by TRON; w0 (n_features + 1 entries, bias slot last) or 0 to start."""
    if loss not in LOSSES:
        raise ValueError(
            f"tron solves the smooth losses {LOSSES}, got loss={loss!r}; for the hinge "
            "loss (l1) use dcd or ocas"
        )
    if not eps > 0.0:
        raise ValueError(f"eps must be > 0, got {eps}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    with parallel.numba_threads(threads) as used:
        state = _TronState(X, y, cost, bias_scale, kernels.L2 if loss == "l2" else
                           kernels.LOGISTIC, chunks=max(parallel.MAX_CHUNKS, int(threads)))
        state.threads, state.grain = used, GrainMeter(used)
        numba.set_num_threads(1)  # sequential until the grain meter measures otherwise
        outcome = _iterate(state, (eps, tol), max_iter, supervisor, w0,
                           line_search=method == "line_search")
    outcome.threads = used
    outcome.fine_share = state.grain.share_fine()
    return outcome


class _TronState:
    """Arrays of the iteration: w, margins, gradient, preconditioner, CG vectors, chunks."""

    def __init__(self, X: CsrRows, y: np.ndarray, cost: np.ndarray, bias_scale: float,
                 loss_kind: int, chunks: int = parallel.MAX_CHUNKS) -> None:
        n, size = X.n_rows, X.n_features + 1
        self.rows = (X.data, X.indices, X.indptr)
        self.y = np.ascontiguousarray(y, dtype=np.float64)
        self.cost = np.ascontiguousarray(cost, dtype=np.float64)
        self.bias_scale = float(bias_scale)
        self.loss_kind = loss_kind
        self.bounds = parallel.chunk_bounds(X.indptr, size, accumulators=2, max_chunks=chunks)
        n_chunks = self.bounds.shape[0] - 1
        self.chunk_acc = np.zeros((2, n_chunks, size))
        self.chunk_sums = np.zeros(n_chunks)
        # active rows of each chunk: (index, u_i, h_i), their number; and their nnz
        self.active = (np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n),
                       np.zeros(n_chunks, dtype=np.int64))
        self.active_nnz = np.zeros(n_chunks, dtype=np.int64)
        self.n_groups = n_chunks  # accumulator groups of H v (set by each gradient pass)
        # Numba threads, and whether the loops use them (solvers/grain.py measures it)
        self.threads, self.grain = 1, GrainMeter(1)
        self.w = np.zeros(size)
        self.margins = np.zeros(n)
        self.new_margins = np.zeros(n)
        self.grad = np.zeros(size)
        self.precond = np.ones(size)
        self.cg_vectors = tuple(np.zeros(size) for _ in range(6))  # s, r, z, d, Hd, M^-1
        self.cg_scalars = np.zeros(kernels.N_CG_SCALARS)
        self.cg_counters = np.array([0, max(size, 5), CG_RULE], dtype=np.int64)
        self.f = 0.0
        self.exact = False  # f and margins computed from w itself (not carried over)
        self.grad_norm = 0.0
        self.timings = {"function_s": 0.0, "gradient_s": 0.0, "cg_s": 0.0}

    def cg_part(self, fine: bool, steps: int) -> tuple[int, int, float]:
        """Up to `steps` CG steps on `threads` (fine) or one thread: (status, steps, work).
        The chunks are the data's, so both give the same arithmetic."""
        numba.set_num_threads(self.threads if fine else 1)
        before = int(self.cg_counters[0])
        status = int(kernels.cg_steps(self.rows, self.bias_scale, self.bounds, self.active,
                                      self.n_groups, self.chunk_acc, self.chunk_sums,
                                      self.precond, self.cg_vectors, self.cg_scalars,
                                      self.cg_counters, steps))
        done = int(self.cg_counters[0]) - before
        return status, done, float(done)

    @property
    def active_size(self) -> int:
        return int(self.active[3].sum())

    def evaluate(self) -> None:
        """f, margins (exact, from w), gradient and preconditioner at the current w."""
        started = time.perf_counter()
        self.f = float(kernels.margins_and_loss(self.rows, self.y, self.cost, self.w,
                                                self.bias_scale, self.loss_kind, self.bounds,
                                                self.margins, self.chunk_sums))
        self.exact = True
        self.timings["function_s"] += time.perf_counter() - started
        self.gradient()

    def gradient(self) -> None:
        """grad = w + X'u and M = (1 - a) I + a diag(H) from the current margins."""
        started = time.perf_counter()
        kernels.select_active((self.y, self.cost), self.margins, self.loss_kind,
                              self.rows[2], self.bounds, self.active[:3], self.active[3],
                              self.active_nnz)
        self.n_groups = kernels.hessian_groups(int(self.active_nnz.sum()), self.w.shape[0],
                                               self.bounds.shape[0] - 1)
        self.grad_norm = float(kernels.gradient_and_preconditioner(
            self.rows, self.bias_scale, self.bounds, self.active, self.n_groups,
            self.chunk_acc, self.w, ALPHA_PCG, self.grad, self.precond))
        self.timings["gradient_s"] += time.perf_counter() - started

    def gradient_at_zero(self) -> float:
        """||grad f(0)|| (margins all 0); leaves margins, gradient and M to be recomputed."""
        saved_w = self.w.copy()
        self.w[:] = 0.0
        self.margins[:] = 0.0
        self.exact = False
        self.gradient()
        norm = self.grad_norm
        self.w[:] = saved_w
        return norm

    def loss_change(self) -> float:
        """sum_i C_i (loss(m_i + y_i x_i.s) - loss(m_i)) for the CG step s; new_margins =
        the margins of w + s."""
        started = time.perf_counter()
        change = kernels.trial_margins(self.rows, self.y, self.cost, self.cg_vectors[0],
                                       self.bias_scale, self.loss_kind, self.bounds,
                                       self.margins, self.new_margins, self.chunk_sums)
        self.timings["function_s"] += time.perf_counter() - started
        return float(change)

    def accept(self, actred: float) -> None:
        kernels.add_step(self.w, self.cg_vectors[0])
        self.margins, self.new_margins = self.new_margins, self.margins
        self.exact = False
        self.f -= actred
        self.gradient()

    def snapshot(self, iteration: int, grad_norm0: float) -> dict[str, Any]:
        # P is 1-strongly convex: P* >= P(w) - ||grad P(w)||^2 / 2 (the certificate's bound)
        gap = 0.5 * self.grad_norm * self.grad_norm
        return {"iteration": iteration, "primal": self.f, "dual": self.f - gap, "gap": gap,
                "violation": _relative(self.grad_norm, grad_norm0),
                "active_size": self.active_size, "grad_norm": self.grad_norm}


def _iterate(state: _TronState, stop: tuple[float, float | None], max_iter: int,
             supervisor: Supervisor, w0: np.ndarray | None,
             line_search: bool = False) -> TronOutcome:
    started = time.perf_counter()
    eps, tol = stop

    def stop_rule_holds() -> bool:
        """LIBLINEAR's test, and (given tol) the gradient certificate ||g||^2 <= 2 tol f."""
        return state.grad_norm <= tolerance * grad_norm0 and (
            tol is None or state.grad_norm * state.grad_norm <= 2.0 * tol * state.f)

    positives = int(np.count_nonzero(state.y > 0))
    n = state.y.shape[0]
    tolerance = eps * max(min(positives, n - positives), 1) / n
    if w0 is None:
        state.evaluate()
        grad_norm0 = state.grad_norm
    else:
        grad_norm0 = state.gradient_at_zero()
        state.w[:] = w0
        state.evaluate()
    counts = {"iteration": 0, "accepted": 0, "cg": 0}
    stall: str | None = None

    def finish(reason: str) -> TronOutcome:
        t_final = time.perf_counter()
        # exact f(w): the confirmed convergence test has just computed it from w itself
        primal = state.f if state.exact else float(kernels.margins_and_loss(
            state.rows, state.y, state.cost, state.w, state.bias_scale, state.loss_kind,
            state.bounds, state.margins, state.chunk_sums))
        if not (math.isfinite(primal) and np.all(np.isfinite(state.w))):
            reason = "numerical_error"
        timings = dict(state.timings)
        timings["objective_s"] = time.perf_counter() - t_final
        timings["iterate_s"] = t_final - started - sum(state.timings.values())
        return TronOutcome(
            w=state.w.copy(), exit_reason=reason, iterations=counts["iteration"],
            newton_steps=counts["accepted"], cg_iterations=counts["cg"], primal=primal,
            grad_norm=state.grad_norm, grad_norm0=grad_norm0, tolerance=tolerance,
            active_size=state.active_size, stall=stall, timings=timings)

    def report() -> bool:
        return supervisor.event_due() and supervisor.report(
            lambda: state.snapshot(counts["iteration"], grad_norm0))

    delta = 0.0
    budget = _INITIAL_CG_BUDGET
    while True:
        if not math.isfinite(state.grad_norm) or not math.isfinite(state.f):
            return finish("numerical_error")
        if stop_rule_holds():
            return finish("converged")
        if counts["iteration"] >= max_iter:
            return finish("max_iter")
        if supervisor.out_of_time():
            return finish("max_seconds")
        if report():
            return finish("cancelled")

        # ---- PCG on H s = -g within ||s||_M <= delta
        s, r = state.cg_vectors[0], state.cg_vectors[1]
        if line_search:
            delta = math.inf  # the full Newton system; the step length comes after
        elif counts["iteration"] == 0:
            delta = float(kernels.m_norm(state.grad, state.precond))
        kernels.cg_start(state.grad, state.precond, EPS_CG, delta, state.cg_vectors,
                         state.cg_scalars, state.cg_counters)
        while True:
            call_start = time.perf_counter()
            status = state.grain.call(budget, state.cg_part, kernels.CG_RUNNING)
            # the other passes (gradient, line search) follow the meter's choice
            numba.set_num_threads(state.threads if state.grain.fine else 1)
            seconds = time.perf_counter() - call_start
            state.timings["cg_s"] += seconds
            budget = _next_budget(budget, seconds)
            if status != kernels.CG_RUNNING:
                break
            if supervisor.out_of_time():
                counts["cg"] += int(state.cg_counters[0])
                return finish("max_seconds")
            if report():
                counts["cg"] += int(state.cg_counters[0])
                return finish("cancelled")
        counts["cg"] += int(state.cg_counters[0])
        reached_boundary = status == kernels.CG_BOUNDARY

        if line_search:
            counts["iteration"] += 1
            found = _line_search(state)
            if found == "accepted":
                counts["accepted"] += 1
                if stop_rule_holds():
                    state.evaluate()  # confirm with margins recomputed exactly from w
                continue
            if found == "numerical_error":
                return finish("numerical_error")
            stall = found
            return finish("stalled")

        # ---- actual and predicted reduction, trust-region update (tron.cpp)
        gs, sr, s_norm, ws, ss, unchanged = kernels.step_quantities(state.w, state.grad,
                                                                    state.precond, s, r)
        prered = -0.5 * (gs - sr)
        # f(w) - f(w + s) = -(w's + s's / 2 + sum_i C_i (loss(m_i + y_i x_i.s) - loss(m_i)))
        actred = -(ws + 0.5 * ss + state.loss_change())
        if counts["iteration"] == 0:
            delta = min(delta, s_norm)
        denominator = -actred - gs  # f(w + s) - f(w) - g's
        alpha = SIGMA3 if denominator <= 0.0 else max(SIGMA1, -0.5 * (gs / denominator))
        if actred < ETA0 * prered:
            delta = min(alpha * s_norm, SIGMA2 * delta)
        elif actred < ETA1 * prered:
            delta = max(SIGMA1 * delta, min(alpha * s_norm, SIGMA2 * delta))
        elif actred < ETA2 * prered:
            delta = max(SIGMA1 * delta, min(alpha * s_norm, SIGMA3 * delta))
        elif reached_boundary:
            delta = SIGMA3 * delta
        else:
            delta = max(delta, min(alpha * s_norm, SIGMA3 * delta))
        counts["iteration"] += 1

        if actred > ETA0 * prered and not unchanged:
            state.accept(actred)
            counts["accepted"] += 1
            if stop_rule_holds():
                state.evaluate()  # confirm with margins recomputed exactly from w
            continue
        if math.isnan(actred):
            return finish("numerical_error")
        if not prered > 0.0 or unchanged:
            stall = ("predicted reduction <= 0" if not prered > 0.0
                     else "the step no longer changes w in float64")
            return finish("stalled")


def _line_search(state: _TronState) -> str:
    """newton.cpp's step: w + alpha s for the first alpha of 1, 1/2, 1/4, ... with f(w +
    alpha s) - f(w) <= 0.01 alpha g's (Armijo), the margins of w + alpha s updated from
    those of the direction, y_i x_i.s (one pass over X, then O(n) per trial alpha).

    Returns "accepted", "numerical_error" or why the run stalls."""
    started = time.perf_counter()
    s, r = state.cg_vectors[0], state.cg_vectors[1]
    gs, _, _, ws, ss, _ = kernels.step_quantities(state.w, state.grad, state.precond, s, r)
    if not gs < 0.0:
        state.timings["function_s"] += time.perf_counter() - started
        return ("numerical_error" if math.isnan(gs)
                else "the Newton direction is not a descent direction")
    steps = state.new_margins
    # steps_i = y_i (x_i.s[:d] + B s[d]): the margin change of a unit step along s
    signed_margins(state.rows, state.y, s, state.bias_scale, state.bounds, steps)
    alpha = 1.0
    outcome = "the line search found no decrease in 20 halvings of the step"
    for _ in range(LINE_SEARCH_HALVINGS):
        # f(w + alpha s) - f(w) = alpha w's + alpha^2 s's / 2 + the loss change
        change = alpha * ws + 0.5 * alpha * alpha * ss + float(kernels.line_loss_change(
            state.cost, state.margins, steps, alpha, state.loss_kind, state.bounds,
            state.chunk_sums))
        if math.isnan(change):
            outcome = "numerical_error"
            break
        if change <= ETA_LINE_SEARCH * alpha * gs:
            changed = kernels.take_step(state.w, s, state.margins, steps, alpha)
            state.exact = False
            if changed:
                state.f += change
                outcome = "accepted"
            else:
                outcome = "the step no longer changes w in float64"
            break
        alpha *= 0.5
    state.timings["function_s"] += time.perf_counter() - started
    if outcome == "accepted":
        state.gradient()
    return outcome


def _next_budget(budget: int, seconds: float) -> int:
    scale = min(max(_CALL_SECONDS / max(seconds, 1e-6), 0.5), 4.0)
    return int(min(max(budget * scale, 1), _MAX_CG_BUDGET))


def _relative(value: float, reference: float) -> float:
    if value == 0.0:
        return 0.0
    return value / reference if reference > 0.0 else math.inf
