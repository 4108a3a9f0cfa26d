"""The compiled sweeps of the linear formulations beyond the binary SVM (solvers/
linear_tasks.py): Crammer-Singer's sequential dual method, the dual coordinate descent of
linear SVR and the pair updates of the linear one-class SVM, each as LIBLINEAR 2.50's
linear.cpp runs it (`Solver_MCSVM_CS`, `solve_l2r_l1l2_svr`, `solve_oneclass_svm`), with
a per-row cost C_i (LIBLINEAR's weights extension). Every kernel runs a bounded number of
sweeps and returns, so Python can certify, report progress and honour limits between
calls; the state lives in the arrays passed in.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from solvers._kernel_helpers import liblinear_shuffle, next_below, row_axpy, row_dot

_INF = np.inf


@njit(cache=True)
def row_sq_norms(data, indptr):
    n = indptr.shape[0] - 1
    out = np.zeros(n)
    for i in range(n):
        total = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            total += data[k] * data[k]
        out[i] = total
    return out


@njit(cache=True)
def rows_transpose_times(data, indices, indptr, u, n_features):
    """X'u = sum_i u_i x_i."""
    out = np.zeros(n_features)
    for i in range(indptr.shape[0] - 1):
        if u[i] != 0.0:
            row_axpy(u[i], data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]), out)
    return out


@njit(cache=True)
def _shuffle(index, size, rng):
    """index[:size] permuted by Hinge's generator (a one-slot xorshift64* state) or by
    scikit-learn's LIBLINEAR's (an MT19937 state: liblinear_shuffle)."""
    if rng.shape[0] != 1:
        liblinear_shuffle(index, size, rng)
        return
    for s in range(size):
        j = s + next_below(rng, np.uint64(size - s))
        index[s], index[j] = index[j], index[s]


# --------------------------------------------------------------------------------------
# Crammer-Singer (Keerthi et al. 2008; LIBLINEAR -s 4)


@njit(cache=True)
def _cs_subproblem(a_i, yi, c_yi, b, k, alpha_new, scratch):
    """min_a 1/2 A ||a||^2 + b'a, sum(a) = 0, a_m <= C^m (C^yi = c_yi, else 0): LIBLINEAR's
    solve_sub_problem (sort, then the threshold beta)."""
    for m in range(k):
        scratch[m] = b[m]
    scratch[yi] += a_i * c_yi
    scratch[:k] = -np.sort(-scratch[:k])  # descending
    beta = scratch[0] - a_i * c_yi
    r = 1
    while r < k and beta < r * scratch[r]:
        beta += scratch[r]
        r += 1
    beta /= r
    for m in range(k):
        bound = c_yi if m == yi else 0.0
        alpha_new[m] = min(bound, (beta - b[m]) / a_i)


@njit(cache=True)
def cs_sweeps(data, indices, indptr, label, cost, qd, alpha, W, k, sweeps, rng, index, state,
              eps):
    """Up to `sweeps` passes of the sequential dual method over the active rows in random
    order, with LIBLINEAR's shrinking of the rows whose sub-problem cannot move (every
    class but at most one at its bound with G_m below the smallest G of the free ones).
    alpha is (n, k) row-major, W (d, k) row-major (w_m = sum_i alpha_i^m x_i); state =
    [active size, eps_shrink, started from all rows (0/1)], as Solver_MCSVM_CS: when a
    sweep's largest violation max_m G_m - min_{m: alpha_m < C^m} G_m is below eps_shrink,
    every row is reactivated and eps_shrink halved (down to eps); the inner rule holds when
    it is below eps on a sweep that started from all rows. Returns (sweeps run, 1 when the
    rule held else 0, the last sweep's largest violation)."""
    n = indptr.shape[0] - 1
    grad = np.empty(k)
    b = np.empty(k)
    alpha_new = np.empty(k)
    scratch = np.empty(k)
    worst = 0.0
    done = 0
    active = np.int64(state[0])
    for _ in range(sweeps):
        worst = 0.0
        _shuffle(index, active, rng)
        s = 0
        while s < active:
            i = index[s]
            a_i = qd[i]
            if a_i <= 0.0 or cost[i] <= 0.0:
                s += 1
                continue
            start, end = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
            yi = label[i]
            for m in range(k):
                grad[m] = 0.0 if m == yi else 1.0
            for p in range(start, end):
                j = np.uint32(indices[p])
                v = data[p]
                for m in range(k):
                    grad[m] += W[j * k + m] * v
            gmax = -_INF
            gmin = _INF
            for m in range(k):
                gmax = max(gmax, grad[m])
                bound = cost[i] if m == yi else 0.0
                if alpha[i * k + m] < bound:
                    gmin = min(gmin, grad[m])
            movable = 0
            for m in range(k):
                bound = cost[i] if m == yi else 0.0
                if not (alpha[i * k + m] == bound and grad[m] < gmin):
                    movable += 1
            if movable <= 1:  # shrunk
                active -= 1
                index[s], index[active] = index[active], index[s]
                continue
            s += 1
            if gmax - gmin > worst:
                worst = gmax - gmin
            if gmax - gmin <= 1e-12:
                continue
            for m in range(k):
                b[m] = grad[m] - a_i * alpha[i * k + m]
            _cs_subproblem(a_i, yi, cost[i], b, k, alpha_new, scratch)
            for m in range(k):
                delta = alpha_new[m] - alpha[i * k + m]
                if delta != 0.0:
                    alpha[i * k + m] = alpha_new[m]
                    for p in range(start, end):
                        W[np.uint32(indices[p]) * k + m] += delta * data[p]
        done += 1
        if worst < state[1]:
            if worst < eps and state[2] > 0.0:
                state[0] = active
                return done, 1, worst
            active = n
            state[1] = max(state[1] / 2.0, eps)
            state[2] = 1.0
        else:
            state[2] = 0.0
    state[0] = active
    return done, 0, worst


