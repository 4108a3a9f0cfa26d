"""Run the benchmark suite and write the summary, bench/results/README.md.

    python -m bench.run [--quick] [--only NAME ...]     (make bench / make bench-quick)

Experiments run in a fixed order: parser, parse, dcd, acf, ocas_alm, smo, kernel_peers,
formulations, liblinear_formulations, certified, linear_tasks, auto, service, predict,
first_run, search, batch_predict, busy_cores, shared_memory, large_uploads. Each is the
module bench/<name>_bench.py exposing
`main(quick: bool = False) -> list[dict]`, which writes its own table
bench/results/<name>.md (bench/results/quick/ with --quick: see bench/paths.py) and
returns summary rows

    {"experiment", "metric", "hinge", "reference", "ratio", "target", "met"}

A module that does not exist yet, or has no `main`, is skipped with a note. Each module
runs in a fresh interpreter (`python -m bench.run --child NAME`): one module's threads,
environment variables, memory or a hard crash cannot distort or stop the next one. A
module that fails is reported in the README and the others still run; the exit status is
non-zero if any module failed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from bench.paths import QUICK_RESULTS, REPO, results_dir

MULTICORE_VENV = REPO / "bench" / ".venv-multicore"
EXPERIMENTS = ("parser", "parse", "dcd", "acf", "ocas_alm", "smo", "kernel_peers", "formulations",
               "liblinear_formulations", "certified", "linear_tasks",
               "auto", "service", "predict", "first_run",
               "search", "batch_predict", "busy_cores", "shared_memory", "large_uploads",
               "serial_share")
ROW_KEYS = ("experiment", "metric", "hinge", "reference", "ratio", "target", "met")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS", "NUMBA_THREADING_LAYER", "HINGE_SOLVER_THREADS")
VERSIONS = ("numpy", "scipy", "numba", "liblinear-official", "libsvm-official", "scikit-learn",
            "matplotlib", "fastapi", "celery", "sqlalchemy")
NO_TARGET = ("", "-", "—", "none")


def module_name(experiment: str) -> str:
    return f"bench.{experiment}_bench"


# --------------------------------------------------------------------------------------
# The child: one experiment in a fresh interpreter


def thread_facts() -> dict[str, Any]:
    """Thread counts as this process sees them (after the experiment ran)."""
    facts: dict[str, Any] = {}
    if "numba" in sys.modules:
        import numba

        facts["numba"] = f"{numba.get_num_threads()} of {numba.config.NUMBA_NUM_THREADS}"
    try:
        from threadpoolctl import threadpool_info

        pools = threadpool_info()
        seen = [f"{p.get('internal_api')} {p.get('num_threads')}" for p in pools]
        facts["blas/openmp"] = ", ".join(dict.fromkeys(seen)) or "none loaded"
    except Exception:  # threadpoolctl absent: not essential
        pass
    return facts


def run_child(experiment: str, quick: bool, result_path: Path) -> int:
    """Import bench.<experiment>_bench, run main(quick=...), write the outcome as JSON."""
    outcome: dict[str, Any] = {"status": "ok", "rows": [], "note": ""}
    started = time.perf_counter()
    try:
        module = importlib.import_module(module_name(experiment))
        main = getattr(module, "main", None)
        if not callable(main):
            outcome.update(status="skipped", note=f"{module_name(experiment)} has no main()")
        else:
            rows = main(quick=quick)
            good, problems = check_rows(experiment, rows)
            outcome["rows"] = good
            if problems:
                outcome.update(status="failed", note="; ".join(problems))
    except BaseException as exc:  # report everything, including SystemExit from argparse
        outcome.update(status="failed", note=f"{type(exc).__name__}: {exc}"[:500],
                       traceback=traceback.format_exc()[-6000:])
    outcome["seconds"] = time.perf_counter() - started
    outcome["threads"] = thread_facts()
    result_path.write_text(json.dumps(outcome, default=_plain))
    return 0


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):  # NumPy scalars
        return value.item()
    return str(value)


def check_rows(experiment: str, rows: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows with the agreed shape, and what was wrong with the others."""
    if not isinstance(rows, list):
        return [], [f"main() returned {type(rows).__name__}, not a list of rows"]
    good: list[dict[str, Any]] = []
    problems: list[str] = []
    for index, row in enumerate(rows):
        missing = [key for key in ROW_KEYS if not isinstance(row, dict) or key not in row]
        if missing:
            problems.append(f"row {index} lacks {', '.join(missing)}")
            continue
        clean = dict(row)
        for key in ("hinge", "reference", "ratio"):
            try:
                clean[key] = float(row[key]) if row[key] is not None else math.nan
            except (TypeError, ValueError):
                clean[key] = math.nan
                problems.append(f"row {index}: {key} {row[key]!r} is not a number")
        clean["met"] = bool(row["met"]) if row["met"] is not None else None
        clean["target"] = str(row["target"] if row["target"] is not None else "")
        clean["experiment"] = str(row["experiment"] or experiment)
        clean["metric"] = str(row["metric"])
        good.append(clean)
    return good, problems


