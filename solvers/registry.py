"""The solver registry (`SOLVERS`): name -> training module (imported lazily, by
`solvers.train`), description, problem, capabilities and parameter schema. One keyword
`SolverSpec` per solver (solvers/solver_spec.py says what each field means); the
workflow's parameters (solvers/workflow_params.py) are appended to every entry. Pure
Python (no NumPy, no Numba), so the API can list the solvers and validate a spec without
loading numerical code."""

from __future__ import annotations

from dataclasses import replace

from solvers.registry_kernel import KERNEL
from solvers.registry_linear import LINEAR, LINEAR_TASK_SOLVERS
from solvers.solver_spec import SolverSpec
from solvers.workflow_params import with_workflow

SOLVERS: dict[str, SolverSpec] = {
    **LINEAR,  # dcd, tron, newton, gram, acf, ocas, alm, pegasos, logistic_dcd, l1_cd, auto
    **KERNEL,  # smo
    **LINEAR_TASK_SOLVERS,  # crammer_singer, linear_svr, linear_one_class
}
# auto trains the tasks of the solvers it chooses among
SOLVERS["auto"] = replace(SOLVERS["auto"], tasks=tuple(dict.fromkeys(
    task for spec in SOLVERS.values() if spec.auto_candidate for task in spec.tasks)))

SOLVERS = {name: with_workflow(spec) for name, spec in SOLVERS.items()}