@njit(cache=True)
def cs_objectives(data, indices, indptr, label, cost, alpha, W, k):
    """(P(W), f(alpha)): the primal 1/2 ||W||^2 + sum_i C_i max_m (e_i^m + (w_m - w_yi).x_i)
    and LIBLINEAR's dual 1/2 ||W||^2 + sum_{i, m != yi} alpha_i^m (minimised; the gap is
    P + f >= 0 for W = W(alpha))."""
    n = indptr.shape[0] - 1
    half = 0.5 * np.sum(W * W)
    loss = 0.0
    linear = 0.0
    scores = np.empty(k)
    for i in range(n):
        yi = label[i]
        for m in range(k):
            scores[m] = 0.0
            if m != yi:
                linear += alpha[i * k + m]
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for m in range(k):
                scores[m] += W[j * k + m] * data[p]
        worst = 0.0
        for m in range(k):
            if m != yi:
                worst = max(worst, 1.0 + scores[m] - scores[yi])
        loss += cost[i] * worst
    return half + loss, half + linear


# --------------------------------------------------------------------------------------
# Linear SVR, dual coordinate descent (Ho & Lin 2012; LIBLINEAR -s 12, -s 13)


@njit(cache=True)
def svr_sweeps(
    data, indices, indptr, target, upper, lam, p, qd, beta, w, sweeps, eps, rng, index, state,
    liblinear_sums
):
    """Sweeps of LIBLINEAR's solve_l2r_l1l2_svr (shrinking included) on
    min_b 1/2 ||w(b)||^2 + sum_i (lam_i / 2 b_i^2 - y_i b_i + p |b_i|), -U_i <= b_i <= U_i.
    state = [Gmax_old, Gnorm1_init, active_size, sweeps done in all]. Returns 1 when the
    stop rule Gnorm1 <= eps * Gnorm1_init held on an unshrunk sweep, else 0.
    liblinear_sums: G summed as LIBLINEAR does, x_ij w_j added to -y_i + lam_i b_i one by
    one (else the row's dot product is added at the end)."""
    n = indptr.shape[0] - 1
    for _ in range(sweeps):
        gmax_old = state[0]
        active = np.int64(state[2])
        gmax_new = 0.0
        gnorm1 = 0.0
        _shuffle(index, active, rng)
        s = 0
        while s < active:
            i = index[s]
            start, end = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
            if liblinear_sums:
                g = -target[i] + lam[i] * beta[i]
                for k in range(start, end):
                    g += data[k] * w[np.uint32(indices[k])]
            else:
                g = -target[i] + lam[i] * beta[i] + row_dot(w, data, indices, start, end)
            h = qd[i] + lam[i]
            gp = g + p
            gn = g - p
            violation = 0.0
            shrink = False
            if beta[i] == 0.0:
                if gp < 0.0:
                    violation = -gp
                elif gn > 0.0:
                    violation = gn
                elif gp > gmax_old and gn < -gmax_old:
                    shrink = True
            elif beta[i] >= upper[i]:
                if gp > 0.0:
                    violation = gp
                elif gp < -gmax_old:
                    shrink = True
            elif beta[i] <= -upper[i]:
                if gn < 0.0:
                    violation = -gn
                elif gn > gmax_old:
                    shrink = True
            elif beta[i] > 0.0:
                violation = abs(gp)
            else:
                violation = abs(gn)
            if shrink:
                active -= 1
                index[s], index[active] = index[active], index[s]
                continue
            s += 1
            gmax_new = max(gmax_new, violation)
            gnorm1 += violation
            if h <= 0.0:
                continue
            if gp < h * beta[i]:
                d = -gp / h
            elif gn > h * beta[i]:
                d = -gn / h
            else:
                d = -beta[i]
            if abs(d) < 1e-12:
                continue
            old = beta[i]
            beta[i] = min(max(beta[i] + d, -upper[i]), upper[i])
            d = beta[i] - old
            if d != 0.0:
                row_axpy(d, data, indices, start, end, w)
        if state[1] < 0.0:
            state[1] = gnorm1
        state[3] += 1.0
        if gnorm1 <= eps * state[1]:
            if active == n:
                state[2] = active
                return 1
            state[2] = n
            state[0] = _INF
            continue
        state[0] = gmax_new
        state[2] = active
    return 0


