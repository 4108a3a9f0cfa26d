"""Certified optima of the linear SVM problems, for the tests and the benchmark (issue 12).

A reference optimum is never assumed: every `Certificate` carries a primal value P(w)
recomputed here from the returned model, and a lower bound on the optimum computed here
from a *feasible* dual point (or, for the smooth L2-loss primal, from the gradient norm and
strong convexity). `certified_optimum` raises `CertificationError` unless

    (primal - dual_bound) <= rel_gap * |primal|       (rel_gap = 1e-9 by default),

so P* lies in [dual_bound, primal] and a solver's relative suboptimality measured against
`primal` is exact to 1e-9.

The problem (docs: ../shared/guides/solvers.md), labels y_i in {-1, +1}, cost
C_i = C * class_weight[y_i] * sample_weight_i:

    min_{w, b}  1/2 ||w||^2 (+ 1/2 w_B^2 for bias="augment") + sum_i C_i loss(1 - y_i f_i)
    f_i = w.x_i                    bias=None
    f_i = w.x_i + B * w_B          bias="augment" (LIBLINEAR -B: a regularised feature B)
    f_i = w.x_i + b                bias="free"    (unregularised intercept, as ALM / SMO)
    loss(t) = max(0, t) ("l1", hinge) or max(0, t)^2 ("l2", squared hinge).

Its dual: max_a  D(a) = sum_i a_i - 1/2 ||sum_i a_i y_i z_i||^2 - sum_i a_i^2 / (4 C_i) [l2]
over 0 <= a_i <= C_i (l1) or a_i >= 0 (l2), and y'a = 0 when bias="free"; z_i is x_i with
the bias feature B appended for "augment". Any such feasible a gives D(a) <= P*.

Methods:
- "clarabel": the primal QP in (w, [b], xi), sparse, solved by the interior-point solver
  clarabel to tolerances 1e-10; its dual variables of the margin constraints are a, made
  exactly feasible (clipped into the box; for bias="free" the larger side of y'a = 0
  scaled down) before D(a) is evaluated.
- "liblinear": L2 loss only (bias None / "augment", per-class costs), LIBLINEAR -s 2
  (trust-region Newton on the primal) at -e 1e-8 (by default); certified by
  P(w) - P* <= ||grad P(w)||^2 / 2 (P is 1-strongly convex, differentiable) and by the
  dual point a_i = 2 C_i max(0, 1 - y_i f_i); the better bound is kept.
- `certify_pair(...)`: any primal-dual pair (w, a) from any solver, checked the same way
  (for L1 loss on sets too large for the QP).

Results are cached in memory per (problem bytes, parameters) for the test session.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

Loss = Literal["l1", "l2"]
Bias = Literal["augment", "free"] | None

DEFAULT_REL_GAP = 1e-9
CLARABEL_TOL = 1e-10
# problems with more rows than this go to LIBLINEAR (L2 loss) under method="auto"
CLARABEL_MAX_ROWS = 60_000


class CertificationError(RuntimeError):
    """The reference could not be certified to the requested relative gap."""


@dataclass(frozen=True)
class Certificate:
    """A certified optimum: P* lies in [dual_bound, primal]."""

    primal: float  # P(w, b) recomputed from w, intercept (an upper bound on P*)
    dual_bound: float  # a proven lower bound on P*
    w: np.ndarray  # (d,) feature weights
    intercept: float  # b of the decision function x.w + b (B * w_B for "augment")
    bias_weight: float | None  # w_B for "augment", else None
    alpha: np.ndarray | None  # the feasible dual point behind dual_bound, if any
    method: str
    loss: str
    bias: str | None
    bias_scale: float | None
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def gap(self) -> float:
        return self.primal - self.dual_bound

    @property
    def relative_gap(self) -> float:
        return self.gap / max(abs(self.primal), 1e-300)

    def relative_suboptimality(self, primal_value: float) -> float:
        """(P - P*) / P* with P* taken as `primal` (exact to `relative_gap`)."""
        return (float(primal_value) - self.primal) / max(abs(self.primal), 1e-300)


# --------------------------------------------------------------------------------------
# problem data


@dataclass(frozen=True)
class _Problem:
    X: sp.csr_matrix  # (n, d) CSR float64
    y: np.ndarray  # (n,) +-1 float64
    cost: np.ndarray  # (n,) C_i > 0
    loss: str
    bias: str | None
    bias_scale: float | None  # B for "augment", else None

    @property
    def Z(self) -> sp.csr_matrix:
        """x_i with the bias feature B appended ("augment"), else X."""
        if self.bias != "augment":
            return self.X
        column = sp.csr_matrix(np.full((self.X.shape[0], 1), float(self.bias_scale)))
        return sp.hstack([self.X, column], format="csr")


def cost_vector(
    y: np.ndarray,
    C: float,
    class_weight: Mapping[Any, float] | None = None,
    sample_weight: np.ndarray | None = None,
) -> np.ndarray:
    """C_i = C * class_weight[y_i] * sample_weight_i (keys of class_weight: labels)."""
    y = np.asarray(y, dtype=np.float64)
    cost = np.full(y.shape[0], float(C))
    for label, weight in (class_weight or {}).items():
        cost[y == float(label)] *= float(weight)
    if sample_weight is not None:
        sample_weight = np.asarray(sample_weight, dtype=np.float64)
        if sample_weight.shape != y.shape:
            raise ValueError(f"sample_weight has shape {sample_weight.shape}, y {y.shape}")
        cost = cost * sample_weight
    if not np.all(np.isfinite(cost) & (cost > 0)):
        raise ValueError("every cost C_i must be finite and > 0")
    return cost


def _problem(
    X: Any, y: Any, C: float, loss: str, bias: str | None, bias_scale: float | None,
    class_weight: Mapping[Any, float] | None, sample_weight: np.ndarray | None,
) -> _Problem:
    if loss not in ("l1", "l2"):
        raise ValueError(f"loss must be 'l1' or 'l2', got {loss!r}")
    if bias not in (None, "augment", "free"):
        raise ValueError(f"bias must be None, 'augment' or 'free', got {bias!r}")
    if bias == "augment":
        bias_scale = 1.0 if bias_scale is None else float(bias_scale)
        if not bias_scale > 0:
            raise ValueError("bias_scale must be > 0")
    else:
        bias_scale = None
    matrix = sp.csr_matrix(X, dtype=np.float64)
    matrix.sum_duplicates()
    labels = np.asarray(y, dtype=np.float64).ravel()
    if labels.shape[0] != matrix.shape[0]:
        raise ValueError(f"y has {labels.shape[0]} labels, X {matrix.shape[0]} rows")
    if not np.all(np.abs(labels) == 1.0):
        raise ValueError("labels must be -1 or +1 (binarise first)")
    return _Problem(matrix, labels, cost_vector(labels, C, class_weight, sample_weight),
                    loss, bias, bias_scale)


# --------------------------------------------------------------------------------------
# objectives, evaluated here (never taken from a solver)


def primal_value(
    X: Any, y: Any, w: np.ndarray, intercept: float = 0.0, *, C: float = 1.0,
    loss: str = "l1", bias: str | None = None, bias_scale: float | None = None,
    class_weight: Mapping[Any, float] | None = None, sample_weight: np.ndarray | None = None,
) -> float:
    """P of a model (coef w, intercept b of the decision function x.w + b).

    bias="augment": the regularised weight of the bias feature is b / B; bias=None requires
    b == 0; bias="free": b is not regularised.
    """
    problem = _problem(X, y, C, loss, bias, bias_scale, class_weight, sample_weight)
    return _primal(problem, np.asarray(w, dtype=np.float64), float(intercept))


def _primal(problem: _Problem, w: np.ndarray, intercept: float) -> float:
    if problem.bias is None and intercept != 0.0:
        raise ValueError("bias=None but the model has a non-zero intercept")
    f = problem.X @ w + intercept
    slack = np.maximum(0.0, 1.0 - problem.y * f)
    losses = slack if problem.loss == "l1" else slack * slack
    value = 0.5 * float(math.fsum(w * w)) + float(math.fsum(problem.cost * losses))
    if problem.bias == "augment":
        assert problem.bias_scale is not None
        value += 0.5 * (intercept / problem.bias_scale) ** 2
    return value


def _feasible_alpha(problem: _Problem, alpha: np.ndarray) -> np.ndarray:
    """Project a near-feasible dual point onto the dual's feasible set (exactly feasible)."""
    upper = problem.cost if problem.loss == "l1" else np.inf
    a = np.clip(np.asarray(alpha, dtype=np.float64), 0.0, upper)
    if problem.bias == "free":
        positive, negative = problem.y > 0, problem.y < 0
        s_pos, s_neg = float(a[positive].sum()), float(a[negative].sum())
        # scale the larger side down so that y'a = 0 (stays inside the box)
        if s_pos > s_neg and s_pos > 0:
            a[positive] *= s_neg / s_pos
        elif s_neg > s_pos and s_neg > 0:
            a[negative] *= s_pos / s_neg
    return a