# --------------------------------------------------------------------------------------
# The parent: run each experiment, then write the summary


def run_experiment(experiment: str, quick: bool, timeout: float | None) -> dict[str, Any]:
    name = module_name(experiment)
    if importlib.util.find_spec(name) is None:
        path = f"bench/{experiment}_bench.py"
        print(f"== {experiment}: skipped ({path} does not exist yet)", flush=True)
        return {"status": "skipped", "rows": [], "note": f"{path} does not exist yet",
                "seconds": 0.0}
    print(f"== {experiment}: running {name}.main(quick={quick})", flush=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])))
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="hinge-bench-") as tmp:
        result_path = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "bench.run", "--child", experiment,
                   "--result", str(result_path)] + (["--quick"] if quick else [])
        try:
            process = subprocess.run(command, cwd=REPO, env=env, timeout=timeout)
            code: int | None = process.returncode
        except subprocess.TimeoutExpired:
            code = None
        seconds = time.perf_counter() - started
        if result_path.exists():
            outcome = json.loads(result_path.read_text())
            outcome["seconds"] = seconds
        elif code is None:
            outcome = {"status": "failed", "rows": [], "seconds": seconds,
                       "note": f"timed out after {timeout:.0f} s"}
        else:
            how = f"signal {-code}" if code < 0 else f"exit status {code}"
            outcome = {"status": "failed", "rows": [], "seconds": seconds,
                       "note": f"the process died ({how}) before reporting"}
    print(f"== {experiment}: {outcome['status']} in {seconds:.0f} s, "
          f"{len(outcome['rows'])} rows{': ' + outcome['note'] if outcome['note'] else ''}",
          flush=True)
    return outcome


def version_of(distribution: str, path: list[str] | None = None) -> str:
    try:
        if path is None:
            return importlib.metadata.version(distribution)
        found = next(iter(importlib.metadata.distributions(name=distribution, path=path)), None)
        return found.version if found else "not installed"
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_facts() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = f"{int(line.split()[1]) / 1024**2:.1f} GiB"
                break
    except OSError:
        pass
    system = platform.platform()
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                pretty = line.split("=", 1)[1].strip().strip('"')
                system = f"{pretty} (kernel {platform.release()})"
                break
    except OSError:
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    cores = f"{os.cpu_count()} logical CPUs" + (
        f" ({affinity} usable by this process)" if affinity and affinity != os.cpu_count()
        else "")
    return {"CPU": cpu, "cores": cores, "memory": memory, "OS": system}


def software_facts() -> dict[str, str]:
    facts = {"Python": f"{platform.python_version()} ({sys.executable})"}
    for name in VERSIONS:
        facts[name] = version_of(name)
    site = sorted(MULTICORE_VENV.glob("lib/python*/site-packages"))
    facts["liblinear-multicore (bench/.venv-multicore)"] = (
        version_of("liblinear-multicore", [str(site[0])]) if site else "not installed yet")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        commit = ""
    facts["git commit"] = commit or "unknown"
    return facts


def parent_threads() -> dict[str, str]:
    facts = {name: os.environ.get(name, "unset") for name in THREAD_VARIABLES}
    try:
        import numba

        facts["Numba default threads"] = str(numba.config.NUMBA_NUM_THREADS)
    except ImportError:
        pass
    return facts


def fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    value = float(value)
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 1:
        return f"{value:.3g}" if magnitude < 10 else f"{value:.1f}"
    return f"{value:.3g}"


def met_cell(row: dict[str, Any]) -> str:
    if str(row.get("target", "")).strip().lower() in NO_TARGET or row.get("met") is None:
        return "—"
    return "yes" if row["met"] else "**no**"


def cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


CpuSnapshot = tuple[float, float, float, float]
BUSY_OTHER_CORES = 0.2  # other processes' average use above which the run is flagged