# --------------------------------------------------------------------------------------
# Linear one-class SVM (LIBLINEAR -s 21)


@njit(cache=True)
def _smallest_k(key, k, out, scratch):
    """out[:k] = the indices of the k smallest keys (finite), ascending by key, in O(n)
    plus O(k log k) (LIBLINEAR: quick_select_min_k, then qsort of the k); returns how
    many were found (< k when fewer keys are finite)."""
    n = key.shape[0]
    count = 0
    for i in range(n):
        if key[i] < _INF:
            scratch[count] = key[i]
            count += 1
    k = min(k, count)
    if k == 0:
        return 0
    threshold = np.partition(scratch[:count], k - 1)[k - 1]
    found = 0
    for i in range(n):  # strictly below the threshold first, then ties up to k
        if key[i] < threshold:
            out[found] = i
            found += 1
    for i in range(n):
        if found >= k:
            break
        if key[i] == threshold:
            out[found] = i
            found += 1
    chosen = out[:k].copy()
    order = np.argsort(key[chosen], kind="mergesort")
    for s in range(k):
        out[s] = chosen[order[s]]
    return k


@njit(cache=True)
def _oneclass_certificate(grad, alpha, upper, w, nu_total, out):
    """rho as LIBLINEAR computes it (the mean of G over the free alphas, else the middle of
    the bounds), P(w, rho) and D = -1/2 ||w||^2 into out = (P, D, rho)."""
    n = grad.shape[0]
    free_sum = 0.0
    free = 0
    lb = -_INF
    ub = _INF
    for i in range(n):
        if alpha[i] > 0.0 and alpha[i] < upper[i]:
            free_sum += grad[i]
            free += 1
        elif alpha[i] >= upper[i]:
            lb = max(lb, grad[i])
        else:
            ub = min(ub, grad[i])
    rho = free_sum / free if free > 0 else 0.5 * (lb + ub)
    half = 0.0
    for j in range(w.shape[0]):
        half += w[j] * w[j]
    half *= 0.5
    loss = 0.0
    for i in range(n):
        if rho > grad[i]:
            loss += upper[i] * (rho - grad[i])
    out[0] = half - rho * nu_total + loss
    out[1] = -half
    out[2] = rho


