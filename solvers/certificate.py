"""Certificates: a proven lower bound on the optimum of a linear problem, at the model a
solver returns. The backbone (solvers/continuation.py, solvers/train.py) decides
`converged` from it, and only from it.

For one binary problem with primal P (solvers/objectives.py; bias "augment" or "none"):

    relative_gap = (P(w) - L) / P(w),   L <= P* a proven lower bound,

so P(w) is within relative_gap of the optimum: (P(w) - P*) / P(w) <= relative_gap.
`converged` means relative_gap <= tol (the job's `tol`, default 1e-3), nothing else.

L is the best of:
- the solver's own dual value (`BinarySolution.dual`), which every solver that reports
  one guarantees to be the value of a feasible dual point (dcd, acf: -D(a); ocas: the
  dual of its reduced problem, <= F_t(w_t) <= P*; alm: the dual at a feasible point built
  from its slacks or multipliers);
- a bound computed here from w alone (one pass over the data, two sparse products):
  * l2 (squared hinge): P is 1-strongly convex and differentiable, so
    P* >= P(w) - ||grad P(w)||^2 / 2; and the dual point a_i = t 2 C_i max(0, 1 - m_i)
    (m_i = y_i w.x_i; the exact optimal multipliers at w*), scaled by the best t >= 0;
  * logistic: P* >= P(w) - ||grad P(w)||^2 / 2 (1-strongly convex);
  * l1 (hinge): the dual point a_i = t C_i [m_i < 1] with the best t in [0, 1] (weak away
    from the optimum; solvers of the hinge loss report their own, better, dual);
  * L1-regularised problems (penalty "l1"): a scaled feasible dual point from w
    (solvers/l1_objectives.py).
For the free (unregularised) intercept of alm the problem differs; only the solver's own
dual counts there (alm builds it with y'a = 0).

A one-vs-rest fit is certified output by output; the fit's relative gap is
sum of gaps / sum of primal values, and it is converged only if every output is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from solvers import l1_objectives
from solvers.backbone import BinarySolution, LinearProblem
from solvers.objectives import margins, transpose_times
from solvers.params import L1R_PREFIX

DEFAULT_TOL = 1e-3


@dataclass(frozen=True)
class Certificate:
    """P(w) of the returned model and a proven lower bound on the optimum."""

    primal: float
    lower_bound: float
    source: str  # which bound won: "solver dual", "gradient", "dual from slacks"

    @property
    def gap(self) -> float:
        return max(self.primal - self.lower_bound, 0.0)

    @property
    def relative_gap(self) -> float:
        if not (math.isfinite(self.primal) and math.isfinite(self.lower_bound)):
            return math.inf
        return self.gap / max(abs(self.primal), 1e-300)

    def holds(self, tol: float) -> bool:
        return self.relative_gap <= tol


def problem_loss(params: dict[str, Any]) -> str:
    """The loss of a linear solver's problem from its applied parameters: "l1", "l2",
    "logistic", "lp" (alm with p other than 1 and 2), or with penalty "l1" (an
    L1-regularised problem, solvers/l1_objectives.py) "l1r_l2" or "l1r_logistic"."""
    if params.get("penalty") == "l1":
        return f"{L1R_PREFIX}{params.get('loss', 'l2')}"
    if "p" in params:
        p = float(params["p"])
        return "l1" if p == 1.0 else "l2" if p == 2.0 else "lp"
    return str(params.get("loss", "l1"))


def certify(problem: LinearProblem, solution: BinarySolution, loss: str,
            free_bias: bool) -> Certificate:
    """The certificate of `solution` (its w, and its dual if any) for `problem`."""
    solver_dual = solution.dual if solution.dual is not None else -math.inf
    w = solution.w
    if w is None or not np.all(np.isfinite(w)):
        return Certificate(math.inf, -math.inf, "none")
    if free_bias or loss == "lp":
        primal = float(solution.primal) if solution.primal is not None else math.inf
        return Certificate(primal, solver_dual, "solver dual")
    primal, bounds = bounds_at(problem, w, loss)
    bounds["solver dual"] = solver_dual
    source = max(bounds, key=bounds.__getitem__)
    return Certificate(primal, bounds[source], source)


def bounds_at(problem: LinearProblem, w: np.ndarray, loss: str
              ) -> tuple[float, dict[str, float]]:
    """(P(w), {name: lower bound on P*}) from w alone."""
    if loss.startswith(L1R_PREFIX):
        return l1_objectives.bounds_at(problem, w, loss.removeprefix(L1R_PREFIX))
    w = np.asarray(w, dtype=np.float64)
    m = margins(problem, w)
    cost, y = problem.cost, problem.y
    half_norm = 0.5 * float(w @ w)
    if loss == "logistic":
        primal = half_norm + float(np.sum(cost * np.logaddexp(0.0, -m)))
        # grad = w - Z'(C y sigma(-m))
        grad = w - transpose_times(problem, cost * y * _sigmoid(-m))
        return primal, {"gradient": primal - 0.5 * float(grad @ grad)}
    slack = np.maximum(0.0, 1.0 - m)
    if loss == "l2":
        primal = half_norm + float(np.sum(cost * slack * slack))
        alpha = 2.0 * cost * slack
        v = transpose_times(problem, alpha * y)
        grad = w - v  # grad P(w) = w - Z'(2 C y slack)
        total = float(alpha.sum())
        # D(t a) = t S - t^2 (||v||^2 / 2 + sum a^2 / (4 C)), maximal at t = S / (2 q)
        q = 0.5 * float(v @ v) + 0.25 * float(np.sum(alpha * alpha / cost))
        dual = total * total / (4.0 * q) if q > 0.0 else 0.0
        return primal, {"gradient": primal - 0.5 * float(grad @ grad),
                        "dual from slacks": dual}
    if loss != "l1":
        raise ValueError(f"no certificate for loss {loss!r}")
    primal = half_norm + float(np.sum(cost * slack))
    alpha = np.where(m < 1.0, cost, 0.0)
    v = transpose_times(problem, alpha * y)
    total, vv = float(alpha.sum()), float(v @ v)
    # D(t a) = t S - t^2 ||v||^2 / 2 over 0 <= t <= 1
    t = min(1.0, total / vv) if vv > 0.0 else 1.0
    return primal, {"dual from slacks": t * total - 0.5 * t * t * vv}


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def warning_text(solver: str, exit_reason: str, certificate: Certificate, tol: float,
                 output: str | None = None) -> str:
    """A plain sentence for a model that is not certified within tol."""
    where = f"{output}: " if output else ""
    rel = certificate.relative_gap
    if not math.isfinite(rel):
        return (f"{where}{solver} stopped at {exit_reason} with no certified lower bound: "
                "the model's distance from the optimum is unknown")
    above = certificate.gap / max(certificate.lower_bound, 1e-300)
    bound_text = f"{100 * above:.3g}%" if certificate.lower_bound > 0 else (
        "an unknown amount")
    return (f"{where}{solver} stopped at {exit_reason}, {bound_text} above the certified "
            f"lower bound (relative gap {rel:.2e} > tol {tol:g})")
