"""One problem on one and on two threads: the done-when figures of issue 46 for the linear
solvers (dcd with the L1 and the L2 loss, logistic_dcd and tron).

Each fit (C = 1, `tol` 1e-3 unless --tol, on the generated 200,000 x 100,000 text set of
bench/tron_liblinear.py, or 20,000 x 20,000 with --quick) runs with `threads: 1` and
`threads: 2` interleaved in this one process (1t, 2t, 2t, 1t, 1t, 2t, ...: the order
reverses on odd repetitions, so a change of load hits both alike), timed in wall-clock
seconds after one untimed warm-up fit of each. Reported per fit:

- the fastest 1-thread and 2-thread times (the minimum over the repetitions: on a loaded
  machine the least disturbed run) and their ratio, the 2-thread speedup S2;
- the relative difference of the two primal objectives and whether both are certified
  (`converged`: the duality gap, or tron's gradient certificate, within tol). At tol t
  two certified fits can differ by up to t relative; run with --tol 1e-10 to see the
  objectives agree within 1e-9;
- the serial share Amdahl's law reads from S2, s = 2 / S2 - 1, and the 16-thread
  projection 1 / (s + (1 - s) / 16);
- measured inside the 2-thread fit: the share of its wall time outside the calls that
  contain the parallel loops (details parallel_s; tron: function, gradient and CG
  passes, whose CG vector updates are serial inside them, so a lower bound);
- an estimate of the quiet S2 from CPU time: the 1-thread fit's CPU seconds over the
  2-thread fit's main-thread CPU seconds (the main thread runs the serial parts and its
  share of every parallel loop; OMP_WAIT_POLICY=PASSIVE, so waiting costs no CPU). It
  assumes the other thread carries an equal share of what ran on both, and it counts
  what the grain meter kept on one thread (on a busy machine, most) as serial; with
  --fine (grain.FORCE = "fine": every parallel loop on both threads) it estimates the
  quiet S2 of the parallel mode. Read it on a busy machine, the wall-clock S2 on a quiet
  one; and the fine share, the share of the 2-thread fit's calls run on both threads;
- the sweeps (dcd, logistic_dcd) or Newton steps (tron) of each.

--pin runs the 1-thread fits on CPU 0 alone and the 2-thread fits on CPUs 0 and 1
(sched_setaffinity of the process's threads).

Usage: python bench/serial_share_bench.py [--quick] [--reps N] [--tol T] [--pin] [--fine]
                                          [--only "dcd l1" tron ...]
       python -m bench.run --only serial_share
Writes bench/results/serial_share.md (bench/results/quick/ with --quick).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before Numba starts its threads

import argparse
import contextlib
import datetime as dt
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import results_dir, smaller  # noqa: E402

RESULTS_NAME = "serial_share.md"
TARGET = 1.7  # issue 46: dcd (L1) and tron at least 1.7x on two threads
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
    return max(0.0, 1.0 - inside / wall) if inside > 0 else math.nan


def _pin(threads: int, pin: bool) -> None:
    """Every thread of this process on CPU 0 (one thread) or CPUs 0 and 1."""
    if not pin or not hasattr(os, "sched_setaffinity"):
        return
    cpus = {0} if threads == 1 else {0, 1}
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(task), cpus)


def one_fit(X: Any, y: np.ndarray, solver: str, extra: dict[str, Any], threads: int,
            tol: float, pin: bool = False) -> dict[str, Any]:
    """One timed fit: wall and CPU seconds (the process's, the calling thread's)."""
    from solvers import fit

    _pin(threads, pin)
    cpu, main, started = time.process_time(), time.thread_time(), time.perf_counter()
    result = fit(X, y, solver=solver, C=1.0, threads=threads, tol=tol, **extra)
    wall = time.perf_counter() - started
    return {"wall": wall, "cpu": time.process_time() - cpu, "main": time.thread_time() - main,
            "result": result}


def measure(X: Any, y: np.ndarray, solver: str, extra: dict[str, Any], reps: int,
            tol: float, pin: bool = False) -> dict[str, Any]:
    """The figures of one fit (module docstring) from `reps` interleaved pairs."""
    for threads in (1, 2):
        one_fit(X, y, solver, extra, threads, tol, pin)  # compile and warm
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for rep in range(reps):
        for threads in ((1, 2) if rep % 2 == 0 else (2, 1)):
            runs[threads].append(one_fit(X, y, solver, extra, threads, tol, pin))
    _pin(2, pin)
    best = {t: min(runs[t], key=lambda run: run["wall"]) for t in (1, 2)}
    one, two = best[1]["wall"], best[2]["wall"]
    speedup = one / two
    share, projection = amdahl(speedup)
    p1 = best[1]["result"].primal_objective
    p2 = best[2]["result"].primal_objective
    cpu_one = min(run["cpu"] for run in runs[1])
    main_two = min(run["main"] for run in runs[2])
    outputs = {t: best[t]["result"].per_output[0] for t in (1, 2)}
    return {
        "one": one, "two": two, "speedup": speedup, "share": share,
        "projection": projection,
        "outside": float(np.median([outside_share(run["result"], run["wall"])
                                    for run in runs[2]])),
        "cpu_speedup": cpu_one / main_two if main_two > 0 else math.nan,
        "relative_diff": abs(p1 - p2) / abs(p1),
        "converged": (all(run["result"].converged for run in runs[1]),
                      all(run["result"].converged for run in runs[2])),
        "iterations": (outputs[1].get("iterations"), outputs[2].get("iterations")),
        "fine": float(np.median([float(run["result"].per_output[0].get(
            "fine_grained_share", math.nan)) for run in runs[2]])),
    }


def fit_name(solver: str, extra: dict[str, Any]) -> str:
    return solver + (f" {extra['loss']}" if "loss" in extra and solver == "dcd" else "")


def main(quick: bool = False, reps: int | None = None, tol: float = 1e-3,
         pin: bool = False, only: list[str] | None = None,
         fine: bool = False) -> list[dict[str, Any]]:
    from solvers import grain
    from testkit.datagen import text_like

    if fine:
        grain.FORCE = "fine"

    reps = reps or (smaller(2, 1) if quick else 3)
    size = smaller(20_000, 3_000)
    rows, features = (size, size) if quick else (200_000, 100_000)
    X, y = text_like(rows, features, seed=0)
    load_before = os.getloadavg()
    lines, summary = [], []
    for solver, extra in FITS:
        name = fit_name(solver, extra)
        if only and name not in only:
            continue
        m = measure(X, y, solver, extra, reps, tol, pin)
        line = (f"| {name} | {m['one']:.3f} | {m['two']:.3f} | {m['speedup']:.2f} | "
                f"{m['relative_diff']:.1e} | {m['converged'][0]} / {m['converged'][1]} | "
                f"{m['share']:.2f} | {m['projection']:.1f} | {m['outside']:.2f} | "
                f"{m['cpu_speedup']:.2f} | {m['fine']:.2f} | "
                f"{m['iterations'][0]} / {m['iterations'][1]} |")
        print(line, flush=True)
        lines.append(line)
        if solver in ("dcd", "tron") and extra.get("loss") in ("l1", "l2"):
            met = m["speedup"] >= TARGET and all(m["converged"])
            summary.append({"experiment": "serial_share", "metric": f"{name} 2-thread speedup",
                            "hinge": m["speedup"], "reference": TARGET,
                            "ratio": m["speedup"] / TARGET, "target": f">= {TARGET}x, certified",
                            "met": met})
    load_after = os.getloadavg()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo"],
                         capture_output=True, text=True).stdout.split(":")[-1].strip()
    import numba

    header = [
        "# One problem on one and on two threads (issue 46)", "",
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs ({cpu}), "
        f"load average (1, 5, 15 min) {', '.join(f'{v:.2f}' for v in load_before)} before, "
        f"{', '.join(f'{v:.2f}' for v in load_after)} after; Numba {numba.__version__}, "
        f"threading layer {numba.threading_layer()}, OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY')}; text set {rows:,} x {features:,} "
        f"(testkit.datagen.text_like, seed 0), C = 1, tol {tol:g}, wall-clock seconds, the "
        f"fastest of {reps} interleaved repetitions" + (", pinned (1t: CPU 0, 2t: CPUs 0-1)"
                                                      if pin else "")
        + ". Generated by `python bench/serial_share_bench.py"
        + (" --quick" if quick else "") + (f" --tol {tol:g}" if tol != 1e-3 else "")
        + (" --pin" if pin else "") + (" --fine" if fine else "")
        + (" --only " + " ".join(repr(n) for n in only) if only else "") + "`.", "",
        "S2 = 1t / 2t; s = 2 / S2 - 1 (Amdahl), 16t projection = 1 / (s + (1 - s) / 16); "
        "outside: the share of the 2-thread fit's wall time outside its parallel calls "
        "(tron: a lower bound); CPU S2: the 1-thread fit's CPU seconds over the 2-thread "
        "fit's main-thread CPU seconds (what the quiet S2 would be for the work the grain "
        "meter ran on the threads: on a busy machine it keeps most of it on one thread); "
        "fine share: the share of the 2-thread fit's calls the grain meter ran on both "
        "threads (median)" + (", forced to 1 (--fine)" if fine else "") + "; "
        "primal rel. diff: |P(1t) - P(2t)| / P(1t), at most about tol for two certified "
        "fits.", "",
        "| fit | 1 thread s | 2 threads s | S2 | primal rel. diff | converged 1t / 2t | s | "
        "16t projection | outside | CPU S2 | fine share | sweeps 1t / 2t |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    if load_before[0] > 1.0:
        header[2] += (" The machine was loaded (shared by other sessions): the wall-clock "
                      "figures are indicative only.")
    path = results_dir() / RESULTS_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header + lines) + "\n")
    return summary


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--tol", type=float, default=1e-3)
    parser.add_argument("--pin", action="store_true")
    parser.add_argument("--only", nargs="+", metavar="FIT",
                        help="only these fits: " + ", ".join(fit_name(*f) for f in FITS))
    parser.add_argument("--fine", action="store_true",
                        help="every parallel loop on both threads (grain.FORCE)")
    arguments = parser.parse_args()
    main(arguments.quick, arguments.reps, arguments.tol, arguments.pin, arguments.only,
         arguments.fine)
