"""Dual coordinate descent with adaptive coordinate frequencies (ACF) for linear SVMs.

Problem: the dual D(a) of `solvers.dcd`'s docstring (0 <= a_i <= U_i, Qbar = Q +
diag(D_ii), l1 or l2 loss, per-example C_i, w(a) maintained, bias="augment" as LIBLINEAR -B).

Algorithm: Glasmachers & Dogan, "Accelerated Linear SVM Training with Adaptive Variable
Selection Frequencies", 2013: Algorithm 3 (the sweep loop), Algorithm 4 (the schedule of
one sweep built in O(n) from the preferences) and Algorithm 5 (the preference update),
with the paper's constants c = 1/5, p_min = 1/20, p_max = 20. The one-variable step is
that of Hsieh et al. 2008 (a_i <- min(max(a_i - G/Qbar_ii, 0), U_i), G = y_i w.x_i - 1 +
D_ii a_i); the paper writes it for l1, the l2 dual only changes Qbar_ii, U_i and G. Every
step's dual gain Delta = mu (g - mu/2 Qbar_ii) (g = -G, mu the step) moves the preference
p_i <- clip(p_i exp(c (Delta / Delta_ref - 1)), p_min, p_max), Delta_ref being the mean
gain of the first sweep, then a fading average (1 - 1/n) Delta_ref + Delta/n. There is no
shrinking: small preferences are the paper's "soft shrinking".

Stop rule (Algorithm 3): v = the largest KKT violation |projected gradient| seen in a sweep
(each variable measured when it is visited). When v < eps after a sweep that was built
from uniform preferences (the first sweep, or the sweep after a reset), converged;
when v < eps after an adaptive sweep, the preferences are reset to 1 and the next sweep
(every variable exactly once, in random order) must confirm v < eps.
The returned objectives are P(w) and the maximised dual value -D(a) (duality gap >= 0).
details["updates"] counts the coordinate steps (the paper's "update steps": every visit
of a scheduled variable, moved or not); "active_size" (also in progress events) is the
number of distinct variables in the current sweep's schedule (n for a uniform sweep).

Numerical guards, not in the paper: psum = sum_i p_i is computed exactly when a schedule
is built (Algorithm 5's incremental psum update drifts in floating point, so it is not
kept), and a schedule never exceeds n entries (rounding of the last m); while Delta_ref
is 0 (no progress seen yet) a step with zero gain keeps its preference and one with a
positive gain gets p_max.

Speed: a sweep visits rows in random order, so the kernel prefetches (llvm.prefetch) the
row and the scalars of the variable two positions ahead in the schedule; this changes no
result. As in `solvers.dcd`, the compiled kernel runs a bounded amount of work and returns, so the
wrapper can enforce max_seconds, emit throttled progress events and honour cancellation;
the whole state lives in arrays, so splitting the work does not change a single bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from solvers import dual_cd
from solvers._kernel_helpers import next_below, next_unit
from solvers.backbone import BinarySolution, LinearProblem, ProgressMonitor

WARMUP_VARIANTS = dual_cd.WARMUP_VARIANTS

# The paper's constants (Section 3).
PREFERENCE_RATE = 0.2  # c
PREFERENCE_MIN = 1.0 / 20.0  # p_min
PREFERENCE_MAX = 20.0  # p_max
_SHRINK_FACTOR = math.exp(-PREFERENCE_RATE)  # exp(c (0 / Delta_ref - 1)): a step with no gain

# counters[] slots (int64) and gauges[] slots (float64) of the kernel state, in the order
# the kernel loads and stores them.
_ITERATION, _POSITION, _SWEEP_LENGTH, _IN_SWEEP, _CAN_STOP, _UPDATES, _SCHEDULED = range(7)
_GAIN_REFERENCE, _VIOLATION, _LAST_VIOLATION = range(3)

# Prefetch distances, in schedule positions: the row bounds of schedule[s + 4] and the row,
# alpha_i, y_i, ... of schedule[s + 2] are requested while step s runs (a sweep visits rows
# in random order, so without this most steps wait for memory; ~35% faster on news20).
_PREFETCH_BOUNDS_AHEAD, _PREFETCH_ROW_AHEAD = 4, 2



def solve(
    problem: LinearProblem, params: dict[str, Any], monitor: ProgressMonitor
) -> BinarySolution:
    """Solve one binary problem with ACF; `params` as filled by validate_params("acf")."""
    return dual_cd.solve_dual(_AcfState, problem, params, monitor)


class _AcfState(dual_cd.DualState):
    """DualState plus the preferences, the sweep's schedule and the gain reference."""

    def __init__(self, problem: LinearProblem, params: dict[str, Any]) -> None:
        super().__init__(problem, params)
        X = problem.X
        n_rows = X.n_rows
        self.preference = np.ones(n_rows)
        self.schedule = np.zeros(n_rows, dtype=np.int64)
        # iteration, position, sweep length, in sweep, canstop (true), updates, scheduled
        self.counters = np.array([0, 0, 0, 0, 1, 0, n_rows], dtype=np.int64)
        # Delta_ref, v of the sweep in progress, v of the last finished sweep
        self.gauges = np.array([0.0, 0.0, math.nan])
        self._use_kernel(_acf_sweeps, (self.alpha, self.w, self.preference, self.schedule),
                         (self.counters, self.gauges, self.rng))

    def progress(self) -> dict[str, Any]:
        return {"violation": float(self.gauges[_LAST_VIOLATION]),
                "active_size": int(self.counters[_SCHEDULED])}

    def details(self) -> dict[str, Any]:
        return {"updates": int(self.counters[_UPDATES]), **super().details()}


