"""The first minute of `make run`: from /healthz's first answer to a newcomer's first model.

Starts `python -m app.run` (API + one worker on the embedded default) in a new, empty
HINGE_HOME, with the solver kernels already in Numba's on-disk cache, as `make run`'s
install step leaves them. As soon as /healthz answers: upload a9a (the shared .xz file,
32,561 rows), POST a job with no solver named (auto), poll every 50 ms until it succeeds.
Repeated (3 times; once with --quick), a new home each time; medians. Issue 16's target:
the first job succeeds within 10 s of /healthz first answering.

    .venv/bin/python -m bench.first_run_bench [--quick]   (or python -m bench.run --only first_run)
Writes bench/results/first_run.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.paths import DATA_DIR, results_dir
from testkit.first_run import first_job

TARGET_S = 10.0


def one_run(content: bytes, work: Path) -> dict[str, Any]:
    run = first_job(content, work)
    job = run["job"]
    if job["status"] != "succeeded":
        raise RuntimeError(f"the first job ended {job['status']}: {job.get('error')}")
    return {"to_healthz": run["to_healthz"], "upload": run["upload"],
            "to_model": run["to_model"], "train": job["result"]["train_seconds"],
            "solver": (job["result"].get("path") or [{}])[0].get("solver", "?")}


def main(quick: bool = False) -> list[dict[str, Any]]:
    a9a = (DATA_DIR / "a9a.xz").read_bytes()
    runs = []
    for _ in range(1 if quick else 3):
        with tempfile.TemporaryDirectory(prefix="hinge-first-run-") as work:
            runs.append(one_run(a9a, Path(work)))
        print(f"first run: {runs[-1]}", flush=True)
    to_model = statistics.median(r["to_model"] for r in runs)
    rows = [
        {"experiment": "first_run", "metric": "first a9a job: /healthz -> succeeded (s)",
         "hinge": to_model, "reference": float("nan"), "ratio": float("nan"),
         "target": f"< {TARGET_S:g} s", "met": to_model < TARGET_S},
        {"experiment": "first_run", "metric": "make run: process start -> /healthz (s)",
         "hinge": statistics.median(r["to_healthz"] for r in runs),
         "reference": float("nan"), "ratio": float("nan"), "target": "—", "met": True},
    ]
    write_report(runs, rows)
    return rows


def write_report(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> None:
    out = results_dir() / "first_run.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# The first run", "",
        f"Run {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}); "
        "`python -m bench.first_run_bench` (see its docstring for the method). "
        "Each run: a new HINGE_HOME, `python -m app.run`, a9a uploaded as soon as /healthz "
        "answers, one job with no solver named.", "",
        "| run | start -> /healthz (s) | upload (s) | /healthz -> job succeeded (s) "
        "| train (s) | solver |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for k, r in enumerate(runs, 1):
        lines.append(f"| {k} | {r['to_healthz']:.1f} | {r['upload']:.1f} | "
                     f"{r['to_model']:.1f} | {r['train']:.2f} | {r['solver']} |")
    lines += ["", "| metric | Hinge | target | met |", "|---|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r['metric']} | {r['hinge']:.1f} | {r['target']} | "
                     f"{'yes' if r['met'] else 'NO'} |")
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}", flush=True)


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    main(quick=parser.parse_args().quick)


if __name__ == "__main__":
    _cli()
