"""What a Dask worker runs for a distributed fit (solvers/distributed.py): plain functions
on plain objects, so this module imports nothing of Dask and a worker unpickles the
functions by name from the same install.

A worker holds blocks: a `Block` is the rows of some consecutive shards of the dataset,
loaded once by `load_block` from the dataset's ShardSource (a picklable source: NpzShards
over a shared filesystem, BlobShards over S3, MemoryShards in tests) and kept in the
worker's memory as the result of that task, across all the rounds of the fit. Every
other task takes the block (and, for tron, the `NewtonState` of the current iterate) as
a dependency, so it runs where they are; a block lost with its worker is loaded again
wherever the scheduler puts the task.

The row loops are tron's, dcd's and ocas's compiled kernels (solvers/_tron_kernels.py,
solvers/_kernel_helpers.py, solvers/ocas.py); the two products below only leave out what
the driver adds once for the whole problem (w in the gradient, v in H v, the
preconditioner's form).

OCAS keeps an `OcasBlock` per block from an iteration's first round to its second: its
rows' outputs y_i w.x_i at w_best (sent by the driver, which holds them) and at the
reduced problem's solution w_t (computed there). It depends on the problem, the driver's
outputs and w_t only, not on the previous iteration's state: a state lost with its worker
is made again from them (Dask's lineage, or the driver's `resend`), never by replaying
the fit, and the scheduler keeps no growing chain of tasks.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit, prange

from solvers import _tron_kernels as kernels
from solvers import ocas, parallel
from solvers._kernel_helpers import next_below, reduce_chunks, row_axpy, row_dot, signed_margins
from solvers.shards import ShardSource

LINE_SEARCH_HALVINGS = 20  # tron's line search tries alpha = 1, 1/2, ..., 2^-19
_PG_ZERO = 1.0e-12


@dataclass
class Block:
    """Consecutive rows of the dataset on one worker: CSR arrays, labels +-1, costs C_i."""

    index: int
    shards: tuple[int, ...]
    rows: tuple[np.ndarray, np.ndarray, np.ndarray]  # data, indices (int32), indptr (int64)
    labels: np.ndarray  # the dataset's labels (float64)
    weights: np.ndarray | None
    n_features: int
    threads: int
    loaded_by: int  # the pid of the worker process that loaded it
    load_seconds: float

    @property
    def n_rows(self) -> int:
        return int(self.labels.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.rows[0].shape[0])


def load_block(source: ShardSource, index: int, shards: tuple[int, ...],
               threads: int = 1) -> Block:
    """Load the shards (their rows in order, one CSR block) on this worker."""
    started = time.perf_counter()
    data, indices, indptr, labels, weights = [], [], [np.zeros(1, np.int64)], [], []
    offset = 0
    for k in shards:
        shard = source.load(k)
        X = shard.X
        data.append(np.asarray(X.data))
        indices.append(np.asarray(X.indices, dtype=np.int32))
        indptr.append(np.asarray(X.indptr[1:], dtype=np.int64) + offset)
        offset += int(X.indptr[-1])
        labels.append(np.asarray(shard.y, dtype=np.float64))
        weights.append(shard.w)
        source.release(k)
    dtype = np.result_type(*[d.dtype for d in data]) if data else np.float64
    rows = (np.ascontiguousarray(np.concatenate(data).astype(dtype, copy=False)),
            np.ascontiguousarray(np.concatenate(indices)),
            np.ascontiguousarray(np.concatenate(indptr)))
    if any(w is not None for w in weights) and not all(w is not None for w in weights):
        raise ValueError("some shards have instance weights and some do not")
    w = (None if not weights or weights[0] is None
         else np.concatenate([np.asarray(x, np.float64) for x in weights]))
    return Block(index, tuple(shards), rows, np.concatenate(labels), w, source.n_features,
                 max(1, int(threads)), os.getpid(), time.perf_counter() - started)


def block_facts(block: Block) -> dict[str, Any]:
    """What the driver learns of a loaded block: its size, its labels, who holds it."""
    labels, counts = np.unique(block.labels, return_counts=True)
    return {"index": block.index, "rows": block.n_rows, "nnz": block.nnz,
            "nbytes": int(sum(a.nbytes for a in block.rows) + block.labels.nbytes),
            "labels": labels, "counts": counts, "pid": block.loaded_by,
            "load_seconds": block.load_seconds}


@dataclass
class Problem:
    """A block as one binary problem: y_i = +1 for the positive class, C_i, B."""

    block: Block
    y: np.ndarray
    cost: np.ndarray
    bias_scale: float
    bounds: np.ndarray  # row chunks (solvers.parallel)
    chunk_acc: np.ndarray  # (2, groups, size) accumulators of the X' products
    positives: int


def binary_problem(block: Block, positive: float, C: float, bias_scale: float,
                   weighted: bool = True) -> Problem:
    y = np.where(block.labels == positive, 1.0, -1.0)
    cost = np.full(block.n_rows, float(C))
    if weighted and block.weights is not None:
        cost *= block.weights
    size = block.n_features + 1
    bounds = parallel.chunk_bounds(block.rows[2], size, accumulators=2)
    groups = 1 if block.threads == 1 else min(block.threads, bounds.shape[0] - 1)
    chunk_acc = np.zeros((2, groups if groups > 1 else 0, size))
    return Problem(block, y, cost, float(bias_scale), bounds, chunk_acc,
                   int(np.count_nonzero(y > 0)))


# ---- tron: f(w), gradient, diag(H) and H v of the block's rows


@njit(cache=True, parallel=True)
def local_gradient(rows, bias_scale, bounds, active, n_groups, chunk_acc, grad, diag):
    """grad = X_A'u_A and diag = X_A'^2 h_A over this block's active rows (the driver
    adds w and forms the preconditioner); groups of chunks as tron's
    gradient_and_preconditioner, summed in group order."""
    n_chunks = bounds.shape[0] - 1
    size = grad.shape[0]
    grad[:] = 0.0
    diag[:] = 0.0
    if n_groups == 1:
        kernels._accumulate_rows(rows, bias_scale, bounds, active, 0, n_chunks, grad, diag)
        return
    for g in prange(n_groups):
        acc_g = chunk_acc[0, g]
        acc_d = chunk_acc[1, g]
        acc_g[:] = 0.0
        acc_d[:] = 0.0
        kernels._accumulate_rows(rows, bias_scale, bounds, active, g * n_chunks // n_groups,
                                 (g + 1) * n_chunks // n_groups, acc_g, acc_d)
    for j in range(size):
        grad[j] = kernels._reduced(chunk_acc, 0, n_groups, j, 0.0)
        diag[j] = kernels._reduced(chunk_acc, 1, n_groups, j, 0.0)


@njit(cache=True, parallel=True)
def local_hessian(rows, bias_scale, bounds, active, n_groups, chunk_acc, group_sums, v, out):
    """out = X_A' diag(h_A) X_A v over this block's active rows; returns sum_A h_i
    (x_i.v)^2 (tron's hessian_vector without the + v)."""
    n_chunks = bounds.shape[0] - 1
    out[:] = 0.0
    if n_groups == 1:
        return kernels._hessian_rows(rows, bias_scale, bounds, active, 0, n_chunks, v, out)
    for g in prange(n_groups):
        acc = chunk_acc[0, g]
        acc[:] = 0.0
        group_sums[g] = kernels._hessian_rows(rows, bias_scale, bounds, active,
                                              g * n_chunks // n_groups,
                                              (g + 1) * n_chunks // n_groups, v, acc)
    for j in range(v.shape[0]):
        out[j] = kernels._reduced(chunk_acc, 0, n_groups, j, 0.0)
    quadratic = 0.0
    for g in range(n_groups):
        quadratic += group_sums[g]
    return quadratic


@dataclass
class NewtonState:
    """The block at one iterate w: margins, active rows, and its parts of f and grad."""

    problem: Problem
    loss_kind: int
    margins: np.ndarray
    active: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    n_groups: int
    loss: float
    grad: np.ndarray
    diag: np.ndarray
    seconds: float


def newton_state(problem: Problem, w: np.ndarray, loss_kind: int) -> NewtonState:
    """Margins and loss at w (tron's margins_and_loss), the active rows and their parts of
    the gradient and of diag(H)."""
    started = time.perf_counter()
    block = problem.block
    n, size = block.n_rows, w.shape[0]
    n_chunks = problem.bounds.shape[0] - 1
    margins, chunk_sums = np.zeros(n), np.zeros(n_chunks)
    with parallel.numba_threads(block.threads):
        kernels.margins_and_loss(block.rows, problem.y, problem.cost, w, problem.bias_scale,
                                 loss_kind, problem.bounds, margins, chunk_sums)
        loss = 0.0
        for c in range(n_chunks):
            loss += float(chunk_sums[c])
        active = (np.zeros(n, dtype=np.int64), np.zeros(n), np.zeros(n),
                  np.zeros(n_chunks, dtype=np.int64))
        active_nnz = np.zeros(n_chunks, dtype=np.int64)
        kernels.select_active((problem.y, problem.cost), margins, loss_kind, block.rows[2],
                              problem.bounds, active[:3], active[3], active_nnz)
        groups = problem.chunk_acc.shape[1]
        n_groups = 1 if groups < 2 else min(groups, kernels.hessian_groups(
            int(active_nnz.sum()), size, n_chunks))
        grad, diag = np.zeros(size), np.zeros(size)
        local_gradient(block.rows, problem.bias_scale, problem.bounds, active, n_groups,
                       problem.chunk_acc, grad, diag)
    return NewtonState(problem, loss_kind, margins, active, n_groups, loss, grad, diag,
                       time.perf_counter() - started)


def newton_parts(state: NewtonState) -> tuple[float, np.ndarray, np.ndarray, int, float, int]:
    """(loss, gradient part, diag(H) part, active rows, seconds, pid) for the driver."""
    return (state.loss, state.grad, state.diag, int(state.active[3].sum()), state.seconds,
            os.getpid())


def hessian_part(state: NewtonState, v: np.ndarray) -> tuple[np.ndarray, float, float]:
    """(X_A' h X_A v, sum h (x.v)^2, seconds) of this block."""
    started = time.perf_counter()
    problem = state.problem
    out = np.zeros(v.shape[0])
    group_sums = np.zeros(max(state.n_groups, 1))
    with parallel.numba_threads(problem.block.threads):
        quadratic = local_hessian(problem.block.rows, problem.bias_scale, problem.bounds,
                                  state.active, state.n_groups, problem.chunk_acc,
                                  group_sums, v, out)
    return out, float(quadratic), time.perf_counter() - started


def line_search_part(state: NewtonState, s: np.ndarray) -> tuple[np.ndarray, float]:
    """sum_i C_i (loss(m_i + a y_i x_i.s) - loss(m_i)) of this block for every trial step
    a = 1, 1/2, ..., 2^-19 of tron's line search (one pass over X, then O(n) per a)."""
    started = time.perf_counter()
    problem = state.problem
    steps = np.zeros(problem.block.n_rows)
    n_chunks = problem.bounds.shape[0] - 1
    chunk_sums = np.zeros(n_chunks)
    changes = np.zeros(LINE_SEARCH_HALVINGS)
    with parallel.numba_threads(problem.block.threads):
        signed_margins(problem.block.rows, problem.y, s, problem.bias_scale, problem.bounds,
                       steps)
        alpha = 1.0
        for k in range(LINE_SEARCH_HALVINGS):
            changes[k] = kernels.line_loss_change(problem.cost, state.margins, steps, alpha,
                                                  state.loss_kind, problem.bounds,
                                                  chunk_sums)
            alpha *= 0.5
    return changes, time.perf_counter() - started


# ---- CoCoA+ for the L1-loss (hinge) SVM: local dual coordinate descent


@njit(cache=True, error_model="numpy")
def local_dual_sweeps(rows, y, upper, qii, bias_scale, sigma, alpha, u, dw, order, rng,
                      sweeps):
    """dcd's coordinate steps on the block's CoCoA+ subproblem (Ma et al. 2015, sigma' =
    sigma): u = w + sigma dw is the local view of w; coordinate i's gradient is
    G = y_i u.x_i - 1, its curvature sigma Qii, the step a_i <- clip(a_i - G / (sigma
    Qii), 0, U_i), then dw += step y_i x_i, u += sigma step y_i x_i. `sweeps` passes in a
    random order; returns (PGmax, PGmin) of the last pass."""
    data, indices, indptr = rows
    bias_slot = u.shape[0] - 1
    pg_max, pg_min = -np.inf, np.inf
    n = indptr.shape[0] - 1
    for _ in range(sweeps):
        pg_max, pg_min = -np.inf, np.inf
        for t in range(n - 1):
            j = t + next_below(rng, n - t)
            swap = order[t]
            order[t] = order[j]
            order[j] = swap
        for s in range(n):
            i = order[s]
            start, end = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
            g = y[i] * (row_dot(u, data, indices, start, end) + u[bias_slot] * bias_scale)
            g -= 1.0
            a_i = alpha[i]
            pg = g
            if a_i == 0.0:
                pg = min(g, 0.0)
            elif a_i == upper[i]:
                pg = max(g, 0.0)
            pg_max = max(pg_max, pg)
            pg_min = min(pg_min, pg)
            if abs(pg) <= _PG_ZERO:
                continue
            a_new = min(max(a_i - g / (sigma * qii[i]), 0.0), upper[i])
            step = (a_new - a_i) * y[i]
            alpha[i] = a_new
            row_axpy(step, data, indices, start, end, dw)
            dw[bias_slot] += step * bias_scale
            row_axpy(sigma * step, data, indices, start, end, u)
            u[bias_slot] += sigma * step * bias_scale
    return pg_max, pg_min


@njit(cache=True)
def hinge_loss_sum(rows, y, cost, w, bias_scale):
    """sum_i C_i max(0, 1 - y_i w.x_i) over the block's rows."""
    data, indices, indptr = rows
    bias_term = w[w.shape[0] - 1] * bias_scale
    total = 0.0
    for i in range(indptr.shape[0] - 1):
        slack = 1.0 - y[i] * (row_dot(w, data, indices, np.uint64(indptr[i]),
                                      np.uint64(indptr[i + 1])) + bias_term)
        if slack > 0.0:
            total += cost[i] * slack
    return total


@njit(cache=True)
def _squared_norms(rows, bias_scale, out):
    data, _, indptr = rows
    for i in range(indptr.shape[0] - 1):
        total = bias_scale * bias_scale
        for k in range(indptr[i], indptr[i + 1]):
            total += data[k] * data[k]
        out[i] = total


@njit(cache=True)
def transfer_direction(rows, y, upper, alpha, bias_scale, e, ew):
    """The block's transfer direction at alpha: e_i = y_i on its free coordinates (0 <
    a_i < U_i), 0 elsewhere, and ew = sum_i e_i y_i (x_i, B) = sum over the free rows of
    (x_i, B), the change of w per unit of step. Returns (sum_i e_i, the smallest and the
    largest step t with alpha + t e in the box) (0, 0 without a free coordinate)."""
    data, indices, indptr = rows
    bias_slot = ew.shape[0] - 1
    total, lo, hi = 0.0, -np.inf, np.inf
    for i in range(indptr.shape[0] - 1):
        a_i = alpha[i]
        if not (a_i > 0.0 and a_i < upper[i]):
            continue
        e[i] = y[i]
        total += y[i]
        if y[i] > 0.0:
            lo, hi = max(lo, -a_i), min(hi, upper[i] - a_i)
        else:
            lo, hi = max(lo, a_i - upper[i]), min(hi, a_i)
        row_axpy(1.0, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]), ew)
        ew[bias_slot] += bias_scale
    if hi == np.inf:
        return 0.0, 0.0, 0.0
    return total, lo, hi


