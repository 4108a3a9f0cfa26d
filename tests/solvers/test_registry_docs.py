"""What names the solvers elsewhere says what the registry (solvers.params.SOLVERS) says:
the README's count and list, docs/solvers.md's table and seed row, the CLI's list (the
client does not import the solvers), and auto's candidates."""

from __future__ import annotations

import itertools
import re

from app.client.cli import SOLVER_NAMES
from solvers.auto import FORMULATION_LOSSES, DataShape, choose
from solvers.params import AUTO_FORMULATIONS, L1R_PREFIX, SOLVERS
from tests.support import REPO

NUMBERS = {"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
           "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
           "twenty": 20}


def test_the_readme_counts_and_names_every_solver() -> None:
    readme = (REPO / "README.md").read_text()
    match = re.search(r"^(\w+) solvers, checked against(.*?)\)\.\s", readme, re.M | re.S)
    assert match, "the README's solver paragraph"
    assert NUMBERS[match.group(1).lower()] == len(SOLVERS)
    named = set(re.findall(r"`([a-z0-9_]+)`", match.group(2)))
    assert named == set(SOLVERS)


def _first_table(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| solver |"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return rows


def test_the_solvers_table_lists_every_solver_once() -> None:
    cells = _first_table((REPO / "docs" / "solvers.md").read_text())
    named = [name for cell in cells for name in re.findall(r"`([a-z0-9_]+)`", cell)]
    assert sorted(named) == sorted(SOLVERS)


def test_the_seed_row_splits_the_solvers_as_the_registry() -> None:
    docs = (REPO / "docs" / "solvers.md").read_text()
    row = next(line for line in docs.splitlines() if line.startswith("| `seed` |"))
    randomized = re.search(r"the randomized solvers \(([^)]*)\)", row)
    deterministic = re.search(r"the deterministic ones \(([^)]*)\)", row)
    assert randomized and deterministic
    assert set(re.findall(r"`(\w+)`", randomized.group(1))) == {
        name for name, spec in SOLVERS.items() if spec.randomized}
    assert set(re.findall(r"`(\w+)`", deterministic.group(1))) == {
        name for name, spec in SOLVERS.items() if not spec.randomized}


def test_the_cli_names_every_solver_auto_first() -> None:
    assert SOLVER_NAMES[0] == "auto"
    assert sorted(SOLVER_NAMES) == sorted(SOLVERS)


def test_auto_trains_what_its_candidates_train() -> None:
    candidates = [spec for spec in SOLVERS.values() if spec.auto_candidate]
    assert all(spec.kind == "linear" and not spec.chooses for spec in candidates)
    assert list(AUTO_FORMULATIONS) == list(dict.fromkeys(
        f for spec in candidates for f in spec.formulations))
    assert SOLVERS["auto"].formulations == AUTO_FORMULATIONS
    for formulation, losses in FORMULATION_LOSSES.items():
        own = {loss for spec in candidates if formulation in spec.formulations
               for loss in spec.losses if not loss.startswith(L1R_PREFIX)}
        # None: the formulation has one loss of its own, which auto does not choose
        assert (sorted(own) if len(own) > 1 else None) == (
            sorted(losses) if losses is not None else None), formulation


def test_every_choice_of_auto_is_a_candidate_that_trains_the_problem() -> None:
    shapes = [DataShape(n, d, int(n * d * density), max_abs)
              for n, d, density, max_abs in itertools.product(
                  (500, 50_000), (50, 100_000), (0.001, 0.6), (1.0, 500.0))]
    for shape, formulation, C in itertools.product(shapes, AUTO_FORMULATIONS, (1.0, 1e3)):
        losses = FORMULATION_LOSSES[formulation] or ("l1",)
        penalties = ("l2", "l1") if formulation == "c_svc" else ("l2",)
        for loss, penalty in itertools.product(losses, penalties):
            if penalty == "l1" and loss == "l1":
                continue  # refused by validate_params (LIBLINEAR has no -s for it)
            choice = choose(shape, loss, C, "augment", penalty, formulation)
            spec = SOLVERS[choice.solver]
            assert spec.auto_candidate, choice
            assert formulation in spec.formulations, choice
            expected = L1R_PREFIX + loss if penalty == "l1" else loss
            if FORMULATION_LOSSES[formulation] is not None:
                assert expected in spec.losses, choice
            accepted = {p.name for p in spec.params}
            assert set(choice.settings) <= accepted, choice
