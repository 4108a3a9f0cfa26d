"""Numba's on-disk cache is keyed by a hash of the solvers sources (solvers/__init__.py):
a kernel that inlines a shared helper (solvers/_kernel_helpers.py) is compiled again when
the helper changes, and loaded from the cache while nothing changed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import solvers

REPO = Path(__file__).resolve().parents[2]

# _margins_kernel (solvers/objectives.py) inlines row_dot (solvers/_kernel_helpers.py)
PROBE = """
import json, os
import numpy as np
from solvers.objectives import _margins_kernel as kernel
out = np.empty(2)
kernel(np.array([1.0, 2.0, 3.0]), np.array([0, 1, 1], dtype=np.int32),
       np.array([0, 2, 3], dtype=np.int64), np.array([1.0, -1.0]), np.array([0.5, 0.25]),
       0.0, out)
print(json.dumps({"margins": out.tolist(), "cache": os.environ["NUMBA_CACHE_DIR"],
                  "hits": sum(kernel.stats.cache_hits.values()),
                  "misses": sum(kernel.stats.cache_misses.values())}))
"""


def _probe(source_root: Path, cache_dir: Path, **more_env: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HINGE_NUMBA_CACHE_BASE")}
    env.update(PYTHONPATH=str(source_root), NUMBA_CACHE_DIR=str(cache_dir), **more_env)
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=source_root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_editing_a_shared_helper_compiles_its_callers_again(tmp_path: Path) -> None:
    source_root = tmp_path / "src"
    shutil.copytree(REPO / "solvers", source_root / "solvers",
                    ignore=shutil.ignore_patterns("__pycache__"))
    base = tmp_path / "cache"

    first = _probe(source_root, base)
    assert first["margins"] == [1.0, -0.75]  # y_i x_i.w
    assert (first["hits"], first["misses"]) == (0, 1)
    assert Path(first["cache"]).parent == base

    again = _probe(source_root, base)  # a fresh process, nothing changed: from the cache
    assert (again["hits"], again["misses"]) == (1, 0)
    assert again["margins"] == first["margins"] and again["cache"] == first["cache"]

    helpers = source_root / "solvers" / "_kernel_helpers.py"
    text = helpers.read_text()
    row_dot = text[text.index("def row_dot("):text.index("def row_axpy(")]
    assert row_dot.count("    return total\n") == 1
    helpers.write_text(text.replace(row_dot, row_dot.replace("    return total\n",
                                                             "    return 2.0 * total\n")))
    # as a child of a process that chose the old folder in the given base: the base is
    # kept, not nested
    edited = _probe(source_root, Path(first["cache"]), HINGE_NUMBA_CACHE_BASE=str(base))
    assert edited["margins"] == [2.0, -1.5]
    assert (edited["hits"], edited["misses"]) == (0, 1)
    assert Path(edited["cache"]).parent == base and edited["cache"] != first["cache"]


def test_a_folder_that_a_parent_process_chose_by_default_is_not_inherited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A parent's default folder (the __pycache__ of its own solvers: another checkout or
    install) is not a base the user gave: this process chooses its own default."""
    other = tmp_path / "other" / "solvers" / "__pycache__" / "hinge-solvers-0123456789abcdef"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(other))
    monkeypatch.delenv("HINGE_NUMBA_CACHE_BASE", raising=False)
    own = solvers.kernel_cache_dir()
    assert own is not None and own.parent != other.parent
    assert own.name == f"hinge-solvers-{solvers.sources_digest()}"
    monkeypatch.setenv("HINGE_NUMBA_CACHE_BASE", str(other.parent))  # given by the user
    assert solvers.kernel_cache_dir() == other.parent / own.name


def test_old_cache_folders_are_pruned_when_a_new_one_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    now = time.time()
    olds = [tmp_path / f"hinge-solvers-{k:016x}" for k in range(6)]
    for age, folder in enumerate(olds):
        folder.mkdir()
        os.utime(folder, (now - 100 * (age + 1), now - 100 * (age + 1)))
    (tmp_path / "not-ours").mkdir()

    current = solvers.kernel_cache_dir()

    assert current is not None and current.parent == tmp_path
    assert current.name == f"hinge-solvers-{solvers.sources_digest()}"
    assert sorted(p for p in tmp_path.iterdir()) == sorted(
        [current, tmp_path / "not-ours", *olds[:4]])  # the 4 most recently used
    assert solvers.kernel_cache_dir() == current  # the folder of these sources, again
