"""Where the benchmark writes its tables and plots.

`make bench` writes the figures of record to bench/results/ (committed). `make
bench-quick` is a functional run with smaller data and fewer repetitions; its tables go to
bench/results/quick/ (git-ignored), so a quick run never overwrites the full results.
`bench/run.py --quick` sets HINGE_BENCH_RESULTS for its children; a module run on its own
honours it too, and with --quick on its command line writes to bench/results/quick/.
The shared data sets are read from ../shared/data, or $HINGE_SHARED_DATA.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from testkit.paths import DATA_DIR, REPO

__all__ = ["DATA_DIR", "FULL_RESULTS", "QUICK_RESULTS", "REPO", "SMOKE", "results_dir", "smaller"]

FULL_RESULTS = REPO / "bench" / "results"
QUICK_RESULTS = FULL_RESULTS / "quick"
# `python -m bench.run --smoke` (the test suite's run): --quick on small stand-in data
SMOKE = os.environ.get("HINGE_BENCH_SMOKE") == "1"


def smaller(quick_value: int, smoke_value: int) -> int:
    """A size or count of --quick, cut to `smoke_value` in the smoke run."""
    return smoke_value if SMOKE else quick_value


def results_dir() -> Path:
    """The folder this run writes to: $HINGE_BENCH_RESULTS; else bench/results/quick/ for a
    module run directly with --quick (python bench/<name>_bench.py --quick); else
    bench/results/."""
    chosen = os.environ.get("HINGE_BENCH_RESULTS")
    if chosen:
        return Path(chosen)
    return QUICK_RESULTS if "--quick" in sys.argv[1:] else FULL_RESULTS