# Row loops and the RNG: solvers/_kernel_helpers.py. Unsigned counters and indices: no
# negative-index wraparound code.
_U1 = np.uint64(1)


@intrinsic
def _prefetch_intrinsic(typingctx, array, index):
    """Hint the CPU to load the cache line of array[index] (LLVM's llvm.prefetch; no-op
    semantics, never faults)."""
    signature = types.void(array, index)

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        byte_pointer = ir.IntType(8).as_pointer()
        function_type = ir.FunctionType(ir.VoidType(), [byte_pointer] + [ir.IntType(32)] * 3)
        prefetch = builder.module.declare_intrinsic("llvm.prefetch", [byte_pointer],
                                                    function_type)
        read, high_locality, data_cache = (ir.Constant(ir.IntType(32), v) for v in (0, 3, 1))
        address = builder.bitcast(builder.gep(data, [args[1]]), byte_pointer)
        builder.call(prefetch, [address, read, high_locality, data_cache])
        return context.get_dummy_value()

    return signature, codegen


# _prefetch(array, index) in compiled code (mypy would read the typing-time signature)
_prefetch: Any = _prefetch_intrinsic


@njit(cache=True, inline="always")
def _prefetch_variable(rows, labels, variables, i):
    """Prefetch row i of X (data and indices, one hint per 64-byte line) and its scalars."""
    data, indices, indptr = rows
    y, upper, diag, qbar_diag = labels
    alpha, _, preference, _ = variables
    for k in range(indptr[i], indptr[i + _U1], 8):
        _prefetch(data, np.uint64(k))
    for k in range(indptr[i], indptr[i + _U1], 16):
        _prefetch(indices, np.uint64(k))
    for array in (alpha, preference, y, upper, diag, qbar_diag):
        _prefetch(array, i)


@njit(cache=True)
def _build_schedule(preference, schedule, rng):
    """Algorithm 4: schedule[:length] lists i about p_i n / psum times; then shuffled.

    Returns (length, number of distinct variables scheduled). psum is recomputed here.
    """
    n_rows = preference.shape[0]
    remaining = 0.0
    for i in range(n_rows):
        remaining += preference[i]  # N = psum
    j = 0
    scheduled = 0
    for i in range(n_rows):
        if j >= n_rows:
            break
        # m = p_i (n - j) / N; copies = floor(m) + Bernoulli(m - floor(m))
        m = preference[i] * (n_rows - j) / remaining if remaining > 0.0 else float(n_rows - j)
        copies = math.floor(m)
        if next_unit(rng) < m - copies:
            copies += 1
        copies = min(copies, n_rows - j)
        if copies > 0:
            scheduled += 1
        for _ in range(copies):
            schedule[j] = i
            j += 1
        remaining -= preference[i]  # N <- N - p_i
    # schedule[:j] = random permutation of itself (Fisher-Yates): "in random order"
    for t in range(j - 1):
        k = t + next_below(rng, j - t)
        swap = schedule[t]
        schedule[t] = schedule[k]
        schedule[k] = swap
    return j, scheduled


