"""SMO with batched working sets (`working_set="batched"`): ThunderSVM's decomposition
(Wen, Shi, Li, He & Chen, "ThunderSVM: A Fast SVM Library on GPUs and CPUs", JMLR 19,
2018; the q-variable working sets of Joachims 1999, "Making large-scale SVM learning
practical") on the CPU's threads.

Each outer iteration
1. checks LIBSVM's stop rule on all l variables, m(a) - M(a) < eps (no shrinking: the
   certificate is the full set's, as LIBSVM's unshrunk check);
2. chooses q variables: the q - q_new kept from the last working set (the most recently
   chosen) and q_new new ones, half the largest -y_t G_t of I_up(a), half the smallest of
   I_low(a) (first order, as ThunderSVM), ties to the lower index;
3. computes the missing kernel columns Q_:t of the working set in one parallel pass over
   the rows (cache-blocked: a block of positions is read once for every column; dense and
   0/1 rows) or column by column with the column's own parallel loop (other sparse rows),
   kept in a column cache of `cache_mb` MB (least recently used columns out);
4. solves the q-variable subproblem by LIBSVM's SMO steps (second-order pairs, the same
   two-variable update) on the q x q block until its own violation is below
   max(eps, LOCAL_SHARE x its first violation) or LOCAL_STEPS x q steps;
5. updates G over all l variables with the columns of the variables that moved, in
   parallel over the rows.

The arithmetic of a column, a step and the gradient does not depend on the threads (the
parallel passes only partition rows; every sum over the working set runs in one order), so
`threads=2` returns bit-for-bit the result of `threads=1`, and whether the passes run on
the threads or on the calling one is measured call by call (solvers/grain.py: beside a
busy neighbour a pass that waits for a descheduled thread costs more than it saves; a
step of the meter, and of a call's budget, is an outer iteration). The trajectory is
not LIBSVM's: the solution is LIBSVM's to the same eps (the same stop rule on the same
problem), not to the digit. Counted as steps (a fit's iterations, what max_iter bounds):
the subproblems' SMO steps.

Formulations: those of LIBSVM's Solver with y in {-1, +1} on one set of rows - c_svc and
one_class (its initial alpha); the nu formulations (Solver_NU's rule) and the regressions
(2n variables over n rows) keep the pair solver."""

from __future__ import annotations

import math
import mmap
import time
from typing import Any

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic

from solvers.backbone import CsrArrays
from solvers.grain import GrainMeter
from solvers.smo.columns import column_range, fill_range, kernel_diagonal
from solvers.smo.layout import (
    CONVERGED,
    LOWER,
    MAX_ITER,
    NON_FINITE,
    PAUSED,
    TAU,
    UPPER,
    ZERO,
    parallel_modes,
)
from solvers.smo.rows import rows_in_order
from solvers.smo.selection import pair_step, update_status
from solvers.smo.solution import _rho

WORKING_SET = 512  # q, at most (and at most the columns the cache holds, and l)
LOCAL_SHARE = 0.1  # a subproblem stops below max(eps, 0.1 x its first violation)
LOCAL_STEPS = 8  # ... or after 8 q steps
BLOCK = 2048  # positions per block of the batched column pass
# the parallel passes only above this much work (rows x columns, or rows)
PARALLEL_MIN = 20_000

# counters
(B_ITER, B_OUTER, B_EVALS, B_HITS, B_MISSES, B_STAMP, B_FILLED, B_CYCLES,
 B_PARALLEL_CYCLES) = range(9)
B_COUNTERS = 9
B_VIOLATION = 0