@njit(cache=True)
def oneclass_sweeps(data, indices, indptr, upper, qd, alpha, w, sweeps, eps, nu_total, tol,
                    out):
    """Outer iterations of LIBLINEAR's solve_oneclass_svm on min_a 1/2 ||X'a||^2,
    0 <= a_i <= U_i, sum a = const: G = X w, the largest violations max -G over I_up and
    min -G over I_low, then pair updates of the max(n / 10, 1) most violating pairs (found
    by partial selection, as LIBLINEAR's quick select). Before each iteration and after
    the last, from the same G: the certificate out = (P, D, rho) of the current alpha.
    Returns (status, iterations run, violation): status 2 when (P - D) / |P| <= tol, 1
    when max -G(I_up) - min -G(I_low) < eps, else 0 (budget used)."""
    n = indptr.shape[0] - 1
    grad = np.empty(n)
    up_key = np.empty(n)
    low_key = np.empty(n)
    ups = np.empty(n, dtype=np.int64)
    lows = np.empty(n, dtype=np.int64)
    scratch = np.empty(n)
    violation = _INF
    for sweep in range(sweeps + 1):
        neg_max = -_INF
        neg_min = _INF
        for i in range(n):
            grad[i] = row_dot(w, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]))
            if alpha[i] < upper[i]:
                neg_max = max(neg_max, -grad[i])
            if alpha[i] > 0.0:
                neg_min = min(neg_min, -grad[i])
        violation = neg_max - neg_min
        _oneclass_certificate(grad, alpha, upper, w, nu_total, out)
        if out[0] - out[1] <= tol * max(abs(out[0]), 1e-300):
            return 2, sweep, violation
        if violation < eps:
            return 1, sweep, violation
        if sweep == sweeps:
            break
        for i in range(n):
            up_key[i] = grad[i] if alpha[i] < upper[i] else _INF  # ascending G = max -G
            low_key[i] = -grad[i] if alpha[i] > 0.0 else _INF  # ascending -G
        inner = max(n // 10, 1)
        n_up = _smallest_k(up_key, inner, ups, scratch)
        n_low = _smallest_k(low_key, inner, lows, scratch)
        for s in range(min(n_up, n_low)):
            i = ups[s]
            j = lows[s]
            if i == j:
                break
            si, ei = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
            sj, ej = np.uint64(indptr[j]), np.uint64(indptr[j + 1])
            gi = row_dot(w, data, indices, si, ei)
            gj = row_dot(w, data, indices, sj, ej)
            if not (
                (alpha[i] < upper[i] and alpha[j] > 0.0 and -gj + 1e-12 < -gi)
                or (alpha[i] > 0.0 and alpha[j] < upper[j] and -gi + 1e-12 < -gj)
            ):
                continue
            qij = 0.0
            p, q = si, sj
            while p < ei and q < ej:  # x_i . x_j: merge of two sorted rows
                if indices[p] == indices[q]:
                    qij += data[p] * data[q]
                    p += np.uint64(1)
                    q += np.uint64(1)
                elif indices[p] < indices[q]:
                    p += np.uint64(1)
                else:
                    q += np.uint64(1)
            quad = qd[i] + qd[j] - 2.0 * qij
            if quad <= 0.0:
                quad = 1e-12
            total = alpha[i] + alpha[j]
            new_i = alpha[i] - (gi - gj) / quad
            new_i = min(max(new_i, max(0.0, total - upper[j])), min(upper[i], total))
            delta = new_i - alpha[i]
            if delta == 0.0:
                continue
            alpha[i] = new_i
            alpha[j] = total - new_i
            row_axpy(delta, data, indices, si, ei, w)
            row_axpy(-delta, data, indices, sj, ej, w)
    return 0, sweeps, violation


# --------------------------------------------------------------------------------------
# Linear SVR, l2 loss, primal Newton (LIBLINEAR -s 11: l2r_l2_svr_fun in newton.cpp's line
# search). The conjugate gradient, the gradient / preconditioner and the Hessian products
# are tron's kernels (solvers/_tron_kernels.py) on the active rows A = {|r_i| > epsilon}
# with u_i = 2 C_i e_i, h_i = 2 C_i; these compute the loss-specific pieces from the
# residuals r_i = w.x_i - y_i and the signed excess e_i = sign(r_i) max(0, |r_i| - eps).


@njit(cache=True, inline="always")
def _excess(r, p):
    if r > p:
        return r - p
    if r < -p:
        return r + p
    return 0.0


@njit(cache=True)
def svr_residuals(data, indices, indptr, w, target, cost, p, resid):
    """resid_i = w.x_i - y_i; returns sum_i C_i e_i^2 (the loss part of P(w))."""
    n = indptr.shape[0] - 1
    total = 0.0
    for i in range(n):
        r = row_dot(w, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1])) - target[i]
        resid[i] = r
        e = _excess(r, p)
        total += cost[i] * e * e
    return total


