"""One linear model trained data-parallel on a Dask cluster (`distributed`).

The driver (the process that calls `fit_on_dask`: the Celery worker that claimed the job,
a test, a benchmark) is a Dask client; solvers/dask_rounds.py places one block of the
dataset's shards on each Dask worker, runs rounds of one task per block and counts what
they cost; solvers/_distributed_tasks.py is what the workers run, with the compiled
kernels of tron and dcd. The driver only sums vectors (in block order) and does the O(d)
vector work of the method.

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
  used: the certificate is the stop rule.

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
    lower_bound: float  # proven: the dual value (dcd) or f - ||grad f||^2 / 2 (tron)
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
                connect_timeout: float = 30.0, weighted: bool = True) -> FitResult:
    """Train a binary linear model on the shards of `source`, on the Dask cluster of
    `client` (a distributed.Client, or a scheduler address such as tcp://host:8786).

    The rows of `source` must have two label values; the model's output is positive for
    the larger (as solvers.fit). `threads`: Numba threads per task on a worker;
    `weighted`: C_i = C w_i with the shards' instance weights (when they have them)."""
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
