"""Distributed fits on Dask (solvers/distributed.py) with 1, 2 and 3 Dask workers, and
Spark MLlib's LinearSVC (pyspark, local[2]) on the same generated data, in one run.

    python -m bench.distributed [--rows 40000 --features 20000 --nnz 30]
        [--text-solvers dcd,tron,ocas] [--out PATH]

Writes bench/results/distributed.md (or --out). Rows per solver and worker count: wall time of the
fit (blocks loaded included, the cluster's start not), rounds, bytes per round (numpy
payloads both ways), the share of the wall time spent in communication (a round's wall
time less its slowest task, summed), the objective reached. The comparison with Spark is
on the L1-loss (hinge) SVM without intercept: LinearSVC(regParam = 1 / (C n),
fitIntercept=False, standardization=False) minimises (1/n) sum hinge + regParam/2 ||w||^2,
our P(w) / (C n); Hinge's time to Spark's objective is the time of the first CoCoA+
round (or OCAS iteration) whose P(w) is at or below P(w_spark) (both computed here, in
our units).
"""

from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from solvers.distributed import fit_on_dask
from solvers.shards import MemoryShards, split_rows
from testkit.dask_cluster import dask_cluster
from testkit.datagen import text_like

RESULTS = Path(__file__).parent / "results" / "distributed.md"
# the dual CD paper's yahoo-korea (460,554 x 3,052,939); 310 words drawn a row is
# bench/out_of_core.py's option for it (about 99M non-zeros once the generator merges
# repeated words: 1.2 GB of float64 values and int32 indices)
YAHOO = (460_554, 3_052_939, 310.0)
YAHOO_SEED = 45


def yahoo_set(scratch: Path, scale: float = 1.0) -> tuple[Any, np.ndarray]:
    """The seeded yahoo-korea-shaped text-like set (rows and features times `scale`: a
    smoke run), generated once into `scratch` (an .npz outside the repository) and read
    back from there afterwards."""
    import scipy.sparse as sp

    rows, features, per_row = YAHOO
    rows, features = int(rows * scale), int(features * scale)
    path = scratch / f"yahoo-{rows}x{features}-{per_row:g}-s{YAHOO_SEED}.npz"
    if path.exists():
        with np.load(path) as arrays:
            X = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]),
                              shape=(rows, features))
            return X, arrays["y"]
    X, y = text_like(rows, features, seed=YAHOO_SEED, nnz_per_row=per_row)
    X.sort_indices()
    scratch.mkdir(parents=True, exist_ok=True)
    np.savez(path, data=X.data, indices=X.indices.astype(np.int32),
             indptr=X.indptr.astype(np.int64), y=y)
    return X, y


def hinge_primal(X: Any, y: np.ndarray, w: np.ndarray, C: float) -> float:
    margins = y * (X @ w)
    return float(0.5 * w @ w + C * np.maximum(0.0, 1.0 - margins).sum())


def run_dask(source: MemoryShards, workers: int, log_dir: Path, solver: str, loss: str,
             C: float, target: float | None = None, bias: str = "none") -> dict[str, Any]:
    from distributed import Client

    with dask_cluster(log_dir, workers=workers) as cluster, \
            Client(cluster.address, timeout=60, set_as_default=False) as client:
        # warm the workers' kernels (Numba's cache) on a small fit first
        small = MemoryShards(split_rows(*text_like(600, 200, seed=1), None, 200), 200)
        fit_on_dask(client, small, solver=solver, loss=loss, bias="none", max_iter=3)
        reached: list[float] = []
        started = time.perf_counter()

        def progress(event: dict[str, Any]) -> bool:
            primal = event.get("primal")
            if target is not None and not reached and primal is not None \
                    and primal <= target:
                reached.append(time.perf_counter() - started)
            return False

        result = fit_on_dask(client, source, solver=solver, loss=loss, C=C, bias=bias,
                             tol=1e-3, max_iter=400, progress=progress,
                             progress_interval=0.0)
        wall = time.perf_counter() - started
    plan = result.data_plan or {}
    label = f"{solver} ({loss})" + (", bias" if bias != "none" else "")
    return {"solver": label, "workers": workers, "seconds": wall,
            "rounds": plan.get("rounds"), "bytes_per_round": plan.get("bytes_per_round"),
            "communication": plan.get("communication_s", 0.0) / max(wall, 1e-9),
            "primal": result.primal_objective, "converged": result.converged,
            "relative_gap": result.relative_gap,
            "to_target": reached[0] if reached else None}