def dual_round(problem: Problem, alpha: np.ndarray, w: np.ndarray, sigma: float,
               sweeps: int, seed: int) -> dict[str, Any]:
    """One CoCoA+ round on this block from (w, alpha): the hinge loss at w (its part of
    P(w), for the certificate of w, alpha), then `sweeps` local passes. Returns the new
    alpha, dw = sum_i (a_i new - a_i) y_i x_i, the loss sum, PG extremes, seconds, and the
    transfer direction at the new alpha (`transfer_direction`: e as int8, ew, sum e and
    the step's bounds), along which the driver moves every block at once
    (solvers/distributed.py)."""
    started = time.perf_counter()
    block = problem.block
    loss = float(hinge_loss_sum(block.rows, problem.y, problem.cost, w, problem.bias_scale))
    qii = np.empty(block.n_rows)
    _squared_norms(block.rows, problem.bias_scale, qii)
    qii = np.where(qii > 0.0, qii, np.inf)  # an empty row (no bias) has no step
    # the driver's transfer steps end on the box's edges up to rounding: onto them
    new_alpha = np.minimum(np.maximum(np.asarray(alpha, dtype=np.float64), 0.0),
                           problem.cost)
    alpha = new_alpha.copy()
    u, dw = np.array(w, dtype=np.float64, copy=True), np.zeros(w.shape[0])
    order = np.arange(block.n_rows, dtype=np.int64)
    rng = np.array([np.uint64((seed * 0x9E3779B97F4A7C15 + 1) % (1 << 64)) | np.uint64(1)],
                   dtype=np.uint64)
    pg_max, pg_min = local_dual_sweeps(block.rows, problem.y, problem.cost, qii,
                                       problem.bias_scale, float(sigma), new_alpha, u, dw,
                                       order, rng, int(sweeps))
    e, ew = np.zeros(block.n_rows), np.zeros(w.shape[0])
    e_sum, lo, hi = transfer_direction(block.rows, problem.y, problem.cost, new_alpha,
                                       problem.bias_scale, e, ew)
    return {"alpha": new_alpha, "dw": dw, "loss": loss, "alpha_sum": float(alpha.sum()),
            "pg": (float(pg_max), float(pg_min)), "seconds": time.perf_counter() - started,
            "pid": os.getpid(), "e": e.astype(np.int8), "ew": ew,
            "transfer": (float(e_sum), float(lo), float(hi))}