def cpu_snapshot() -> CpuSnapshot:
    """(wall clock, machine busy CPU s, machine steal CPU s, this process tree's CPU s).

    Busy = user + nice + system + irq + softirq of /proc/stat (all cores); ours = this
    process and its waited-for children (os.times), which covers every experiment.
    """
    ticks = os.sysconf("SC_CLK_TCK")
    try:
        with open("/proc/stat") as stat:
            fields = [int(v) for v in stat.readline().split()[1:9]]
    except (OSError, ValueError):  # not Linux: no machine-wide figure
        fields = [0] * 8
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    own = sum(os.times()[:4])
    return (time.monotonic(), (user + nice + system + irq + softirq) / ticks, steal / ticks,
            own)


def other_cpu(start: CpuSnapshot, end: CpuSnapshot) -> dict[str, float]:
    """Average cores used by processes not of this run, and stolen, between two snapshots."""
    wall = max(end[0] - start[0], 1e-9)
    others = max(0.0, (end[1] - start[1]) - (end[3] - start[3]))
    return {"other_cores": others / wall, "steal_cores": max(0.0, end[2] - start[2]) / wall}


def write_summary(outcomes: dict[str, dict[str, Any]], quick: bool, only: list[str] | None,
                  started: dt.datetime, load_start: tuple[float, float, float],
                  threads: dict[str, str], total_seconds: float,
                  cpu_start: CpuSnapshot | None = None) -> None:
    load_end = os.getloadavg()
    others = other_cpu(cpu_start, cpu_snapshot()) if cpu_start else None
    command = "make bench-quick" if quick else "make bench"
    if only:
        command = f"python -m bench.run{' --quick' if quick else ''} --only {' '.join(only)}"
    lines = [
        "# Benchmark summary",
        "",
        f"Regenerated by `{command}` (`bench/run.py`); every table it summarises is in "
        "this folder. "
        + ("**Quick mode**: fewer repetitions and smaller data, a functional run; the "
           "figures of record come from `make bench` on a quiet machine. " if quick else "")
        + ("**Partial run** (`--only`): the other experiments are not in this file. "
           if only else ""),
        "",
        "Every comparison runs Hinge and the reference engine in the same run, alternated "
        "repetition by repetition; figures are medians; ratio = Hinge / reference (for a "
        "time, lower is better; for a throughput, higher is better), shown beside its "
        "target. Solver times exclude parsing and Numba compilation; the one-off compile "
        "time and a worker's cold start are reported on their own rows (no reference, "
        "no target: —).",
        "",
        "## Machine and software",
        "",
        f"- date: {started.isoformat(timespec='seconds')}, total {total_seconds:.0f} s",
    ]
    lines += [f"- {key}: {value}" for key, value in machine_facts().items()]
    lines.append(f"- load average (1/5/15 min) at the start {load_start[0]:.2f}/"
                 f"{load_start[1]:.2f}/{load_start[2]:.2f}, at the end {load_end[0]:.2f}/"
                 f"{load_end[1]:.2f}/{load_end[2]:.2f} (this run's own processes count in it)")
    if others is not None:
        busy = others["other_cores"] > BUSY_OTHER_CORES
        lines.append(
            f"- CPU used by other processes during the run: {others['other_cores']:.2f} cores on "
            f"average (the machine's busy time minus this run's processes), CPU taken by the "
            f"hypervisor (steal): {others['steal_cores']:.2f} cores"
            + (" — **the machine was busy**: absolute times are inflated, ratios less so, "
               "thread speed-ups most" if busy else " — a quiet machine"))
    lines += [f"- {key}: {value}" for key, value in software_facts().items()]
    lines.append("- thread settings given to every experiment: " + ", ".join(
        f"{key}={value}" for key, value in threads.items()))
    lines += [
        "",
        "## Experiments",
        "",
        "| experiment | status | seconds | rows | threads seen at its end | note |",
        "|---|---|---:|---:|---|---|",
    ]
    for experiment, outcome in outcomes.items():
        seen = "; ".join(f"{k} {v}" for k, v in (outcome.get("threads") or {}).items()) or "—"
        # its tables: <experiment>.md, or one per part of the name (ocas_alm: ocas.md, alm.md)
        tables = [name for name in (experiment, *experiment.split("_"))
                  if (results_dir() / f"{name}.md").exists()]
        label = (experiment if not tables else
                 " ".join(f"[{name}]({name}.md)" for name in dict.fromkeys(tables)))
        lines.append(f"| {label} | {outcome['status']} | {outcome.get('seconds', 0):.0f} | "
                     f"{len(outcome['rows'])} | {cell(seen)} | {cell(outcome.get('note', ''))} |")
    lines += [
        "",
        "## Hinge vs reference",
        "",
        "| experiment | metric | Hinge | reference | ratio | target | met |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for outcome in outcomes.values():
        for row in outcome["rows"]:
            ratio = row["ratio"]
            lines.append(
                f"| {cell(row['experiment'])} | {cell(row['metric'])} | {fmt(row['hinge'])} | "
                f"{fmt(row['reference'])} | "
                f"{'—' if not math.isfinite(ratio) else f'{ratio:.2f}'} | "
                f"{cell(row['target'] or '—')} | {met_cell(row)} |")
    failures = {name: o for name, o in outcomes.items() if o["status"] == "failed"}
    if failures:
        lines += ["", "## Failures", ""]
        for name, outcome in failures.items():
            lines += [f"### {name}", "", cell(outcome.get("note", "")), ""]
            if outcome.get("traceback"):
                lines += ["```", outcome["traceback"].rstrip(), "```", ""]
    summary = results_dir() / "README.md"
    summary.parent.mkdir(parents=True, exist_ok=True)
    summary.write_text("\n".join(lines) + "\n")
    shown = summary.relative_to(REPO) if summary.is_relative_to(REPO) else summary
    print(f"wrote {shown}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run Hinge's benchmarks and write "
                                                 "bench/results/README.md.")
    parser.add_argument("--quick", action="store_true",
                        help="fewer repetitions and smaller data (a functional run)")
    parser.add_argument("--smoke", action="store_true",
                        help="--quick on small stand-ins of the shared sets "
                             "(testkit/standins.py), tables to a temporary folder: checks "
                             "that every experiment runs to the end (the test suite's run)")
    parser.add_argument("--smoke-data", type=Path, default=None,
                        help="with --smoke: a folder of stand-ins already written")
    parser.add_argument("--only", nargs="+", choices=EXPERIMENTS, metavar="NAME",
                        help=f"run only these experiments ({', '.join(EXPERIMENTS)})")
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds allowed per experiment (default: 900 with --quick, "
                             "none otherwise)")
    parser.add_argument("--child", choices=EXPERIMENTS, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        return run_child(args.child, args.quick, args.result)

    if args.smoke:
        return smoke(args.only, args.timeout, args.smoke_data)
    if args.quick and not os.environ.get("HINGE_BENCH_RESULTS"):
        # a functional run: never overwrite the figures of record in bench/results/
        os.environ["HINGE_BENCH_RESULTS"] = str(QUICK_RESULTS)
    timeout = args.timeout if args.timeout is not None else (900.0 if args.quick else None)
    if timeout is not None and timeout <= 0:
        timeout = None
    started = dt.datetime.now().astimezone()
    load_start = os.getloadavg()
    cpu_start = cpu_snapshot()
    clock = time.perf_counter()
    threads = parent_threads()
    selected = [name for name in EXPERIMENTS if not args.only or name in args.only]
    outcomes = {name: run_experiment(name, args.quick, timeout) for name in selected}
    write_summary(outcomes, args.quick, args.only, started, load_start, threads,
                  time.perf_counter() - clock, cpu_start)
    failed = [name for name, outcome in outcomes.items() if outcome["status"] == "failed"]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def smoke(only: list[str] | None, timeout: float | None, data: Path | None = None) -> int:
    """Every experiment (or `only`) with --quick on stand-in data (written to `data` unless
    it holds them already), in a temporary folder that also takes the tables: no figure of
    it is kept, and no ../shared is needed."""
    from testkit.standins import write_standins

    with tempfile.TemporaryDirectory(prefix="hinge-bench-smoke-") as tmp:
        if data is None or not (data / "MANIFEST.md").exists():
            data = write_standins(data or Path(tmp) / "data")
        os.environ["HINGE_SHARED_DATA"] = str(data)
        os.environ["HINGE_BENCH_RESULTS"] = str(Path(tmp) / "results")
        os.environ["HINGE_BENCH_SMOKE"] = "1"
        selected = [name for name in EXPERIMENTS if not only or name in only]
        outcomes = {name: run_experiment(name, True, timeout or 600.0) for name in selected}
    failed = {name: outcome.get("note", "") for name, outcome in outcomes.items()
              if outcome["status"] != "ok"}
    for name, note in failed.items():
        print(f"{name}: {outcomes[name]['status']}: {note}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