def run_spark(X: Any, y: np.ndarray, C: float) -> dict[str, Any]:
    from pyspark.ml.classification import LinearSVC
    from pyspark.ml.linalg import SparseVector
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("hinge-bench")
             .config("spark.driver.memory", "4g").config("spark.ui.enabled", "false")
             .getOrCreate())
    try:
        n, d = X.shape
        rows = [(float(y[i] > 0), SparseVector(d, X.indices[X.indptr[i]:X.indptr[i + 1]],
                                               X.data[X.indptr[i]:X.indptr[i + 1]]))
                for i in range(n)]
        frame = spark.createDataFrame(rows, ["label", "features"]).cache()
        frame.count()
        model_spec = LinearSVC(regParam=1.0 / (C * n), fitIntercept=False,
                               standardization=False)
        started = time.perf_counter()
        model = model_spec.fit(frame)
        seconds = time.perf_counter() - started
        w = np.asarray(model.coefficients.toArray())
        summary = model.summary() if callable(model.summary) else model.summary
        iterations = summary.totalIterations
    finally:
        spark.stop()
    return {"seconds": seconds, "primal": hinge_primal(X, y, w, C),
            "iterations": iterations}


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a live process (all its threads), in seconds."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_peak_rss(pid: int) -> int:
    """VmHWM of a live process (its peak resident set), in bytes (0 when gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def load_avg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def store_dataset(settings: Any, X: Any, y: np.ndarray, shard_bytes: int) -> str:
    """The arrays stored as the service stores a streamed svmlight upload: row shards of
    about `shard_bytes` written by app.infra.storage.ShardWriter into the service's blob
    store, and the dataset's row (app.domain.services.datasets.create_dataset) of tenant
    "default" in its database; the upload's parsing is left out (bench/large_uploads_bench
    measures it). Returns the dataset id."""
    from app.domain.label_tally import LabelTally
    from app.domain.orm import new_id
    from app.domain.services import tenants
    from app.domain.services.datasets import create_dataset
    from app.infra.db import session_scope
    from app.infra.storage import ShardWriter, blob_store
    from solvers.svmlight import ParsedDataset

    writer = ShardWriter(blob_store(settings), new_id(), settings.disk_reserve_bytes,
                         value_dtype="float64")
    labels = LabelTally("auto", settings.max_classes, settings.max_memory_dataset_bytes)
    per_row = (X.data.nbytes + X.indices.nbytes) / max(X.shape[0], 1) + 16
    step = max(1, int(shard_bytes // per_row))
    for start in range(0, X.shape[0], step):
        stop = min(start + step, X.shape[0])
        lo, hi = int(X.indptr[start]), int(X.indptr[stop])
        arrays = {"data": np.ascontiguousarray(X.data[lo:hi]),
                  "indices": np.ascontiguousarray(X.indices[lo:hi], dtype=np.int32),
                  "indptr": (X.indptr[start:stop + 1] - lo).astype(np.int64),
                  "y": np.ascontiguousarray(y[start:stop], dtype=np.float64)}
        labels.add(arrays["y"])
        writer.write(arrays)
    empty = np.zeros(0)
    parsed = ParsedDataset(data=empty, indices=np.zeros(0, np.int32),
                           indptr=np.zeros(1, np.int64), y=empty, n_features=X.shape[1],
                           sha256=f"generated-yahoo-{new_id()}", bytes_read=0,
                           shards=len(writer.written), shard_rows=int(X.shape[0]),
                           shard_nnz=int(X.nnz))
    with session_scope(settings.database_url) as session:
        tenant = tenants.tenant_by_name(session, "default")
        assert tenant is not None, "running_service makes tenant default's key first"
        dataset = create_dataset(session, settings, tenant.id, parsed, "yahoo-korea-shaped",
                                 "auto", None, writer, labels, "float64")
        writer.owned = True
        dataset_id = str(dataset.id)
    return dataset_id


def run_yahoo(args: argparse.Namespace) -> None:
    """The issue's done-when run: the yahoo-korea-shaped set, a scheduler and three Dask
    workers (each `--memory-limit` and in a memory cgroup of `--cgroup-mb`), tron (L2)
    and the distributed L1-loss methods (dcd: CoCoA+; ocas) as service jobs on engine "dask"
    with the Celery worker's budget (HINGE_WORKER_MEMORY_BYTES) at `--budget-mb`, then
    the same fits in memory in this process (solvers.fit, no Dask)."""
    import json

    from solvers import fit
    from testkit import cgroups
    from testkit.dask_cluster import start_scheduler
    from testkit.netns_cluster import NO_SPILL_NO_PAUSE
    from testkit.service import embedded_settings, running_service, wait_for_job

    report: dict[str, Any] = {"load_start": load_avg(),
                              "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    t0 = time.perf_counter()
    X, y = yahoo_set(args.scratch, args.scale)
    report["set"] = {"rows": X.shape[0], "features": X.shape[1], "nnz": int(X.nnz),
                     "array_bytes": int(X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
                                        + y.nbytes),
                     "seconds": time.perf_counter() - t0}
    print(json.dumps(report), flush=True)
    solvers = [s for s in args.solvers.split(",") if s]
    losses = {"tron": "l2", "dcd": "l1", "ocas": "l1"}
    jobs: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="hinge-yahoo-", dir=args.scratch))
    groups: list[Any] = []
    cluster = start_scheduler(work)
    try:
        for _ in range(args.workers_n):
            worker = cluster.start_worker(memory_limit=args.memory_limit, wait=False,
                                          env=NO_SPILL_NO_PAUSE if args.no_spill else None)
            group = cgroups.create("hinge-yahoo", args.cgroup_mb << 20)
            group.add(worker.process.pid)
            groups.append(group)
        for worker in cluster.workers:
            worker.wait_for_log("Registered to:", timeout=180)
        from distributed import Client

        with Client(cluster.address, timeout=60, set_as_default=False) as client:
            small = MemoryShards(split_rows(*text_like(600, 200, seed=1), None, 200), 200)
            for solver in solvers:  # compile (or load) the workers' kernels first
                fit_on_dask(client, small, solver=solver, loss=losses[solver],
                            bias="none", max_iter=3)
        settings = embedded_settings(work / "home", dask_scheduler=cluster.address,
                                     worker_memory_bytes=args.budget_mb << 20,
                                     job_max_seconds=float(args.job_seconds))
        with running_service(settings, work) as (service, celery):
            started = time.perf_counter()
            dataset_id = store_dataset(settings, X, y, settings.shard_bytes)
            report["store_seconds"] = time.perf_counter() - started
            shown = service.get(f"/v1/datasets/{dataset_id}").json()
            report["dataset"] = {k: shown.get(k) for k in
                                 ("id", "rows", "features", "nnz", "stored_bytes", "task")}
            report["dataset"]["shards"] = shown.get("shards")
            print(json.dumps(report, default=str), flush=True)
            for solver in solvers:
                for group in groups:  # each job's own peak
                    (group.path / "memory.max_usage_in_bytes").write_text("0\n")
                pids = [w.process.pid for w in cluster.workers]
                celery_pids = [c.process.pid for c in celery]
                from testkit.service import child_pids
                celery_pids += [p for c in celery_pids for p in child_pids(c)]
                cpu_before = {p: proc_cpu_seconds(p) for p in pids + celery_pids}
                load_before = load_avg()
                started = time.perf_counter()
                answer = service.post("/v1/jobs", json={
                    "dataset_id": dataset_id, "solver": solver, "engine": "dask",
                    "params": {"C": args.C, **loss_param(solver, losses)}})
                assert answer.status_code in (200, 201, 202), answer.text
                job = wait_for_job(service.get, answer.json()["id"],
                                   timeout=args.job_seconds + 60)
                wall = time.perf_counter() - started
                celery_pids += [p for c in celery_pids for p in child_pids(c)
                                if p not in celery_pids]
                entry = {"solver": solver, "loss": losses[solver],
                         "status": job["status"], "wall_s": wall,
                         "load": f"{load_before} -> {load_avg()}",
                         "error": job.get("error"),
                         "dask_cpu_s": sum(proc_cpu_seconds(p) - cpu_before.get(p, 0.0)
                                           for p in pids),
                         "celery_cpu_s": sum(proc_cpu_seconds(p) - cpu_before.get(p, 0.0)
                                             for p in celery_pids),
                         "celery_peak_rss": max(proc_peak_rss(p) for p in celery_pids),
                         "celery_peaks": {str(p): proc_peak_rss(p) for p in celery_pids},
                         "dask_peak_rss": [proc_peak_rss(p) for p in pids],
                         "cgroups": [{"max_usage": g.peak_bytes(), "failcnt": g.failures(),
                                      "oom_kills": g.oom_kills(), "usage": g.usage_bytes()}
                                     for g in groups],
                         "workers_alive": [w.process.poll() is None
                                           for w in cluster.workers]}
                result = job.get("result") or {}
                for key in ("converged", "exit_reason", "relative_gap", "primal_objective",
                            "dual_objective", "iterations", "train_seconds",
                            "train_accuracy", "data_plan", "warnings"):
                    entry[key] = result.get(key)
                jobs.append(entry)
                print(json.dumps(entry, default=str), flush=True)
    finally:
        cluster.stop()
        for group in groups:
            try:
                cgroups.remove(group)
            except OSError as exc:
                print(f"cgroup {group.path} not removed: {exc}", flush=True)
        # the service's home (the stored shards, 1.2 GB) and the logs; the generated
        # .npz in --scratch stays for the next run
        shutil.rmtree(work, ignore_errors=True)
    memory: list[dict[str, Any]] = []
    if not args.no_in_memory:
        for solver in solvers:
            load_before = load_avg()
            cpu, started = time.process_time(), time.perf_counter()
            single = fit(X, y, solver=solver, C=args.C, **loss_param(solver, losses))
            entry = {"solver": solver, "wall_s": time.perf_counter() - started,
                     "cpu_s": time.process_time() - cpu,
                     "load": f"{load_before} -> {load_avg()}",
                     "primal": single.primal_objective, "converged": single.converged,
                     "relative_gap": single.relative_gap, "iterations": single.iterations,
                     "exit_reason": single.exit_reason}
            memory.append(entry)
            print(json.dumps(entry, default=str), flush=True)
    report.update(jobs=jobs, in_memory=memory, load_end=load_avg(),
                  peak_rss_bench=proc_peak_rss(__import__("os").getpid()))
    out = args.scratch / "yahoo-report.json"
    out.write_text(json.dumps(report, default=str, indent=1))
    print(f"report: {out}", flush=True)
    print(yahoo_section(report, args), flush=True)


def loss_param(solver: str, losses: dict[str, str]) -> dict[str, str]:
    """The job's loss param: ocas has none (the hinge is its one loss)."""
    return {} if solver == "ocas" else {"loss": losses[solver]}