def hinge_part(problem: Problem, w: np.ndarray) -> float:
    """This block's sum_i C_i max(0, 1 - y_i w.x_i)."""
    block = problem.block
    return float(hinge_loss_sum(block.rows, problem.y, problem.cost, w, problem.bias_scale))


# ---- OCAS for the L1-loss (hinge) SVM: outputs and cutting planes of the block's rows


@dataclass
class OcasBlock:
    """The block's rows' outputs at OCAS's two points (kept on the worker from an
    iteration's first round to its second)."""

    problem: Problem
    out_best: np.ndarray  # y_i w_best.x_i
    out_t: np.ndarray  # y_i w_t.x_i (w_t: the reduced problem's solution)
    bounds: np.ndarray  # the cut's row chunks: as many as the block's threads (or fewer)
    seconds: float = 0.0


def _cut_bounds(problem: Problem) -> np.ndarray:
    return parallel.chunk_bounds(problem.block.rows[2], problem.block.n_features + 1,
                                 accumulators=1, max_chunks=problem.block.threads)


def ocas_start(problem: Problem) -> OcasBlock:
    """The block at w_best = w_t = 0 (outputs 0), for the first plane."""
    n = problem.block.n_rows
    return OcasBlock(problem, np.zeros(n), np.zeros(n), _cut_bounds(problem))


