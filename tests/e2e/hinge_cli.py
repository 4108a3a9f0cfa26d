"""Running the `hinge` console script in tests, as a user would: a real process, with
HINGE_URL and HINGE_API_KEY in its environment, this checkout's code on its path."""

from __future__ import annotations

import os
import shutil
import sys
import tomllib
from pathlib import Path

from tests.support import REPO


def entry_point() -> str:
    """`module:function` of the `hinge` script, as pyproject.toml declares it."""
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    return str(scripts["hinge"])


def hinge_bin_dir(tmp: Path) -> Path:
    """A directory with an executable `hinge`: the installed console script when the
    environment has it, else one written from pyproject's entry point (an environment
    installed before the script was declared), so the test runs the declared entry point
    either way."""
    installed = Path(sys.executable).parent / "hinge"
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    target = bin_dir / "hinge"
    if installed.exists():
        shutil.copy(installed, target)
    else:
        module, function = entry_point().split(":")
        target.write_text(f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\n"
                          f"sys.exit({function}())\n")
    target.chmod(0o755)
    return bin_dir


def cli_env(base_url: str, key: str, bin_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "HINGE_URL": base_url,
        "HINGE_API_KEY": key,
        "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        "PYTHONPATH": str(REPO),  # this checkout's app/, whatever the editable install says
        "COLUMNS": "200",
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
    })
    return env
