"""threads: 2 against threads: 1 with a busy neighbour (issue 30, done-when on 2 cores).

A busy-loop process (`while True: pass`, one core) runs beside the whole experiment. For
every SMO row of the kernel_peers experiment (letter-like, pendigits, dna, ijcnn1, w8a,
a9a: bench/kernel_peers_bench.py's data and settings: rbf, eps 1e-3, cache 200 MB) and
the tron rows (a9a, ijcnn1 and the generated text set of bench/tron_liblinear.py: L2
loss, C = 1, eps 0.01) and SMO with batched working sets on the binary sets (ijcnn1, w8a,
a9a: `working_set: "batched"`, issue 46), the same fit runs with `threads: 1` and
`threads: 2`, alternating in this one process (the order reverses on odd repetitions, so
a change of load hits both alike), timed in wall-clock seconds (what a user waits; CPU
time would add up the threads). A short fit is repeated in a block of about
BLOCK_SECONDS. Reported: the medians, their ratio (2 threads / 1 thread; target <= 1.10),
whether the two fits are the same (SMO: the same dual objective and iterations, bit for
bit; tron: the same primal value), SMO's share of steps with the fine-grained parallel
loops (solvers/smo/grain.py measures it), the 1-minute load average before and after, and
the CPU the neighbour got.

--quick (a smoke run of make bench-quick, 5 minutes in all): SMO on letter-like, dna and a
seeded 3,000-row sample of w8a (batched too), tron on a9a and a 10,000 x 10,000 text set,
2 repetitions (one in each order; 7 without --quick); `--only smo:ijcnn1`,
`smo-batched:w8a` etc. runs the other rows with --quick's samples (ijcnn1: 12,000 rows,
as kernel_peers'). --no-busy runs without the neighbour (the idle baseline).

Usage: python bench/busy_cores_bench.py [--quick] [--no-busy] [--reps N]
Writes bench/results/busy_cores.md; `main(quick)` returns the summary rows of bench/run.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import SMOKE, results_dir, smaller  # noqa: E402

RESULTS_NAME = "busy_cores.md"
TARGET = 1.10
BLOCK_SECONDS = 0.3
SMO_SETS = ("letter-like", "pendigits", "dna", "ijcnn1", "w8a", "a9a")
TRON_SETS = ("a9a", "ijcnn1", "text")
BATCHED_SETS = ("ijcnn1", "w8a", "a9a")  # smo working_set "batched": the binary sets
SAMPLE_ROWS = 3_000  # --quick: w8a and a9a samples
# --quick is a smoke run (make bench-quick, 5 minutes in all): the small kernel sets and a
# binary sample, tron on a LIBSVM set and the generated text set
QUICK_SMO_SETS = ("letter-like", "dna", "w8a")
QUICK_TRON_SETS = ("a9a", "text")
QUICK_BATCHED_SETS = ("w8a",)
QUICK_TEXT = 10_000  # rows and features of the text set with --quick


def busy_neighbour() -> subprocess.Popen[bytes]:
    """A process that keeps one core busy until it is terminated."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return math.nan


def timed_block(run: Callable[[], Any], count: int) -> float:
    """Mean wall seconds per run over `count` runs."""
    started = time.perf_counter()
    for _ in range(count):
        run()
    return (time.perf_counter() - started) / count


def compare(runs: dict[int, Callable[[], Any]], reps: int) -> dict[int, float]:
    """Median wall seconds per run of each thread count, alternating (reversed on odd
    repetitions), each in blocks of about BLOCK_SECONDS."""
    first = {threads: timed_block(run, 1) for threads, run in runs.items()}  # warm
    count = max(1, min(50, round(BLOCK_SECONDS / max(min(first.values()), 1e-4))))
    times: dict[int, list[float]] = {threads: [] for threads in runs}
    order = sorted(runs)
    for rep in range(reps):
        for threads in (order if rep % 2 == 0 else order[::-1]):
            times[threads].append(timed_block(runs[threads], count))
    return {threads: statistics.median(values) for threads, values in times.items()}


# --------------------------------------------------------------------------------------
# SMO rows