def ocas_outputs(problem: Problem, out_best: np.ndarray, w_t: np.ndarray) -> OcasBlock:
    """The block's outputs at the new w_t (one pass over its rows), beside those at
    w_best, which the driver holds and sends."""
    started = time.perf_counter()
    out_t = np.empty(problem.block.n_rows)
    with parallel.numba_threads(problem.block.threads):
        signed_margins(problem.block.rows, problem.y, w_t, problem.bias_scale,
                       problem.bounds, out_t)
    return OcasBlock(problem, np.asarray(out_best, np.float64), out_t, _cut_bounds(problem),
                     time.perf_counter() - started)


def ocas_outputs_part(state: OcasBlock) -> tuple[np.ndarray, float, int]:
    """(y_i w_t.x_i of the block's rows, seconds, pid): the driver's line search."""
    return state.out_t, state.seconds, os.getpid()


def compact(vector: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """(int32 indices, values) of the non-zeros where that is smaller than the dense
    vector (12 bytes a non-zero against 8 an entry), else (None, the vector itself)."""
    nonzero = np.flatnonzero(vector)
    if nonzero.shape[0] * 12 < vector.shape[0] * 8:
        return nonzero.astype(np.int32), vector[nonzero]
    return None, vector


def compact_nbytes(stored: tuple[np.ndarray | None, np.ndarray]) -> int:
    indices, values = stored
    return values.nbytes + (0 if indices is None else indices.nbytes)


def ocas_cut(state: OcasBlock, k: float, with_costs: bool = False) -> dict[str, Any]:
    """w_best moved by k towards w_t (its outputs, linearly) and the block's part of the
    cutting plane at w_c = (1 - LAMBDA) w_best + LAMBDA w_t: solvers/ocas.py's
    _update_and_cut on the block's rows (on a copy: the state stays as it was, so the
    task run again gives the same part). The part: s = sum over the violators of
    C_i y_i (x_i, B) (int32 indices and values where that is smaller than the dense
    vector), their sum of C_i, the hinge loss at the new w_best and its count of rows;
    and the block's C_i when `with_costs` (once: the driver's line search needs them)."""
    started = time.perf_counter()
    problem = state.problem
    size = problem.block.n_features + 1
    n_chunks = state.bounds.shape[0] - 1
    out_best = state.out_best.copy()
    chunk_acc = np.zeros((n_chunks, size))
    chunk_sums = np.zeros((n_chunks, 4))
    with parallel.numba_threads(problem.block.threads):
        ocas._update_and_cut(problem.block.rows, (problem.y, problem.cost),
                             (out_best, state.out_t), (float(k), ocas.LAMBDA,
                                                       problem.bias_scale),
                             state.bounds, chunk_acc, chunk_sums)
        if n_chunks == 1:
            plane = chunk_acc[0]
        else:
            plane = np.zeros(size)
            reduce_chunks(chunk_acc, plane)
    sums = chunk_sums.sum(axis=0)  # chunk order fixed
    indices, values = compact(plane)
    return {"indices": indices, "values": values,
            "loss": float(sums[0]), "offset": float(sums[1]), "n_loss": int(sums[2]),
            "cost": problem.cost if with_costs else None,
            "seconds": time.perf_counter() - started, "pid": os.getpid()}


def warmup() -> None:
    """Compile (or load from Numba's cache) what a Dask worker runs, in this process and
    without Dask: a driver that starts workers on the same install warms it once, rather
    than each worker compiling it at once (the tests' cluster does)."""
    import scipy.sparse as sp

    from solvers.shards import MemoryShards, split_rows

    X = sp.csr_matrix(np.round(np.random.default_rng(0).normal(size=(12, 3)), 2))
    source = MemoryShards(split_rows(X, np.array([1.0, -1.0, 1.0] * 4), None, 6), 3)
    problem = binary_problem(load_block(source, 0, (0, 1)), 1.0, 1.0, 1.0)
    w, v = np.zeros(4), np.ones(4)
    for kind in (kernels.L2, kernels.LOGISTIC):
        state = newton_state(problem, w, kind)
        newton_parts(state)
        hessian_part(state, v)
        line_search_part(state, v)
    dual_round(problem, np.zeros(problem.block.n_rows), w, 2.0, 1, 0)
    ocas_cut(ocas_start(problem), 0.0, True)
    ocas_cut(ocas_outputs(problem, np.zeros(problem.block.n_rows), v), 0.5)
    hinge_part(problem, v)
