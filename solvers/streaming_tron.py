"""`tron` out of core: the line-search Newton method of solvers/tron.py (LIBLINEAR >= 2.40,
newton.cpp; Galli & Lin 2021) with every data product a streaming pass over the blocks
(solvers/blocks.py), for the L2 loss and logistic regression.

Per Newton step: one pass for f(w), the margins, the gradient and the diagonal
preconditioner (M = (1 - a) I + a diag(H), a = 0.01) at w; one pass per conjugate-
gradient step (H d = d + sum_i h_i (z_i.d) z_i, h_i from the stored margins; CG stopped by
newton.cpp's quadratic-model rule, at most max(n_weights, 5) steps); one pass for the
margin changes y_i z_i.s of the direction, after which the Armijo line search (f(w + a s)
- f(w) <= 0.01 a g's, a = 1, 1/2, ...) costs O(rows) per trial. The stop rule is tron's:
||g|| <= eps' ||g(0)|| and ||g||^2 <= 2 tol f(w), tested on a gradient computed from w
itself; `converged` is then decided by the certificate's own pass
(solvers/out_of_core.py `certify_pass`). Memory: the margins and margin changes (16 bytes
a row) and seven vectors of n_weights beside the blocks.

Threads: each block's rows are cut into ranges of equal non-zeros (block_certificate
`row_parts`), one a thread (the kernels release the GIL), at most TRON_THREADS: the
function/gradient and Hessian-vector passes add each range into an accumulator of its
own (the first range into the pass's own vectors), summed after the pass; the direction's
margins are per row. The same thread count gives the same figures (to rounding those of
one thread).

Control: max_seconds, progress events and cancellation are checked after every block of
every pass.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from solvers import _out_of_core_kernels as ook
from solvers import _tron_kernels as tk
from solvers.block_certificate import block_rows, row_parts
from solvers.pcg import cg_step

ALPHA_PCG, EPS_CG = 0.01, 0.5
ETA_LINE_SEARCH, HALVINGS = 0.01, 20
# the products' threads: a second holds two more vectors of the weights' size in the
# function/gradient pass and one in a Hessian-vector pass, within the nine the data plan
# counts (app.domain.memory.out_of_core_working_bytes); more would need more
TRON_THREADS = 2


class Stopped(Exception):
    """A pass interrupted by the monitor (max_seconds, cancelled)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@njit(cache=True, nogil=True)
def evaluate_rows(rows, y, cost, w, bias_scale, loss_kind, margins, acc_g, acc_d):
    """margins_i = y_i w.z_i; acc_g += u_i z_i, acc_d += h_i z_i^2 (tron's gradient
    coefficient and Hessian weight at m_i); returns sum_i C_i loss(m_i)."""
    data, indices, indptr = rows
    bias_slot = w.shape[0] - 1
    bias_term = w[bias_slot] * bias_scale
    total = 0.0
    for i in range(indptr.shape[0] - 1):
        start, end, m = ook.row_margin(rows, w, y, bias_term, i)
        margins[i] = m
        total += cost[i] * tk._loss(m, loss_kind)
        u, h = tk._coefficients(m, y[i], cost[i], loss_kind)
        if u != 0.0 or h != 0.0:
            for k in range(start, end):
                j = np.uint32(indices[k])
                acc_g[j] += u * data[k]
                acc_d[j] += h * data[k] * data[k]
            acc_g[bias_slot] += u * bias_scale
            acc_d[bias_slot] += h * bias_scale * bias_scale
    return total


@njit(cache=True, nogil=True)
def hessian_rows(rows, y, cost, margins, loss_kind, bias_scale, v, acc):
    """acc += sum_i h_i (z_i.v) z_i; returns sum_i h_i (z_i.v)^2."""
    data, indices, indptr = rows
    bias_slot = v.shape[0] - 1
    bias_v = v[bias_slot] * bias_scale
    total = 0.0
    for i in range(indptr.shape[0] - 1):
        _, h = tk._coefficients(margins[i], y[i], cost[i], loss_kind)
        if h == 0.0:
            continue
        start = np.uint64(indptr[i])
        end = np.uint64(indptr[i + 1])
        t = bias_v
        for k in range(start, end):
            t += v[np.uint32(indices[k])] * data[k]
        coef = h * t
        for k in range(start, end):
            acc[np.uint32(indices[k])] += coef * data[k]
        acc[bias_slot] += coef * bias_scale
        total += coef * t
    return total


@njit(cache=True, nogil=True)
def step_margins(rows, y, s, bias_scale, out):
    """out_i = y_i z_i.s."""
    data, indices, indptr = rows
    bias_term = s[s.shape[0] - 1] * bias_scale
    for i in range(indptr.shape[0] - 1):
        dot = 0.0
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            dot += s[np.uint32(indices[k])] * data[k]
        out[i] = y[i] * (dot + bias_term)


