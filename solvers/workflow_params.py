"""The workflow's parameters, valid for every solver: scaling and probabilities (applied
around the solver's fit by solvers/workflow.py), and the data-dependent check of
`standard` scaling. Pure Python."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from solvers.param_types import Param, ParamError

if TYPE_CHECKING:
    from solvers.solver_spec import SolverSpec

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


def with_workflow(spec: SolverSpec) -> SolverSpec:
    """The entry with the workflow's parameters it does not define itself appended."""
    names = {p.name for p in spec.params}
    extra = tuple(p for p in WORKFLOW_PARAMS if p.name not in names)
    return replace(spec, params=spec.params + extra)



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