def yahoo_section(report: dict[str, Any], args: argparse.Namespace) -> str:
    """The done-when run's table (markdown) from run_yahoo's report."""
    data = report["set"]
    memory = {m["solver"]: m for m in report.get("in_memory", [])}
    lines = [
        "## The yahoo-korea shape on three Dask workers in 768 MB cgroups (issue 45's "
        "done-when)", "",
        f"`python -m bench.distributed --shape yahoo --cgroup-mb {args.cgroup_mb} "
        f"--memory-limit {args.memory_limit} --budget-mb {args.budget_mb}` on "
        f"{platform.node()} ({report['started']}; load average {report['load_start']} at "
        f"the start, {report.get('load_end', '?')} at the end: a 2-core machine shared "
        f"with another benchmark). testkit.datagen.text_like({data['rows']:,}, "
        f"{data['features']:,}, seed={YAHOO_SEED}, nnz_per_row={YAHOO[2]:g}): "
        f"{data['nnz']:,} non-zeros, {data['array_bytes'] / 1e9:.2f} GB of arrays "
        "(float64 values, int32 indices), stored as the service stores a streamed "
        f"upload ({report['dataset']['shards']} row shards of about 32 MB). A scheduler "
        f"and {args.workers_n} `dask worker` processes (one thread, --memory-limit "
        f"{args.memory_limit}, Dask's spill and pause thresholds "
        f"{'off' if args.no_spill else 'on'}), each in a cgroup v1 memory cgroup of "
        f"{args.cgroup_mb} MB; one API and one Celery worker with HINGE_WORKER_MEMORY_BYTES"
        f" = {args.budget_mb} MB and HINGE_DASK_SCHEDULER; each job `engine: dask`, "
        "C = 1, the service's defaults otherwise (bias augment, tol 1e-3). The job's "
        "time is from POST to its end; CPU seconds are the Dask workers' and the Celery "
        "worker's (its pool included) over the job. The in-memory row is solvers.fit on "
        "the same arrays in one process, no Dask, after the cluster was stopped.", "",
        "| solver | engine | status | job seconds (fit) | rounds | bytes per round | "
        "communication share | converged | certified relative gap | P(w) | "
        "relative difference to in-memory P | CPU s (Dask / Celery) | cgroup peaks MB "
        "(failcnt, OOM kills) | Celery peak RSS |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|"]
    for job in report.get("jobs", []):
        plan = job.get("data_plan") or {}
        single = memory.get(job["solver"])
        primal = job.get("primal_objective")
        diff = (abs(primal - single["primal"]) / abs(single["primal"])
                if single and primal is not None and single.get("primal") else None)
        peaks = ", ".join(f"{g['max_usage'] / 2**20:.0f} ({g['failcnt']}, {g['oom_kills']})"
                          for g in job["cgroups"])
        fit_s = plan.get("wall_s")
        gap = "—" if job.get("relative_gap") is None else f"{job['relative_gap']:.2g}"
        share = (plan.get("communication_s", 0.0) / fit_s) if fit_s else None
        lines.append(
            f"| {job['solver']} ({job['loss']}) | dask, {plan.get('workers', '?')} "
            f"workers, {plan.get('blocks', '?')} blocks | {job['status']} | "
            f"{job['wall_s']:.0f} "
            f"({'—' if fit_s is None else f'{fit_s:.0f}'}) | {plan.get('rounds', '—')} | "
            f"{plan.get('bytes_per_round', 0):,} | "
            f"{'—' if share is None else f'{share:.0%}'} | {job.get('converged')} | "
            f"{gap} | {'—' if primal is None else f'{primal:.8g}'} | "
            f"{'—' if diff is None else f'{diff:.1e}'} | {job['dask_cpu_s']:.0f} / "
            f"{job['celery_cpu_s']:.0f} | {peaks} | {job['celery_peak_rss'] / 2**20:.0f} MB |")
    for solver, single in memory.items():
        lines.append(
            f"| {solver} ({'l2' if solver == 'tron' else 'l1'}) | in memory, one process "
            f"| {'converged' if single['converged'] else single['exit_reason']} | "
            f"{single['wall_s']:.0f} | {single['iterations']} iterations | — | — | "
            f"{single['converged']} | {single['relative_gap']:.2g} | "
            f"{single['primal']:.8g} | 0 | {single['cpu_s']:.0f} | — | — |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--features", type=int, default=20_000)
    parser.add_argument("--nnz", type=float, default=30.0)
    parser.add_argument("--shard-rows", type=int, default=5_000)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument("--no-spark", action="store_true")
    # the done-when run (issue 45): --shape yahoo [--cgroup-mb 768 --memory-limit 600MB
    # --budget-mb 400]; the default run above is unchanged without it
    parser.add_argument("--shape", choices=("text", "yahoo"), default="text")
    parser.add_argument("--cgroup-mb", type=int, default=768)
    parser.add_argument("--memory-limit", default="600MB")
    parser.add_argument("--budget-mb", type=int, default=400)
    parser.add_argument("--dask-workers", dest="workers_n", type=int, default=3)
    parser.add_argument("--solvers", default="tron,dcd")
    parser.add_argument("--job-seconds", type=int, default=3000)
    parser.add_argument("--spill", dest="no_spill", action="store_false",
                        help="leave Dask's spill/pause thresholds on (default: off, as "
                             "testkit/netns_cluster.py: the cgroup is the hard limit)")
    parser.add_argument("--no-in-memory", action="store_true")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="yahoo's rows and features times this (a smoke run)")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir())
                        / "hinge-bench-distributed")
    parser.add_argument("--text-solvers", default="dcd,tron",
                        help="the text shape's methods: dcd (CoCoA+) and ocas, each "
                             "without and with a bias, tron (L2) without")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.shape == "yahoo":
        run_yahoo(args)
        return
    X, y = text_like(args.rows, args.features, seed=45, nnz_per_row=args.nnz)
    X.sort_indices()
    source = MemoryShards(split_rows(X, y, None, args.shard_rows), args.features)
    counts = [int(k) for k in args.workers.split(",")]
    spark = None if args.no_spark else run_spark(X, y, args.C)
    target = spark["primal"] if spark else None
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        # the hinge without and with a regularised bias (bias "augment", B = 1)
        methods = [s for s in args.text_solvers.split(",") if s]
        for solver, loss, bias in [(s, "l2" if s == "tron" else "l1", b) for s in methods
                                   for b in (("none",) if s == "tron"
                                             else ("none", "augment"))]:
            for k in counts:
                rows.append(run_dask(source, k, Path(logs), solver, loss, args.C,
                                     target if bias == "none" and loss == "l1" else None,
                                     bias))
    write(args, X, rows, spark)