class BatchedState:
    """The arrays of one binary problem in problem order (no shrinking, no permutation),
    its column cache and its working set; `run(outer)` is the driver's bounded call."""

    def __init__(self, X: CsrArrays, sq_norms: np.ndarray, rows: np.ndarray, y: np.ndarray,
                 cost: np.ndarray, kernel: tuple[int, float, float, int], cache_mb: float,
                 chunks: int, linear: np.ndarray | None = None,
                 alpha0: np.ndarray | None = None) -> None:
        l = int(rows.shape[0])
        self.l = l
        self.eps, self.max_iter = 0.0, 0
        self.pair: list[float | None] = []
        perm = np.ascontiguousarray(rows, dtype=np.int64).copy()
        self.y = np.ascontiguousarray(y, dtype=np.int8).copy()
        self.cost = np.ascontiguousarray(cost, dtype=np.float64).copy()
        rows_arrays, self.column_source = rows_in_order(X, sq_norms, perm, kernel)
        self.rows = rows_arrays
        self.kernel = kernel
        self.diagonal = np.empty(l)
        kernel_diagonal(rows_arrays[0][3], kernel, self.diagonal)
        self.linear = (np.full(l, -1.0) if linear is None
                       else np.ascontiguousarray(linear, dtype=np.float64).copy())
        self.alpha = np.zeros(l)
        self.status = np.full(l, LOWER, dtype=np.int8)
        self.gradient = self.linear.copy()
        # the cache: `capacity` columns of l float32 (at least two), slot_of[t] = -1 if none
        capacity = max(2, min(l, int(cache_mb * (1 << 20)) // (4 * max(l, 1))))
        self.q = max(2, min(WORKING_SET, capacity, l))
        self.columns = _huge_pages(capacity, l)
        self.slot_of = np.full(l, -1, dtype=np.int64)
        self.owner = np.full(capacity, -1, dtype=np.int64)
        self.last_used = np.zeros(capacity, dtype=np.int64)
        self.working = np.empty(self.q, dtype=np.int64)
        self.counters = np.zeros(B_COUNTERS, dtype=np.int64)
        self.values = np.array([math.inf])
        # wall seconds of the compiled calls, and the share of them in the passes that
        # run on all the threads (the columns, the gradient, the scans, the block)
        self.seconds = 0.0
        self.parallel_seconds = 0.0
        self.chunks = max(1, int(chunks))
        # the passes on the threads ("fine") or none of them: the grain meter picks one per
        # part of a call
        self.parallel_of = parallel_modes(self.chunks, PARALLEL_MIN, PARALLEL_MIN * 5,
                                          PARALLEL_MIN * 5)
        self.parallel = self.parallel_of[False]
        self.grain = GrainMeter(self.chunks)
        # sources the batched pass reads (no scattered x_i): dense rows and bit sets
        self.batch_pass = self.column_source in ("dense", "bits")
        if alpha0 is not None:
            self.alpha[:] = np.ascontiguousarray(alpha0, dtype=np.float64)
            for t in range(l):
                update_status(self.alpha, self.cost, self.status, t)
            _initial_gradient(*self._args())

    def _args(self) -> tuple[Any, ...]:
        return (self.rows, self.kernel, self.y, self.cost, self.diagonal, self.alpha,
                self.status, self.gradient, self.columns, self.slot_of, self.owner,
                self.last_used, self.working, self.counters, self.values, self.parallel,
                self.batch_pass)

    @property
    def iteration(self) -> int:
        return int(self.counters[B_ITER])

    def run(self, outer: int) -> int:
        """Up to `outer` outer iterations, with the passes on the threads or not as the
        grain meter measures; returns the kernel's status."""
        return self.grain.call(outer, self._run_part, PAUSED)

    def _run_part(self, fine: bool, outer: int) -> tuple[int, int, float]:
        """One compiled call in one mode: (status, outer iterations done, work: the kernel
        values computed + l per outer iteration, the gradient pass)."""
        self.parallel = self.parallel_of[fine]
        counters = self.counters
        arguments = (*self._args(), (float(self.eps), int(self.max_iter), int(outer)))
        cycles, inside = int(counters[B_CYCLES]), int(counters[B_PARALLEL_CYCLES])
        done, evaluations = int(counters[B_OUTER]), int(counters[B_EVALS])
        started = time.perf_counter()
        status = int(_batched_steps(*arguments))
        seconds = time.perf_counter() - started
        cycles = int(counters[B_CYCLES]) - cycles
        self.seconds += seconds
        if cycles > 0:  # no cycle counter: no split
            self.parallel_seconds += seconds * (
                int(counters[B_PARALLEL_CYCLES]) - inside) / cycles
        done = int(counters[B_OUTER]) - done
        return status, done, float(int(counters[B_EVALS]) - evaluations + done * self.l)

    def serial_share(self) -> float:
        """The share of the solver's wall time outside its parallel passes (Amdahl's s on
        one thread; NaN without a cycle counter)."""
        if self.seconds <= 0 or self.counters[B_CYCLES] == 0:
            return math.nan
        return max(0.0, 1.0 - self.parallel_seconds / self.seconds)

    def objective(self) -> float:
        return float(0.5 * np.dot(self.alpha, self.gradient + self.linear))

    def snapshot(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "primal": None, "dual": self.objective(),
                "gap": None, "violation": float(self.values[B_VIOLATION]),
                "active_size": self.l, "pair": self.pair, "kkt_violators": None}

    def finish(self) -> tuple[np.ndarray, float, float]:
        out = np.zeros(4)
        _rho(self.y, self.status, self.gradient, out)
        return self.alpha.copy(), float(out[0]), self.objective()


def _huge_pages(rows: int, columns: int) -> np.ndarray:
    """A zeroed float32 (rows, columns) array in an anonymous mapping advised for
    transparent huge pages (where the kernel has them): the cache's first touch then
    faults once per 2 MB, not per 4 KB page (on a virtual machine a 200 MB cache's 51,200
    faults cost tenths of a second, inside the parallel column pass)."""
    size = max(rows * columns * 4, 1)
    mapping = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        mapping.madvise(mmap.MADV_HUGEPAGE)
    return np.frombuffer(mapping, dtype=np.float32, count=rows * columns).reshape(
        rows, columns)


@intrinsic
def _cycles(typingctx):
    """The CPU's cycle counter (LLVM's readcyclecounter: rdtsc on x86-64, 0 where there is
    none): the split of a compiled call's time between its serial and parallel parts."""

    def codegen(context, builder, signature, args):
        import llvmlite.ir as ir

        function = builder.module.declare_intrinsic(
            "llvm.readcyclecounter", fnty=ir.FunctionType(ir.IntType(64), []))
        return builder.call(function, [])

    return types.int64(), codegen


@njit(cache=True, inline="always")
def _now():
    return _cycles()  # type: ignore[call-arg]


@njit(cache=True, nogil=True)
def _initial_gradient(rows, kernel, y, cost, diagonal, alpha, status, gradient, columns,
                      slot_of, owner, last_used, working, counters, values, parallel,
                      batch_pass):
    """G = p + Q alpha0 from the columns of the nonzero alphas (LIBSVM's Solver::Solve),
    each computed into the cache's first slot (nothing is cached yet)."""
    l = y.shape[0]
    column = columns[0]
    for t in range(l):
        if alpha[t] != 0.0:
            fill_range(rows[0], rows[2], kernel, y, t, ZERO, l, column, parallel)
            counters[B_EVALS] += l
            a = alpha[t]
            for s in range(l):
                gradient[s] += a * column[s]


@njit(cache=True, inline="always")
def _eligible(y_t, status_t, up):
    """t in I_up(a) (up) or I_low(a): LIBSVM's is_upper / is_lower_bound with y_t."""
    if up:
        return status_t != UPPER if y_t > 0 else status_t != LOWER
    return status_t != LOWER if y_t > 0 else status_t != UPPER


@njit(cache=True)
def _heap_push(keys, items, n, key, item):
    """A min-heap of (key, -item) pairs (the smallest key, then the largest index, on top)
    with room for keys.shape[0]; returns its size."""
    k = keys.shape[0]
    if n < k:
        pos = n
        n += 1
    elif _before(keys[0], items[0], key, item):  # better than the worst kept
        pos = 0  # replace the top, sift down
        while True:
            child = 2 * pos + 1
            if child >= n:
                break
            if child + 1 < n and _before(keys[child + 1], items[child + 1], keys[child],
                                         items[child]):
                child += 1
            if _before(keys[child], items[child], key, item):
                keys[pos] = keys[child]
                items[pos] = items[child]
                pos = child
            else:
                break
        keys[pos] = key
        items[pos] = item
        return n
    else:
        return n
    while pos > 0:  # sift up
        parent = (pos - 1) // 2
        if _before(key, item, keys[parent], items[parent]):
            keys[pos] = keys[parent]
            items[pos] = items[parent]
            pos = parent
        else:
            break
    keys[pos] = key
    items[pos] = item
    return n


@njit(cache=True, inline="always")
def _before(key_a, item_a, key_b, item_b):
    """Heap order: the worse candidate first (smaller key; at a tie the larger index)."""
    return key_a < key_b or (key_a == key_b and item_a > item_b)


@njit(cache=True, inline="always")
def _heap_range(y, status, gradient, in_set, up, lo, hi, heap_keys, heap_items):
    """The best heap_keys.shape[0] candidates of [lo, hi) into the heap; returns their
    number."""
    n = 0
    for t in range(lo, hi):
        if in_set[t] or not _eligible(y[t], status[t], up):
            continue
        value = -y[t] * gradient[t]
        n = _heap_push(heap_keys, heap_items, n, value if up else -value, t)
    return n


@njit(cache=True, parallel=True)
def _heaps_parallel(y, status, gradient, in_set, up, chunks, keys, items, counts):
    """Each chunk of rows its own heap of the best keys.shape[1] candidates."""
    l = y.shape[0]
    for c in prange(chunks):
        counts[c] = _heap_range(y, status, gradient, in_set, up, c * l // chunks,
                                (c + 1) * l // chunks, keys[c], items[c])


@njit(cache=True)
def _select(y, status, gradient, in_set, up, count, keys, items, chunks):
    """The `count` variables of I_up (up: largest -y_t G_t) or I_low (smallest) not in the
    set, best first (ties to the lower index), into items[:n]; returns n and the cycles of
    the pass over the rows (the parallel part). With chunks > 1
    each chunk of rows keeps its best `count` and the chunks' candidates are merged: the
    same variables in the same order (the order is total)."""
    k = min(count, keys.shape[0])
    if k <= 0:
        return 0, 0
    start = _now()
    if chunks > 1:
        chunk_keys = np.empty((chunks, k))
        chunk_items = np.empty((chunks, k), dtype=np.int64)
        counts = np.zeros(chunks, dtype=np.int64)
        _heaps_parallel(y, status, gradient, in_set, up, chunks, chunk_keys, chunk_items,
                        counts)
        total = 0
        for c in range(chunks):
            total += counts[c]
        candidate_keys = np.empty(total)
        candidate_items = np.empty(total, dtype=np.int64)
        n = 0
        for c in range(chunks):
            candidate_keys[n:n + counts[c]] = chunk_keys[c, :counts[c]]
            candidate_items[n:n + counts[c]] = chunk_items[c, :counts[c]]
            n += counts[c]
    else:
        candidate_keys = keys[:k]
        candidate_items = items[:k]
        n = _heap_range(y, status, gradient, in_set, up, 0, y.shape[0], candidate_keys,
                        candidate_items)
    heaps = _now() - start
    # best first: by key, descending, ties to the lower index (a stable sort of the
    # candidates in index order)
    by_index = np.argsort(candidate_items[:n])
    ordered_keys = candidate_keys[:n][by_index]
    ordered_items = candidate_items[:n][by_index]
    order = np.argsort(-ordered_keys, kind="mergesort")
    n = min(n, k)
    for a in range(n):
        items[a] = ordered_items[order[a]]
    return n, heaps


@njit(cache=True, inline="always")
def _violation_range(y, status, gradient, lo, hi):
    """(max of -y_t G_t on I_up, min on I_low) over [lo, hi)."""
    gmax = -np.inf
    gmin = np.inf
    for t in range(lo, hi):
        value = -y[t] * gradient[t]
        if _eligible(y[t], status[t], True) and value > gmax:
            gmax = value
        if _eligible(y[t], status[t], False) and value < gmin:
            gmin = value
    return gmax, gmin


@njit(cache=True, parallel=True)
def _violation_parallel(y, status, gradient, chunks, out):
    l = y.shape[0]
    for c in prange(chunks):
        gmax, gmin = _violation_range(y, status, gradient, c * l // chunks,
                                      (c + 1) * l // chunks)
        out[c] = gmax
        out[chunks + c] = gmin


@njit(cache=True)
def _violation(y, status, gradient, chunks):
    """m(a) - M(a) over all variables: max of -y_t G_t on I_up, minus min on I_low (a max
    and a min: the same in chunks)."""
    if chunks == 1:
        gmax, gmin = _violation_range(y, status, gradient, 0, y.shape[0])
        return gmax - gmin
    out = np.empty(2 * chunks)
    _violation_parallel(y, status, gradient, chunks, out)
    return out[:chunks].max() - out[chunks:].min()


@njit(cache=True, inline="always")
def _block_range(columns, slot_of, working, size, block, lo, hi):
    """block[a, b] = Q_{working[a], working[b]} from the cached columns, a in [lo, hi)."""
    for a in range(lo, hi):
        column = columns[slot_of[working[a]]]
        for b in range(size):
            block[a, b] = column[working[b]]


@njit(cache=True, parallel=True)
def _block_parallel(columns, slot_of, working, size, block, chunks):
    """The block, its rows in chunks (one parallel region: called only with chunks > 1,
    since a region of one chunk still waits for every thread)."""
    for c in prange(chunks):
        _block_range(columns, slot_of, working, size, block, c * size // chunks,
                     (c + 1) * size // chunks)


@njit(cache=True, parallel=True)
def _batch_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale, cdata, cpos,
                    cptr, bits, table, kind, gamma, coef0, degree, y, which, slots, m,
                    columns, chunks):
    """Columns Q_:which[k] into columns[slots[k]], k < m: the rows in blocks of BLOCK
    positions per thread, each block read once for all m columns (dense and 0/1 rows:
    no scattered x_i)."""
    l = y.shape[0]
    for c in prange(chunks):
        lo = c * l // chunks
        hi = (c + 1) * l // chunks
        for start in range(lo, hi, BLOCK):
            stop = min(start + BLOCK, hi)
            for k in range(m):
                column_range(((data, indices, indptr, sq_norms, dense),
                              (Xd, dots, scale, cdata, cpos, cptr, bits, table)),
                             (kind, gamma, coef0, degree), y, which[k], start, stop,
                             columns[slots[k]])


@njit(cache=True)
def _batch_seq(rows, kernel, y, which, slots, m, columns):
    l = y.shape[0]
    for start in range(0, l, BLOCK):
        stop = min(start + BLOCK, l)
        for k in range(m):
            column_range((rows[0], rows[2]), kernel, y, which[k], start, stop,
                         columns[slots[k]])


@njit(cache=True, parallel=True)
def _gradient_parallel(gradient, columns, slots, deltas, m, chunks):
    """G[t] += sum_k deltas[k] Q_k[t] over the rows in chunks (the sum in k order)."""
    l = gradient.shape[0]
    for c in prange(chunks):
        _gradient_range(gradient, columns, slots, deltas, m, c * l // chunks,
                        (c + 1) * l // chunks)


@njit(cache=True, inline="always")
def _gradient_range(gradient, columns, slots, deltas, m, lo, hi):
    for start in range(lo, hi, BLOCK):
        stop = np.uint64(min(start + BLOCK, hi))
        first = np.uint64(start)
        for k in range(m):
            column = columns[slots[k]]
            d = deltas[k]
            for t in range(first, stop):
                gradient[t] += d * column[t]


@njit(cache=True, nogil=True)
def _batched_steps(rows, kernel, y, cost, diagonal, alpha, status, gradient, columns,
                   slot_of, owner, last_used, working, counters, values, parallel,
                   batch_pass, settings):
    """Outer iterations until convergence, max_iter (steps of the subproblems), a
    non-finite step or the budget of outer iterations (settings = (eps, max_iter,
    budget)); returns a status code
    (layout.py)."""
    eps, max_iter, budget = settings
    l = y.shape[0]
    q = working.shape[0]
    chunks = parallel.chunks
    in_set = np.zeros(l, dtype=np.bool_)
    keys = np.empty(q)
    items = np.empty(q, dtype=np.int64)
    block = np.empty((q, q), dtype=np.float32)
    a_b = np.empty(q)
    g_b = np.empty(q)
    y_b = np.empty(q, dtype=np.int8)
    c_b = np.empty(q)
    d_b = np.empty(q)
    s_b = np.empty(q, dtype=np.int8)
    deltas = np.empty(q)
    moved = np.empty(q, dtype=np.int64)
    which = np.empty(q, dtype=np.int64)
    slots = np.empty(q, dtype=np.int64)
    outer = 0  # in this call
    call_start = _now()
    while True:
        scans = chunks if chunks > 1 and l >= parallel.min_pass else 1
        start = _now()
        violation = _violation(y, status, gradient, scans)
        counters[B_PARALLEL_CYCLES] += _now() - start
        values[B_VIOLATION] = violation
        if violation < eps:
            counters[B_CYCLES] += _now() - call_start
            return CONVERGED
        if counters[B_ITER] >= max_iter:
            counters[B_CYCLES] += _now() - call_start
            return MAX_ITER
        if outer >= budget:
            counters[B_CYCLES] += _now() - call_start
            return PAUSED
        # ---- the working set: the most recent kept, q_new new ones (half each side)
        filled = counters[B_FILLED]
        keep = min(filled, q // 2)
        q_new = q - keep
        kept = working[filled - keep:filled].copy()
        in_set[:] = False
        for a in range(keep):
            in_set[kept[a]] = True
        # kept members first: the next iteration keeps the newest
        for a in range(keep):
            working[a] = kept[a]
        n = keep
        for r in range(4):  # half each side, then what one side lacks from the other
            up = r % 2 == 0
            want = ((q_new + 1) // 2 if up else q_new // 2) if r < 2 else q - n
            got, heaps = _select(y, status, gradient, in_set, up, min(want, q - n), keys,
                                 items, scans)
            counters[B_PARALLEL_CYCLES] += heaps
            for a in range(got):
                working[n + a] = items[a]
                in_set[items[a]] = True
            n += got
        size = n
        counters[B_FILLED] = size
        # ---- their columns: cached, or computed in one pass (LRU slots out)
        counters[B_STAMP] += 1
        stamp = counters[B_STAMP]
        missing = 0
        for a in range(size):
            t = working[a]
            if slot_of[t] >= 0:
                last_used[slot_of[t]] = stamp
                counters[B_HITS] += 1
            else:
                which[missing] = t
                missing += 1
        if missing > 0:
            order = np.argsort(last_used, kind="mergesort")
            o = 0
            for k in range(missing):
                while last_used[order[o]] == stamp:  # a slot of this working set
                    o += 1
                s = order[o]
                o += 1
                if owner[s] >= 0:
                    slot_of[owner[s]] = -1
                owner[s] = which[k]
                slot_of[which[k]] = s
                last_used[s] = stamp
                slots[k] = s
            start = _now()
            if batch_pass and chunks > 1 and missing * l >= parallel.min_pass:
                positional, dense_rows = rows[0], rows[2]
                data, indices, indptr, sq_norms, dense = positional
                Xd, dots, scale, cdata, cpos, cptr, bits, table = dense_rows
                _batch_parallel(data, indices, indptr, sq_norms, dense, Xd, dots, scale,
                                cdata, cpos, cptr, bits, table, kernel[0], kernel[1],
                                kernel[2], kernel[3], y, which, slots, missing, columns,
                                chunks)
            elif batch_pass:
                _batch_seq(rows, kernel, y, which, slots, missing, columns)
            else:
                for k in range(missing):
                    fill_range(rows[0], rows[2], kernel, y, which[k], ZERO, l,
                               columns[slots[k]], parallel)
            counters[B_PARALLEL_CYCLES] += _now() - start
            counters[B_EVALS] += missing * l
            counters[B_MISSES] += missing
        # ---- the subproblem: LIBSVM's steps on the q x q block
        start = _now()
        if scans > 1:
            _block_parallel(columns, slot_of, working, size, block, scans)
        else:
            _block_range(columns, slot_of, working, size, block, 0, size)
        counters[B_PARALLEL_CYCLES] += _now() - start
        for a in range(size):
            t = working[a]
            a_b[a] = alpha[t]
            g_b[a] = gradient[t]
            y_b[a] = y[t]
            c_b[a] = cost[t]
            d_b[a] = diagonal[t]
            s_b[a] = status[t]
        local_eps = -1.0
        inner = 0
        limit = LOCAL_STEPS * size
        while inner < limit:
            gmax = -np.inf
            i = -1
            for a in range(size):
                if _eligible(y_b[a], s_b[a], True) and -y_b[a] * g_b[a] >= gmax:
                    gmax = -y_b[a] * g_b[a]
                    i = a
            if i < 0:
                break
            q_i = block[i]
            y_i = np.float64(y_b[i])
            gmax2 = -np.inf
            best = np.inf
            j = -1
            for b in range(size):
                if not _eligible(y_b[b], s_b[b], False):
                    continue
                value = y_b[b] * g_b[b]
                if value >= gmax2:
                    gmax2 = value
                grad_diff = gmax + value
                if grad_diff > 0:
                    quad = d_b[i] + d_b[b] - 2.0 * y_i * y_b[b] * q_i[b]
                    decrease = -(grad_diff * grad_diff) / (quad if quad > 0 else TAU)
                    if decrease <= best:
                        best = decrease
                        j = b
            local = gmax + gmax2
            if local_eps < 0:
                local_eps = max(eps, LOCAL_SHARE * local)
            if j < 0 or local < local_eps:
                break
            delta_i, delta_j, crossed = pair_step(i, j, q_i, y_b, c_b, d_b, a_b, s_b, g_b)
            if crossed == 0:
                counters[B_CYCLES] += _now() - call_start
                return NON_FINITE
            q_j = block[j]
            for b in range(size):
                g_b[b] += q_i[b] * delta_i + q_j[b] * delta_j
            inner += 1
        counters[B_ITER] += inner
        counters[B_OUTER] += 1
        outer += 1
        # ---- G over all rows from the columns of the variables that moved
        m = 0
        for a in range(size):
            t = working[a]
            d = a_b[a] - alpha[t]
            if d != 0.0:
                deltas[m] = d
                moved[m] = slot_of[t]
                m += 1
            alpha[t] = a_b[a]
            status[t] = s_b[a]
        if m == 0:
            if inner == 0:  # no step possible on this set: the rule above decides
                counters[B_CYCLES] += _now() - call_start
                return CONVERGED if violation < eps else NON_FINITE
            continue
        start = _now()
        if chunks > 1 and m * l >= parallel.min_pass:
            _gradient_parallel(gradient, columns, moved, deltas, m, chunks)
        else:
            _gradient_range(gradient, columns, moved, deltas, m, 0, l)
        counters[B_PARALLEL_CYCLES] += _now() - start


def warm_batched() -> None:
    """Compile (or load) the batched kernels and their parallel passes (warm-up)."""
    from solvers._kernel_helpers import RBF
    from solvers.inputs import as_csr_arrays

    rng = np.random.default_rng(0)
    for X in (np.round(rng.normal(size=(24, 3)), 2), (rng.random((24, 4)) > 0.5) * 1.0):
        arrays = as_csr_arrays(X)
        sq = np.asarray((X * X).sum(axis=1), dtype=np.float64)
        y = np.array([1, -1] * 12, dtype=np.int8)
        for chunks in (1, 2):
            state = BatchedState(arrays, sq, np.arange(24, dtype=np.int64), y, np.ones(24),
                                 (RBF, 0.5, 0.0, 3), 1.0, chunks)
            state.parallel_of[True] = state.parallel_of[True]._replace(min_pass=np.int64(1))
            state.eps, state.max_iter = 1e-3, 10_000
            state._run_part(True, 1_000)
            state.finish()
