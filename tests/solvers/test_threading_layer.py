"""Numba's thread pool is OpenMP whatever else the process loaded: Numba prefers TBB when
libtbb can be loaded (scikit-learn-intelex brings it), and SMO's per-step parallel loops
ran slower there, so that a fit's speed depended on another package's import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import ctypes, glob, os, sys
for path in glob.glob(os.path.join(sys.prefix, "lib", "libtbb.so*")):
    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)  # as a package that uses TBB would
import numpy as np
import numba
import solvers
from numba import njit, prange

@njit(parallel=True)
def fill(a):
    for i in prange(a.shape[0]):
        a[i] = i

fill(np.zeros(64))
print(numba.threading_layer())
"""


def _layer(env: dict[str, str]) -> str:
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, env=env, text=True,
                         capture_output=True, timeout=120, check=True)
    return run.stdout.strip().splitlines()[-1]


def _environment(**given: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_THREADING")}
    env["PYTHONPATH"] = str(REPO)
    return {**env, **given}


def test_solvers_run_on_openmp_even_with_tbb_loaded() -> None:
    assert _layer(_environment()) == "omp"


def test_an_order_given_in_the_environment_wins() -> None:
    assert _layer(_environment(NUMBA_THREADING_LAYER_PRIORITY="workqueue omp tbb")) == \
        "workqueue"