def _dual(problem: _Problem, alpha: np.ndarray) -> float:
    """D(a) for a feasible a (see `_feasible_alpha`): a lower bound on P*."""
    v = problem.Z.T @ (alpha * problem.y)
    value = float(math.fsum(alpha)) - 0.5 * float(math.fsum(v * v))
    if problem.loss == "l2":
        value -= 0.25 * float(math.fsum(alpha * alpha / problem.cost))
    return value


def _l2_gradient(problem: _Problem, w_full: np.ndarray) -> np.ndarray:
    """Gradient of the (differentiable) L2-loss primal in the weights (bias feature last)."""
    Z = problem.Z
    slack = np.maximum(0.0, 1.0 - problem.y * (Z @ w_full))
    return w_full - 2.0 * (Z.T @ (problem.cost * slack * problem.y))


def _split(problem: _Problem, w_full: np.ndarray) -> tuple[np.ndarray, float, float | None]:
    """(w, intercept, w_B) from the weights over Z (bias feature last for "augment")."""
    d = problem.X.shape[1]
    if problem.bias == "augment":
        assert problem.bias_scale is not None
        w_b = float(w_full[d])
        return w_full[:d].copy(), w_b * problem.bias_scale, w_b
    return w_full[:d].copy(), 0.0, None


def _certificate(
    problem: _Problem, w: np.ndarray, intercept: float, bias_weight: float | None,
    alpha: np.ndarray | None, method: str, rel_gap: float, extra_bound: float | None = None,
    details: dict[str, Any] | None = None,
) -> Certificate:
    primal = _primal(problem, w, intercept)
    bounds = []
    feasible = None
    if alpha is not None:
        feasible = _feasible_alpha(problem, alpha)
        bounds.append(_dual(problem, feasible))
    if extra_bound is not None:
        bounds.append(extra_bound)
    if not bounds:
        raise CertificationError("no lower bound: give a dual point")
    dual_bound = max(bounds)
    certificate = Certificate(
        primal=primal, dual_bound=dual_bound, w=w, intercept=intercept,
        bias_weight=bias_weight, alpha=feasible, method=method, loss=problem.loss,
        bias=problem.bias, bias_scale=problem.bias_scale, details=dict(details or {}),
    )
    if not (math.isfinite(primal) and math.isfinite(dual_bound)):
        raise CertificationError(f"{method}: non-finite primal {primal} or bound {dual_bound}")
    if certificate.gap > rel_gap * abs(primal):
        raise CertificationError(
            f"{method}: relative gap {certificate.relative_gap:.3e} > {rel_gap:.1e} "
            f"(primal {primal!r}, lower bound {dual_bound!r})"
        )
    return certificate


