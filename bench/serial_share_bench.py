"""The serial share of one problem on two threads (issue 46, "the serial share measured").

For each fit (dcd with the L1 and the L2 loss, logistic_dcd and tron, C = 1, on the
generated 200,000 x 100,000 text set of bench/tron_liblinear.py, or 20,000 x 20,000 with
--quick), `threads: 1` and `threads: 2` alternate in this one process (the order reverses
on odd repetitions), timed in wall-clock seconds. Reported per fit: the medians, the
2-thread speedup S2, the serial share s = 2 / S2 - 1 Amdahl's law reads from it, the
16-thread projection 1 / (s + (1 - s) / 16), and, measured inside the 2-thread fit, the
share of its wall time spent outside the calls that contain the parallel loops (dcd and
logistic_dcd: the rounds and merges of solvers/_dcd_parallel.py; tron: the function,
gradient and CG passes, whose CG vector updates are serial inside those calls, so for
tron this is a lower bound of the serial share). Both thread counts must reach the
certificate (converged), and their primal values are compared (relative difference).

Speed figures need a quiet machine; on a loaded one the table says so (load average).

Usage: python bench/serial_share_bench.py [--quick] [--reps N]
Writes bench/results/serial_share.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import results_dir  # noqa: E402

RESULTS_NAME = "serial_share.md"
FITS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("dcd", {"loss": "l1"}),
    ("dcd", {"loss": "l2"}),
    ("logistic_dcd", {}),
    ("tron", {"loss": "l2"}),
)


def amdahl(speedup: float, threads: int = 16) -> tuple[float, float]:
    """(s, projection): s = 2 / S2 - 1 and 1 / (s + (1 - s) / threads)."""
    share = min(max(2.0 / speedup - 1.0, 0.0), 1.0)
    return share, 1.0 / (share + (1.0 - share) / threads)


def outside_share(result: Any, wall: float) -> float:
    """The share of a 2-thread fit's wall time outside its parallel calls."""
    inside = sum(float(output.get("parallel_s", 0.0)) for output in result.per_output)
    timings = result.timings or {}
    inside += sum(float(timings.get(key, 0.0)) for key in ("function_s", "gradient_s", "cg_s"))
    return max(0.0, 1.0 - inside / wall) if inside > 0 else float("nan")


def one_fit(X: Any, y: np.ndarray, solver: str, extra: dict[str, Any],
            threads: int) -> tuple[float, Any]:
    from solvers import fit

    started = time.perf_counter()
    result = fit(X, y, solver=solver, C=1.0, threads=threads, **extra)
    return time.perf_counter() - started, result


def main(quick: bool = False, reps: int | None = None) -> list[dict[str, Any]]:
    from testkit.datagen import text_like

    reps = reps or (3 if quick else 5)
    rows, features = (20_000, 20_000) if quick else (200_000, 100_000)
    X, y = text_like(rows, features, seed=0)
    load_before = os.getloadavg()[0]
    lines, summary = [], []
    for solver, extra in FITS:
        for threads in (1, 2):
            one_fit(X, y, solver, extra, threads)  # compile and warm
        times: dict[int, list[float]] = {1: [], 2: []}
        results: dict[int, Any] = {}
        outside: list[float] = []
        for rep in range(reps):
            for threads in ((1, 2) if rep % 2 == 0 else (2, 1)):
                seconds, result = one_fit(X, y, solver, extra, threads)
                times[threads].append(seconds)
                results[threads] = result
                if threads == 2:
                    outside.append(outside_share(result, seconds))
        one, two = statistics.median(times[1]), statistics.median(times[2])
        speedup = one / two
        share, projection = amdahl(speedup)
        p1, p2 = results[1].primal_objective, results[2].primal_objective
        name = solver + (f" {extra['loss']}" if "loss" in extra and solver == "dcd" else "")
        line = (f"| {name} | {one:.3f} | {two:.3f} | {speedup:.2f} | {share:.2f} | "
                f"{projection:.1f} | {statistics.median(outside):.2f} | "
                f"{results[1].converged} / {results[2].converged} | "
                f"{abs(p1 - p2) / p1:.1e} |")
        print(line, flush=True)
        lines.append(line)
        summary.append({"experiment": "serial_share", "metric": f"{name} 2-thread speedup",
                        "hinge": speedup, "reference": 1.7, "ratio": speedup / 1.7,
                        "target": ">= 1.7x", "met": speedup >= 1.7})
    load_after = os.getloadavg()[0]
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo"],
                         capture_output=True, text=True).stdout.split(":")[-1].strip()
    header = [
        "# Serial share of one problem on two threads (issue 46)", "",
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs ({cpu}), "
        f"load average {load_before:.2f} before, {load_after:.2f} after; text set "
        f"{rows:,} x {features:,} (testkit.datagen.text_like, seed 0), C = 1, tol 1e-3, "
        f"wall-clock seconds, median of {reps} alternating repetitions. Generated by "
        "`python bench/serial_share_bench.py" + (" --quick" if quick else "") + "`.", "",
        "s = 2 / S2 - 1 (Amdahl), 16t projection = 1 / (s + (1 - s) / 16); outside: the "
        "share of the 2-thread fit's wall time outside its parallel calls (tron: a lower "
        "bound, its CG vector updates run serially inside them).", "",
        "| fit | 1 thread s | 2 threads s | S2 | s | 16t projection | outside | converged "
        "1t / 2t | primal rel. diff |", "|---|---|---|---|---|---|---|---|---|"]
    if load_before > 1.0:
        header[2] += (" The machine was loaded (shared by other sessions): the timings "
                      "are indicative only.")
    path = results_dir() / RESULTS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header + lines) + "\n")
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    arguments = parser.parse_args()
    main(arguments.quick, arguments.reps)
