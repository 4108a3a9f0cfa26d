"""The solver registry says what each solver can do (solvers/params.py, SolverSpec), and
the control flow asks it: no solver's name decides a branch outside the registry and the
solver's own module."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import fit
from solvers.params import FORMULATIONS, SOLVERS, ParamError, validate_params
from tests.support import REPO

# a solver's own module may name it (solvers.auto names its choices)
OWN = {"solvers/params.py", "solvers/registry.py", "solvers/registry_linear.py",
       "solvers/registry_kernel.py",
       "solvers/auto.py",
       "solvers/distributed.py",  # the Dask engine: its own tron and CoCoA+ (dcd)
       "solvers/out_of_core.py"} | {  # the out-of-core engine: block dcd, streaming tron
    spec.module.replace(".", "/") + ".py" for spec in SOLVERS.values()}


def _named_in_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every registered solver name that a comparison (==, !=, in, not
    in) tests against, directly or in a tuple, list or set literal, or that keys a dict
    literal whose every key names a solver (a table by solver, as {"logistic_dcd": ...};
    a formulation's name, which crammer_singer also is, may key one)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):  # a table whose every key names a solver
            keys = [key.value if isinstance(key, ast.Constant) else None for key in node.keys]
            if keys and all(key in SOLVERS and key not in FORMULATIONS for key in keys):
                found += [(node.lineno, str(key)) for key in keys]
            continue
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            items = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) else [
                operand]
            found += [(node.lineno, item.value) for item in items
                      if isinstance(item, ast.Constant) and item.value in SOLVERS]
    return found


def test_no_solver_name_decides_control_flow() -> None:
    offenders = []
    for package in ("app", "workers", "solvers"):
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if relative in OWN or any(relative.startswith(own[:-3] + "/") for own in OWN):
                continue
            tree = ast.parse(path.read_text(), relative)
            offenders += [f"{relative}:{line} {name!r}"
                          for line, name in _named_in_comparisons(tree)]
    assert not offenders, offenders


def test_the_check_finds_a_name_in_a_comparison() -> None:
    tree = ast.parse("if solver in ('dcd', 'x') or other == \"smo\": pass\nx = ['tron']\n"
                     "t = {'logistic_dcd': 1}\nu = {'auto': 1, 'x': 2}")
    assert sorted(name for _, name in _named_in_comparisons(tree)) == [
        "dcd", "logistic_dcd", "smo"]


def test_capabilities_are_consistent() -> None:
    for name, spec in SOLVERS.items():
        accepted = {p.name: p for p in spec.params}
        # a linear model is certified by its duality gap, a kernel model by SMO's rule
        assert (spec.kind == "linear") == (spec.certificate == "duality_gap"), name
        # one problem for any y (regression, outlier) or at least the binary one
        assert "binary" in spec.tasks or spec.tasks == ("single_output",), name
        for step in spec.fallback:
            if step.target is None:
                assert "eps" in accepted, name  # tightened by eps / 10
                continue
            target = SOLVERS[step.target]
            assert target.kind == spec.kind and not target.chooses, (name, step.target)
            assert set(step.losses) <= set(target.losses), (name, step.target)
            assert set(step.losses) & set(spec.losses), (name, step.target)
        if spec.chooses:
            assert spec.randomized  # its seed goes to a randomized choice
        # a randomized solver owns its seed; a deterministic one takes only the
        # workflow's (the probability cross-validation), null by default
        assert accepted["seed"].default == (0 if spec.randomized else None), name
        assert accepted["seed"].nullable is not spec.randomized, name


def test_continuing_fits_are_the_dual_and_state_warm_starts() -> None:
    continuing = {name for name, spec in SOLVERS.items() if spec.continues_fits}
    assert continuing == {name for name, spec in SOLVERS.items()
                          if spec.warm_start in ("dual", "state")}
    assert all(SOLVERS[name].warm_start != "primal" for name in continuing)


@pytest.mark.parametrize("solver", sorted(n for n, s in SOLVERS.items() if not s.randomized))
def test_a_deterministic_solver_refuses_a_seed_without_probability(solver: str) -> None:
    with pytest.raises(ParamError, match="uses no randomness") as raised:
        validate_params(solver, {"seed": 3})
    assert raised.value.field == "seed"
    assert validate_params(solver, {})["seed"] is None
    assert validate_params(solver, {"seed": 3, "probability": True})["seed"] == 3
    # the params stored before (every solver's default seed was 0) still validate
    assert validate_params(solver, {"seed": 0})["seed"] is None


@pytest.mark.parametrize("solver", sorted(n for n, s in SOLVERS.items() if s.randomized))
def test_a_randomized_solver_takes_a_seed(solver: str) -> None:
    assert validate_params(solver, {})["seed"] == 0
    assert validate_params(solver, {"seed": 3})["seed"] == 3


def _two_blobs() -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(5)
    X = np.vstack([rng.normal(0.4, 1.0, size=(60, 4)), rng.normal(-0.4, 1.0, size=(60, 4))])
    return sp.csr_matrix(X), np.repeat([1.0, -1.0], 60)


def test_a_deterministic_solvers_seed_shuffles_the_probability_folds() -> None:
    X, y = _two_blobs()
    first = fit(X, y, solver="tron", probability=True, seed=1)
    again = fit(X, y, solver="tron", probability=True, seed=1)
    other = fit(X, y, solver="tron", probability=True, seed=2)
    assert first.params["seed"] == 1 and other.params["seed"] == 2
    sigmoid = first.model.calibration  # type: ignore[union-attr]
    assert np.array_equal(sigmoid.A, again.model.calibration.A)  # type: ignore[union-attr]
    assert not np.array_equal(sigmoid.A, other.model.calibration.A)  # type: ignore[union-attr]
    # the model itself does not depend on the seed
    assert np.array_equal(first.model.predict(X)[1], other.model.predict(X)[1])


def test_auto_passes_its_seed_only_to_a_randomized_choice() -> None:
    X, y = _two_blobs()
    chosen = fit(X, y, solver="auto", seed=4)  # low-dimensional, l2: tron
    assert chosen.auto is not None and not SOLVERS[chosen.auto["chosen"]].randomized
    assert chosen.params["seed"] is None


def test_tron_imports_the_backbone_not_the_driver() -> None:
    tree = ast.parse(Path(REPO / "solvers" / "tron.py").read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert "solvers.train" not in imported and "solvers.backbone" in imported