# --------------------------------------------------------------------------------------
# clarabel: the primal QP


# Settings tried in turn until one certifies: on a few unscaled problems clarabel stalls at
# "AlmostSolved" (heart_scale x factors, L2 loss: 2e-8 relative) with its defaults, and
# tighter iterative refinement or static regularisation or no equilibration fix it.
CLARABEL_ATTEMPTS: tuple[dict[str, Any], ...] = (
    {},
    {"iterative_refinement_reltol": 1e-16, "iterative_refinement_abstol": 1e-16,
     "iterative_refinement_max_iter": 50},
    {"static_regularization_constant": 1e-10},
    {"equilibrate_enable": False},
)


def _solve_clarabel(problem: _Problem, rel_gap: float, time_limit: float) -> Certificate:
    failures = []
    for attempt in CLARABEL_ATTEMPTS:
        try:
            certificate = _clarabel_once(problem, rel_gap, time_limit, attempt)
        except CertificationError as exc:
            failures.append(f"{attempt or 'defaults'}: {exc}")
            continue
        certificate.details["failed_attempts"] = failures
        return certificate
    raise CertificationError("clarabel: no setting certified the optimum; " + "; ".join(failures))


def _clarabel_once(
    problem: _Problem, rel_gap: float, time_limit: float, overrides: dict[str, Any]
) -> Certificate:
    import clarabel

    Z = problem.Z.tocsc()
    n, dz = Z.shape
    free = problem.bias == "free"
    nb = 1 if free else 0
    nv = dz + nb + n  # variables: w (dz), b (free only), xi (n)
    y = problem.y
    cost = problem.cost
    # P: identity on w, 0 on b, 2 C_i on xi (l2) / 0 (l1); upper triangle, CSC
    p_diag = np.concatenate([np.ones(dz), np.zeros(nb),
                             2.0 * cost if problem.loss == "l2" else np.zeros(n)])
    P = sp.diags(p_diag, format="csc")
    q = np.concatenate([np.zeros(dz + nb), cost if problem.loss == "l1" else np.zeros(n)])
    # margin rows: -y_i z_i.w - y_i b - xi_i <= -1  (dual variables: alpha)
    blocks = [sp.diags(-y) @ Z]
    if free:
        blocks.append(sp.csc_matrix(-y.reshape(-1, 1)))
    blocks.append(-sp.identity(n, format="csc"))
    A_margin = sp.hstack(blocks, format="csc")
    rows = [A_margin]
    b_rhs = [-np.ones(n)]
    if problem.loss == "l1":  # -xi <= 0 (with squared slack, xi >= 0 is implied)
        rows.append(sp.hstack([sp.csc_matrix((n, dz + nb)), -sp.identity(n, format="csc")],
                              format="csc"))
        b_rhs.append(np.zeros(n))
    A = sp.vstack(rows, format="csc")
    b_vec = np.concatenate(b_rhs)
    A.sort_indices()
    P.sort_indices()

    settings = clarabel.DefaultSettings()
    settings.verbose = False
    # clarabel's tolerances apply to its equilibrated problem: asked for 1e-10 it can end
    # at 4e-9 relative on unscaled data (madelon), so ask for more; the check is ours
    settings.tol_gap_abs = CLARABEL_TOL * 1e-6
    settings.tol_gap_rel = CLARABEL_TOL * 1e-3
    settings.tol_feas = CLARABEL_TOL * 1e-2
    settings.tol_ktratio = CLARABEL_TOL
    settings.max_iter = 500
    settings.time_limit = time_limit
    settings.max_threads = 1
    for name, value in overrides.items():
        setattr(settings, name, value)
    solver = clarabel.DefaultSolver(
        P, q, A, b_vec, [clarabel.NonnegativeConeT(A.shape[0])], settings
    )
    solution = solver.solve()
    status = str(solution.status)
    x = np.asarray(solution.x)
    z = np.asarray(solution.z)
    if x.shape != (nv,) or not np.all(np.isfinite(x)) or not np.all(np.isfinite(z)):
        raise CertificationError(f"clarabel: status {status}, no usable solution")
    w_full = x[:dz]
    alpha = z[:n]
    if free:
        w, intercept, bias_weight = w_full.copy(), float(x[dz]), None
    else:
        w, intercept, bias_weight = _split(problem, w_full)
    details = {"status": status, "iterations": int(solution.iterations),
               "solve_time": float(solution.solve_time), "settings": dict(overrides)}
    try:
        return _certificate(problem, w, intercept, bias_weight, alpha, "clarabel", rel_gap,
                            details=details)
    except CertificationError as exc:
        details["primal_point_failed"] = str(exc)
    # the model w(a) of the dual point is sometimes the better primal point
    feasible = _feasible_alpha(problem, alpha)
    w_alpha = problem.Z.T @ (feasible * y)
    if free:
        intercept_a = _best_intercept(problem, w_alpha)
        return _certificate(problem, w_alpha, intercept_a, None, alpha, "clarabel", rel_gap,
                            details=details)
    w_a, b_a, wb_a = _split(problem, w_alpha)
    return _certificate(problem, w_a, b_a, wb_a, alpha, "clarabel", rel_gap, details=details)


