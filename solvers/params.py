"""The solver registry and its parameters, as one import: `from solvers.params import X`
gives every name it always gave. The parts live by responsibility:

- solvers/param_types.py: `Param` (a parameter's schema and coercion), `ParamError`,
  `label_key`;
- solvers/formulations.py: `Formulation`, `FORMULATIONS`, the tasks and the vocabulary
  of the capabilities (`Task`, `TaskName`, `WarmStart`, `Certificate`, `Size`);
- solvers/solver_spec.py: `SolverSpec`, `Step` and the parameters entries share;
- solvers/registry.py (and solvers/registry_linear.py): `SOLVERS`, one keyword
  `SolverSpec` per solver;
- solvers/workflow_params.py: scaling and probabilities, valid for every solver;
- solvers/validation.py: `validate_params`, the one gate a spec passes through (it fills
  defaults, coerces types and raises `ParamError` with a message that says how to fix the
  input), `task_of`, `formulations_for`, `describe_solvers`.

Pure Python (no NumPy, no Numba), so the API can validate a training spec and list the
solvers without loading any numerical code.
"""

from __future__ import annotations

from solvers.auto import FORMULATION_LOSSES
from solvers.auto import RULE as AUTO_RULE
from solvers.formulations import (
    AUTO_FORMULATIONS,
    FORMULATIONS,
    L1_LOSSES,
    L1R_PREFIX,
    LIBSVM_FORMULATIONS,
    LINEAR_TASKS,
    Certificate,
    Formulation,
    Size,
    Task,
    TaskName,
    WarmStart,
)
from solvers.param_types import Kind, Param, ParamError, label_key
from solvers.registry import SOLVERS
from solvers.solver_spec import SolverSpec, Step
from solvers.validation import describe_solvers, formulations_for, task_of, validate_params
from solvers.workflow_params import (
    SCALE_METHODS,
    STANDARD_MIN_DENSITY,
    WORKFLOW_PARAMS,
    check_scale_for_data,
    with_workflow,
)

__all__ = [
    "AUTO_FORMULATIONS",
    "AUTO_RULE",
    "FORMULATIONS",
    "FORMULATION_LOSSES",
    "L1R_PREFIX",
    "L1_LOSSES",
    "LIBSVM_FORMULATIONS",
    "LINEAR_TASKS",
    "SCALE_METHODS",
    "SOLVERS",
    "STANDARD_MIN_DENSITY",
    "WORKFLOW_PARAMS",
    "Certificate",
    "Formulation",
    "Kind",
    "Param",
    "ParamError",
    "Size",
    "SolverSpec",
    "Step",
    "Task",
    "TaskName",
    "WarmStart",
    "check_scale_for_data",
    "describe_solvers",
    "formulations_for",
    "label_key",
    "task_of",
    "validate_params",
    "with_workflow",
]
