"""The two commands: `make run` installs only the runtime and starts (the worker compiles
the kernels, not make); `make test` adds the dev extras. Checked with `make -n` (what make
would run) against an empty virtualenv path, so nothing is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.paths import REPO


def _plan(target: str, tmp_path: Path) -> str:
    if shutil.which("make") is None:
        pytest.fail("make is not installed")
    return subprocess.run(["make", "-n", target, f"VENV={tmp_path / 'venv'}"], cwd=REPO,
                          capture_output=True, text=True, check=True).stdout


def test_make_run_installs_the_runtime_only_and_starts_without_compiling(tmp_path: Path
                                                                         ) -> None:
    plan = _plan("run", tmp_path)
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert any(line.rstrip().endswith("install --quiet -e .") for line in installs), plan
    assert not any("[dev]" in line for line in installs), plan
    assert "app.run" in plan
    # the API does not wait for the compiler: the worker warms up after the service starts
    assert "warmup" not in plan, plan


def test_make_test_adds_the_dev_extras_and_lints_imports(tmp_path: Path) -> None:
    plan = _plan("test", tmp_path)
    assert "install --quiet --no-compile -e '.[dev]'" in plan, plan
    assert "lint-imports" in plan and "-m pytest -n 4 --dist loadfile" in plan, plan


def test_make_test_compiles_the_kernels_and_ships_the_install_before_the_tests(
        tmp_path: Path) -> None:
    """The compile, the lint and the shipped install's pip run side by side (a make -j of
    their own); the install is seeded with the kernels once they are compiled, all before
    pytest starts; the test run writes bytecode, and its OpenMP threads sleep while they
    wait (four test processes share the cores)."""
    plan = _plan("test", tmp_path).splitlines()

    def at(text: str, without: str = "\0") -> int:
        return next(i for i, line in enumerate(plan) if text in line and without not in line)

    assert any("-j" in line and "test-ready" in line for line in plan), plan
    seed, tests = at("testkit.runtime_venv", without="--install-only"), at("-m pytest -n")
    assert at("testkit.kernels") < seed < tests, plan
    assert at("testkit.runtime_venv --install-only") < tests, plan
    assert at("ruff check") < tests, plan
    assert "env -u PYTHONDONTWRITEBYTECODE" in plan[tests], plan
    assert "OMP_WAIT_POLICY=PASSIVE" in plan[tests], plan
