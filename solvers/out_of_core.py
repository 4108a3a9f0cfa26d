"""Training on data larger than memory: block minimization over a ShardSource.

Yu, Hsieh, Chang & Lin, "Large linear classification when data cannot fit in memory"
(KDD 2010; TKDD 2012): the rows are split into blocks on disk (solvers/blocks.py); the
dual variables of all rows and w stay in memory (about 60 bytes a row and 8 a weight);
each outer pass reads every block once, in order (the next block read ahead by a thread,
the last one released behind), and optimises the block's dual variables by DCD sweeps
while the others wait. The per-row step is the in-memory solver's own:

- `dcd` (L1 and L2 loss, solvers/dcd.py): selective block minimization (Chang & Roth,
  KDD 2011; solvers/selective.py): up to `block_sweeps` sweeps of one random permutation
  of the block's active variables and the cached informative rows (the support vectors
  nearest the margin, kept in memory across blocks) interleaved, until their
  projected-gradient extremes satisfy the stop rule or fall to `inner_fraction` of the
  first sweep's; the cache is then chosen again. The cache is a quarter of
  max_block_bytes (`cache_share`) and the blocks the rest (two blocks resident and the
  cache twice while it is chosen: two blocks' bytes in all); at the yahoo-korea shape a
  quarter took half the sweeps' CPU of a half in the same 12 passes (the cached rows are
  swept with every block: a cache of half a block doubled each block's sweeps).
  Interleaved, the cached rows move the regularised bias's weight
  between blocks, which a block's own sweeps cannot (block minimization alone stalls on
  it): on a 3,000-row set in 13 blocks the L1 loss certified in 14 passes (the in-memory
  fit: 41 sweeps), against 91 with the cache swept after the block and 666 without it;
  `selective=False` reads whole blocks and keeps no cache. Shrinking carries across
  blocks and passes: a variable shrunk stays out (a mask of all rows) until the active
  set is reset; the thresholds of a block's first sweep are the previous pass's extremes
  (those of its first sweeps over all blocks), those of its later sweeps the block's
  previous sweep's, as LIBLINEAR updates them sweep by sweep. Stop rule: after a pass,
  the extremes of its first sweeps satisfy LIBLINEAR's test (spread, |PGmax|, |PGmin| <=
  eps); with some variables shrunk, the active set is reset and one pass without any
  shrinking must agree.
- `tron` (L2 loss, logistic): solvers/streaming_tron.py, each function, gradient and
  Hessian-vector product a streaming pass.
- `logistic_dcd` (solvers/logistic_dual.py): its step on two blocks at a time, one sweep
  of their rows in one permutation, the pairs drawn anew by each pass's block order
  (LOGISTIC_GROUP); the start a_i = min(1e-3 C_i, 1e-8) costs one pass (w(a) of the
  start); the stop rule is the largest |g'| of the pass < eps.

The certificate is the in-memory one (solvers/certificate.py `certify`): after the solver
stops, one streaming pass computes P(w), the lower bounds from w alone (`bounds_at`: the
dual point from the slacks, the gradient bound) and with the solver's dual value -D(a)
(known from a and w) the best of them; `converged` is relative gap <= tol, nothing else.
When the solver's own rule held without the certificate, it continues from its dual point
with eps / 10 (the in-memory fallback's first step) up to continuation.MAX_STEPS steps.
Every pass is counted: `passes` (fit and certificate), `certificate_passes`, `bytes_read`.

Control: progress events between the sweeps of a block (at most every progress interval),
so cancellation and max_seconds act within a block.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers import _out_of_core_kernels as kernels
from solvers import dual_cd, logistic_dual, streaming_tron
from solvers.backbone import (
    BinarySolution,
    CsrArrays,
    LinearProblem,
    ProgressCallback,
    ProgressMonitor,
    seed_state,
    worst_exit,
)
from solvers.block_certificate import block_rows as _rows
from solvers.block_certificate import certificate_threads, certify_pass
from solvers.blocks import Blocks, Reader
from solvers.certificate import Certificate
from solvers.continuation import MAX_STEPS, MIN_EPS
from solvers.inputs import TrainingSet, class_weights
from solvers.objectives import _qbar_diagonal_kernel, dual_box
from solvers.params import ParamError, validate_params
from solvers.result import FitResult
from solvers.selective import train_block
from solvers.shards import ShardSource

SOLVERS = ("dcd", "logistic_dcd", "tron")  # those with an out-of-core path
# a block's sweeps at most: 46,055 x 305,294 in 40 blocks took 12 passes, 10 sweeps 20
# passes of more sweeps each (times: bench/results/out_of_core.md)
DEFAULT_BLOCK_SWEEPS = 3
DEFAULT_INNER_FRACTION = 0.1  # a block's sweeps stop at this share of its first violation
DEFAULT_CACHE_SHARE = 0.25  # of max_block_bytes: the selective cache; the blocks the rest
CERTIFY_EVERY = 5  # passes between two certificates while the stop rule does not hold
# logistic_dcd sweeps the blocks two at a time (blocks of half the planned bytes): over a
# fixed partition of the rows, one sweep a block (a whole sweep of the rows a pass, only
# each block's rows kept together) took 10 passes to a relative gap of 8.2e-4 on the
# 46,055-row text set in 19 blocks, and 37 at the yahoo-korea shape, where one random
# permutation of all rows takes 4; pairs drawn anew each pass (the blocks' random order)
# reach 4e-4 in 5 passes in 20 blocks
LOGISTIC_GROUP = 2


@dataclass
class _Output:
    """One binary problem over all rows: labels, costs, dual variables and w."""

    y: np.ndarray
    cost: np.ndarray
    bias_scale: float
    n_features: int
    w: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.w = np.zeros(self.n_features + 1)

    @property
    def n_weights(self) -> int:
        return self.n_features + (1 if self.bias_scale > 0 else 0)


class _Run:
    """What the outputs of one fit share: the reader, the monitor, the counters."""

    def __init__(self, reader: Reader, monitor: ProgressMonitor, block_sweeps: int,
                 cache_bytes: int = 0, inner_fraction: float = DEFAULT_INNER_FRACTION
                 ) -> None:
        self.reader = reader
        self.monitor = monitor
        self.block_sweeps = block_sweeps
        self.inner_fraction = inner_fraction
        self.cache_bytes = cache_bytes
        self.certificate_passes = 0
        self.index = np.zeros(max((b.rows for b in reader.blocks.blocks), default=1),
                              dtype=np.int64)
        self.threads = certificate_threads()
        self.pool = concurrent.futures.ThreadPoolExecutor(
            max(self.threads - 1, 1), thread_name_prefix="certificate")

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    def order(self, rng: np.ndarray) -> list[int]:
        """The blocks' order for a pass: a random permutation (each block is still read
        sequentially; in the order on disk, a cyclic block order, the passes needed grow
        several-fold with the number of blocks)."""
        count = len(self.reader.blocks)
        keys = [int(kernels.next_below(rng, 1 << 30)) for _ in range(count)]
        return sorted(range(count), key=keys.__getitem__)

    def interrupted(self, iteration: int, block: int, violation: float,
                    active: Callable[[], int], dual: Callable[[], float]) -> str | None:
        """max_seconds, cancelled (a due progress event asked to stop) or None."""
        return self.monitor.interruption(
            lambda: self.event(iteration, block, violation, active(), dual()))

    def event(self, iteration: int, block: int, violation: float, active: int,
              dual: float) -> dict[str, Any]:
        return {"iteration": iteration, "block": block, "blocks": len(self.reader.blocks),
                "passes": self.reader.passes, "bytes_read": self.reader.bytes_read,
                "violation": violation, "active_size": active, "primal": None,
                "dual": dual, "gap": None}


# -- dcd -------------------------------------------------------------------------------

class _DcdState:
    def __init__(self, out: _Output, loss: str, seed: int) -> None:
        n = out.y.shape[0]
        self.out, self.loss = out, loss
        self.upper, self.diag = dual_box(out.cost, loss)
        self.qbar = np.full(n, math.nan)
        self.alpha = np.zeros(n)
        self.margin = np.zeros(n)  # y_i w.z_i at row i's latest visit (solvers/selective.py)
        self.mask = np.ones(n, dtype=np.uint8)
        self.rng = np.array([seed_state(seed)], dtype=np.uint64)
        self.iteration = 0
        self.cache: Any = None  # solvers/selective.py Cache, once the first block is read

    def active(self) -> int:
        return int(self.mask.sum())

    def dual(self) -> float:
        w = self.out.w[: self.out.n_weights]
        value = float(self.alpha.sum()) - 0.5 * float(w @ w)
        if self.loss == "l2":
            value -= 0.25 * float(np.sum(self.alpha * self.alpha / self.out.cost))
        return value


def _dcd_solve(run: _Run, state: _DcdState, eps: float, max_iter: int, tol: float,
               certified: Callable[[], Certificate]) -> tuple[str, float]:
    """Block-minimization passes until the stop rule, max_iter (passes), the monitor or
    `certified()` (asked every CERTIFY_EVERY passes: the certificate at the current
    w); (exit reason, violation)."""
    out, n = state.out, state.alpha.shape[0]
    pg_max_old, pg_min_old = math.inf, -math.inf
    violation = math.inf
    confirming = False
    state.mask[:] = 1
    start_iteration = state.iteration
    while True:
        if state.iteration - start_iteration >= max_iter:
            return "max_iter", violation
        pass_max, pass_min = -math.inf, math.inf
        for block, shard in run.reader.one_pass(run.order(state.rng)):
            lo, hi = block.first_row, block.first_row + block.rows
            rows = _rows(shard)
            if hi > lo and math.isnan(state.qbar[lo]):
                _qbar_diagonal_kernel(rows[0], rows[2], state.diag[lo:hi], out.bias_scale,
                                      state.qbar[lo:hi])
                if not np.all(np.isfinite(state.qbar[lo:hi])):
                    raise ValueError("some rows of X have a squared norm that is not a "
                                     "finite float64 (overflow or NaN); scale the features")
            low, high = (math.inf, -math.inf) if confirming else (pg_max_old, pg_min_old)
            status, top, bottom, stop = train_block(run, state, block, rows, eps, low, high,
                                                    confirming, violation)
            if status == dual_cd.NON_FINITE:
                return "numerical_error", math.nan
            pass_max, pass_min = max(pass_max, top), min(pass_min, bottom)
            if stop is not None:
                return stop, violation
        state.iteration += 1
        spread = pass_max - pass_min
        violation = max(spread, abs(pass_max), abs(pass_min))
        if spread <= eps and pass_max <= eps and pass_min >= -eps:
            if confirming or int(state.mask.sum()) == n:
                return "converged", violation
            state.mask[:] = 1  # one pass without shrinking must confirm
            confirming = True
            continue
        confirming = False
        if ((state.iteration - start_iteration) % CERTIFY_EVERY == 0
                and certified().holds(tol)):
            return "converged", violation
        pg_max_old = pass_max if pass_max > 0.0 else math.inf
        pg_min_old = pass_min if pass_min < 0.0 else -math.inf
        stop = run.interrupted(state.iteration, len(run.reader.blocks), violation,
                               state.active, state.dual)
        if stop is not None:
            return stop, violation


# -- logistic_dcd ----------------------------------------------------------------------

class _LogisticState:
    def __init__(self, run: _Run, out: _Output, seed: int) -> None:
        n = out.y.shape[0]
        self.out = out
        self.alpha = logistic_dual._start(out.cost, None)
        self.norms = np.zeros(n)
        self.rng = np.array([seed_state(seed)], dtype=np.uint64)
        self.iteration = 0
        self.inner_eps = logistic_dual.INNER_EPS_START
        self.index = np.zeros(LOGISTIC_GROUP * run.index.shape[0], dtype=np.int64)
        for block, shard in run.reader.one_pass():  # w(a) of the start, and |z_i|^2
            lo, hi = block.first_row, block.first_row + block.rows
            rows = _rows(shard)
            kernels.add_rows(rows, out.y[lo:hi] * self.alpha[lo:hi, 0], out.bias_scale,
                             out.w)
            _qbar_diagonal_kernel(rows[0], rows[2], np.zeros(hi - lo), out.bias_scale,
                                  self.norms[lo:hi])

    def active(self) -> int:
        return int(self.alpha.shape[0])

    def dual(self) -> float:
        w = self.out.w[: self.out.n_weights]
        cost = self.out.cost
        return -0.5 * float(w @ w) - (float(kernels.entropy_sum(self.alpha))
                                      - float(np.sum(cost * np.log(cost))))


def _logistic_solve(run: _Run, state: _LogisticState, eps: float, max_iter: int,
                    tol: float, certified: Callable[[], Certificate]) -> tuple[str, float]:
    """Passes of one sweep over each pair of blocks (LOGISTIC_GROUP: two consecutive
    blocks of the pass's random order, their rows in one permutation, so the pairs change
    from pass to pass) until the stop rule (the largest |g'| of the pass < eps, as the
    in-memory solver's sweep), max_iter (passes), the monitor or `certified()` (the
    certificate at w, a pass: after CERTIFY_EVERY passes, and after a failed one as soon
    as the dual's rate says its gap is below tol: `next_certificate`)."""
    out, n = state.out, state.alpha.shape[0]
    inner_eps_min = min(1e-8, eps)
    violation = math.inf
    start_iteration = state.iteration
    firsts = np.zeros(3, dtype=np.int64)
    duals = [state.dual()]
    due = start_iteration + CERTIFY_EVERY
    while True:
        if state.iteration - start_iteration >= max_iter:
            return "max_iter", violation
        largest, steps = 0.0, 0
        for group in run.reader.groups(run.order(state.rng), LOGISTIC_GROUP):
            block, shard = group[0]
            rows = _rows(shard)
            other = _rows(group[1][1]) if len(group) > 1 else rows
            firsts[:] = (block.first_row, group[-1][0].first_row,
                         group[1][0].rows if len(group) > 1 else 0)
            top, newton = kernels.logistic_pair_sweep(
                rows, other, firsts, out.y, out.cost, state.norms, state.alpha, out.w,
                state.index, state.rng, (out.bias_scale, state.inner_eps))
            if not math.isfinite(top):
                return "numerical_error", math.nan
            largest, steps = max(largest, top), steps + newton
            stop = run.interrupted(state.iteration, block.index, violation,
                                   state.active, state.dual)
            if stop is not None:
                return stop, violation
        state.iteration += 1
        violation = largest
        if violation < eps:
            return "converged", violation
        duals.append(state.dual())
        if state.iteration >= due:
            certificate = certified()
            if certificate.holds(tol):
                return "converged", violation
            due = state.iteration + next_certificate(certificate.relative_gap, tol, duals)
        if steps <= n // 10:
            state.inner_eps = max(inner_eps_min, 0.1 * state.inner_eps)
        stop = run.interrupted(state.iteration, len(run.reader.blocks), violation,
                               state.active, state.dual)
        if stop is not None:
            return stop, violation


def next_certificate(relative_gap: float, tol: float, duals: list[float]) -> int:
    """Passes until the next certificate after one with `relative_gap` > tol: as many as
    the dual's last rate (the ratio of its last two increases, duals[-3:]) takes the gap
    to tol, in 1..CERTIFY_EVERY (CERTIFY_EVERY when the rate is not below 1)."""
    if len(duals) < 3:
        return CERTIFY_EVERY
    later, earlier = duals[-1] - duals[-2], duals[-2] - duals[-3]
    if not (earlier > 0.0 and 0.0 <= later < earlier) or not relative_gap > tol:
        return CERTIFY_EVERY
    if later == 0.0:
        return 1
    passes = math.log(tol / relative_gap) / math.log(later / earlier)
    return int(min(max(math.ceil(passes), 1), CERTIFY_EVERY))


# -- one output: solver passes, the certificate, continuation ------------------------------

Step = Callable[[float, int], tuple[str, float, Certificate, int]]


def _continued(step: Step, solver: str, applied: dict[str, Any], restart: str
               ) -> tuple[str, float, Certificate, list[dict[str, Any]]]:
    """Run `step(eps, max_iter)` -> (exit, violation, certificate, iterations), and again
    with eps / 10 (from where it stopped: `restart` says from what) while its stop rule
    holds without the certificate, up to continuation.MAX_STEPS steps, as in memory;
    (exit: "stalled" for a stop rule never certified, violation, certificate, path)."""
    tol, eps, max_iter = float(applied["tol"]), float(applied["eps"]), int(applied["max_iter"])
    path: list[dict[str, Any]] = []
    reason = "requested"
    while True:
        started = time.perf_counter()
        exit_reason, violation, certificate, taken = step(eps, max_iter)
        path.append({"solver": solver, "exit": exit_reason, "iterations": taken,
                     "seconds": time.perf_counter() - started,
                     "relative_gap": certificate.relative_gap, "reason": reason,
                     "mode": "blocks"})
        max_iter -= taken
        if (certificate.holds(tol) or exit_reason != "converged" or len(path) >= MAX_STEPS
                or eps / 10.0 < MIN_EPS or max_iter <= 0 or not applied.get("fallback", True)):
            break
        eps /= 10.0
        reason = (f"{solver}'s stop rule held at eps {eps * 10:g} without a certificate: "
                  f"continued from {restart} with eps / 10")
    if exit_reason == "converged" and not certificate.holds(tol):
        exit_reason = "stalled"
    return exit_reason, violation, certificate, path


def _certificate_details(certificate: Certificate, tol: float) -> dict[str, Any]:
    return {"converged": certificate.holds(tol), "relative_gap": certificate.relative_gap,
            "certified_gap": certificate.gap, "lower_bound": certificate.lower_bound,
            "bound": certificate.source, "tol": tol}


def _tron_output(run: _Run, out: _Output, applied: dict[str, Any]) -> BinarySolution:
    """tron out of core (solvers/streaming_tron.py), certified by one pass, continued
    with eps / 10 from w while its stop rule holds without the certificate."""
    loss, tol = str(applied["loss"]), float(applied["tol"])
    counts: dict[str, float] = {}
    passes_before = run.reader.passes

    def step(eps: float, max_iter: int) -> tuple[str, float, Certificate, int]:
        before = int(counts.get("newton_steps", 0))
        exit_reason, violation = streaming_tron.solve(run, out, loss, eps, tol, max_iter,
                                                      counts)
        certificate = (Certificate(math.inf, -math.inf, "none") if exit_reason == "cancelled"
                       else certify_pass(run, out, loss, -math.inf))
        return exit_reason, violation, certificate, int(counts["newton_steps"]) - before

    exit_reason, violation, certificate, path = _continued(step, "tron", applied, "w")
    return BinarySolution(
        w=out.w[: out.n_weights].copy(), iterations=int(counts["newton_steps"]),
        exit_reason=exit_reason, primal=certificate.primal, violation=violation,
        details={"active_size": out.y.shape[0], "path": path,
                 **_certificate_details(certificate, tol), "solver": "tron", "loss": loss,
                 "newton_steps": int(counts["newton_steps"]),
                 "cg_iterations": int(counts["cg_iterations"]),
                 "passes": run.reader.passes - passes_before})


def _solve_output(run: _Run, solver: str, out: _Output, applied: dict[str, Any]
                  ) -> BinarySolution:
    if solver == "tron":
        return _tron_output(run, out, applied)
    loss = "logistic" if solver == "logistic_dcd" else str(applied["loss"])
    tol = float(applied["tol"])
    state: _DcdState | _LogisticState
    passes_before = run.reader.passes
    state = (_LogisticState(run, out, int(applied["seed"])) if loss == "logistic"
             else _DcdState(out, loss, int(applied["seed"])))
    latest: list[Certificate] = []
    duals = [-math.inf]

    def certified() -> Certificate:  # the certificate at the current w: one pass
        latest[:] = [certify_pass(run, out, loss, state.dual())]
        return latest[0]

    def step(eps: float, max_iter: int) -> tuple[str, float, Certificate, int]:
        before = state.iteration
        latest.clear()
        if isinstance(state, _LogisticState):
            exit_reason, violation = _logistic_solve(run, state, eps, max_iter, tol,
                                                     certified)
        else:
            exit_reason, violation = _dcd_solve(run, state, eps, max_iter, tol, certified)
        dual = duals[0] = state.dual() if exit_reason != "numerical_error" else -math.inf
        if exit_reason == "cancelled":
            certificate = Certificate(math.inf, -math.inf, "none")
        elif latest and state.iteration > before and latest[0].holds(tol):
            certificate = latest[0]  # computed at this w, after the last pass
        else:
            certificate = certify_pass(run, out, loss, dual)
        return exit_reason, violation, certificate, state.iteration - before

    exit_reason, violation, certificate, path = _continued(step, solver, applied,
                                                           "its dual point")
    alpha = state.alpha if isinstance(state, _DcdState) else state.alpha[:, 0].copy()
    primal, dual = certificate.primal, duals[0]
    return BinarySolution(
        w=out.w[: out.n_weights].copy(), iterations=state.iteration, exit_reason=exit_reason,
        primal=primal, dual=dual, gap=primal - dual, violation=violation, alpha=alpha,
        details={"active_size": int(state.mask.sum()) if isinstance(state, _DcdState)
                 else out.y.shape[0], "n_support": int(np.count_nonzero(alpha)),
                 "path": path, **_certificate_details(certificate, tol), "solver": solver,
                 "passes": run.reader.passes - passes_before},
    )


# -- the fit -----------------------------------------------------------------------------

def fit_blocks(source: ShardSource, solver: str = "dcd", *, max_block_bytes: int,
               progress: ProgressCallback | None = None, progress_interval: float = 0.2,
               use_weights: bool = True, block_sweeps: int = DEFAULT_BLOCK_SWEEPS,
               selective: bool = True, inner_fraction: float = DEFAULT_INNER_FRACTION,
               cache_share: float = DEFAULT_CACHE_SHARE, **params: Any) -> FitResult:
    """Train `solver` (one of SOLVERS) on the rows of `source`, read in blocks of at most
    `max_block_bytes`; the FitResult of solvers.train.fit, with `data_plan` (mode
    "blocks", blocks, passes, certificate_passes, bytes_read, max_block_bytes (of the
    blocks read), cache_bytes (0: no selective cache)).
    `use_weights`: the shards' per-row weights w (when they have them) multiply C_i."""
    if solver not in SOLVERS:
        raise ParamError(f"solver {solver!r} has no out-of-core path; these do: "
                         f"{', '.join(SOLVERS)}", "solver")
    t0 = time.perf_counter()
    applied = validate_params(solver, params)
    if applied.get("bias") not in ("augment", "none"):
        raise ParamError("out of core: bias must be 'augment' or 'none'", "bias")
    if applied.get("method", "line_search") != "line_search":
        raise ParamError("out of core, tron runs its line search (method 'line_search')",
                         "method")
    cache_bytes = 0
    if (solver == "dcd" and selective
            and sum(source.info(i).nbytes for i in range(len(source))) > max_block_bytes):
        # two blocks (trained, read ahead) of (1 - cache_share) and the cache, twice
        # while it is chosen again, of cache_share: two blocks of max_block_bytes in all
        cache_bytes = int(max_block_bytes * cache_share)
    if cache_bytes:
        block_bytes = max_block_bytes - cache_bytes
    elif solver == "logistic_dcd":  # a pair trained, a pair read ahead
        block_bytes = max(1, max_block_bytes // LOGISTIC_GROUP)
    else:
        block_bytes = max_block_bytes
    blocks = Blocks(source, block_bytes)
    if cache_bytes:
        # no larger than the largest block: the cache is swept with every block, and a
        # dataset stored in shards smaller than the budget's blocks is read a shard a block
        # (a 1e9-non-zero import, 256 shards of 47 MB with an 869 MB plan, swept a cache of
        # 434 MB with each of them: 18 times the block's non-zeros, and its first pass
        # did not end within 1,400 s)
        cache_bytes = min(cache_bytes, max(block.nbytes for block in blocks.blocks))
    reader = Reader(blocks)
    run: _Run | None = None
    try:
        labels, weights, label_bytes = blocks.labels()
        reader.bytes_read += label_bytes
        classes, label_index = np.unique(labels, return_inverse=True)
        if classes.shape[0] < 2:
            raise ValueError(f"training needs at least two classes; y has only the label "
                             f"{classes[0]:g}")
        cost = float(applied["C"]) * class_weights(classes, applied.get("class_weight"))[
            label_index]
        if use_weights and weights is not None:
            if np.any(weights <= 0) or not np.all(np.isfinite(weights)):
                raise ValueError("out of core: every row weight must be a finite number > 0")
            cost = cost * weights
        bias_scale = float(applied["bias_scale"]) if applied["bias"] == "augment" else 0.0
        positives = [1] if classes.shape[0] == 2 else list(range(classes.shape[0]))
        monitor = ProgressMonitor(progress, applied.get("max_seconds"),
                                  n_classes=len(positives), interval=progress_interval)
        run = _Run(reader, monitor, block_sweeps, cache_bytes, inner_fraction)
        validate_s = time.perf_counter() - t0
        solutions: list[BinarySolution] = []
        for k, positive in enumerate(positives):
            out = _Output(np.where(label_index == positive, 1.0, -1.0), cost, bias_scale,
                          blocks.n_features)
            monitor.class_index = k
            started = time.perf_counter()
            if solutions and solutions[-1].exit_reason in ("cancelled", "max_seconds"):
                solution = _untrained(out, solutions[-1].exit_reason, float(applied["tol"]))
            else:
                solution = _solve_output(run, solver, out, applied)
            solution.details["train_seconds"] = time.perf_counter() - started
            solutions.append(solution)
    finally:
        reader.close()
        if run is not None:
            run.close()
    assert run is not None
    return _result(solver, applied, classes, label_index, cost, bias_scale, blocks, run,
                   solutions, validate_s, time.perf_counter() - t0 - validate_s)


def _untrained(out: _Output, reason: str, tol: float) -> BinarySolution:
    primal = math.inf
    return BinarySolution(w=np.zeros(out.n_weights), iterations=0, exit_reason=reason,
                          primal=primal, dual=0.0, gap=primal,
                          details={"path": [], "converged": False, "relative_gap": 1.0,
                                   "certified_gap": math.inf, "tol": tol})


def _result(solver: str, applied: dict[str, Any], classes: np.ndarray,
            label_index: np.ndarray, cost: np.ndarray, bias_scale: float, blocks: Blocks,
            run: _Run, solutions: list[BinarySolution], validate_s: float,
            solve_s: float) -> FitResult:
    from solvers.train import LINEAR

    n = label_index.shape[0]
    stub = CsrArrays(np.zeros(0), np.zeros(0, dtype=np.int32), np.zeros(1, dtype=np.int64),
                     blocks.n_features)
    data = TrainingSet(stub, classes, label_index, np.ones(classes.shape[0]))
    problems = [LinearProblem(stub, np.ones(n), cost, bias_scale)]
    timings = {"validate_s": validate_s, "solve_s": solve_s,
               "progress_s": run.monitor.progress_seconds}
    result = LINEAR.result(solver, data, problems, solutions, applied, timings)
    result.exit_reason = worst_exit(s.exit_reason for s in solutions)
    result.dual_solutions = [s.alpha for s in solutions]
    result.data_plan = {"mode": "blocks", "blocks": len(blocks),
                        "passes": run.reader.passes,
                        "certificate_passes": run.certificate_passes,
                        "bytes_read": run.reader.bytes_read,
                        "max_block_bytes": blocks.max_block_bytes,
                        "cache_bytes": run.cache_bytes}
    return result


def accuracy_pass(result: FitResult, source: ShardSource, max_block_bytes: int
                  ) -> tuple[float, int]:
    """(accuracy of result's model on the rows of `source`, bytes read): one pass."""
    blocks = Blocks(source, max_block_bytes)
    reader = Reader(blocks)
    correct = 0
    try:
        for _, shard in reader.one_pass():
            correct += int(np.count_nonzero(result.predict(shard.X) == shard.y))
    finally:
        reader.close()
    return correct / max(blocks.n_rows, 1), reader.bytes_read


def warmup() -> None:
    """Compile (or load from the cache) the out-of-core kernels (solvers.train's warm-up
    group "other")."""
    import scipy.sparse as sp

    from solvers.shards import MemoryShards, split_rows

    X = sp.csr_matrix(np.round(np.random.default_rng(0).normal(size=(12, 3)), 2))
    y = np.array([1.0, -1.0, 1.0] * 4)
    source = MemoryShards(split_rows(X, y, None, 5), 3)
    variants: tuple[tuple[str, dict[str, Any]], ...] = (
        ("dcd", {"loss": "l1"}), ("dcd", {"loss": "l2", "bias": "none"}), ("logistic_dcd", {}),
        ("tron", {"loss": "l2"}), ("tron", {"loss": "logistic"}))
    for solver, params in variants:
        fit_blocks(source, solver, max_block_bytes=1 << 20, **params)