def _best_intercept(problem: _Problem, w: np.ndarray) -> float:
    from scipy.optimize import minimize_scalar

    f = problem.X @ w

    def value(b: float) -> float:
        slack = np.maximum(0.0, 1.0 - problem.y * (f + b))
        return float(problem.cost @ (slack if problem.loss == "l1" else slack * slack))

    spread = float(np.max(np.abs(f))) + 2.0
    result = minimize_scalar(value, bounds=(-spread, spread), method="bounded",
                             options={"xatol": 1e-13})
    return float(result.x)


# --------------------------------------------------------------------------------------
# LIBLINEAR -s 2 (L2 loss, primal trust-region Newton)


def _solve_liblinear(problem: _Problem, rel_gap: float, eps: float) -> Certificate:
    from liblinear import liblinearutil

    if problem.loss != "l2" or problem.bias == "free":
        raise ValueError("method='liblinear' certifies the L2-loss problem with bias None/augment")
    # LIBLINEAR has per-class costs only: C_i must depend on y_i alone
    weights = {}
    for label in (-1.0, 1.0):
        costs = problem.cost[problem.y == label]
        if costs.size and not np.all(costs == costs[0]):
            raise ValueError("method='liblinear' needs C_i constant within each class")
        weights[label] = float(costs[0]) if costs.size else 1.0
    base = weights[1.0]
    options = f"-s 2 -e {eps!r} -q -c {base!r} -w-1 {weights[-1.0] / base!r}"
    if problem.bias == "augment":
        options += f" -B {problem.bias_scale!r}"
    # the first label LIBLINEAR meets is its positive class: put a +1 row first
    order = np.argsort(-problem.y, kind="stable")
    X = problem.X[order]
    y = problem.y[order]
    model = liblinearutil.train(y, X, options)
    d = problem.X.shape[1]
    coef, bias_term = model.get_decfun()
    w_full = np.zeros(d + (1 if problem.bias == "augment" else 0))
    w_full[:len(coef)] = coef[:d] if len(coef) >= d else coef
    if problem.bias == "augment":
        w_full[d] = bias_term / problem.bias_scale if problem.bias_scale else 0.0
    if model.get_labels()[0] != 1:
        w_full = -w_full
    gradient = _l2_gradient(problem, w_full)
    g2 = float(math.fsum(gradient * gradient))
    primal = _primal(problem, *_split(problem, w_full)[:2])
    strong_convexity_bound = primal - 0.5 * g2  # P(w) - P* <= ||grad||^2 / 2
    slack = np.maximum(0.0, 1.0 - problem.y * (problem.Z @ w_full))
    alpha = 2.0 * problem.cost * slack
    g0 = _l2_gradient(problem, np.zeros_like(w_full))
    details = {"gradient_norm": math.sqrt(g2),
               "relative_gradient_norm": math.sqrt(g2 / float(g0 @ g0)),
               "liblinear_options": options}
    w, intercept, bias_weight = _split(problem, w_full)
    return _certificate(problem, w, intercept, bias_weight, alpha, "liblinear", rel_gap,
                        extra_bound=strong_convexity_bound, details=details)


