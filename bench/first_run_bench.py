"""The first minutes of `make run`: from the command to /healthz, and to a newcomer's first
model on an a9a-sized job.

Two measurements, each from testkit/first_run.py (as soon as /healthz answers: upload the
data, POST a job with no solver named (auto), poll every 50 ms until it ends):

- warm (the default, what `make bench` runs): `python -m app.run` of this checkout in a
  new, empty HINGE_HOME, the kernels already in Numba's on-disk cache (as a second start
  finds them). Repeated (3 times; once with --quick), a new home each time; medians.
  Issue 16's target: the first job succeeds within 10 s of /healthz first answering.
- --fresh-clone (by hand; issue 23): `git clone` of this checkout's HEAD into a temporary
  folder and `make run` there, as a new user does: a new virtualenv (pip install, runtime
  only), an empty Numba cache, an empty home. Targets on a 2-core machine: /healthz within
  90 s of `make run` (install included), the first model within 240 s.

The data: LIBSVM's a9a (32,561 rows, from ../shared/data) when it is there, else `hinge
sample --rows 32561` (a9a-like, made by app/client/sample.py), named in the report.

    .venv/bin/python -m bench.first_run_bench [--quick] [--fresh-clone]
Writes bench/results/first_run.md (each mode rewrites its own section).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from app.client.sample import sample
from bench.paths import DATA_DIR, REPO, results_dir
from testkit.first_run import first_job

TARGET_S = 10.0
FRESH_HEALTHZ_TARGET_S = 90.0
FRESH_MODEL_TARGET_S = 240.0
A9A_ROWS = 32_561
WARM_TITLE = "## Warm start (kernels in the cache)"
FRESH_TITLE = "## First start of a fresh clone (empty kernel cache)"


def dataset() -> tuple[bytes, str]:
    a9a = DATA_DIR / "a9a.xz"
    if a9a.exists():
        return a9a.read_bytes(), "a9a (../shared/data/a9a.xz, 32,561 rows)"
    return (sample("binary", A9A_ROWS).encode(),
            f"`hinge sample --rows {A9A_ROWS}` (a9a-like, {A9A_ROWS:,} rows)")


def one_run(run: dict[str, Any]) -> dict[str, Any]:
    job = run["job"]
    if job["status"] != "succeeded":
        raise RuntimeError(f"the first job ended {job['status']}: {job.get('error')}")
    workers = run["status_at_end"]["workers"]
    return {"to_healthz": run["to_healthz"], "upload": run["upload"],
            "to_model": run["to_model"], "train": job["result"]["train_seconds"],
            "solver": (job["result"].get("path") or [{}])[0].get("solver", "?"),
            "warming_s": max((w["warming_s"] for w in workers), default=float("nan")),
            "waiting_for": run["waiting_for"]}


def main(quick: bool = False) -> list[dict[str, Any]]:
    content, data_name = dataset()
    runs = []
    for _ in range(1 if quick else 3):
        with tempfile.TemporaryDirectory(prefix="hinge-first-run-") as work:
            runs.append(one_run(first_job(content, Path(work))))
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
    lines = [
        WARM_TITLE, "",
        f"Run {_when_where()}; `python -m bench.first_run_bench`. Each run: a new "
        f"HINGE_HOME, `python -m app.run`, {data_name} uploaded as soon as /healthz "
        "answers, one job with no solver named.", "",
        "| run | start -> /healthz (s) | upload (s) | /healthz -> job succeeded (s) "
        "| train (s) | solver | worker warm-up (s) |",
        "|---:|---:|---:|---:|---:|---|---:|",
    ]
    for k, r in enumerate(runs, 1):
        lines.append(f"| {k} | {r['to_healthz']:.1f} | {r['upload']:.1f} | "
                     f"{r['to_model']:.1f} | {r['train']:.2f} | {r['solver']} | "
                     f"{r['warming_s']:.1f} |")
    lines += ["", "| metric | Hinge | target | met |", "|---|---:|---|---|"]
    for r in rows:
        lines.append(f"| {r['metric']} | {r['hinge']:.1f} | {r['target']} | "
                     f"{'yes' if r['met'] else 'NO'} |")
    write_section(WARM_TITLE, lines)
    return rows


def fresh_clone() -> dict[str, Any]:
    """`make run` in a new clone of HEAD; returns the run's figures (and writes them)."""
    content, data_name = dataset()
    load_before = os.getloadavg()
    cpu_before = _children_cpu()
    with tempfile.TemporaryDirectory(prefix="hinge-fresh-clone-") as folder:
        work = Path(folder)
        clone = work / "clone"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, check=True,
                                capture_output=True, text=True).stdout.strip()
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "NUMBA_CACHE_DIR", "HINGE_HOME")}
        run = first_job(content, work, command=["make", "run"], cwd=clone, env=env,
                        healthz_timeout=1800, job_timeout=3600, request_timeout=1800)
        result = one_run(run)
        log = run["log"]
    result.update(commit=commit, load_before=load_before, load_after=os.getloadavg(),
                  data=data_name, to_first_model=result["to_healthz"] + result["to_model"],
                  cpu_s=_children_cpu() - cpu_before,
                  helper_lines=re.findall(r"kernel groups .* warm in [0-9.]+ s", log),
                  ready_line=(re.findall(r"solver kernels ready in [0-9.]+ s.*", log)
                              or ["?"])[0])
    print(f"fresh clone: {result}", flush=True)
    lines = [
        FRESH_TITLE, "",
        f"Run {_when_where()}: `git clone` of commit {commit} into a temporary folder, "
        "`make run` there (a new virtualenv: `pip install -e .`, runtime dependencies only; "
        "Numba's cache empty, the clone's own `__pycache__`; a new home), then "
        f"{data_name} uploaded as soon as /healthz answered, one job with no solver "
        "named (`python -m bench.first_run_bench --fresh-clone`). pip read its packages "
        "from this machine's local package cache and registry mirror, not over the "
        "internet: a download adds to the install time. Load average (1 min) "
        f"{load_before[0]:.1f} before, {result['load_after'][0]:.1f} after"
        + (": other work shared the 2 cores." if max(load_before[0], result["load_after"][0])
           > 2.5 else " (the run's own processes; nothing else ran)."), "",
        "| measure | seconds | target | met |", "|---|---:|---|---|",
        f"| `make run` -> /healthz (install, migration, API start) | "
        f"{result['to_healthz']:.1f} | < {FRESH_HEALTHZ_TARGET_S:g} s | "
        f"{'yes' if result['to_healthz'] < FRESH_HEALTHZ_TARGET_S else 'NO'} |",
        f"| /healthz -> first model (the job waits for the warming worker) | "
        f"{result['to_model']:.1f} | | |",
        f"| `make run` -> first model | {result['to_first_model']:.1f} | "
        f"< {FRESH_MODEL_TARGET_S:g} s | "
        f"{'yes' if result['to_first_model'] < FRESH_MODEL_TARGET_S else 'NO'} |",
        f"| worker warm-up (compiling the kernels of auto and smo, in 2 processes) | "
        f"{result['warming_s']:.1f} | | |",
        f"| training itself ({result['solver']}) | {result['train']:.2f} | | |",
        "",
        f"The job said it waited for: {result['waiting_for']}. Worker log: "
        f"{result['ready_line']}; helpers: {result['helper_lines'] or 'none'}. CPU of "
        f"every process of the run, summed: {result['cpu_s']:.0f} s.",
    ]
    write_section(FRESH_TITLE, lines)
    return result


def _children_cpu() -> float:
    times = os.times()
    return times.children_user + times.children_system


def _when_where() -> str:
    return (f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC on {platform.node()} "
            f"({os.cpu_count()} cores, Python {platform.python_version()})")


def write_section(title: str, lines: list[str]) -> None:
    """Replace the section `title` of first_run.md (or add it), keeping the other one."""
    out = results_dir() / "first_run.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    sections: dict[str, str] = {}
    if out.exists():
        for part in re.split(r"(?m)^(?=## )", out.read_text()):
            if part.startswith("## "):
                sections[part.splitlines()[0]] = part.rstrip() + "\n"
    sections[title] = "\n".join(lines) + "\n"
    ordered = [sections[t] for t in (FRESH_TITLE, WARM_TITLE) if t in sections]
    out.write_text("# The first run\n\n" + "\n".join(ordered))
    print(f"wrote {out}", flush=True)


def _cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--fresh-clone", action="store_true",
                        help="`make run` in a new clone with an empty kernel cache")
    args = parser.parse_args()
    if args.fresh_clone:
        fresh_clone()
    else:
        main(quick=args.quick)


if __name__ == "__main__":
    _cli()
