"""The solver registry (`SOLVERS`): name -> training module (imported lazily, by
`solvers.train`), description, problem and parameter schema (names, types, defaults,
ranges, descriptions).

Pure Python (no NumPy, no Numba), so the API can validate a training spec and list the
solvers without loading any numerical code. `validate_params` is the one gate a spec
passes through: it fills defaults, coerces types and raises `ParamError` with a message
that says how to fix the input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from solvers.auto import FORMULATION_LOSSES
from solvers.auto import RULE as AUTO_RULE

Kind = Literal["float", "int", "choice", "class_weight", "str"]


class ParamError(ValueError):
    """A training spec the solver does not accept; `field` names the offending parameter."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    default: Any
    description: str
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None
    nullable: bool = False

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.kind,
            "default": self.default,
            "description": self.description,
            "nullable": self.nullable,
        }
        if self.minimum is not None:
            out["exclusive_minimum" if self.exclusive_minimum else "minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.choices is not None:
            out["choices"] = list(self.choices)
        return out

    def coerce(self, value: Any) -> Any:
        if value is None:
            if self.nullable:
                return None
            raise ParamError(f"{self.name} may not be null", self.name)
        if self.kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParamError(f"{self.name} must be a number, got {value!r}", self.name)
            number = float(value)
            if not math.isfinite(number):
                raise ParamError(f"{self.name} must be finite, got {value!r}", self.name)
            self._check_range(number)
            return number
        if self.kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                if isinstance(value, float) and value.is_integer():
                    value = int(value)
                else:
                    raise ParamError(f"{self.name} must be an integer, got {value!r}", self.name)
            self._check_range(value)
            return int(value)
        if self.kind == "choice":
            assert self.choices is not None
            flags = isinstance(self.choices[0], bool)  # a flag takes true/false, not 1/0
            if value not in self.choices or (flags and not isinstance(value, bool)):
                allowed = ", ".join(repr(c) for c in self.choices)
                raise ParamError(f"{self.name} must be one of {allowed}, got {value!r}", self.name)
            return self.choices[self.choices.index(value)]  # the canonical value: 0 -> 0.0
        if self.kind == "class_weight":
            return _coerce_class_weight(self.name, value)
        if not isinstance(value, str):
            raise ParamError(f"{self.name} must be a string, got {value!r}", self.name)
        return value

    def _check_range(self, number: float) -> None:
        if self.minimum is not None:
            if self.exclusive_minimum and not number > self.minimum:
                raise ParamError(f"{self.name} must be > {self.minimum}, got {number}", self.name)
            if not self.exclusive_minimum and not number >= self.minimum:
                raise ParamError(f"{self.name} must be >= {self.minimum}, got {number}", self.name)
        if self.maximum is not None and number > self.maximum:
            raise ParamError(f"{self.name} must be <= {self.maximum}, got {number}", self.name)


def _coerce_class_weight(name: str, value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise ParamError(f"{name} must be an object mapping class label to weight", name)
    weights: dict[str, float] = {}
    for label, weight in value.items():
        try:
            label_value = float(label)
        except (TypeError, ValueError):
            raise ParamError(f"{name}: {label!r} is not a class label (a number)", name) from None
        if isinstance(weight, bool) or not isinstance(weight, int | float):
            raise ParamError(f"{name}[{label}] must be a number, got {weight!r}", name)
        if not (math.isfinite(weight) and weight > 0):
            raise ParamError(f"{name}[{label}] must be a finite number > 0", name)
        weights[label_key(label_value)] = float(weight)
    return weights


def label_key(label: float) -> str:
    """Canonical text of a class label: '1', '-1', '2.5'."""
    return str(int(label)) if float(label).is_integer() else repr(float(label))


WarmStart = Literal["dual", "primal", "state"]
Certificate = Literal["duality_gap", "kkt"]
Size = Literal["any", "few_weights", "few_rows", "few_wide_rows"]
# "multiclass_joint": all classes in one problem (Crammer-Singer); "single_output": one
# problem whatever y is (regression, outlier detection)
Task = Literal["binary", "multiclass_ovr", "multiclass_ovo", "multiclass_joint",
               "single_output"]
LINEAR_TASKS: tuple[Task, ...] = ("binary", "multiclass_ovr")
L1_LOSSES = ("l2", "logistic")  # the losses of penalty "l1" (LIBLINEAR -s 5, 6)
L1R_PREFIX = "l1r_"  # problem_loss of an L1-regularised problem: "l1r_" + its loss


TaskName = Literal["classification", "regression", "outlier"]


@dataclass(frozen=True)
class Formulation:
    """A problem a solver can train (LIBSVM's svm_type): its task, the parameters it
    reads, and what LIBSVM adds to it. The service derives a job's task from the
    formulation in its params (`task_of`), never from a solver name."""

    name: str  # LIBSVM's svm_type: c_svc, nu_svc, one_class, epsilon_svr, nu_svr
    task: TaskName
    problem: str  # the dual as LIBSVM solves it
    reads: tuple[str, ...]  # of C, nu, epsilon, class_weight
    probability: Literal["platt", "laplace", "density"] | None  # what probability true fits


FORMULATIONS: dict[str, Formulation] = {
    "c_svc": Formulation(
        "c_svc", "classification",
        "min_a 1/2 a'Qa - e'a, 0 <= a_i <= C_i, y'a = 0, Q_ij = y_i y_j K(x_i, x_j)",
        ("C", "class_weight"), "platt"),
    "nu_svc": Formulation(
        "nu_svc", "classification",
        "min_a 1/2 a'Qa, 0 <= a_i <= w_i, y'a = 0, e'a = nu sum_i w_i (LIBSVM -s 1, "
        "Solver_NU; the model is rescaled by 1/r)", ("nu", "class_weight"), "platt"),
    "one_class": Formulation(
        "one_class", "outlier",
        "min_a 1/2 a'Ka, 0 <= a_i <= w_i, e'a = nu sum_i w_i (LIBSVM -s 2); decision "
        "value > 0: inlier (+1), else outlier (-1)", ("nu",), "density"),
    "epsilon_svr": Formulation(
        "epsilon_svr", "regression",
        "min 1/2 (a - a*)'K(a - a*) + epsilon e'(a + a*) - y'(a - a*), 0 <= a_i, a*_i <= "
        "C_i, e'(a - a*) = 0 (LIBSVM -s 3)", ("C", "epsilon"), "laplace"),
    "nu_svr": Formulation(
        "nu_svr", "regression",
        "min 1/2 (a - a*)'K(a - a*) - y'(a - a*), 0 <= a_i, a*_i <= C_i, e'(a - a*) = 0, "
        "e'(a + a*) = C nu sum_i w_i (LIBSVM -s 4, Solver_NU; epsilon = -r)",
        ("C", "nu"), "laplace"),
    "crammer_singer": Formulation(
        "crammer_singer", "classification",
        "min_a 1/2 sum_m ||sum_i a_i^m x_i||^2 + sum_{i, m != y_i} a_i^m, sum_m a_i^m = 0, "
        "a_i^m <= C_i [m = y_i] (LIBLINEAR -s 4; one weight vector per class, trained "
        "jointly)", ("C", "class_weight"), None),
}
LIBSVM_FORMULATIONS = ("c_svc", "nu_svc", "one_class", "epsilon_svr", "nu_svr")
# the formulations auto trains, by LIBLINEAR's linear solvers (its rule: solvers.auto)
AUTO_FORMULATIONS = tuple(FORMULATION_LOSSES)


def task_of(solver: str, applied: Mapping[str, Any]) -> TaskName:
    """The task a fit with these applied parameters trains: its formulation's."""
    spec = SOLVERS.get(solver)
    if spec is None or "formulation" not in {p.name for p in spec.params}:
        return "classification"
    return FORMULATIONS[str(applied.get("formulation", "c_svc"))].task


def formulations_for(task: TaskName) -> dict[str, list[str]]:
    """solver -> the formulations of `task` it trains (what a job of that task may ask)."""
    out: dict[str, list[str]] = {}
    for name, spec in SOLVERS.items():
        names = [f for f in spec.formulations if FORMULATIONS[f].task == task]
        if names:
            out[name] = names
    return out


@dataclass(frozen=True)
class Step:
    """One step of the fallback rule (solvers/continuation.py) after a fit of this solver
    that the certificate does not confirm. The steps of a solver are tried in order; the
    first that applies is taken.

    `target` None: the same solver again with eps / 10 (from its dual point when its warm
    start is "dual", else from its w), while eps / 10 >= continuation.MIN_EPS. Otherwise:
    `target`, warm-started from w, when the fit's loss is one of `losses` and the problem's
    size suits the target (`size`: "few_weights" at most auto.NEWTON_MAX_WEIGHTS weights,
    "few_rows" at most auto.GRAM_MAX_ROWS examples, "few_wide_rows" auto.gram_suits).
    """

    on: tuple[str, ...] | None = None  # the exit reasons it follows; None: any non-final one
    target: str | None = None
    losses: tuple[str, ...] = ("l1", "l2")
    size: Size = "any"
    eps_from_tol: bool = False  # the target's eps is the fit's tol (ocas: a relative gap)
    note: str = ""  # the end of the step's reason; {tol} is the fit's tol


@dataclass(frozen=True)
class SolverSpec:
    """A registered solver: where it lives, what it solves, its parameters, and what it
    can do (the control flow of solvers.train, solvers.continuation, solvers.workflow and
    the search worker asks these fields, never a solver's name)."""

    name: str
    module: str  # the module implementing solve(problem, params, monitor) -> BinarySolution
    kind: Literal["linear", "kernel"]  # the model it trains (solvers.models)
    description: str
    problem: str
    params: tuple[Param, ...] = field(default_factory=tuple)
    losses: tuple[str, ...] = ("l1", "l2")  # what problem_loss(applied) can be
    tasks: tuple[Task, ...] = LINEAR_TASKS  # how many classes it trains, and how
    # how `converged` is decided: "duality_gap" (linear: the relative gap recomputed at
    # the returned w <= tol, continued by `fallback` until it holds, solvers/continuation)
    # or "kkt" (kernel: the solver's own stop rule on the dual's optimality conditions)
    certificate: Certificate = "duality_gap"
    # what a fit can continue from: "dual" an earlier fit's dual solution (fit's
    # warm_start, alpha0), "state" an earlier fit's solver state (warm_start with
    # keep_solver_state), "primal" a w (w0, as a follow-up of the fallback rule); None
    warm_start: WarmStart | None = None
    fallback: tuple[Step, ...] = ()  # the fallback rule after an uncertified fit
    randomized: bool = False  # uses `seed`; a deterministic solver takes no seed of its own
    scale_sensitive: bool = False  # crawls on unscaled features (kernel: non-linear kernels)
    chooses: bool = False  # trains nothing itself: picks a solver from the data (auto)
    # the problems it trains (FORMULATIONS); more than one: chosen by its `formulation`
    # parameter, whose formulation says the task (task_of)
    formulations: tuple[str, ...] = ("c_svc",)
    # take fit(sample_weight=...): C_i = C * class_weight * w_i (LIBSVM's weights extension)
    sample_weights: bool = False
    # holds the rows x rows Gram matrix in memory (a job's memory estimate, app.domain.memory)
    dense_gram: bool = False
    # the warm-up group that compiles its kernels (solvers.train.WARMUP_GROUPS): "linear"
    # (auto's path, warmed first), "smo" (its own groups) or "other"
    warmup_group: Literal["linear", "smo", "other"] = "other"
    # one of the solvers `auto` chooses among (solvers.auto.choose): auto's formulations,
    # tasks and per-formulation losses are those of its candidates
    auto_candidate: bool = False
    # (loss, LIBLINEAR solver_type) its model files name where that is not the usual type
    # of the formulation, penalty and loss (solvers.formats.liblinear_solver_type)
    liblinear_types: tuple[tuple[str, str], ...] = ()

    @property
    def continues_fits(self) -> bool:
        """Whether `fit(warm_start=earlier)` continues from an earlier fit of the same rows
        (a C path: the search worker fits a path's points in increasing C)."""
        return self.warm_start in ("dual", "state")

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "problem": self.problem,
            "params": [p.describe() for p in self.params],
        }


def _c_param() -> Param:
    return Param("C", "float", 1.0, "Cost of a margin violation (C in the primal).",
                 minimum=0.0, exclusive_minimum=True, maximum=1e12)


def _eps_param(eps: float, what: str = "Stopping tolerance of the solver's stop rule.") -> Param:
    return Param("eps", "float", eps, what, minimum=0.0, exclusive_minimum=True, maximum=1e6)


def _bias_params(choices: tuple[str, ...], default: str) -> tuple[Param, ...]:
    meaning = {
        "augment": "'augment' appends a constant feature of value bias_scale (regularised, "
        "as LIBLINEAR -B)",
        "none": "'none' fits no intercept",
        "free": "'free' fits a true, unregularised intercept",
    }
    params = [Param("bias", "choice", default, "; ".join(meaning[c] for c in choices) + ".",
                    choices=choices)]
    if "augment" in choices:
        params.append(Param("bias_scale", "float", 1.0, "Value of the appended bias feature.",
                            minimum=0.0, exclusive_minimum=True, maximum=1e6))
    return tuple(params)


def _limits(max_iter: int, what: str = "outer iterations (sweeps)") -> tuple[Param, ...]:
    return (
        Param("max_iter", "int", max_iter, f"Maximum number of {what}.",
              minimum=1, maximum=100_000_000),
        Param("max_seconds", "float", None,
              "Wall-clock limit of the solver; the model so far is kept (exit reason "
              "max_seconds). Null means the service default.",
              minimum=0.0, exclusive_minimum=True, maximum=7 * 24 * 3600.0, nullable=True),
    )


def _class_weight() -> Param:
    return Param("class_weight", "class_weight", None,
                 "Per-class multiplier of C, e.g. {\"1\": 5.0}.", nullable=True)


def _weights_and_seed(seed_what: str = "Seed of the random permutation") -> tuple[Param, ...]:
    """class_weight and the seed of a randomized solver (SolverSpec.randomized); a
    deterministic solver takes the workflow's seed instead (probability only)."""
    return (
        _class_weight(),
        Param("seed", "int", 0, f"{seed_what}; runs with the same seed are reproducible.",
              minimum=0, maximum=2**63 - 1),
    )


def _threads() -> Param:
    return Param("threads", "int", 1, "Numba threads for the data-parallel kernels.",
                 minimum=1, maximum=256)


def _loss(choices: tuple[str, ...] = ("l1", "l2"), default: str = "l2") -> Param:
    return Param("loss", "choice", default, "'l1' hinge loss or 'l2' squared hinge loss.",
                 choices=choices)


def _penalty_param(choices: tuple[str, ...], default: str) -> Param:
    return Param("penalty", "choice", default, "The regulariser: 'l2' 1/2 ||w||^2, or 'l1' "
                 "||w||_1 (sparse weights; with loss 'l2' or 'logistic' only, as LIBLINEAR "
                 "-s 5, 6).", choices=choices)


def _tol_param() -> Param:
    return Param(
        "tol", "float", 1e-3,
        "Relative duality gap at which the model counts as converged: converged is true "
        "only when (P(w) - L) / P(w) <= tol at the returned model, L a proven lower bound "
        "of the optimum (a dual value, or for a smooth loss P(w) - ||grad P(w)||^2 / 2), so "
        "P(w) is within tol of the optimum. Same meaning for every linear solver; when a "
        "solver's own stop rule holds first without it, the fit continues (fallback) or "
        "ends with converged false and a warning.",
        minimum=1e-12, maximum=1.0)


def _deterministic_tail(eps: Param, bias: tuple[str, ...], bias_default: str,
                        max_iter: int, what: str) -> tuple[Param, ...]:
    """eps, tol, bias, limits, class weights and threads of a deterministic solver."""
    return (eps, _tol_param(), *_bias_params(bias, bias_default), *_limits(max_iter, what),
            _class_weight(), _threads())


def _fallback_param() -> Param:
    return Param("fallback", "choice", True,
                 "When the dual CD ends without a certificate (sweep limit, or its stop rule "
                 "held first): continue with tron (l2) or ocas (l1) warm-started from its w, "
                 "as LIBLINEAR does; recorded in the result's path.", choices=(True, False))


_DCD_EPS = ("Inner stop rule of the dual CD: the projected-gradient spread and extremes of a "
            "sweep are <= eps (a bound on the dual's optimality conditions, not on the "
            "objective); whether the model is converged is decided by tol.")


def _common(eps: float, loss: Param | None = None, eps_text: str = _DCD_EPS
            ) -> tuple[Param, ...]:
    """The parameters of the dual coordinate-descent family (dcd, acf)."""
    return (
        _c_param(),
        *((loss,) if loss is not None else ()),
        _eps_param(eps, eps_text),
        _tol_param(),
        _fallback_param(),
        *_bias_params(("augment", "none"), "augment"),
        *_limits(1000),
        *_weights_and_seed(),
    )


# after the dual CD (dcd, acf), as LIBLINEAR switches -s 1 to -s 2 at its sweep limit
_GAP_NOTE = " (relative gap above tol {tol:g})"
_DUAL_CD_FALLBACK = (
    Step(on=("converged",)),
    Step(target="gram", size="few_wide_rows",
         note=_GAP_NOTE + "; few wide examples: interior point"),
    Step(target="tron", losses=("l2",), note=_GAP_NOTE),
    Step(target="ocas", losses=("l1",), eps_from_tol=True, note=_GAP_NOTE),
)

_SVR_EPSILON = Param("epsilon", "float", 0.1, "Width of the insensitive tube (LIBLINEAR -p).",
                     minimum=0.0, maximum=1e12)
_SEED = Param("seed", "int", 0, "Seed of the random order of the rows; runs with the same "
              "seed are reproducible.", minimum=0, maximum=2**63 - 1)


def _task_params(formulation: str, params: tuple[Param, ...], max_iter: int, unit: str
                 ) -> tuple[Param, ...]:
    """The parameters of a solver of solvers/linear_tasks.py (one formulation each;
    certificate: the duality gap at the model)."""
    return (Param("formulation", "choice", formulation, f"The problem: {formulation}.",
                  choices=(formulation,)), *params, _tol_param(), *_limits(max_iter, unit))


SOLVERS: dict[str, SolverSpec] = {
    "dcd": SolverSpec(
        name="dcd",
        module="solvers.dcd",
        kind="linear",
        warm_start="dual", fallback=_DUAL_CD_FALLBACK, randomized=True, scale_sensitive=True,
        warmup_group="linear", auto_candidate=True,
        description="Dual coordinate descent with random permutation and shrinking "
        "(Hsieh et al. 2008); LIBLINEAR -s 3 (l1) / -s 1 (l2).",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(1 - y_i w.x_i), loss = hinge (l1) or "
        "squared hinge (l2)",
        params=_common(0.1, _loss()),
    ),
    "tron": SolverSpec(
        name="tron",
        module="solvers.tron",
        kind="linear",
        losses=("l2", "logistic"), warm_start="primal", sample_weights=True,
        warmup_group="linear", auto_candidate=True,
        fallback=(Step(on=("max_iter", "stalled"), target="newton", losses=("l2", "logistic"),
                       size="few_weights", note="; few weights: exact Newton steps"),
                  Step(on=("converged",))),
        description="Truncated Newton method with preconditioned conjugate gradient on "
        "the primal (Lin, Weng & Keerthi 2008; Hsia, Chiang & Lin 2018; Galli & Lin 2021): "
        "a line search along the Newton direction as LIBLINEAR >= 2.40 -s 2, or the trust "
        "region of LIBLINEAR <= 2.30 (method). "
        "Indifferent to feature scaling. With loss='logistic' it also fits L2-regularised "
        "logistic regression (LIBLINEAR -s 0), sharing the same Newton machinery.",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(y_i w.x_i), loss = squared hinge "
        "max(0, 1 - m)^2 (l2) or log(1 + exp(-m)) (logistic)",
        params=(
            _c_param(),
            Param("loss", "choice", "l2", "'l2' squared hinge loss (SVM) or 'logistic' "
                  "(logistic regression).", choices=("l2", "logistic")),
            Param("method", "choice", "line_search", "How far to step along the Newton "
                  "direction: 'line_search' (LIBLINEAR 2.40+, Galli & Lin 2021: the full CG "
                  "solution, halved until the objective drops enough) or 'trust_region' "
                  "(Lin, Weng & Keerthi 2008: CG cut at a trust-region radius; crawls in "
                  "tiny steps on unscaled word counts such as news20).",
                  choices=("line_search", "trust_region")),
            *_deterministic_tail(
                _eps_param(0.01, "Inner stop rule (LIBLINEAR's): ||grad P(w)|| <= eps * "
                           "max(min(#pos, #neg), 1) / n * ||grad P(0)||, required together "
                           "with the gradient certificate ||grad P(w)||^2 <= 2 tol P(w): "
                           "LIBLINEAR's rule alone at eps 0.01 can leave P(w) 1e-3..0.7 "
                           "above the optimum (mushrooms)."),
                ("augment", "none"), "augment", 1000, "Newton iterations (line searches, or "
                "trust-region steps accepted or not)"),
        ),
    ),
    "newton": SolverSpec(
        name="newton",
        module="solvers.dense_newton",
        kind="linear",
        losses=("l2", "logistic"), warm_start="primal", sample_weights=True,
        warmup_group="linear", auto_candidate=True,
        description="Newton's method on the primal with the Newton system solved exactly "
        "(dense Cholesky; Keerthi & DeCoste 2005): for at most 2000 weights (features + "
        "bias). Indifferent to feature scaling where TRON's conjugate gradient stalls "
        "(unscaled data such as madelon).",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(y_i w.x_i), loss = squared hinge "
        "max(0, 1 - m)^2 (l2) or log(1 + exp(-m)) (logistic)",
        params=(
            _c_param(),
            Param("loss", "choice", "l2", "'l2' squared hinge loss (SVM) or 'logistic'.",
                  choices=("l2", "logistic")),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(200, "Newton steps"),
            _class_weight(),
        ),
    ),
    "gram": SolverSpec(
        name="gram",
        module="solvers.gram",
        kind="linear",
        dense_gram=True, warmup_group="linear", auto_candidate=True,
        description="Primal-dual interior-point method (Mehrotra predictor-corrector) on "
        "the SVM dual with the full Gram matrix in memory: for at most 5000 examples (n^2 "
        "doubles, 200 MB at 5000, plus one copy per Cholesky). Each iteration solves one "
        "n x n system by Cholesky (about 0.02 s at n = 1000, seconds at 5000; typically "
        "15..40 iterations), nearly indifferent to feature scaling where dcd, acf and ocas "
        "crawl (unscaled data such as madelon). BLAS runs on one thread.",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(1 - y_i w.x_i), loss = hinge (l1) or "
        "squared hinge (l2)",
        params=(
            _c_param(),
            _loss(),
            _eps_param(1e-5, "Inner stop rule: the relative duality gap of the interior "
                       "point (a feasible dual point and w(a)) is <= min(eps, tol / 10); "
                       "whether the model is converged is decided by tol (the certificate "
                       "recomputed at the returned w)."),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(200, "interior-point iterations"),
            _class_weight(),
        ),
    ),
    "acf": SolverSpec(
        name="acf",
        module="solvers.acf",
        kind="linear",
        warm_start="dual", fallback=_DUAL_CD_FALLBACK, randomized=True, scale_sensitive=True,
        description="Dual coordinate descent with adaptive coordinate frequencies "
        "(Glasmachers & Dogan 2013); fastest at large C.",
        problem="min_w 1/2||w||^2 + sum_i C_i loss(1 - y_i w.x_i), loss = hinge (l1) or "
        "squared hinge (l2)",
        params=_common(0.1, _loss(), "Inner stop rule of ACF: the largest projected-"
                       "gradient violation of a sweep < eps, confirmed by a sweep with "
                       "uniform preferences (a bound on the dual's optimality conditions, "
                       "not on the objective); whether the model is converged is decided "
                       "by tol."),
    ),
    "ocas": SolverSpec(
        name="ocas",
        module="solvers.ocas",
        kind="linear",
        losses=("l1",), warm_start="primal", warmup_group="linear", auto_candidate=True,
        fallback=(Step(on=("max_iter", "stalled"), target="gram", size="few_rows",
                       note="; few examples: interior point on the dual's Gram matrix"),
                  Step(on=("converged", "stalled"))),
        description="Optimized cutting planes (Franc & Sonnenburg 2008); strong on dense, "
        "low-dimensional data.",
        problem="min_w 1/2||w||^2 + sum_i C_i max(0, 1 - y_i w.x_i)",
        params=(
            _c_param(),
            _eps_param(1e-3, "Relative stop: F(w_best) - F_t(w_t) <= eps * |F(w_best)|, "
                             "a relative duality gap (F_t(w_t) <= P*), the same quantity as "
                             "tol."),
            _tol_param(),
            Param("eps_abs", "float", None,
                  "Absolute stop: F(w_best) - F_t(w_t) <= eps_abs (null: off).",
                  minimum=0.0, exclusive_minimum=True, maximum=1e12, nullable=True),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(10_000, "cutting-plane iterations"),
            _class_weight(),
            _threads(),
        ),
    ),
    "alm": SolverSpec(
        name="alm",
        module="solvers.alm",
        kind="linear",
        losses=("l1", "l2", "lp"),
        description="Inexact augmented-Lagrangian primal solver for the Lp-loss SVM "
        "(Nie et al. 2014), free bias.",
        problem="min_{w,b} 1/2||w||^2 + sum_i C_i max(0, 1 - y_i (w.x_i + b))^p",
        params=(
            _c_param(),
            Param("p", "float", 2.0, "Exponent of the loss (1 = hinge, 2 = squared hinge).",
                  minimum=1.0, maximum=10.0),
            *_deterministic_tail(
                _eps_param(0.01, "Inner stop: p > 1, ||grad P|| <= eps ||grad P(0)|| and "
                           "relative gap <= eps / 10; p = 1, relative gap <= eps / 10; or "
                           "exit 'stalled' when the objective stops changing (relative "
                           "1e-4). Converged is decided by tol, from a feasible dual "
                           "point built from the slacks or the multipliers."),
                ("free", "none"), "free", 10_000, "ALM iterations"),
        ),
    ),
    "pegasos": SolverSpec(
        name="pegasos",
        module="solvers.pegasos",
        kind="linear",
        losses=("l1",), randomized=True, scale_sensitive=True,
        description="Stochastic sub-gradient descent (Shalev-Shwartz et al. 2007), the "
        "approximate baseline; reports the primal objective it reaches. It has no stop "
        "rule (exit 'epochs_done'): its default 10 epochs end 4e-2..3e-1 above the "
        "optimum on scaled data, so it reports converged false with a warning unless the "
        "certificate (a dual point from its w) happens to hold.",
        problem="min_w 1/2||w||^2 + sum_i C_i max(0, 1 - y_i w.x_i), lambda = 1/(C n)",
        params=(
            _c_param(),
            Param("epochs", "int", 10, "Passes over the data (n / batch_size steps each).",
                  minimum=1, maximum=100_000),
            Param("batch_size", "int", 1, "Examples per sub-gradient step (k).",
                  minimum=1, maximum=1_000_000),
            _tol_param(),
            *_bias_params(("augment", "none"), "none"),
            *_limits(100_000_000, "sub-gradient steps"),
            *_weights_and_seed("Seed of the example sampling"),
        ),
    ),
    "logistic_dcd": SolverSpec(
        name="logistic_dcd",
        module="solvers.logistic_dual",
        kind="linear",
        losses=("logistic",), warm_start="dual", randomized=True, scale_sensitive=True,
        sample_weights=True, auto_candidate=True,
        liblinear_types=(("logistic", "L2R_LR_DUAL"),),  # LIBLINEAR -s 7
        fallback=(Step(on=("converged",)),
                  Step(target="tron", losses=("logistic",), note=_GAP_NOTE)),
        description="Dual coordinate descent for L2-regularised logistic regression (Yu, "
        "Huang & Lin 2011); LIBLINEAR -s 7. Its dual value is the certificate; when it "
        "ends uncertified at its sweep limit, tron (-s 0) continues from its w, as "
        "LIBLINEAR does. Probabilities come with the model (sigma of the decision value).",
        problem="min_w 1/2||w||^2 + sum_i C_i log(1 + exp(-y_i w.x_i)); dual min_a "
        "1/2||w(a)||^2 + sum_i a_i log a_i + (C_i - a_i) log(C_i - a_i), 0 < a_i < C_i",
        params=_common(0.1, Param("loss", "choice", "logistic", "'logistic' (the only "
                                  "loss of this solver).", choices=("logistic",)),
                       "Inner stop rule (LIBLINEAR's): the largest derivative of a sweep's "
                       "one-variable sub-problems < eps; whether the model is converged is "
                       "decided by tol."),
    ),
    "l1_cd": SolverSpec(
        name="l1_cd",
        module="solvers.l1_linear",
        kind="linear",
        losses=(L1R_PREFIX + "l2", L1R_PREFIX + "logistic"), warm_start="primal",
        randomized=True, sample_weights=True, fallback=(Step(on=("converged",)),),
        auto_candidate=True,
        description="L1-regularised linear classification for sparse models: coordinate "
        "descent with a line search for the L2-loss SVM (Chang, Hsieh & Lin 2008; LIBLINEAR "
        "-s 5) and newGLMNET for logistic regression (Yuan, Ho & Lin 2012; LIBLINEAR -s "
        "6). The result reports the non-zero weights of each output; the certificate is "
        "a scaled feasible dual point.",
        problem="min_w ||w||_1 + sum_i C_i loss(y_i w.x_i), loss = squared hinge "
        "max(0, 1 - m)^2 (l2) or log(1 + exp(-m)) (logistic)",
        params=(
            _c_param(),
            _penalty_param(("l1",), "l1"),
            Param("loss", "choice", "l2", "'l2' squared hinge loss (LIBLINEAR -s 5) or "
                  "'logistic' (-s 6).", choices=("l2", "logistic")),
            _eps_param(0.01, "Inner stop rule (LIBLINEAR's): the 1-norm of the minimum-"
                       "norm subgradient <= eps * max(min(#pos, #neg), 1) / n times its "
                       "value at the first iteration; whether the model is converged is "
                       "decided by tol."),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            *_limits(10_000, "sweeps over the features (l2) or Newton iterations "
                     "(logistic); LIBLINEAR stops at 1000 and 100, short of the optimum of "
                     "-s 5 on some sets (breast_cancer)"),
            *_weights_and_seed(),
        ),
    ),
    "auto": SolverSpec(
        name="auto",
        module="solvers.auto",
        kind="linear",
        # its choice continues from an earlier fit's dual point when it is a dual CD
        warm_start="dual", randomized=True, chooses=True, sample_weights=True,
        warmup_group="linear",
        formulations=AUTO_FORMULATIONS,  # its candidates' (a test ties them)
        tasks=(),  # its candidates' (below)
        description="The default for linear jobs: " + AUTO_RULE,
        problem="min_w R(w) + sum_i C_i loss(y_i w.x_i), R = 1/2||w||^2 (penalty l2) or "
        "||w||_1 (l1), loss = hinge (l1), squared hinge (l2) or logistic (formulation "
        "c_svc; see `formulation` for the others)",
        params=(
            Param("formulation", "choice", "c_svc",
                  "The problem: 'c_svc' binary / one-vs-rest classification (loss and "
                  "penalty below), 'crammer_singer' the multi-class SVM of Crammer and "
                  "Singer, 'epsilon_svr' linear regression (loss l1 or l2, epsilon), "
                  "'one_class' outlier detection (nu; +1 inlier, -1 outlier). " + " ".join(
                      f"{f}: {FORMULATIONS[f].problem}." for f in AUTO_FORMULATIONS
                      if f != "c_svc"), choices=AUTO_FORMULATIONS),
            _c_param(),
            Param("loss", "choice", "l2", "'l1' hinge loss, 'l2' squared hinge loss or "
                  "'logistic' (logistic regression: the model gives probabilities).",
                  choices=("l1", "l2", "logistic")),
            _penalty_param(("l2", "l1"), "l2"),
            Param("epsilon", "float", 0.1, "Width of the insensitive tube of epsilon_svr "
                  "(LIBLINEAR -p).", minimum=0.0, maximum=1e12),
            Param("nu", "float", 0.5, "nu of one_class (LIBLINEAR -n): an upper bound on "
                  "the fraction of outliers.", minimum=0.0, exclusive_minimum=True,
                  maximum=1.0),
            _tol_param(),
            *_bias_params(("augment", "none"), "augment"),
            Param("max_iter", "int", None, "Iteration limit of the chosen solver, in its "
                  "own unit (null: its default).", minimum=1, maximum=100_000_000,
                  nullable=True),
            _limits(1)[1],
            *_weights_and_seed(),
            _threads(),
        ),
    ),
    "smo": SolverSpec(
        name="smo",
        module="solvers.smo",
        kind="kernel",
        losses=("l1",), tasks=("binary", "multiclass_ovo", "multiclass_ovr"),
        certificate="kkt", warm_start="state", scale_sensitive=True,
        formulations=LIBSVM_FORMULATIONS, sample_weights=True, warmup_group="smo",
        description="Sequential minimal optimization for kernel SVMs (Platt 1998) with "
        "second-order working-set selection, shrinking and a kernel cache; LIBSVM's C-SVC, "
        "nu-SVC, one-class SVM, epsilon-SVR and nu-SVR (Solver_NU for the nu variants).",
        problem="min_a 1/2 a'Qa - e'a, 0 <= a_i <= C_i, y'a = 0, Q_ij = y_i y_j K(x_i, x_j) "
        "(formulation c_svc; see `formulation` for the others)",
        params=(
            Param("formulation", "choice", "c_svc",
                  "The problem (LIBSVM's svm_type): 'c_svc' and 'nu_svc' classification, "
                  "'one_class' outlier detection (+1 inlier, -1 outlier), 'epsilon_svr' and "
                  "'nu_svr' regression. " + " ".join(
                      f"{f}: {FORMULATIONS[f].problem}." for f in LIBSVM_FORMULATIONS),
                  choices=LIBSVM_FORMULATIONS),
            _c_param(),
            Param("nu", "float", 0.5, "nu of nu_svc, one_class and nu_svr (LIBSVM -n): a "
                  "lower bound on the fraction of support vectors and an upper bound on "
                  "the fraction of margin errors (outliers).", minimum=0.0,
                  exclusive_minimum=True, maximum=1.0),
            Param("epsilon", "float", 0.1, "Width of the insensitive tube of epsilon_svr "
                  "(LIBSVM -p).", minimum=0.0, maximum=1e12),
            Param("kernel", "choice", "rbf", "Kernel function.",
                  choices=("linear", "rbf", "poly", "sigmoid")),
            Param("gamma", "float", None, "Kernel coefficient of rbf/poly/sigmoid (null: "
                  "1/features).", minimum=0.0, exclusive_minimum=True, maximum=1e6,
                  nullable=True),
            Param("degree", "int", 3, "Degree of the poly kernel.", minimum=1, maximum=20),
            Param("coef0", "float", 0.0, "Constant term of poly/sigmoid.",
                  minimum=-1e6, maximum=1e6),
            _eps_param(1e-3, "Stop when the maximal violating pair m(a) - M(a) <= eps."),
            Param("cache_mb", "float", 200.0, "Kernel-column cache size in MB.",
                  minimum=1.0, maximum=16384.0),
            Param("multiclass", "choice", "ovo", "'ovo' one-vs-one with voting (as LIBSVM) "
                  "or 'ovr' one-vs-rest.", choices=("ovo", "ovr")),
            *_limits(10_000_000, "SMO steps"),
            _class_weight(),
            _threads(),
        ),
    ),
    "crammer_singer": SolverSpec(
        name="crammer_singer",
        module="solvers.linear_tasks",
        kind="linear",
        losses=("l1",), tasks=("binary", "multiclass_joint"), randomized=True,
        formulations=("crammer_singer",), sample_weights=True, auto_candidate=True,
        description="Crammer-Singer multi-class SVM by the sequential dual method (Keerthi "
        "et al. 2008; LIBLINEAR -s 4): one weight vector per class (also for two classes), "
        "predicts the class of the largest score.",
        problem=FORMULATIONS["crammer_singer"].problem,
        params=_task_params("crammer_singer", (
            _c_param(),
            _eps_param(0.1, "Inner rule: the largest sub-problem violation of a sweep <= "
                       "eps, then the certificate is checked (tightened by 10 while it "
                       "fails); converged is decided by tol."),
            *_bias_params(("augment", "none"), "augment"), _class_weight(), _SEED),
            100_000, "sweeps"),
    ),
    "linear_svr": SolverSpec(
        name="linear_svr",
        module="solvers.linear_tasks",
        kind="linear",
        losses=("l1", "l2"), tasks=("single_output",), randomized=True,
        formulations=("epsilon_svr",), sample_weights=True, auto_candidate=True,
        description="Linear epsilon-SVR (Ho & Lin 2012): dual coordinate descent with "
        "shrinking (LIBLINEAR -s 13 l1, -s 12 l2) or, method 'primal' (l2), Newton steps "
        "with conjugate gradient (-s 11). Predicts the value.",
        problem="min_w 1/2||w||^2 + sum_i C_i max(0, |w.x_i - y_i| - epsilon)^p, p = 1 (l1) "
        "or 2 (l2)",
        params=_task_params("epsilon_svr", (
            _c_param(), _SVR_EPSILON, _loss(("l1", "l2"), "l2"),
            Param("method", "choice", "dual", "'dual' coordinate descent (l1, l2) or "
                  "'primal' Newton (l2 only).", choices=("dual", "primal")),
            _eps_param(0.1, "Inner rule of the dual CD: the sum of the projected-gradient "
                       "violations of a sweep <= eps times the first sweep's; converged is "
                       "decided by tol."),
            *_bias_params(("augment", "none"), "augment"), _SEED),
            1000, "sweeps (dual) or Newton steps (primal)"),
    ),
    "linear_one_class": SolverSpec(
        name="linear_one_class",
        module="solvers.linear_tasks",
        kind="linear",
        losses=("l1",), tasks=("single_output",),
        formulations=("one_class",), sample_weights=True, auto_candidate=True,
        description="Linear one-class SVM (LIBLINEAR -s 21, 2.42+): pair updates of the "
        "most violating pairs; +1 inlier, -1 outlier.",
        problem="min_{w,rho} 1/2||w||^2 - rho nu sum_i U_i + sum_i U_i max(0, rho - w.x_i), "
        "U_i the sample weight",
        params=_task_params("one_class", (
            Param("nu", "float", 0.5, "Upper bound on the fraction of outliers, lower bound "
                  "on the fraction of support vectors (LIBLINEAR -n).", minimum=0.0,
                  exclusive_minimum=True, maximum=1.0),
            _eps_param(0.01, "Inner rule: max -G over I_up minus min -G over I_low < eps; "
                       "converged is decided by tol.")),
            1000, "outer iterations"),
    ),
}
# auto trains the tasks of the solvers it chooses among
SOLVERS["auto"] = replace(SOLVERS["auto"], tasks=tuple(dict.fromkeys(
    task for spec in SOLVERS.values() if spec.auto_candidate for task in spec.tasks)))

# -- the workflow: scaling and probabilities, valid for every solver ---------------------
# (applied around the solver's fit by solvers/workflow.py)

SCALE_METHODS = ("none", "minmax", "maxabs", "standard")
STANDARD_MIN_DENSITY = 0.5  # solvers.scaling refuses `standard` below it (imports it)
WORKFLOW_PARAMS: tuple[Param, ...] = (
    Param("scale", "choice", "none",
          "Feature scaling fitted on the training rows and stored with the model (applied "
          "in predict and evaluate): 'minmax' maps each feature to [scale_lower, 1] as "
          "LIBSVM's svm-scale; 'maxabs' divides by max |x| (keeps sparsity); 'standard' "
          "(x - mean) / std, for dense data only; 'none'.", choices=SCALE_METHODS),
    Param("scale_lower", "choice", -1.0,
          "Lower end of the minmax range: -1 (svm-scale's default) or 0 (keeps the zeros "
          "of non-negative sparse features).", choices=(-1.0, 0.0)),
    Param("scale_target", "choice", False,
          "Regression only: train on the standardised target (y - mean) / std of the "
          "training rows (epsilon is then in units of std) and fold the inverse into the "
          "model (coefficients and intercept times std, plus mean), so that predict, "
          "evaluate and the exported file give values on the original scale.",
          choices=(False, True)),
    Param("probability", "choice", False,
          "Fit Platt sigmoids on 5-fold cross-validated decision values (LIBSVM -b 1); "
          "predict then returns probabilities. Costs about five more fits.",
          choices=(False, True)),
    # a randomized solver's own seed (SolverSpec.randomized) also seeds this shuffle
    Param("seed", "int", None,
          "Seed of the row shuffle of the cross-validation that fits probabilities "
          "(probability true; null: 0). The solver itself uses no randomness, so a seed "
          "without probability is refused.", minimum=0, maximum=2**63 - 1, nullable=True),
)


def _with_workflow(spec: SolverSpec) -> SolverSpec:
    names = {p.name for p in spec.params}
    extra = tuple(p for p in WORKFLOW_PARAMS if p.name not in names)
    return replace(spec, params=spec.params + extra)


SOLVERS = {name: _with_workflow(spec) for name, spec in SOLVERS.items()}


def check_scale_for_data(applied: Mapping[str, Any], rows: int, features: int,
                         nnz: int) -> None:
    """ParamError when `standard` scaling would densify sparse data (the API knows the
    dataset's rows, features and non-zeros; the worker's scaler checks the same rule)."""
    if applied.get("scale") != "standard" or rows <= 0 or features <= 0:
        return
    density = nnz / (rows * features)
    if density < STANDARD_MIN_DENSITY:
        raise ParamError(
            f"scale 'standard' needs dense data: only {density:.1%} of this dataset's "
            f"entries are non-zero (at least {STANDARD_MIN_DENSITY:.0%} needed), and "
            "(x - mean) / std would store every zero of a feature with a non-zero mean; "
            "use scale 'maxabs' (keeps zeros) or 'minmax' with scale_lower 0", "scale")


def validate_params(solver: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return the parameters as applied (defaults filled in), or raise ParamError."""
    spec = SOLVERS.get(solver)
    if spec is None:
        known = ", ".join(sorted(SOLVERS))
        raise ParamError(f"unknown solver {solver!r}; choose one of: {known}", "solver")
    given = dict(params or {})
    known_names = {p.name for p in spec.params}
    unknown = sorted(set(given) - known_names)
    if unknown:
        raise ParamError(
            f"unknown parameter(s) for solver {solver!r}: {', '.join(unknown)}; "
            f"accepted: {', '.join(sorted(known_names))}",
            unknown[0],
        )
    formulation = given.get("formulation", next(
        (p.default for p in spec.params if p.name == "formulation"), "c_svc"))
    if formulation in FORMULATIONS and "formulation" in known_names:
        reads = FORMULATIONS[formulation].reads
        defaults = {p.name: p.default for p in spec.params}
        # a value other than the default (applied params passed back carry the defaults)
        unused = sorted(name for name in ("nu", "epsilon") if name in given
                        and name not in reads and given[name] != defaults[name])
        if unused:
            raise ParamError(f"{unused[0]} is not a parameter of formulation "
                             f"{formulation!r} (it reads {', '.join(reads)})", unused[0])
        if "class_weight" in given and given["class_weight"] and (
                "class_weight" not in reads):
            raise ParamError(f"class_weight applies to classification; formulation "
                             f"{formulation!r} has no classes", "class_weight")
    applied: dict[str, Any] = {}
    for param in spec.params:
        applied[param.name] = param.coerce(given[param.name]) if param.name in given else (
            param.default
        )
    if spec.chooses:
        _check_auto_formulation(spec, given, applied)
    if applied.get("penalty") == "l1" and applied.get("loss") not in L1_LOSSES:
        raise ParamError(f"penalty 'l1' takes loss {' or '.join(map(repr, L1_LOSSES))} "
                         f"(LIBLINEAR -s 5, 6), not {applied.get('loss')!r}", "loss")
    if applied.get("scale_target") and task_of(solver, applied) != "regression":
        raise ParamError("scale_target applies to regression (formulation epsilon_svr or "
                         f"nu_svr), not to a {task_of(solver, applied)} model",
                         "scale_target")
    if not spec.randomized and applied.get("seed") == 0 and not applied.get("probability"):
        # 0 was every solver's default before only randomized ones took a seed: the params
        # stored with earlier jobs, searches and models carry it, and mean no seed
        applied["seed"] = None
    if not spec.randomized and applied.get("seed") is not None and not applied.get(
            "probability"):
        randomized = ", ".join(name for name, s in SOLVERS.items() if s.randomized)
        raise ParamError(
            f"seed: solver {solver!r} uses no randomness, so a seed would change nothing; "
            "here it only seeds the cross-validation of probability true. Leave seed out, "
            f"or choose a randomized solver ({randomized})", "seed")
    return applied


def _check_auto_formulation(spec: SolverSpec, given: Mapping[str, Any],
                            applied: Mapping[str, Any]) -> None:
    """auto's loss, penalty and C must suit its formulation (a value equal to the default
    passes: applied params given back carry the defaults)."""
    formulation = str(applied.get("formulation", "c_svc"))
    defaults = {p.name: p.default for p in spec.params}

    def asked(name: str) -> bool:
        return name in given and given[name] != defaults[name]

    losses = FORMULATION_LOSSES[formulation]
    if losses is None and asked("loss"):
        raise ParamError(f"formulation {formulation!r} has a loss of its own; leave loss "
                         "out", "loss")
    if losses is not None and applied["loss"] not in losses:
        raise ParamError(f"formulation {formulation!r} takes loss "
                         f"{' or '.join(map(repr, losses))}, not {applied['loss']!r}", "loss")
    if formulation != "c_svc" and asked("penalty"):
        raise ParamError(f"penalty 'l1' is for classification (formulation 'c_svc', "
                         f"LIBLINEAR -s 5, 6), not {formulation!r}", "penalty")
    if "C" not in FORMULATIONS[formulation].reads and asked("C"):
        raise ParamError(f"C is not a parameter of formulation {formulation!r} (it reads "
                         f"{', '.join(FORMULATIONS[formulation].reads)})", "C")


def describe_solvers() -> list[dict[str, Any]]:
    return [spec.describe() for spec in SOLVERS.values()]
