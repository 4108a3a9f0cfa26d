"""Migration files are named by their revision, `<revision>_<words>.py`, so a file's name
says which revision it holds and no two files share a prefix (renaming a file never
changes its revision id: existing databases migrate on)."""

from __future__ import annotations

import ast
import re

from tests.support import REPO

VERSIONS = REPO / "migrations" / "versions"


def revision_of(source: str) -> str:
    for node in ast.parse(source).body:
        if not isinstance(node, ast.AnnAssign | ast.Assign):
            continue
        value = node.value
        target: ast.expr = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
        if isinstance(target, ast.Name) and target.id == "revision":
            assert isinstance(value, ast.Constant)
            return str(value.value)
    raise AssertionError("no revision")


def misnamed(files: dict[str, str]) -> list[str]:
    """The file names (name -> revision) that break the rule: not `<revision>_<words>.py`,
    or starting with another file's `<revision>_`."""
    bad = [name for name, revision in files.items()
           if not re.fullmatch(re.escape(revision) + r"_[a-z0-9_]+\.py", name)]
    bad += [name for name in files for other, revision in files.items()
            if other != name and name.startswith(revision + "_")]
    return sorted(set(bad))


def test_every_migration_file_is_named_by_its_revision() -> None:
    files = {path.name: revision_of(path.read_text())
             for path in VERSIONS.glob("*.py") if path.name != "__init__.py"}
    assert len(files) >= 15
    assert misnamed(files) == []


def test_the_rule_finds_a_shared_prefix_and_a_wrong_revision() -> None:
    assert misnamed({"0003_tenants.py": "0003t", "0003_workflow.py": "0003w"}) == [
        "0003_tenants.py", "0003_workflow.py"]
    assert misnamed({"0005_searches.py": "0004s"}) == ["0005_searches.py"]
    assert misnamed({"0016_abc_x.py": "0016_abc", "0016_abc_x_y.py": "0016_abc_x"}) == [
        "0016_abc_x_y.py"]
    assert misnamed({"0015_h43shards_dataset_shards.py": "0015_h43shards",
                     "0016_h44x_more.py": "0016_h44x"}) == []