def write(args: argparse.Namespace, X: Any, rows: list[dict[str, Any]],
          spark: dict[str, Any] | None) -> None:
    lines = [
        "# Distributed fits on Dask",
        "",
        f"Generated by `python -m bench.distributed --rows {args.rows} --features "
        f"{args.features} --nnz {args.nnz:g} --workers {args.workers} --text-solvers "
        f"{args.text_solvers}{' --no-spark' if args.no_spark else ''}` on {platform.node()} "
        f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): a text-like set of "
        f"{X.shape[0]:,} x {X.shape[1]:,} with {X.nnz:,} non-zeros "
        f"({args.shard_rows:,}-row shards), C = {args.C:g}, no bias unless the row says "
        "bias (augment, B = 1: a regularised intercept), tol 1e-3. The Dask "
        "scheduler and workers (one thread each) run on this one machine over TCP on "
        "loopback: a 2-core machine shared with other work, so the times are noisy and "
        "more workers do not add cores (they show the rounds' cost, not a speed-up). "
        "A moderate size, not the yahoo-korea-shape done-when run.",
        "",
        "| solver | Dask workers | seconds | rounds | bytes per round | communication "
        "share | P(w) | certified relative gap | seconds to Spark's P |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        to_target = "—" if r["to_target"] is None else f"{r['to_target']:.2f}"
        lines.append(
            f"| {r['solver']} | {r['workers']} | {r['seconds']:.2f} | {r['rounds']} | "
            f"{r['bytes_per_round']:,} | {r['communication']:.0%} | {r['primal']:.6g} | "
            f"{r['relative_gap']:.2g} | {to_target} |")
    if spark is not None:
        lines += ["", "Spark MLlib LinearSVC (pyspark, local[2], regParam = 1/(C n), "
                  "fitIntercept=False, standardization=False, its default maxIter 100 and "
                  "tol 1e-6), same data, the DataFrame cached before timing:", "",
                  "| engine | seconds | iterations | P(w) in Hinge's units |",
                  "|---|---:|---:|---:|",
                  f"| Spark LinearSVC | {spark['seconds']:.2f} | {spark['iterations']} | "
                  f"{spark['primal']:.6g} |"]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