@njit(cache=True)
def svr_row_products(data, indices, indptr, s, out):
    """out_i = x_i.s (the residual change of a unit step along s)."""
    for i in range(indptr.shape[0] - 1):
        out[i] = row_dot(s, data, indices, np.uint64(indptr[i]), np.uint64(indptr[i + 1]))


@njit(cache=True)
def svr_select_active(cost, resid, p, indptr, active_idx, active_u, active_h, active_count):
    """The rows outside the tube compactly (index, u_i = 2 C_i e_i, h_i = 2 C_i), their
    number in active_count[0]; returns their nnz (+1 each)."""
    count = 0
    nnz = 0
    for i in range(resid.shape[0]):
        e = _excess(resid[i], p)
        if e != 0.0:
            active_idx[count] = i
            active_u[count] = 2.0 * cost[i] * e
            active_h[count] = 2.0 * cost[i]
            count += 1
            nnz += indptr[i + 1] - indptr[i] + 1
    active_count[0] = count
    return nnz


@njit(cache=True)
def svr_line_change(cost, resid, steps, alpha, p):
    """sum_i C_i (e(r_i + alpha steps_i)^2 - e(r_i)^2), each term from the residual change
    itself where both excesses are on the same side (no cancellation)."""
    total = 0.0
    for i in range(resid.shape[0]):
        step = alpha * steps[i]
        if step == 0.0:
            continue
        old = _excess(resid[i], p)
        new = _excess(resid[i] + step, p)
        if (old > 0.0 and new > 0.0) or (old < 0.0 and new < 0.0):
            total += cost[i] * step * (new + old)
        else:
            total += cost[i] * (new * new - old * old)
    return total


@njit(cache=True)
def svr_newton_dual(w, grad, cost, target, resid, p, beta):
    """The dual value at the dual point of w, beta_i = -2 C_i e_i (feasible: the l2 dual has
    no bounds); X'beta = w - grad (grad = w + X'(2 C e)), so no pass over X."""
    vv = 0.0
    for j in range(w.shape[0]):
        v = w[j] - grad[j]
        vv += v * v
    value = -0.5 * vv
    for i in range(resid.shape[0]):
        b = -2.0 * cost[i] * _excess(resid[i], p)
        beta[i] = b
        value += target[i] * b - p * abs(b) - b * b / (4.0 * cost[i])
    return value


@njit(cache=True)
def augment_rows(data, indices, indptr, n_features, bias_scale):
    """The rows with one more feature (index n_features, value bias_scale) at each end."""
    n = indptr.shape[0] - 1
    nnz = indptr[n]
    out_data = np.empty(nnz + n)
    out_indices = np.empty(nnz + n, dtype=np.int32)
    out_indptr = np.empty(n + 1, dtype=np.int64)
    out_indptr[0] = 0
    q = 0
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            out_data[q] = data[k]
            out_indices[q] = indices[k]
            q += 1
        out_data[q] = bias_scale
        out_indices[q] = n_features
        q += 1
        out_indptr[i + 1] = q
    return out_data, out_indices, out_indptr


@njit(cache=True)
def svr_certificate(data, indices, indptr, target, cost, beta, w, l1, p, scratch):
    """(P(w), D(beta)) of linear SVR: the primal 1/2 ||w||^2 + sum_i C_i e_i^q (q = 1 for
    l1, 2 for l2; e_i = max(0, |w.x_i - y_i| - p)) at the model w, and the dual value
    -1/2 ||X'beta||^2 - [l2] sum_i beta_i^2 / (4 C_i) + y.beta - p ||beta||_1 at beta, with
    X'beta recomputed here (into scratch), not taken from the w the sweeps keep."""
    n = indptr.shape[0] - 1
    scratch[:] = 0.0
    primal = 0.0
    dual = 0.0
    for i in range(n):
        start, end = np.uint64(indptr[i]), np.uint64(indptr[i + 1])
        e = abs(row_dot(w, data, indices, start, end) - target[i]) - p
        if e > 0.0:
            primal += cost[i] * (e if l1 else e * e)
        b = beta[i]
        if b != 0.0:
            row_axpy(b, data, indices, start, end, scratch)
            dual += target[i] * b - p * abs(b)
            if not l1:
                dual -= b * b / (4.0 * cost[i])
    ww = 0.0
    vv = 0.0
    for j in range(w.shape[0]):
        ww += w[j] * w[j]
        vv += scratch[j] * scratch[j]
    return primal + 0.5 * ww, dual - 0.5 * vv
