"""SMO's binary problems and its model: a training set becomes one-vs-one (LIBSVM's pairs)
or one-vs-rest kernel problems; their dual variables become a KernelModel in LIBSVM's
layout (support vectors grouped by class) and a FitResult."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from solvers.backbone import BinarySolution, CsrArrays, worst_exit
from solvers.inputs import TrainingSet
from solvers.kernels import KERNEL_CODES, KernelModel, max_threads, row_sq_norms
from solvers.params import ParamError
from solvers.result import FitResult


@dataclass(frozen=True)
class KernelProblem:
    """One binary problem: rows of X (global ids), labels +-1, costs, and the kernel and
    threads shared by every problem of the fit."""

    X: CsrArrays
    sq_norms: np.ndarray  # ||x_r||^2 of every row of X
    rows: np.ndarray  # int64
    y: np.ndarray  # int8, +1 / -1
    cost: np.ndarray  # float64, C_i
    positive: int  # class index of the +1 side
    negative: int  # class index of the -1 side, or -1 for "the rest"
    pair: tuple[float, float | None]  # the classes of the two sides (None: the rest)
    kernel: tuple[int, float, float, int]  # LIBSVM's kernel_type, gamma, coef0, degree
    threads: int  # Numba threads of the loops inside this problem (1 when grain = "pairs")
    fine_grained: bool  # parallel loops once per step allowed (solvers/grain.py measures them)
    grain: str = "none"  # the parallel grain of the fit: "pairs", "columns" or "none"
    workers: int = 1  # binary problems trained at once (grain "pairs"), each on one thread
    # fit(warm_start=..., keep_solver_state=True): the earlier fit's solver state of this
    # problem to continue from (SmoState), and whether to hand this fit's state on (then
    # the fit's cache_mb is shared by its `cache_share` problems, all kept alive)
    warm: Any = None
    keep_state: bool = False
    cache_share: int = 1
    # the formulation (params.FORMULATIONS): c_svc has p = -e, a = 0 at the start; the
    # others give their linear term p, LIBSVM's initial alpha, and whether Solver_NU runs
    formulation: str = "c_svc"
    linear: np.ndarray | None = None
    alpha0: np.ndarray | None = None
    nu: bool = False


class KernelAssembly:
    """solvers.train.Assembly of SMO."""

    def problems(self, data: TrainingSet, applied: dict[str, Any]) -> list[KernelProblem]:
        X = data.X
        gamma = _gamma(applied, X.n_features)
        kernel = (KERNEL_CODES[applied["kernel"]], float(gamma), float(applied["coef0"]),
                  int(applied["degree"]))
        threads = max(1, min(int(applied["threads"]), max_threads()))
        sq_norms = row_sq_norms(X.data, X.indptr)
        formulation = str(applied.get("formulation", "c_svc"))
        if formulation in ("c_svc", "nu_svc"):
            label_index = data.label_index.astype(np.int64)
            # nu_svc: upper bounds w_i * class weight (no C)
            class_cost = (data.class_cost if formulation == "c_svc"
                          else data.class_cost / float(applied["C"]))
            sides = _sides(label_index, data.n_classes, _strategy(data, applied),
                           class_cost, data.weights())
            extras = [_formulation_terms(formulation, side, data, applied) for side in sides]
        else:
            side, extra = _single_side(formulation, data, applied)
            sides, extras = [side], [extra]
        grain, workers = parallel_grain(threads, [rows.shape[0] for rows, *_ in sides])
        if grain == "pairs":
            inner, fine_grained = 1, False
        else:
            # one problem at a time on `threads`: whether its per-step loops run in
            # parallel is measured as it runs (solvers/grain.py), not guessed from the machine
            inner = threads
            fine_grained = threads > 1
            grain = "columns" if fine_grained else "none"
        return [KernelProblem(X, sq_norms, rows, y, cost, positive, negative,
                              _pair(data.classes, positive, negative), kernel, inner,
                              fine_grained, grain, workers, formulation=formulation,
                              linear=linear, alpha0=alpha0, nu=nu)
                for (rows, y, cost, positive, negative), (linear, alpha0, nu)
                in zip(sides, extras, strict=True)]

    def untrained(self, problem: KernelProblem, applied: dict[str, Any],
                  reason: str) -> BinarySolution:
        """A binary problem never trained because the fit was stopped: a = 0, rho = 0."""
        return BinarySolution(w=None, iterations=0, exit_reason=reason, primal=None, dual=0.0,
                              alpha=np.zeros(problem.rows.shape[0]),
                              details={"rho": 0.0, "active_size": int(problem.rows.shape[0])})

    def result(self, solver: str, data: TrainingSet, problems: list[KernelProblem],
               solutions: list[BinarySolution], applied: dict[str, Any],
               timings: dict[str, float]) -> FitResult:
        t_model = time.perf_counter()
        strategy = _strategy(data, applied)
        gamma = _gamma(applied, data.X.n_features)
        model = _build_model(problems, solutions, data.X, data.classes, strategy, applied,
                             gamma)
        timings["model_s"] = time.perf_counter() - t_model
        return FitResult(
            solver=solver,
            model=model,
            primal_objective=None,
            dual_objective=float(sum(cast(float, s.dual) for s in solutions)),
            duality_gap=None,
            n_support=model.n_support,
            iterations=int(sum(s.iterations for s in solutions)),
            exit_reason=worst_exit(s.exit_reason for s in solutions),
            train_seconds=timings["solve_s"],
            params={**applied, "gamma": float(gamma),
                    "threads_used": max(problems[0].threads, problems[0].workers),
                    "fine_grained_parallel": problems[0].fine_grained,
                    "fine_grained_share": _fine_share(solutions),
                    "parallel_grain": problems[0].grain, "pair_workers": problems[0].workers},
            timings=timings,
            per_output=[_output_summary(p, s) for p, s in zip(problems, solutions,
                                                                strict=True)],
        )


ASSEMBLY = KernelAssembly()


def _fine_share(solutions: list[BinarySolution]) -> float:
    """The share of all SMO steps of the fit run with the fine-grained parallel loops."""
    steps = sum(s.iterations for s in solutions)
    fine = sum(s.iterations * float(s.details.get("fine_grained_share", 0.0))
               for s in solutions)
    return fine / steps if steps else 0.0


def _gamma(applied: dict[str, Any], n_features: int) -> float:
    gamma = applied["gamma"]
    return float(gamma) if gamma is not None else 1.0 / max(n_features, 1)


def _strategy(data: TrainingSet, applied: dict[str, Any]) -> str:
    return str(applied["multiclass"]) if data.n_classes > 2 else "ovo"


def _pair(classes: np.ndarray, positive: int, negative: int) -> tuple[float, float | None]:
    if classes.shape[0] == 0:  # one-class, regression: one problem
        return 1.0, None
    return float(classes[positive]), None if negative < 0 else float(classes[negative])


Side = tuple[np.ndarray, np.ndarray, np.ndarray, int, int]
Terms = tuple[np.ndarray | None, np.ndarray | None, bool]  # linear term, alpha0, Solver_NU


def _greedy_fill(bounds: np.ndarray, total: float) -> np.ndarray:
    """LIBSVM's initial alpha of the nu formulations: a_i = min(u_i, what is left of
    `total`), in order."""
    alpha = np.zeros(bounds.shape[0])
    left = total
    for t in range(bounds.shape[0]):
        if left <= 0:
            break
        alpha[t] = min(bounds[t], left)
        left -= alpha[t]
    return alpha


def _nu_total(nu_bounds: np.ndarray, nu: float, bounds: np.ndarray, weighted: bool) -> float:
    """The total of the nu formulations' initial alpha. Without instance weights LIBSVM's
    nu * l (`nu` times the sum of `bounds`, ones); with them LIBSVM-weights' (the fork in
    scikit-learn) sum of nu * u_i accumulated row by row (`nu_bounds`, in row order). The
    two round differently, and an initial alpha off in its last bit sends SMO down
    another path (another n_iter_, and another optimum where it is not unique)."""
    if not weighted:
        return nu * float(bounds.sum())
    return float(np.cumsum(nu_bounds)[-1]) if nu_bounds.size else 0.0


def _formulation_terms(formulation: str, side: Side, data: TrainingSet,
                       applied: dict[str, Any]) -> Terms:
    """c_svc: LIBSVM's defaults (p = -e, a = 0). nu_svc: upper bounds u_i = w_i (times
    the class weight), p = 0, and on each side a_i filled greedily up to nu sum(u) / 2
    (solve_nu_svc; the sum as _nu_total); LIBSVM's "specified nu is infeasible" when
    nu (n1 + n2) / 2 > min(n1, n2) for the (weighted) class sizes of a pair."""
    if formulation == "c_svc":
        return None, None, False
    rows, y, cost, _, _ = side
    nu = float(applied["nu"])
    positive = y > 0
    n1, n2 = float(cost[positive].sum()), float(cost[~positive].sum())
    if nu * (n1 + n2) / 2 > min(n1, n2) * (1 + 1e-12):
        raise ParamError(f"specified nu is infeasible: nu = {nu:g} needs nu * (n1 + n2) / 2 "
                         f"<= min(n1, n2) for every pair of classes; here n1 = {n1:g}, "
                         f"n2 = {n2:g} (weighted class sizes): choose nu <= "
                         f"{2 * min(n1, n2) / (n1 + n2):.6g}", "nu")
    half = _nu_total(nu * cost, nu, cost, data.sample_weight is not None) / 2
    alpha0 = np.zeros(rows.shape[0])
    alpha0[positive] = _greedy_fill(cost[positive], half)
    alpha0[~positive] = _greedy_fill(cost[~positive], half)
    return np.zeros(rows.shape[0]), alpha0, True


def _single_side(formulation: str, data: TrainingSet,
                 applied: dict[str, Any]) -> tuple[Side, Terms]:
    """The one problem of one_class (y = +1, u_i = w_i, p = 0, a filled greedily up to
    nu sum(w)), epsilon_svr and nu_svr (2n variables: rows t and n + t are x_t with
    y = +1 / -1, C_i = C w_i; epsilon_svr p = (epsilon - z, epsilon + z), a = 0; nu_svr
    p = (-z, z), a_t = a_{n+t} filled greedily up to C nu sum(w) / 2; the sums as
    _nu_total). Rows of weight 0 are left out (as scikit-learn's LIBSVM does)."""
    weights = data.weights()
    keep = np.flatnonzero(weights > 0).astype(np.int64)
    w = weights[keep]
    if formulation == "one_class":
        y = np.ones(keep.shape[0], dtype=np.int8)
        nu = float(applied["nu"])
        alpha0 = _greedy_fill(w, _nu_total(w * nu, nu, w, data.sample_weight is not None))
        return (keep, y, w.copy(), 0, -1), (np.zeros(keep.shape[0]), alpha0, False)
    assert data.targets is not None
    z = data.targets[keep]
    cost = float(applied["C"]) * w
    n = keep.shape[0]
    rows = np.concatenate([keep, keep])
    y = np.concatenate([np.ones(n, np.int8), -np.ones(n, np.int8)])
    if formulation == "epsilon_svr":
        epsilon = float(applied["epsilon"])
        return ((rows, y, np.concatenate([cost, cost]), 0, -1),
                (np.concatenate([epsilon - z, epsilon + z]), None, False))
    nu = float(applied["nu"])
    half = _greedy_fill(cost, _nu_total(cost * nu, float(applied["C"]) * nu, w,
                                        data.sample_weight is not None) / 2)
    return ((rows, y, np.concatenate([cost, cost]), 0, -1),
            (np.concatenate([-z, z]), np.concatenate([half, half]), True))


def _sides(label_index: np.ndarray, n_classes: int, strategy: str,
           class_cost: np.ndarray, weights: np.ndarray | None = None) -> list[Side]:
    """rows, y, cost, positive, negative of every binary problem, in LIBSVM's pair order
    (one-vs-one) or class order (one-vs-rest); cost C_i = class cost * w_i, rows of
    weight 0 left out (as scikit-learn's LIBSVM)."""
    if weights is None:
        weights = np.ones(label_index.shape[0])
    rows_of = [np.flatnonzero((label_index == c) & (weights > 0)).astype(np.int64)
               for c in range(n_classes)]
    sides: list[Side] = []
    if strategy == "ovo":
        for i in range(n_classes):
            for j in range(i + 1, n_classes):
                rows = np.concatenate([rows_of[i], rows_of[j]])
                y = np.concatenate([np.ones(rows_of[i].shape[0], np.int8),
                                    -np.ones(rows_of[j].shape[0], np.int8)])
                cost = np.concatenate([class_cost[i] * weights[rows_of[i]],
                                       class_cost[j] * weights[rows_of[j]]])
                sides.append((rows, y, cost, i, j))
    else:
        rows = np.flatnonzero(weights > 0).astype(np.int64)
        cost = (class_cost[label_index] * weights)[rows].astype(np.float64)
        label_index = label_index[rows]
        for c in range(n_classes):
            y = np.where(label_index == c, 1, -1).astype(np.int8)
            sides.append((rows, y, cost, c, -1))
    return sides


def _build_model(problems: list[KernelProblem], solutions: list[BinarySolution],
                 X: CsrArrays, classes: np.ndarray, strategy: str, applied: dict[str, Any],
                 gamma: float) -> KernelModel:
    """LIBSVM's model layout: SVs grouped by class (rows ascending within a class)."""
    if problems[0].formulation in SINGLE_OUTPUT:
        return _build_single(problems[0], solutions[0], X, applied, gamma)
    n_rows = X.n_rows
    k = classes.shape[0]
    alphas = [cast(np.ndarray, s.alpha) for s in solutions]
    support = np.zeros(n_rows, dtype=bool)
    for p, alpha in zip(problems, alphas, strict=True):
        support[p.rows[alpha > 0]] = True
    label_of = np.empty(n_rows, dtype=np.int64)
    for p in problems:
        label_of[p.rows[p.y > 0]] = p.positive
        if p.negative >= 0:
            label_of[p.rows[p.y < 0]] = p.negative
    sv_rows = np.concatenate([np.flatnonzero(support & (label_of == c)) for c in range(k)])
    n_sv = np.array([np.count_nonzero(support & (label_of == c)) for c in range(k)])
    position = np.full(n_rows, -1, dtype=np.int64)
    position[sv_rows] = np.arange(sv_rows.shape[0])
    sv_coef = np.zeros((k if strategy == "ovr" else k - 1, sv_rows.shape[0]))
    for p, alpha in zip(problems, alphas, strict=True):
        nonzero = alpha > 0
        target = position[p.rows[nonzero]]
        coef = alpha[nonzero] * p.y[nonzero]  # y_i a_i
        if strategy == "ovr":
            sv_coef[p.positive, target] = coef
        else:
            # pair (i, j): class i's coefficients in row j-1, class j's in row i
            is_i = p.y[nonzero] > 0
            sv_coef[p.negative - 1, target[is_i]] = coef[is_i]
            sv_coef[p.positive, target[~is_i]] = coef[~is_i]
    data, indices, indptr = _gather_rows(X, sv_rows)
    return KernelModel(
        classes=classes, kernel=applied["kernel"], gamma=gamma, degree=int(applied["degree"]),
        coef0=float(applied["coef0"]), multiclass=strategy, n_features=X.n_features,
        sv_data=data, sv_indices=indices, sv_indptr=indptr, sv_coef=sv_coef,
        rho=np.array([s.details["rho"] for s in solutions]), n_sv=n_sv, sv_rows=sv_rows,
        svm_type=problems[0].formulation,
    )


SINGLE_OUTPUT = ("one_class", "epsilon_svr", "nu_svr")  # one decision function, no classes


def _build_single(problem: KernelProblem, solution: BinarySolution, X: CsrArrays,
                  applied: dict[str, Any], gamma: float) -> KernelModel:
    """One-class and regression models: LIBSVM's layout (one row of sv_coef, the support
    vectors in training order; regression: coef_t = a_t - a*_t)."""
    alpha = cast(np.ndarray, solution.alpha)
    if problem.formulation == "one_class":
        rows, coef = problem.rows, alpha
    else:
        n = problem.rows.shape[0] // 2
        rows, coef = problem.rows[:n], alpha[:n] - alpha[n:]
    nonzero = coef != 0
    sv_rows = rows[nonzero]
    data, indices, indptr = _gather_rows(X, sv_rows)
    classes = np.array([-1.0, 1.0]) if problem.formulation == "one_class" else np.empty(0)
    return KernelModel(
        classes=classes, kernel=applied["kernel"], gamma=gamma, degree=int(applied["degree"]),
        coef0=float(applied["coef0"]), multiclass="ovo", n_features=X.n_features,
        sv_data=data, sv_indices=indices, sv_indptr=indptr, sv_coef=coef[nonzero][None, :],
        rho=np.array([solution.details["rho"]]), n_sv=np.array([sv_rows.shape[0]]),
        sv_rows=sv_rows, svm_type=problem.formulation,
    )


def _gather_rows(X: CsrArrays, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    starts = X.indptr[rows]
    lengths = X.indptr[rows + 1] - starts
    indptr = np.zeros(rows.shape[0] + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    # entry k of the gathered rows = entry k - indptr[s] + starts[s] of X (s: its row)
    take = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1], dtype=np.int64)
    return X.data[take], X.indices[take], indptr


def _output_summary(problem: KernelProblem, solution: BinarySolution) -> dict[str, Any]:
    alpha = cast(np.ndarray, solution.alpha)
    details = dict(solution.details)
    summary = {
        "positive_class": problem.pair[0],
        "negative_class": problem.pair[1],
        "dual_objective": solution.dual,
        "rho": details.pop("rho"),
        "n_support": int(np.count_nonzero(alpha > 0)),
        "n_bounded_support": int(np.count_nonzero(
            alpha >= problem.cost * details.pop("bound_scale", 1.0))),
        "exit_reason": solution.exit_reason,
        "iterations": solution.iterations,
        "violation": solution.violation,
    }
    summary.update(details)
    return summary


# Below this many rows a binary problem's parallel loops do not pay (steps.PARALLEL_MIN_PASS
# elements per pass): several problems then run at once, one thread each.
PAIRS_BELOW_ROWS = 40_000


def parallel_grain(threads: int, sizes: list[int]) -> tuple[str, int]:
    """How a fit with these binary-problem sizes (rows) uses `threads`: ("pairs", workers)
    trains up to `workers` problems at once, each on one thread (no fork/join per SMO
    step; the problems are independent, so the results are those of one thread); else
    ("columns", 1): one problem at a time, its loops split over the threads when that
    pays, as the fit measures it (solvers/grain.py). Pairs when there are at least two problems and
    either they are small (the per-step loops would not pay) or there are enough of them
    to keep the threads busy (at least two per thread)."""
    if threads < 2 or len(sizes) < 2:
        return "columns", 1
    if max(sizes) < PAIRS_BELOW_ROWS or len(sizes) >= 2 * threads:
        return "pairs", min(threads, len(sizes))
    return "columns", 1