def smo_data(name: str, quick: bool) -> tuple[Any, np.ndarray, float, float]:
    from bench.kernel_peers_bench import SETTINGS, problem_data

    X, y, _, _ = problem_data(name, quick)
    if quick and name in ("w8a", "a9a"):
        count = min(smaller(SAMPLE_ROWS, 600), X.shape[0])
        rows = np.sort(np.random.default_rng(0).choice(X.shape[0], count, replace=False))
        X, y = X[rows], y[rows]
    C, gamma = SETTINGS[name]
    return X, y, C, gamma if gamma is not None else 1.0 / X.shape[1]


def smo_row(name: str, quick: bool, reps: int, working_set: str = "pair") -> dict[str, Any]:
    from solvers import fit

    X, y, C, gamma = smo_data(name, quick)
    fits: dict[int, Any] = {}

    def run(threads: int) -> Callable[[], Any]:
        def go() -> Any:
            fits[threads] = fit(X, y, solver="smo", kernel="rbf", C=C, gamma=gamma, eps=1e-3,
                                cache_mb=200.0, threads=threads, working_set=working_set)
            return fits[threads]
        return go

    seconds = compare({1: run(1), 2: run(2)}, reps)
    one, two = fits[1], fits[2]
    layout = "batched" if working_set == "batched" else two.params["parallel_grain"]
    return {"solver": "smo" if working_set == "pair" else f"smo {working_set}",
            "data": f"{name} ({X.shape[0]:,} rows)", "seconds": seconds,
            "same": (one.dual_objective == two.dual_objective
                     and one.iterations == two.iterations),
            "grain": f"{layout}, fine {100 * two.params['fine_grained_share']:.0f}%"}


# --------------------------------------------------------------------------------------
# tron rows


def tron_row(name: str, quick: bool, reps: int) -> dict[str, Any]:
    import scipy.sparse as sp

    from bench.tron_liblinear import _data
    from solvers import tron
    from solvers.backbone import LinearProblem, ProgressMonitor
    from solvers.inputs import as_csr_arrays

    if name == "text":
        from testkit.datagen import text_like

        rows, features = ((smaller(QUICK_TEXT, 2_000),) * 2 if quick else (200_000, 100_000))
        X, y = text_like(rows, features, seed=0)
    else:
        X, y = _data(name, quick)
    X = sp.csr_matrix(X, dtype=np.float64)
    X.sort_indices()
    problem = LinearProblem(as_csr_arrays(X), y, np.ones(X.shape[0]), 1.0)
    solutions: dict[int, Any] = {}

    def run(threads: int) -> Callable[[], Any]:
        def go() -> Any:
            solutions[threads] = tron.solve(problem, {**tron.DEFAULTS, "eps": 0.01,
                                                      "threads": threads},
                                            ProgressMonitor(None, None))
            return solutions[threads]
        return go

    seconds = compare({1: run(1), 2: run(2)}, reps)
    return {"solver": "tron", "data": f"{name} ({X.shape[0]:,} x {X.shape[1]:,})",
            "seconds": seconds, "same": solutions[1].primal == solutions[2].primal,
            "grain": f"{solutions[2].details['threads']} threads, fine "
                     f"{100 * solutions[2].details['fine_grained_share']:.0f}%"}


# --------------------------------------------------------------------------------------
# report


