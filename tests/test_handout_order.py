"""The order `make test` hands the test files out in (tests/conftest.py): the longest
first, then the end-to-end and deployment files, then the unit files."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from tests.conftest import LONGEST, _handed_out
from tests.support import REPO


def test_every_listed_long_file_exists() -> None:
    """A renamed or removed file would drop out of the list unnoticed and be handed out
    at its place in the tree, perhaps last."""
    assert len(set(LONGEST)) == len(LONGEST)
    assert [path for path in LONGEST if not (REPO / path).is_file()] == []


def test_the_longest_go_first_longest_first_then_live_servers_then_units() -> None:
    def item(nodeid: str) -> Any:
        return cast(Any, SimpleNamespace(nodeid=nodeid))
    items = [item("tests/app/test_a.py::t"), item("tests/e2e/test_z.py::t"),
             item(f"{LONGEST[1]}::t1"), item(f"{LONGEST[0]}::t"), item(f"{LONGEST[1]}::t0"),
             item("tests/deploy/test_y.py::t")]
    ordered = [i.nodeid for i in sorted(items, key=_handed_out)]
    assert ordered == [f"{LONGEST[0]}::t", f"{LONGEST[1]}::t1", f"{LONGEST[1]}::t0",
                       "tests/e2e/test_z.py::t", "tests/deploy/test_y.py::t",
                       "tests/app/test_a.py::t"]
