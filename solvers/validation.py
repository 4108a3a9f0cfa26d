"""The one gate a training spec passes through: `validate_params` fills defaults, coerces
types and raises `ParamError` with a message that says how to fix the input; and what
the registry says of a spec (its task, the formulations of a task). Pure Python."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from solvers.auto import FORMULATION_LOSSES
from solvers.formulations import FORMULATIONS, L1_LOSSES, TaskName
from solvers.param_types import ParamError
from solvers.registry import SOLVERS
from solvers.registry_kernel import BATCHED_FORMULATIONS
from solvers.solver_spec import SolverSpec


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
    if applied.get("working_set") == "batched" and (
            applied.get("formulation") not in BATCHED_FORMULATIONS):
        raise ParamError(f"working_set 'batched' supports the formulations "
                         f"{', '.join(BATCHED_FORMULATIONS)}; {applied.get('formulation')} "
                         "needs 'pair'", "working_set")
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