def write_report(results: list[dict[str, Any]], quick: bool, busy: bool,
                 loads: tuple[tuple[float, ...], tuple[float, ...]], neighbour_cores: float,
                 wall: float, reps: int | None = None) -> Path:
    from solvers.kernels import max_threads

    lines = ["# threads: 2 vs threads: 1 beside a busy neighbour", "",
             f"Regenerated by `python bench/busy_cores_bench.py{' --quick' if quick else ''}"
             f"{' --no-busy' if not busy else ''}{f' --reps {reps}' if reps else ''}` on "
             f"{dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}: "
             f"{platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, Numba threads available {max_threads()}, "
             f"{'one busy-loop process beside it' if busy else 'no neighbour'}.", "",
             f"- 1-minute load average before / after: {loads[0][0]:.2f} / {loads[1][0]:.2f} "
             "(the other processes of the machine, the neighbour and this run).",
             f"- The neighbour ran on {neighbour_cores:.2f} cores on average over the "
             f"{wall:.0f} s of the run." if busy else "- No neighbour.",
             "- Wall-clock seconds per fit, median of the alternating repetitions; ratio = "
             f"2 threads / 1 thread, target <= {TARGET:.2f}. `same`: the 2-thread fit equals "
             "the 1-thread fit (SMO: dual objective and iterations bit for bit; tron: the "
             "primal value). SMO grain: the layout and the share of steps the grain meter ran "
             "with the fine-grained parallel loops (tron: of its CG steps on both threads). On a "
             "crowded machine (the neighbour far below one core) the ratios carry its "
             "noise: rerun on a quiet one.", "",
             "| solver | data | threads 1 s | threads 2 s | ratio | met | same | grain |",
             "|---|---|---:|---:|---:|---|---|---|"]
    for r in results:
        one, two = r["seconds"][1], r["seconds"][2]
        ratio = two / one
        lines.append(f"| {r['solver']} | {r['data']} | {one:.3f} | {two:.3f} | {ratio:.2f} | "
                     f"{'yes' if ratio <= TARGET else '**no**'} | "
                     f"{'yes' if r['same'] else '**no**'} | {r['grain']} |")
    path = results_dir() / RESULTS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def main(quick: bool = False, reps: int | None = None, busy: bool = True,
         only: list[str] | None = None) -> list[dict[str, Any]]:
    from solvers.warmup import PRIORITY_GROUPS, warmup

    warmup(PRIORITY_GROUPS)  # smo, its parallel loops, tron
    reps = reps or (smaller(2, 1) if quick else 7)
    # --only names any row; quick's sets otherwise (the smoke run: as before, 2 and 1)
    smo_sets = (SMO_SETS if only else SMO_SETS[:2] if SMOKE else
                QUICK_SMO_SETS if quick else SMO_SETS)
    tron_sets = (TRON_SETS if only else TRON_SETS[:1] if SMOKE else
                 QUICK_TRON_SETS if quick else TRON_SETS)
    batched_sets = (BATCHED_SETS if only else () if SMOKE else
                    QUICK_BATCHED_SETS if quick else BATCHED_SETS)
    started, loads_before = time.perf_counter(), os.getloadavg()
    neighbour = busy_neighbour() if busy else None
    results: list[dict[str, Any]] = []
    try:
        if neighbour is not None:
            time.sleep(0.2)
            neighbour_start = cpu_seconds(neighbour.pid)
        for name in smo_sets:
            if not only or f"smo:{name}" in only:
                results.append(smo_row(name, quick, reps))
                print(results[-1], flush=True)
        for name in batched_sets:  # the binary sets' batched working sets (issue 46)
            if not only or f"smo-batched:{name}" in only:
                results.append(smo_row(name, quick, reps, working_set="batched"))
                print(results[-1], flush=True)
        for name in tron_sets:
            if not only or f"tron:{name}" in only:
                results.append(tron_row(name, quick, reps))
                print(results[-1], flush=True)
        wall = time.perf_counter() - started
        neighbour_cores = ((cpu_seconds(neighbour.pid) - neighbour_start) / max(wall - 0.2, 1e-9)
                           if neighbour is not None else 0.0)
    finally:
        if neighbour is not None:
            neighbour.terminate()
            neighbour.wait()
    write_report(results, quick, busy, (loads_before, os.getloadavg()), neighbour_cores, wall,
                 reps if reps != (smaller(2, 1) if quick else 7) else None)
    rows = []
    for r in results:
        one, two = r["seconds"][1], r["seconds"][2]
        rows.append({"experiment": "busy_cores",
                     "metric": f"{r['solver']} {r['data']}: wall s, threads 2 vs 1"
                               f"{', busy neighbour' if busy else ''}",
                     "hinge": two, "reference": one, "ratio": two / one,
                     "target": f"<= {TARGET:.2f}, same fit",
                     "met": two / one <= TARGET and bool(r["same"])})
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-busy", action="store_true", help="no busy-loop neighbour")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--only", nargs="+", metavar="SOLVER:DATA",
                        help="rows to run, e.g. smo:ijcnn1 tron:text")
    args = parser.parse_args()
    for row in main(args.quick, args.reps, not args.no_busy, args.only):
        print(row)
