"""bench/many_cores.py: the 16-core scaling table's script runs to the end (its --quick
mode, threads 1 and 2, on the stand-in data) and names the machine."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import paths


@pytest.mark.slow
@pytest.mark.timeout(1200)  # ten fresh processes, each loading Numba's cache
def test_many_cores_quick_writes_the_table(tmp_path: Path) -> None:
    from testkit.standins import write_standins

    data = write_standins(tmp_path / "data")
    results = tmp_path / "results"
    env = {**os.environ, "HINGE_SHARED_DATA": str(data), "HINGE_BENCH_RESULTS": str(results)}
    done = subprocess.run([sys.executable, "bench/many_cores.py", "--quick", "--datasets",
                           "HIGGS 7k", "w8a", "--timeout", "240"], cwd=paths.REPO, env=env,
                          capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = (results / "many_cores.md").read_text()
    assert "- Machine: " in text and "logical CPUs" in text
    assert "| data | Hinge 1 t | Hinge 2 t | LIBSVM |" in text
    # every Hinge cell is a time, and the thread counts agree on the objective
    for name in ("seeded 7,000 x 28 dense stand-in", "w8a (shared data)"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {name}"))
        cells = [cell.strip() for cell in row.split("|")[2:4]]
        assert all(re.fullmatch(r"\d+\.\d\d", cell) for cell in cells), row
        assert row.rstrip(" |").endswith("yes"), row
    # tron at 1 and 2 threads, dcd (no threads) once
    for solver, times in (("tron", r"\| \d+\.\d\d \| \d+\.\d\d \|"),
                          ("dcd", r"\| \d+\.\d\d \| — \|")):
        row = next(line for line in text.splitlines() if line.startswith(f"| {solver} ("))
        assert re.search(times, row) and row.endswith("| yes |"), row