@njit(cache=True, inline="always")
def _adapted_preference(p_i, gain, gain_reference):
    """Algorithm 5: clip(p_i exp(c (Delta / Delta_ref - 1)), p_min, p_max)."""
    if gain == 0.0 and gain_reference > 0.0:
        p_new = p_i * _SHRINK_FACTOR  # the same value, without an exp() per idle step
    elif gain_reference > 0.0:
        p_new = p_i * math.exp(PREFERENCE_RATE * (gain / gain_reference - 1.0))
    elif gain > 0.0:
        p_new = PREFERENCE_MAX
    else:
        p_new = p_i
    return min(max(p_new, PREFERENCE_MIN), PREFERENCE_MAX)


@njit(cache=True, error_model="numpy")
def _acf_sweeps(rows, labels, variables, state, settings):
    """Run ACF sweeps until convergence, max_iter, a non-finite gradient or the work budget.

    rows = (data, indices, indptr) of X; labels = (y, U, D, Qbar_ii); variables =
    (alpha, w, preference, schedule) with w[-1] the bias-feature weight; state =
    (counters, gauges, rng) as described by the _ITERATION... and _GAIN_REFERENCE... slots;
    settings = (B, eps, max_iter, work_budget). Returns a status code; all progress is
    kept in the arrays.
    """
    indptr = rows[2]
    qbar_diag = labels[3]
    alpha, w, preference, schedule = variables
    counters, gauges, rng = state
    bias_scale, eps, max_iter, work_budget = settings

    n_rows = indptr.shape[0] - 1
    inv_n = 1.0 / n_rows
    iteration, s, sweep_length, in_sweep, can_stop, updates, scheduled = counters
    gain_reference, violation = gauges[:_LAST_VIOLATION]
    work = 0
    status = dual_cd.MAX_ITER

    while iteration < max_iter:
        if in_sweep == 0:
            if work >= work_budget:
                status = dual_cd.PAUSED
                break
            in_sweep = 1
            s = 0
            violation = 0.0
            sweep_length, scheduled = _build_schedule(preference, schedule, rng)
            work += n_rows
        first_sweep = iteration == 0

        while s < sweep_length:
            if work >= work_budget:
                break
            i = np.uint64(schedule[s])  # unsigned: no negative-index wraparound code
            if s + _PREFETCH_BOUNDS_AHEAD < sweep_length:
                _prefetch(indptr, np.uint64(schedule[s + _PREFETCH_BOUNDS_AHEAD]))
            if s + _PREFETCH_ROW_AHEAD < sweep_length:
                _prefetch_variable(rows, labels, variables,
                                   np.uint64(schedule[s + _PREFETCH_ROW_AHEAD]))
            # row i's bounds, a_i, U_i and G = y_i w.x_i - 1 + D_ii a_i (the gradient of D
            # along a_i; the paper's g = -G)
            start, end, row_work, g, a_i, u_i = dual_cd.visit(rows, labels, alpha, w, bias_scale, i)
            work += row_work
            if not np.isfinite(g):
                status = dual_cd.NON_FINITE
                break
            q_ii = qbar_diag[i]

            # KKT violation: v = max(v, G if a_i > 0, -G if a_i < U_i)
            if a_i > 0.0 and g > violation:
                violation = g
            if a_i < u_i and -g > violation:
                violation = -g

            # mu = clip(-G / Qbar_ii, -a_i, U_i - a_i);  w += mu y_i x_i
            step = 0.0
            if (g < 0.0 and a_i < u_i) or (g > 0.0 and a_i > 0.0):
                step = dual_cd.coordinate_step(rows, labels, alpha, w, bias_scale, i, start,
                                               end, g)
            updates += 1

            # Algorithm 5: Delta = mu (g - mu/2 Qbar_ii) with g = -G
            gain = step * (-g - 0.5 * step * q_ii)
            if first_sweep:
                gain_reference += gain * inv_n
            else:
                preference[i] = _adapted_preference(preference[i], gain, gain_reference)
                gain_reference = (1.0 - inv_n) * gain_reference + gain * inv_n
            s += 1

        status = dual_cd.sweep_status(status, s, sweep_length)
        if status != dual_cd.MAX_ITER:
            break

        # end of a sweep: Algorithm 3's stop rule
        in_sweep = 0
        iteration += 1
        gauges[_LAST_VIOLATION] = violation
        if violation < eps:
            if can_stop == 1:
                status = dual_cd.CONVERGED
                break
            # p <- (1, ..., 1): the next sweep visits every variable once and must confirm
            for k in range(n_rows):
                preference[k] = 1.0
            can_stop = 1
        else:
            can_stop = 0

    counters[:] = (iteration, s, sweep_length, in_sweep, can_stop, updates, scheduled)
    gauges[:_LAST_VIOLATION] = (gain_reference, violation)
    return status
