"""What a registry entry is (`SolverSpec`, with its fallback `Step`s) and the parameters
that entries share (C, eps, tol, bias, limits, class weights, seeds, threads), built by
the helpers below. The entries themselves: solvers/registry.py. Pure Python."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from solvers.formulations import LINEAR_TASKS, Certificate, Size, Task, WarmStart
from solvers.param_types import Param


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
    # the warm-up group that compiles its kernels (solvers.warmup.WARMUP_GROUPS): "linear"
    # (auto's path, warmed first), "smo" (its own groups) or "other"
    warmup_group: Literal["linear", "smo", "other"] = "other"
    # one of the solvers `auto` chooses among (solvers.auto.choose): auto's formulations,
    # tasks and per-formulation losses are those of its candidates
    auto_candidate: bool = False
    # (loss, LIBLINEAR solver_type) its model files name where that is not the usual type
    # of the formulation, penalty and loss (solvers.formats.liblinear_solver_type)
    liblinear_types: tuple[tuple[str, str], ...] = ()
    # the losses the Dask engine (solvers.distributed) trains it with across workers; ():
    # never distributed (a job's engine "dask" is a 422)
    distributed_losses: tuple[str, ...] = ()
    # reads float32 CSR values as they are stored (a compact dataset: 8 bytes a non-zero),
    # its kernels compiled for them too, accumulating in float64; False: a float32 X is
    # converted to a float64 copy first (solvers.inputs.as_float64)
    reads_float32: bool = False

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


def _sweeps_param(detail: str = "") -> Param:
    """Whose sweeps a randomized LIBLINEAR solver runs: Hinge's (the default) or those of
    scikit-learn's vendored LIBLINEAR (hinge.sklearn's estimators); `detail`: what else
    than the generator follows scikit-learn's copy."""
    return Param("sweeps", "choice", "hinge",
                 "'hinge': Hinge's (xorshift64* row orders). 'sklearn': those of "
                 "scikit-learn's vendored LIBLINEAR, so that the epochs are scikit-learn's "
                 "at the seed it draws from random_state: its generator (std::mt19937(seed) "
                 "and bounded_rand_int, one generator for all outputs of the fit)"
                 + detail + ". With threads 1.", choices=("hinge", "sklearn"),
                 from_auto=False)


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