def solve(run: Any, out: Any, loss: str, eps: float, tol: float, max_iter: int,
          counts: dict[str, float]) -> tuple[str, float]:
    """Newton steps on out.w until the stop rule, max_iter (Newton steps) or the monitor;
    (exit reason, relative gradient norm). `counts`: newton_steps, cg_iterations and
    norm0 (||grad f(0)||, kept from the first call: a continuation starts from w)."""
    kind = tk.LOGISTIC if loss == "logistic" else tk.L2
    n = out.y.shape[0]
    margins, steps = np.zeros(n), np.zeros(n)
    size = out.w.shape[0]
    counts.setdefault("newton_steps", 0)
    counts.setdefault("cg_iterations", 0)
    first_step = counts["newton_steps"]
    bounds, chunk = np.array([0, n], dtype=np.int64), np.zeros(1)
    threads = max(1, min(run.threads, TRON_THREADS))

    def each_block(work: Any) -> None:
        """work(rows, lo, hi, part) for each row range of each block (rows: the range's
        CSR arrays, indptr into the block's data; [lo, hi) its rows in the dataset),
        the ranges of a block side by side on the run's threads."""
        for block, shard in run.reader.one_pass():
            data, indices, indptr = block_rows(shard)
            cuts = row_parts(indptr, threads) if threads > 1 else [0, block.rows]
            ranges = [((data, indices, indptr[cuts[j]:cuts[j + 1] + 1]),
                       block.first_row + cuts[j], block.first_row + cuts[j + 1], j)
                      for j in range(len(cuts) - 1)]
            others = [run.pool.submit(work, *job) for job in ranges[1:]]
            work(*ranges[0])
            for future in others:
                future.result()
            reason = run.interrupted(int(counts["newton_steps"]), block.index,
                                     float(state["violation"]), lambda: n,
                                     lambda: -math.inf)
            if reason is not None:
                raise Stopped(reason)

    state = {"violation": math.inf, "f": 0.0}

    def evaluate() -> tuple[np.ndarray, np.ndarray]:
        grads = [np.zeros(size) for _ in range(threads)]
        diags = [np.zeros(size) for _ in range(threads)]
        loss_sums = [0.0] * threads

        def work(rows: Any, lo: int, hi: int, part: int) -> None:
            loss_sums[part] += evaluate_rows(rows, out.y[lo:hi], out.cost[lo:hi], out.w,
                                             out.bias_scale, kind, margins[lo:hi],
                                             grads[part], diags[part])
        each_block(work)
        grad, diag = grads[0], diags[0]
        for extra_g, extra_d in zip(grads[1:], diags[1:], strict=True):
            grad += extra_g
            diag += extra_d
        grads.clear()
        diags.clear()
        grad += out.w
        if out.bias_scale == 0.0:
            grad[-1] = diag[-1] = 0.0
        state["f"] = 0.5 * float(out.w @ out.w) + math.fsum(loss_sums)
        return grad, (1.0 - ALPHA_PCG) + ALPHA_PCG * (1.0 + diag)

    positives = int(np.count_nonzero(out.y > 0))
    tolerance = eps * max(min(positives, n - positives), 1) / n
    try:
        grad, precond = evaluate()
        norm0 = float(counts.setdefault("norm0", float(np.linalg.norm(grad))))
        while True:
            norm = float(np.linalg.norm(grad))
            state["violation"] = norm / norm0 if norm0 > 0 else 0.0
            if not (math.isfinite(norm) and math.isfinite(state["f"])):
                return "numerical_error", math.nan
            if norm <= tolerance * norm0 and norm * norm <= 2.0 * tol * state["f"]:
                return "converged", state["violation"]
            if counts["newton_steps"] - first_step >= max_iter:
                return "max_iter", state["violation"]
            s = _cg(each_block, out, margins, kind, grad, precond, counts, threads)
            gs, ws, ss = float(grad @ s), float(out.w @ s), float(s @ s)
            if not gs < 0.0:
                return ("numerical_error" if math.isnan(gs) else "stalled",
                        state["violation"])

            def direction(rows: Any, lo: int, hi: int, part: int,
                          s: np.ndarray = s) -> None:
                step_margins(rows, out.y[lo:hi], s, out.bias_scale, steps[lo:hi])
            each_block(direction)
            alpha, taken = 1.0, False
            for _ in range(HALVINGS):
                change = alpha * ws + 0.5 * alpha * alpha * ss + float(tk.line_loss_change(
                    out.cost, margins, steps, alpha, kind, bounds, chunk))
                if change <= ETA_LINE_SEARCH * alpha * gs:
                    taken = bool(tk.take_step(out.w, s, margins, steps, alpha))
                    break
                alpha *= 0.5
            if not taken:
                return "stalled", state["violation"]
            counts["newton_steps"] += 1
            grad, precond = evaluate()
    except Stopped as stopped:
        return stopped.reason, state["violation"]


def _cg(each_block: Any, out: Any, margins: np.ndarray, kind: int, grad: np.ndarray,
        precond: np.ndarray, counts: dict[str, float], threads: int) -> np.ndarray:
    """PCG on H s = -g from s = 0, newton.cpp's quadratic-model stop rule; each H d a
    pass."""
    size = grad.shape[0]
    s = np.zeros(size)
    r = -grad
    z = r / precond
    d = z.copy()
    ztr = float(z @ r)
    cg_tol = min(EPS_CG, math.sqrt(math.sqrt(ztr)))
    q = 0.0
    for i in range(1, max(size, 5) + 1):
        hds = [d.copy()] + [np.zeros(size) for _ in range(threads - 1)]
        quads = [0.0] * threads

        def work(rows: Any, lo: int, hi: int, part: int, d: np.ndarray = d,
                 hds: list[np.ndarray] = hds, quads: list[float] = quads) -> None:
            quads[part] += hessian_rows(rows, out.y[lo:hi], out.cost[lo:hi],
                                        margins[lo:hi], kind, out.bias_scale, d, hds[part])
        each_block(work)
        hd = hds[0]
        for extra in hds[1:]:
            hd += extra
        hds.clear()
        counts["cg_iterations"] += 1
        dhd = float(d @ d) + math.fsum(quads)
        if not dhd > 0.0:
            break
        z, znew, q_diff = cg_step(s, r, d, hd, dhd, ztr, 1.0 / precond)
        q += q_diff
        if i * q_diff >= cg_tol * q:
            break
        d = z + (znew / ztr) * d
        ztr = znew
    return s
