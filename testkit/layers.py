"""The layer rule "the API never loads training code", derived from the solver registry and
the package layout rather than kept as a list of modules.

Training code is, in the import graph of app, workers and solvers (imports inside
functions count, as grimp reads them):
- the roots: the driver (`solvers.train`), the backbone every solver implements
  (`solvers.backbone`), and the module of every registered solver that trains
  (`SOLVERS[name].module`; not `auto`'s pure-Python rule, which only chooses);
- every module of `solvers` from which a root is reachable (importing it loads training
  code), the package's own `__init__` aside (its `fit` imports the driver lazily);
- every module of `solvers` that only training code imports (the solvers' compiled
  kernels and helpers: `_tron_kernels`, `parallel`, `calibration`, ...); for a private
  module (`_name`) only its importers inside `solvers` count.
A public helper that loads no training code (`parallel`) stops being training code once
the API imports it: what the rule guarantees is that the API never loads the driver, the
backbone, a registered solver, or a private module only they use.

`TrainingCodeContract` is the import-linter contract type (`pyproject.toml`,
`contract_types`) that forbids these for its source modules, directly or indirectly;
tests/app/test_meta.py checks the same at run time, in a fresh interpreter.
"""

from __future__ import annotations

from typing import Any

import grimp
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.domain import fields
from importlinter.domain.contract import ContractCheck
from importlinter.domain.imports import ModuleExpression

PACKAGE = "solvers"
DRIVER = "solvers.train"
BACKBONE = "solvers.backbone"


def training_roots() -> set[str]:
    """The driver, the backbone and the registered solvers' modules."""
    from solvers.params import SOLVERS

    return {DRIVER, BACKBONE} | {spec.module for spec in SOLVERS.values() if not spec.chooses}


def training_modules(graph: Any) -> set[str]:
    """The training code of `graph` (a grimp ImportGraph of app, workers and solvers)."""
    roots = training_roots()
    modules = {m for m in graph.modules if m.startswith(PACKAGE + ".")}
    missing = roots - modules
    if missing:
        raise ValueError(f"registered or root modules not in the import graph: {missing}")
    training = {m for m in modules
                if m in roots or roots & graph.find_upstream_modules(m)}
    grew = True
    while grew:  # what only training code imports
        grew = False
        for module in sorted(modules - training):
            importers = graph.find_modules_that_directly_import(module)
            if module.rsplit(".", 1)[1].startswith("_"):  # private to the package
                importers = {m for m in importers if m.startswith(PACKAGE + ".")}
            if importers and importers <= training:
                training.add(module)
                grew = True
    return training


def import_graph() -> Any:
    return grimp.build_graph("app", "workers", PACKAGE)


class TrainingCodeContract(ForbiddenContract):
    """A forbidden contract whose forbidden modules are the training code
    (`training_modules`) rather than a list in the configuration."""

    type_name = "training_code"
    forbidden_modules = fields.SetField(subfield=fields.ModuleExpressionField(),
                                        required=False)

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        self.forbidden_modules = {ModuleExpression(m) for m in training_modules(graph)}
        return super().check(graph, verbose)