# --------------------------------------------------------------------------------------
# public API


_CACHE: dict[tuple[Any, ...], Certificate] = {}


def _key(problem: _Problem, *params: Any) -> tuple[Any, ...]:
    digest = hashlib.sha1()
    for array in (problem.X.data, problem.X.indices, problem.X.indptr, problem.y,
                  problem.cost):
        digest.update(np.ascontiguousarray(array).tobytes())
    return (digest.hexdigest(), problem.X.shape, problem.loss, problem.bias,
            problem.bias_scale, *params)


def certified_optimum(
    X: Any,
    y: Any,
    C: float = 1.0,
    loss: Loss = "l1",
    bias: Bias = None,
    bias_scale: float | None = None,
    class_weight: Mapping[Any, float] | None = None,
    sample_weight: np.ndarray | None = None,
    *,
    method: Literal["auto", "clarabel", "liblinear"] = "auto",
    rel_gap: float = DEFAULT_REL_GAP,
    time_limit: float = 600.0,
    liblinear_eps: float = 1e-8,
) -> Certificate:
    """The certified optimum of the binary problem (labels +-1); raises CertificationError.

    bias: None (no intercept), "augment" (constant feature `bias_scale`, default 1.0,
    regularised) or "free" (unregularised intercept). method "auto": clarabel up to
    CLARABEL_MAX_ROWS rows, LIBLINEAR -s 2 beyond (L2 loss with per-class costs).
    Cached in memory per (data, parameters).
    """
    problem = _problem(X, y, C, loss, bias, bias_scale, class_weight, sample_weight)
    if method == "auto":
        large = problem.X.shape[0] > CLARABEL_MAX_ROWS
        method = "liblinear" if large and loss == "l2" and bias != "free" else "clarabel"
    key = _key(problem, method, rel_gap, liblinear_eps if method == "liblinear" else None)
    if key not in _CACHE:
        if method == "clarabel":
            _CACHE[key] = _solve_clarabel(problem, rel_gap, time_limit)
        elif method == "liblinear":
            _CACHE[key] = _solve_liblinear(problem, rel_gap, liblinear_eps)
        else:
            raise ValueError(f"unknown method {method!r}")
    return _CACHE[key]


def certify_pair(
    X: Any,
    y: Any,
    w: np.ndarray,
    intercept: float,
    alpha: np.ndarray,
    C: float = 1.0,
    loss: Loss = "l1",
    bias: Bias = None,
    bias_scale: float | None = None,
    class_weight: Mapping[Any, float] | None = None,
    sample_weight: np.ndarray | None = None,
    *,
    rel_gap: float = DEFAULT_REL_GAP,
    method: str = "pair",
) -> Certificate:
    """Certify a primal-dual pair from any solver: P(w, b) and D(a) computed here.

    alpha is projected onto the dual's feasible set first (so the bound is valid whatever
    the solver returned); raises CertificationError when the gap exceeds rel_gap * |P|.
    """
    problem = _problem(X, y, C, loss, bias, bias_scale, class_weight, sample_weight)
    w = np.asarray(w, dtype=np.float64)
    bias_weight = None
    if problem.bias == "augment":
        assert problem.bias_scale is not None
        bias_weight = float(intercept) / problem.bias_scale
    return _certificate(problem, w, float(intercept), bias_weight, alpha, method, rel_gap)


def relative_suboptimality(certificate: Certificate, primal: float) -> float:
    return certificate.relative_suboptimality(primal)
