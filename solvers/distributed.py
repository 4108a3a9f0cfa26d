"""One linear model trained data-parallel on a Dask cluster (`distributed`).

The driver (the process that calls `fit_on_dask`: the Celery worker that claimed the job,
a test, a benchmark) is a Dask client; solvers/dask_rounds.py places one block of the
dataset's shards on each Dask worker, runs rounds of one task per block and counts what
they cost; solvers/_distributed_tasks.py is what the workers run, with the compiled
kernels of tron, dcd and ocas. The driver only sums vectors (in block order) and does the
O(d) vector work of the method (and, for ocas, an O(rows) line search).

- `tron` (loss "l2" or "logistic"): MPI-LIBLINEAR's distributed Newton method (Zhuang,
  Chin, Juan & Lin 2015) with solvers/tron.py's line-search variant (the default there):
  each block computes its part of f(w), of the gradient and of diag(H) (one round per
  Newton step), of each Hessian-vector product of the preconditioned CG (one round per CG
  step) and of the loss changes of the 20 trial steps of the line search (one round).
  The CG stop rule, the Armijo rule, LIBLINEAR's stop test and the gradient certificate
  ||grad f||^2 <= 2 tol f are tron's, so the iterates are the single-host ones up to
  summation order (f and the gradient are recomputed exactly at each iterate; tron
  carries the margins of w + a s over).
- `dcd` (loss "l1", the hinge): CoCoA+ (Jaggi et al. 2014; Ma et al. 2015: adding, the
  subproblem scaled by sigma' = K blocks): each block runs `local_sweeps` passes of dual
  coordinate descent on its rows' subproblem from (w, alpha_[k]) and returns dw_[k] and
  alpha_[k]; w += sum_k dw_[k]. Then the transfer steps (`_CoCoA.transfer`): each block
  also returns e_k (y_i on its free coordinates) and its change of w; the driver moves
  alpha_[k] += t_k e_k by the exact maximiser t of the dual, a box QP in K variables. The
  subproblems count a feature that every block shares (the regularised bias) K times, so
  they cannot shift its weight from one block's rows to another's; the steps do (bias
  "augment" took over 2,000 rounds to certify without them on the tests' set, as many as
  without a bias with them). The driver holds alpha (8 bytes a row) and w = w(alpha),
  so a round lost with a worker is run again from the same state. Each round's tasks
  first sum the hinge losses at the w they receive, which gives P(w) and the dual
  D(alpha) = sum alpha - ||w||^2 / 2 of the iterate: `converged` means P - D <= tol P
  for the returned (w, alpha) (that round's updates are then not applied). `eps` is not
  used: the certificate is the stop rule. Its rate on the hinge loss is sublinear: on
  the yahoo-korea shape it stalled near a relative gap of 2.6e-3 (tol 1e-3).
- `ocas` (loss "l1", the hinge): solvers/ocas.py's OCAS (Franc & Sonnenburg 2008, whose
  Section 3.1 parallelises the same three passes over the rows), two rounds an iteration
  (`_Ocas`): (A) the reduced problem's solution w_t goes out with each block's outputs
  y_i w_best.x_i, the block's outputs at w_t come back, and the driver runs ocas.py's
  exact line search over every row's breakpoint (8 bytes a row each way); (B) the step
  k goes out, each block moves its outputs to the new w_best and returns its part of
  the cutting plane at w_c = 0.9 w_best + 0.1 w_t (sum of C_i y_i (x_i, B) over its
  violators, int32 indices and values when that is smaller than dense), their sum of
  C_i and its hinge loss at the new w_best. The driver sums the parts in block order,
  adds the plane (`_Planes`: sparse where smaller; a plane whose QP weight has been 0
  for PRUNE_AFTER solves is dropped, as any subset of cutting planes still bounds the
  risk from below; over `planes_bytes` (PLANES_BYTES, 256 MiB) the older half of the
  planes in use is merged into their weighted mean, itself a cutting plane, until they
  fit;
  `peak_planes_bytes` in the details) and solves the reduced dual QP (ocas.py's
  `_qp_simplex`), whose value is a proven lower bound of the optimum.
  `converged` means P(w_best) - that bound <= tol P(w_best), with P(w_best) summed again
  from the rows in one last round (not after a cancel). The driver holds both outputs
  of every row (16 bytes a row), so a block's state lost with its worker is made again
  from them and the round run again gives the same model. `eps` is not used. On a
  46k x 300k text-like set, two local workers: 84 iterations (170 rounds, 5.2 MB a
  round) to certify where CoCoA+ took 636 rounds (15.2 MB a round);
  bench/results/distributed_ocas.md.

The result records `data_plan` (solvers/dask_rounds.py Cluster.plan): workers, blocks,
shards, rounds, bytes sent both ways (numpy payloads; Dask's own messages not counted),
and the seconds spent in communication (a round's wall time less its slowest task).
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from solvers import _distributed_tasks as tasks
from solvers import _tron_kernels as kernels
from solvers import ocas, parallel
from solvers.backbone import ProgressCallback, ProgressMonitor
from solvers.dask_rounds import Cluster, DistributedFitError
from solvers.models import LinearModel
from solvers.params import SOLVERS as REGISTRY
from solvers.pcg import cg_step
from solvers.result import FitResult
from solvers.shards import ShardSource

__all__ = ["SOLVERS", "DistributedFitError", "fit_on_dask"]

# what it trains (solver -> losses), from the registry (SolverSpec.distributed_losses)
SOLVERS = {name: spec.distributed_losses for name, spec in REGISTRY.items()
           if spec.distributed_losses}
ALPHA_PCG, EPS_CG, ETA_LINE_SEARCH = 0.01, 0.5, 0.01  # tron's constants


@dataclass
class Outcome:
    w: np.ndarray  # n_features + 1 entries: the bias feature's weight last (0 without)
    exit_reason: str
    iterations: int
    primal: float
    lower_bound: float  # proven: the dual value (dcd, ocas: the reduced problem's) or
    # f - ||grad f||^2 / 2 (tron)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def relative_gap(self) -> float:
        if not (math.isfinite(self.primal) and math.isfinite(self.lower_bound)):
            return math.inf
        return max(self.primal - self.lower_bound, 0.0) / max(abs(self.primal), 1e-300)


@contextlib.contextmanager
def _client(client: Any, timeout: float) -> Iterator[Any]:
    """The given distributed.Client, or one connected to an address for the block."""
    if not isinstance(client, str):
        yield client
        return
    from distributed import Client

    try:
        connected = Client(client, timeout=timeout, set_as_default=False)
    except Exception as exc:
        raise DistributedFitError(f"cannot reach the Dask scheduler {client}: {exc}") from exc
    try:
        yield connected
    finally:
        with contextlib.suppress(Exception):
            connected.close(timeout=10)


def fit_on_dask(client: Any, source: ShardSource, *, solver: str = "tron",
                loss: str | None = None, C: float = 1.0, bias: str = "augment",
                bias_scale: float = 1.0, eps: float = 0.01, tol: float = 1e-3,
                max_iter: int = 1000, max_seconds: float | None = None,
                progress: ProgressCallback | None = None, progress_interval: float = 0.2,
                threads: int = 1, local_sweeps: int = 1, seed: int = 0,
                round_timeout: float = 600.0, round_retries: int = 3,
                connect_timeout: float = 30.0, weighted: bool = True,
                planes_bytes: int | None = None) -> FitResult:
    """Train a binary linear model on the shards of `source`, on the Dask cluster of
    `client` (a distributed.Client, or a scheduler address such as tcp://host:8786).

    The rows of `source` must have two label values; the model's output is positive for
    the larger (as solvers.fit). `threads`: Numba threads per task on a worker;
    `weighted`: C_i = C w_i with the shards' instance weights (when they have them);
    `planes_bytes`: ocas's budget for the cutting planes the driver keeps (PLANES_BYTES,
    256 MiB, when None; over it planes are merged, which costs iterations)."""
    if solver not in SOLVERS:
        raise ValueError(f"distributed solvers are {sorted(SOLVERS)}, got {solver!r}")
    loss = loss or SOLVERS[solver][0]
    if loss not in SOLVERS[solver]:
        raise ValueError(f"distributed {solver} solves the loss(es) {SOLVERS[solver]}, "
                         f"got loss={loss!r}"
                         + ("; for the hinge loss use dcd" if solver == "tron" else
                            "; for the squared hinge or logistic loss use tron"))
    if not (C > 0 and eps > 0 and tol > 0 and max_iter >= 1):
        raise ValueError("C, eps and tol must be > 0 and max_iter >= 1")
    scale = float(bias_scale) if bias == "augment" else 0.0
    started = time.perf_counter()
    with _client(client, connect_timeout) as dask_client:
        cluster = Cluster(dask_client, source, threads=threads, round_timeout=round_timeout,
                          round_retries=round_retries)
        try:
            classes = np.unique(np.concatenate([f["labels"] for f in cluster.facts]))
            if classes.shape[0] != 2:
                raise ValueError(f"a distributed fit trains a binary problem; the dataset "
                                 f"has {classes.shape[0]} label value(s)")
            positives = sum(int(c) for f in cluster.facts
                            for v, c in zip(f["labels"], f["counts"], strict=True)
                            if v == classes[1])
            problems = cluster.submit_each(
                tasks.binary_problem, [(b, float(classes[1]), float(C), scale, weighted)
                                       for b in cluster.blocks], cluster.holders())
            monitor = ProgressMonitor(progress, max_seconds, interval=progress_interval)
            size = source.n_features + 1
            if solver == "tron":
                outcome = _Newton(cluster, problems, kernels.L2 if loss == "l2"
                                  else kernels.LOGISTIC).run(
                    size, (eps, tol), max_iter, monitor, positives)
            elif solver == "ocas":
                outcome = _Ocas(cluster, problems, size, planes_bytes).run(tol, max_iter,
                                                                         monitor)
            else:
                outcome = _CoCoA(cluster, problems, size, max(1, int(local_sweeps)),
                                 seed).run(tol, max_iter, monitor)
            plan = cluster.plan()
        finally:
            cluster.release()
    return _result(solver, loss, outcome, classes, source.n_features, scale, tol, plan,
                   time.perf_counter() - started,
                   {"C": C, "loss": loss, "bias": bias, "bias_scale": bias_scale, "eps": eps,
                    "tol": tol, "max_iter": max_iter, "threads": threads,
                    **({"local_sweeps": local_sweeps, "seed": seed} if solver == "dcd"
                       else {}),
                    **({"planes_bytes": planes_bytes or PLANES_BYTES} if solver == "ocas"
                       else {})})


def _result(solver: str, loss: str, outcome: Outcome, classes: np.ndarray, n_features: int,
            bias_scale: float, tol: float, plan: dict[str, Any], seconds: float,
            params: dict[str, Any]) -> FitResult:
    from solvers.train import _with_logistic_probabilities

    w = outcome.w
    intercept = float(w[n_features] * bias_scale) if bias_scale > 0 else 0.0
    linear = LinearModel(classes=classes.astype(np.float64), coef=w[None, :n_features].copy(),
                         intercept=np.array([intercept]))
    gap = max(outcome.primal - outcome.lower_bound, 0.0)
    relative = outcome.relative_gap
    converged = outcome.exit_reason == "converged" and relative <= tol
    warnings = [] if converged else [
        f"{solver} on Dask stopped ({outcome.exit_reason}) with a certified relative gap "
        f"of {relative:.3g}, above tol {tol:g}: the objective may still be that far "
        "from the optimum"]
    per_output = [{"positive_class": float(classes[1]), "primal_objective": outcome.primal,
                   "dual_objective": outcome.lower_bound, "duality_gap": gap,
                   "iterations": outcome.iterations, "exit_reason": outcome.exit_reason,
                   **outcome.details}]
    return FitResult(
        solver=solver, model=_with_logistic_probabilities(linear, loss),
        primal_objective=outcome.primal, dual_objective=outcome.lower_bound,
        duality_gap=gap, iterations=outcome.iterations, exit_reason=outcome.exit_reason,
        train_seconds=seconds, params=params, per_output=per_output, converged=converged,
        relative_gap=relative, tol=tol, warnings=warnings,
        path=[{"solver": solver, "exit": outcome.exit_reason,
               "iterations": outcome.iterations, "seconds": seconds,
               "relative_gap": relative, "reason": "distributed on Dask"}],
        dual_solutions=[None], data_plan=plan)


class _Newton:
    """tron's line-search Newton method with the data passes done by the blocks."""

    def __init__(self, cluster: Cluster, problems: list[Any], loss_kind: int) -> None:
        self.cluster, self.problems, self.loss_kind = cluster, problems, loss_kind
        self.w = np.zeros(0)
        self.states: list[Any] = []

    def _new_states(self) -> list[str | None]:
        where = self.cluster.holders()
        w_future = self.cluster.broadcast(self.w)
        self.states = self.cluster.submit_each(
            tasks.newton_state, [(p, w_future, self.loss_kind) for p in self.problems],
            where)
        return where

    def evaluate(self, w: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """f(w), grad f(w) and tron's preconditioner M at w (one round)."""
        self.w = w
        where = self._new_states()

        def resend() -> list[tuple[Any, ...]]:
            self._new_states()
            return [(s,) for s in self.states]

        parts = self.cluster.each(tasks.newton_parts, [(s,) for s in self.states],
                                  seconds=lambda r: float(r[4]), where=where, resend=resend)
        self.cluster.note_pids([int(p[5]) for p in parts])
        self.active = sum(int(p[3]) for p in parts)
        f = 0.5 * float(w @ w)
        grad, diag = w.copy(), np.zeros(w.shape[0])
        for loss, g, d, *_ in parts:
            f += float(loss)
            grad += g
            diag += d
        precond = (1.0 - ALPHA_PCG) + ALPHA_PCG * (1.0 + diag)
        return f, grad, precond

    def _round(self, function: Any, vector: np.ndarray, seconds: Any) -> list[Any]:
        v_future = self.cluster.broadcast(vector)

        def resend() -> list[tuple[Any, ...]]:
            self._new_states()
            fresh = self.cluster.broadcast(vector)
            return [(s, fresh) for s in self.states]

        return self.cluster.each(function, [(s, v_future) for s in self.states],
                                 seconds=seconds, resend=resend,
                                 where=self.cluster.holders())

    def hessian(self, d: np.ndarray) -> tuple[np.ndarray, float]:
        """H d and sum_A h_i (x_i.d)^2 (so d'Hd = d'd + that)."""
        parts = self._round(tasks.hessian_part, d, lambda r: float(r[2]))
        hd = d.copy()
        quadratic = 0.0
        for out, q, _ in parts:
            hd += out
            quadratic += q
        return hd, quadratic

    def line_changes(self, s: np.ndarray) -> np.ndarray:
        parts = self._round(tasks.line_search_part, s, lambda r: float(r[1]))
        total = np.zeros(tasks.LINE_SEARCH_HALVINGS)
        for changes, _ in parts:
            total += changes
        return total

    def run(self, size: int, stop: tuple[float, float], max_iter: int,
            monitor: ProgressMonitor, positives: int) -> Outcome:
        eps, tol = stop
        n = sum(int(f["rows"]) for f in self.cluster.facts)
        tolerance = eps * max(min(positives, n - positives), 1) / n
        w = np.zeros(size)
        f, grad, precond = self.evaluate(w)
        grad_norm = grad_norm0 = float(np.linalg.norm(grad))
        counts = {"iteration": 0, "cg": 0}
        stall: str | None = None

        def finish(reason: str) -> Outcome:
            lower = f - 0.5 * grad_norm * grad_norm
            if not (math.isfinite(f) and np.all(np.isfinite(w))):
                reason = "numerical_error"
            return Outcome(w.copy(), reason, counts["iteration"], f, lower, {
                "grad_norm": grad_norm, "grad_norm0": grad_norm0, "tolerance": tolerance,
                "violation": grad_norm / grad_norm0 if grad_norm0 > 0 else 0.0,
                "newton_steps": counts["iteration"], "cg_iterations": counts["cg"],
                "active_size": self.active, "stall": stall})

        def cancelled() -> bool:
            gap = 0.5 * grad_norm * grad_norm
            return monitor.event_due() and monitor.report(lambda: {
                "iteration": counts["iteration"], "primal": f, "dual": f - gap, "gap": gap,
                "violation": grad_norm / grad_norm0 if grad_norm0 > 0 else 0.0,
                "rounds": self.cluster.rounds})

        while True:
            if not (math.isfinite(grad_norm) and math.isfinite(f)):
                return finish("numerical_error")
            if grad_norm <= tolerance * grad_norm0 and grad_norm ** 2 <= 2.0 * tol * f:
                return finish("converged")
            if counts["iteration"] >= max_iter:
                return finish("max_iter")
            if monitor.out_of_time():
                return finish("max_seconds")
            if cancelled():
                return finish("cancelled")
            # preconditioned CG on H s = -g, newton.cpp's quadratic-model stop rule
            inverse = 1.0 / precond
            s = np.zeros(size)
            r = -grad
            z = r * inverse
            d = z.copy()
            ztr = float(z @ r)
            cg_tol = min(EPS_CG, math.sqrt(math.sqrt(ztr)))
            quadratic_model, dd, steps = 0.0, float(d @ d), 0
            while steps < max(size, 5):
                steps += 1
                hd, extra = self.hessian(d)
                dhd = dd + extra
                if not dhd > 0.0:
                    break
                z, znew_r, q_diff = cg_step(s, r, d, hd, dhd, ztr, inverse)
                quadratic_model += q_diff
                if steps * q_diff >= cg_tol * quadratic_model:
                    break
                d = z + (znew_r / ztr) * d
                dd, ztr = float(d @ d), znew_r
                if monitor.out_of_time():
                    counts["cg"] += steps
                    return finish("max_seconds")
                if cancelled():
                    counts["cg"] += steps
                    return finish("cancelled")
            counts["cg"] += steps
            counts["iteration"] += 1
            # the line search: the first of a = 1, 1/2, ... with an Armijo decrease
            gs, ws, ss = float(grad @ s), float(w @ s), float(s @ s)
            if not gs < 0.0:
                if math.isnan(gs):
                    return finish("numerical_error")
                stall = "the Newton direction is not a descent direction"
                return finish("stalled")
            changes = self.line_changes(s)
            step = None
            for k in range(tasks.LINE_SEARCH_HALVINGS):
                a = 0.5 ** k
                change = a * ws + 0.5 * a * a * ss + float(changes[k])
                if math.isnan(change):
                    return finish("numerical_error")
                if change <= ETA_LINE_SEARCH * a * gs:
                    step = a
                    break
            if step is None:
                stall = "the line search found no decrease in 20 halvings of the step"
                return finish("stalled")
            new_w = w + step * s
            if np.array_equal(new_w, w):
                stall = "the step no longer changes w in float64"
                return finish("stalled")
            w = new_w
            f, grad, precond = self.evaluate(w)
            grad_norm = float(np.linalg.norm(grad))


class _CoCoA:
    """CoCoA+ rounds until the duality gap of (w, alpha) is within tol of P(w)."""

    def __init__(self, cluster: Cluster, problems: list[Any], size: int, sweeps: int,
                 seed: int) -> None:
        self.cluster, self.problems, self.sweeps, self.seed = cluster, problems, sweeps, seed
        self.sigma = float(len(problems))  # CoCoA+ adding: sigma' = K
        self.alpha = [np.zeros(int(f["rows"])) for f in cluster.facts]
        self.w = np.zeros(size)
        self.rounds = 0

    def arguments(self) -> list[tuple[Any, ...]]:
        """The round's tasks' inputs, from the driver's (w, alpha)."""
        w_future = self.cluster.broadcast(self.w)
        alphas = self.cluster.send(self.alpha)
        return [(problem, alphas[k], w_future, self.sigma, self.sweeps,
                 (self.seed * 1_000_003 + k) * 1_000_003 + self.rounds)
                for k, problem in enumerate(self.problems)]

    def run(self, tol: float, max_iter: int, monitor: ProgressMonitor) -> Outcome:
        while True:
            results = self.cluster.each(tasks.dual_round, self.arguments(),
                                        seconds=lambda r: float(r["seconds"]),
                                        where=self.cluster.holders(), resend=self.arguments)
            self.cluster.note_pids([int(r["pid"]) for r in results])
            half_ww = 0.5 * float(self.w @ self.w)
            primal = half_ww + sum(float(r["loss"]) for r in results)
            dual = sum(float(r["alpha_sum"]) for r in results) - half_ww
            pg = (max(r["pg"][0] for r in results), min(r["pg"][1] for r in results))
            if primal - dual <= tol * abs(primal):
                return self.finish("converged", primal, dual, pg)
            if self.rounds >= max_iter:
                return self.finish("max_iter", primal, dual, pg)
            if monitor.out_of_time():
                return self.finish("max_seconds", primal, dual, pg)
            event = {"iteration": self.rounds, "primal": primal, "dual": dual,
                     "gap": primal - dual, "rounds": self.cluster.rounds,
                     "violation": (primal - dual) / max(abs(primal), 1e-300)}
            if monitor.event_due() and monitor.report(functools.partial(dict, event)):
                return self.finish("cancelled", primal, dual, pg)
            step = np.zeros(self.w.shape[0])
            for r in results:
                step += r["dw"]
            self.w = self.w + step
            self.alpha = [np.asarray(r["alpha"]) for r in results]
            self.transfer(results)
            self.rounds += 1

    def transfer(self, results: list[dict[str, Any]]) -> None:
        """Move each block k along its transfer direction e_k (y_i on its free
        coordinates) by the steps t that maximise D(alpha + sum_k t_k e_k) exactly: D is
        quadratic in t (a box QP in K variables, from the e_k's changes of w), so the dual
        never decreases and (w, alpha) stay consistent. The local subproblems cannot
        shift the shared bias weight from one block's rows to another's (sigma' = K makes
        that K times dearer there than it is), which is what this does."""
        ews = [np.asarray(r["ew"]) for r in results]
        bounds = np.array([r["transfer"] for r in results], dtype=np.float64)
        gram = np.array([[float(a @ b) for b in ews] for a in ews])
        linear = bounds[:, 0] - np.array([float(ew @ self.w) for ew in ews])
        steps = box_qp_max(linear, gram, bounds[:, 1], bounds[:, 2])
        for k, t in enumerate(steps):
            if t != 0.0:
                self.w = self.w + t * ews[k]
                self.alpha[k] = self.alpha[k] + t * results[k]["e"].astype(np.float64)

    def finish(self, reason: str, primal: float, dual: float,
               pg: tuple[float, float]) -> Outcome:
        finite = bool(np.all(np.isfinite(self.w))) and math.isfinite(primal)
        return Outcome(self.w.copy(), reason if finite else "numerical_error", self.rounds,
                       primal, dual, {
                           "violation": float(max(pg[0] - pg[1], abs(pg[0]), abs(pg[1]))),
                           "n_support": int(sum(np.count_nonzero(a) for a in self.alpha)),
                           "local_sweeps": self.sweeps, "sigma": self.sigma})


PRUNE_AFTER = 10  # a plane whose QP weight has been 0 this many iterations in a row goes
PLANES_BYTES = 256 << 20  # over this, planes in use are merged (_Planes.fit)


class _Planes:
    """OCAS's reduced problem on the driver: the cutting planes s_k, each stored sparse
    (int32 indices and float64 values) where that is smaller than dense, and the dual QP
    on the simplex (solvers/ocas.py's _qp_simplex, warm-started; slot 0 is the zero
    plane). A plane whose weight beta_k has been 0 for PRUNE_AFTER solves in a row is
    dropped: the reduced problem over any subset of the cutting planes still bounds the
    risk from below, so the QP's value stays a proven lower bound of the optimum (and
    dropping a plane of weight 0 leaves beta, the gradient and that value as they are).
    Where the planes would still take more than `budget` bytes, `fit` merges planes in
    use (the older half, until they fit) into one (BMRM's aggregation):
    sum_k beta_k (s_k, b_k) / sum_k beta_k is a convex combination of cutting planes, so
    a cutting plane, and with weight sum_k beta_k it leaves w and the QP's value as they
    are."""

    def __init__(self, size: int, budget: int | None = None) -> None:
        self.size = size
        self.budget = PLANES_BYTES if budget is None else budget
        self.merged = 0
        self.stored: list[tuple[np.ndarray | None, np.ndarray]] = []  # (indices, values)
        self.idle: list[int] = []  # solves in a row with beta_k = 0
        capacity = 64
        self.H = np.zeros((capacity, capacity))
        self.b = np.zeros(capacity)
        self.beta = np.zeros(capacity)
        self.beta[0] = 1.0  # all on the zero plane: w = 0
        self.grad = np.zeros(capacity)  # H beta - b
        self.added = self.pruned = self.qp_steps = 0
        self.nbytes = self.peak_nbytes = 0

    @property
    def m(self) -> int:
        return len(self.stored) + 1

    def _dot(self, j: int, dense: np.ndarray) -> float:
        indices, values = self.stored[j]
        return float(values @ (dense if indices is None else dense[indices]))

    def add(self, plane: np.ndarray, offset: float,
            stored: tuple[np.ndarray | None, np.ndarray] | None = None) -> None:
        """The plane s (dense, summed over the blocks) with offset b = sum_V C_i;
        `stored`: tasks.compact(s), when the caller has it (a dense s is kept as it is:
        the caller does not change it after)."""
        self.stored.append(tasks.compact(plane) if stored is None else stored)
        self.idle.append(0)
        self.added += 1
        k = len(self.stored)  # the new plane's slot
        if k >= self.H.shape[0]:
            self._resize(2 * self.H.shape[0])
        column = np.array([self._dot(j, plane) for j in range(k)])
        self.H[k, 1: k + 1] = column
        self.H[1: k + 1, k] = column
        self.b[k] = offset
        self.beta[k] = 0.0
        # grad_k = (H beta)_k - b_k; the other gradients are unchanged (beta_k = 0)
        self.grad[k] = float(column @ self.beta[1: k + 1]) - offset
        self.nbytes = sum(tasks.compact_nbytes(stored) for stored in self.stored)
        self.peak_nbytes = max(self.peak_nbytes, self.nbytes)

    def _resize(self, capacity: int) -> None:
        keep = min(capacity, self.H.shape[0])
        H = np.zeros((capacity, capacity))
        H[:keep, :keep] = self.H[:keep, :keep]
        self.H = H
        for name in ("b", "beta", "grad"):
            array = np.zeros(capacity)
            array[:keep] = getattr(self, name)[:keep]
            setattr(self, name, array)

    def solve(self, tolerance: float) -> tuple[np.ndarray, float]:
        """The QP to `tolerance` (its Frank-Wolfe gap): w_t = sum_k beta_k s_k and the
        dual value D(beta) <= min F_t <= min F."""
        m = self.m
        self.qp_steps += int(ocas._qp_simplex(self.H, self.b, self.beta, self.grad, m,
                                              tolerance,
                                              ocas.QP_MAX_STEPS_PER_PLANE * m + 100))
        dual = float(ocas._qp_dual_value(self.b, self.beta, self.grad, m))
        weights = [(j, float(self.beta[j + 1])) for j in range(len(self.stored))]
        for j, weight in weights:
            self.idle[j] = 0 if weight != 0.0 else self.idle[j] + 1
        return self._combination(weights), dual

    def prune(self) -> None:
        """Drop the planes idle for PRUNE_AFTER solves (beta_k = 0 for all of them)."""
        keep = [j for j, idle in enumerate(self.idle) if idle < PRUNE_AFTER]
        if len(keep) == len(self.stored):
            return
        slots = np.array([0] + [j + 1 for j in keep], dtype=np.int64)
        self.pruned += len(self.stored) - len(keep)
        self.stored = [self.stored[j] for j in keep]
        self.idle = [self.idle[j] for j in keep]
        m = slots.shape[0]
        self.H[:m, :m] = self.H[np.ix_(slots, slots)]
        for name in ("b", "beta", "grad"):
            array = getattr(self, name)
            array[:m] = array[slots]
            array[m:] = 0.0
        self.H[m:, :] = 0.0
        self.H[:, m:] = 0.0
        self.nbytes = sum(tasks.compact_nbytes(stored) for stored in self.stored)

    def fit(self, incoming: int) -> None:
        """Before a plane of `incoming` bytes is added: drop the idle planes (PRUNE_AFTER
        solves at beta_k = 0; all at beta_k = 0 when over the budget) and, while still
        over it, merge the older half of the planes in use (the previous merge's first)
        into one, kept first: a bundle of one aggregate and the newest planes (on the
        46k x 300k bench set this took 139 iterations with 10 planes where merging the
        lighter half by beta took 158; bench/results/distributed_ocas.md)."""
        self.prune()
        if self.nbytes + incoming <= self.budget or not self.stored:
            return
        for j in range(len(self.stored)):
            if self.beta[j + 1] == 0.0:
                self.idle[j] = PRUNE_AFTER
        self.prune()
        while self.nbytes + incoming > self.budget and len(self.stored) >= 2:
            self._merge(list(range(max(2, len(self.stored) // 2))), front=True)

    def _merge(self, group: list[int], front: bool = False) -> None:
        """Planes `group` (positions in `stored`, beta_k > 0) -> their beta-weighted mean
        g with weight B = sum beta_k, in the first slot (`front`) or the last. With T the
        map of the old slots to the new (a kept slot to itself, the group's to g with
        beta_k / B), H' = T H T', b' = T b, grad' = T grad (T' beta' = beta): no pass over
        the planes but g's sum."""
        m = self.m
        kept = [j for j in range(len(self.stored)) if j not in set(group)]
        weights = self.beta[[j + 1 for j in group]]
        total = float(weights.sum())
        slots: list[int | None] = [None, *kept] if front else [*kept, None]  # None: g
        T = np.zeros((len(slots) + 1, m))
        T[0, 0] = 1.0
        for row, j in enumerate(slots, start=1):
            if j is None:
                T[row, [k + 1 for k in group]] = weights / total
            else:
                T[row, j + 1] = 1.0
        merged = self._combination(list(zip(group, weights / total, strict=True)))
        plane = tasks.compact(merged)
        n = T.shape[0]
        H, b, grad = T @ self.H[:m, :m] @ T.T, T @ self.b[:m], T @ self.grad[:m]
        beta = np.array([self.beta[0]] + [total if j is None else self.beta[j + 1]
                                          for j in slots])
        for name, value in (("b", b), ("grad", grad), ("beta", beta)):
            array = getattr(self, name)
            array[:] = 0.0
            array[:n] = value
        self.H[:] = 0.0
        self.H[:n, :n] = H
        self.stored = [plane if j is None else self.stored[j] for j in slots]
        self.idle = [0 if j is None else self.idle[j] for j in slots]
        self.merged += len(group)
        self.nbytes = sum(tasks.compact_nbytes(stored) for stored in self.stored)

    def _combination(self, weights: list[tuple[int, float]]) -> np.ndarray:
        """sum_j weight_j s_j (dense) over (position in `stored`, weight) pairs."""
        w = np.zeros(self.size)
        for j, weight in weights:
            if weight != 0.0:
                indices, values = self.stored[j]
                if indices is None:
                    w += weight * values
                else:
                    w[indices] += weight * values
        return w

    def active(self) -> int:
        return int(np.count_nonzero(self.beta[1: self.m]))


class _Ocas:
    """OCAS (solvers/ocas.py) with the data passes done by the blocks, two rounds an
    iteration: (A) w_t and each block's outputs at w_best out, its outputs at w_t back;
    the driver's exact line search between w_best and w_t over every row's breakpoint;
    (B) the step k out, each block's part of the cutting plane at w_c and its hinge loss
    at the new w_best back. A block keeps its outputs (`tasks.OcasBlock`) from A to B.
    The driver holds both outputs of every row (16 bytes a row; it moves w_best's by the
    blocks' arithmetic) and sends w_best's with each round A (8 bytes a row, beside w_t's
    8 bytes a feature to every block): a state depends on the problem, those outputs and
    w_t only, never on the previous iteration's state, so one lost with its worker is
    made again from them (Dask's lineage or `resend`) and the round run again gives the
    same model."""

    def __init__(self, cluster: Cluster, problems: list[Any], size: int,
                 planes_bytes: int | None = None) -> None:
        self.cluster, self.problems, self.size = cluster, problems, size
        rows = [int(f["rows"]) for f in cluster.facts]
        self.offsets = np.concatenate([[0], np.cumsum(rows)]).astype(np.int64)
        n = int(self.offsets[-1])
        self.out_best, self.out_t = np.zeros(n), np.zeros(n)
        self.cost = np.zeros(n)  # C_i, from the first round
        self.breaks, self.jumps = np.empty(n), np.empty(n)
        self.chunk_sums = np.zeros((len(problems), 4))
        self.w_best, self.w_t = np.zeros(size), np.zeros(size)
        self.planes = _Planes(size, planes_bytes)
        self.states: list[Any] = []
        self.iteration = 0
        self.primal = math.inf
        self.dual = 0.0
        self.n_loss = n
        self.timings = {"qp_s": 0.0, "line_search_s": 0.0, "planes_s": 0.0}

    def _blocks(self, values: np.ndarray) -> list[np.ndarray]:
        return [values[self.offsets[k]: self.offsets[k + 1]]
                for k in range(len(self.problems))]

    def _outputs_states(self) -> list[Any]:
        """The blocks' states at (w_best, w_t) from the driver's outputs at w_best."""
        best = self.cluster.send(self._blocks(self.out_best))
        w_t = self.cluster.broadcast(self.w_t)
        return self.cluster.submit_each(
            tasks.ocas_outputs, [(p, b, w_t) for p, b in zip(self.problems, best,
                                                             strict=True)],
            self.cluster.holders())

    def outputs(self) -> None:
        """Round A: the outputs at w_t."""
        self.states = self._outputs_states()

        def resend() -> list[tuple[Any, ...]]:
            self.states = self._outputs_states()
            return [(s,) for s in self.states]

        parts = self.cluster.each(tasks.ocas_outputs_part, [(s,) for s in self.states],
                                  seconds=lambda r: float(r[1]),
                                  where=self.cluster.holders(), resend=resend)
        self.cluster.note_pids([int(p[2]) for p in parts])
        self.out_t = np.concatenate([np.asarray(p[0], np.float64) for p in parts])

    def line_search(self) -> float:
        """k* = argmin_{k >= 0} F(w_best + k (w_t - w_best)): solvers/ocas.py's exact
        line search over every row's breakpoint (blocks as its chunks)."""
        started = time.perf_counter()
        direction = self.w_t - self.w_best
        a0 = float(direction @ direction)
        b0 = float(self.w_best @ direction)
        with parallel.numba_threads(1):
            slope = ocas._breakpoints_kernel(self.out_best, self.out_t, self.cost,
                                             self.offsets, self.breaks, self.jumps,
                                             self.chunk_sums)
            k = float(ocas._line_search_root(self.breaks, self.jumps, self.offsets,
                                             self.chunk_sums, a0, b0 + slope))
        self.timings["line_search_s"] += time.perf_counter() - started
        return k

    def cut(self, k: float) -> tuple[np.ndarray, float]:
        """Round B: w_best += k (w_t - w_best), P(w_best), the plane at w_c (summed in
        block order) and its offset. The first (k = 0 at w_best = w_t = 0) also brings
        the blocks' C_i."""
        first = not self.planes.added
        if first:
            self.states = self.cluster.submit_each(
                tasks.ocas_start, [(p,) for p in self.problems], self.cluster.holders())

        def resend() -> list[tuple[Any, ...]]:
            self.states = (self.cluster.submit_each(
                tasks.ocas_start, [(p,) for p in self.problems], self.cluster.holders())
                if first else self._outputs_states())
            return [(s, float(k), first) for s in self.states]

        parts = self.cluster.each(tasks.ocas_cut, [(s, float(k), first) for s in self.states],
                                  seconds=lambda r: float(r["seconds"]),
                                  where=self.cluster.holders(), resend=resend)
        self.states = []
        self.cluster.note_pids([int(p["pid"]) for p in parts])
        if first:
            self.cost = np.concatenate([np.asarray(p["cost"], np.float64) for p in parts])
        # what the blocks did to their outputs (ocas._update_and_cut's arithmetic)
        self.out_best = self.out_best + k * (self.out_t - self.out_best)
        if k != 0.0:
            self.w_best = self.w_best + k * (self.w_t - self.w_best)
        started = time.perf_counter()
        plane = np.zeros(self.size)
        for p in parts:
            if p["indices"] is None:
                plane += p["values"]
            else:
                plane[p["indices"]] += p["values"]
        self.timings["planes_s"] += time.perf_counter() - started
        self.primal = 0.5 * float(self.w_best @ self.w_best) + sum(
            float(p["loss"]) for p in parts)
        self.n_loss = sum(int(p["n_loss"]) for p in parts)
        return plane, sum(float(p["offset"]) for p in parts)

    def run(self, tol: float, max_iter: int, monitor: ProgressMonitor) -> Outcome:
        plane, offset = self.cut(0.0)  # the first plane, at w_best = 0
        self.add(plane, offset)
        while True:
            started = time.perf_counter()
            self.w_t, self.dual = self.planes.solve(ocas.QP_TOLERANCE * tol
                                                    * abs(self.primal))
            self.timings["qp_s"] += time.perf_counter() - started
            self.outputs()
            k = self.line_search()
            plane, offset = self.cut(k)
            self.iteration += 1
            if not (math.isfinite(self.primal) and math.isfinite(self.dual)):
                return self.finish("numerical_error")
            if self.primal - self.dual <= tol * abs(self.primal):
                return self.finish("converged")
            if self.iteration >= max_iter:
                return self.finish("max_iter")
            if monitor.out_of_time():
                return self.finish("max_seconds")
            event = {"iteration": self.iteration, "primal": self.primal, "dual": self.dual,
                     "gap": self.primal - self.dual, "rounds": self.cluster.rounds,
                     "violation": (self.primal - self.dual) / max(abs(self.primal), 1e-300),
                     "active_size": self.n_loss}
            if monitor.event_due() and monitor.report(functools.partial(dict, event)):
                return self.finish("cancelled")
            self.add(plane, offset)

    def add(self, plane: np.ndarray, offset: float) -> None:
        started = time.perf_counter()
        stored = tasks.compact(plane)
        self.planes.fit(tasks.compact_nbytes(stored))
        self.planes.add(plane, offset, stored)
        self.timings["planes_s"] += time.perf_counter() - started

    def finish(self, reason: str) -> Outcome:
        """P(w_best) summed again from the rows (one round: the incremental outputs carry
        rounding), which the certificate is then of; not after a cancel (no round after
        it: the primal is then the incremental one)."""
        primal = self.primal
        if reason != "cancelled":
            w_future = self.cluster.broadcast(self.w_best)
            losses = self.cluster.each(
                tasks.hinge_part, [(p, w_future) for p in self.problems],
                where=self.cluster.holders(),
                resend=lambda: [(p, self.cluster.broadcast(self.w_best))
                                for p in self.problems])
            primal = 0.5 * float(self.w_best @ self.w_best) + sum(float(v) for v in losses)
        finite = bool(np.all(np.isfinite(self.w_best))) and math.isfinite(primal)
        self.states = []
        return Outcome(self.w_best.copy(), reason if finite else "numerical_error",
                       self.iteration, primal, self.dual, {
                           "active_size": self.n_loss, "n_cuts": self.planes.added,
                           "n_kept_cuts": len(self.planes.stored),
                           "n_pruned_cuts": self.planes.pruned,
                           "n_merged_cuts": self.planes.merged,
                           "n_active_cuts": self.planes.active(),
                           "peak_planes_bytes": self.planes.peak_nbytes,
                           "qp_steps": self.planes.qp_steps,
                           "primal_incremental": self.primal,
                           **{k: round(v, 4) for k, v in self.timings.items()}})


def box_qp_max(linear: np.ndarray, gram: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               sweeps: int = 200) -> np.ndarray:
    """argmax of linear't - t'Gt / 2 over lo <= t <= hi (lo <= 0 <= hi; G PSD, K x K):
    coordinate ascent from t = 0, each step exact, so the value never decreases."""
    t = np.zeros(linear.shape[0])
    for _ in range(sweeps):
        moved = 0.0
        for k in range(t.shape[0]):
            if not gram[k, k] > 0.0:
                continue
            new = min(max(t[k] + (linear[k] - float(gram[k] @ t)) / gram[k, k], lo[k]),
                      hi[k])
            moved = max(moved, abs(new - t[k]))
            t[k] = new
        if moved <= 1e-14 * max(1.0, float(np.abs(t).max())):
            break
    return t
