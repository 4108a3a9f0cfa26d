"""Distributed fits on Dask (solvers/distributed.py) with 1, 2 and 3 Dask workers, and
Spark MLlib's LinearSVC (pyspark, local[2]) on the same generated data, in one run.

    python -m bench.distributed [--rows 40000 --features 20000 --nnz 30]

Writes bench/results/distributed.md. Rows per solver and worker count: wall time of the
fit (blocks loaded included, the cluster's start not), rounds, bytes per round (numpy
payloads both ways), the share of the wall time spent in communication (a round's wall
time less its slowest task, summed), the objective reached. The comparison with Spark is
on the L1-loss (hinge) SVM without intercept: LinearSVC(regParam = 1 / (C n),
fitIntercept=False, standardization=False) minimises (1/n) sum hinge + regParam/2 ||w||^2,
our P(w) / (C n); Hinge's time to Spark's objective is the time of the first CoCoA+
round whose P(w) is at or below P(w_spark) (both computed here, in our units).
"""

from __future__ import annotations

import argparse
import platform
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=40_000)
    parser.add_argument("--features", type=int, default=20_000)
    parser.add_argument("--nnz", type=float, default=30.0)
    parser.add_argument("--shard-rows", type=int, default=5_000)
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--workers", default="1,2,3")
    parser.add_argument("--no-spark", action="store_true")
    args = parser.parse_args()
    X, y = text_like(args.rows, args.features, seed=45, nnz_per_row=args.nnz)
    X.sort_indices()
    source = MemoryShards(split_rows(X, y, None, args.shard_rows), args.features)
    counts = [int(k) for k in args.workers.split(",")]
    spark = None if args.no_spark else run_spark(X, y, args.C)
    target = spark["primal"] if spark else None
    rows = []
    with tempfile.TemporaryDirectory() as logs:
        # the hinge without and with a regularised bias (bias "augment", B = 1)
        for solver, loss, bias in (("dcd", "l1", "none"), ("dcd", "l1", "augment"),
                                   ("tron", "l2", "none")):
            for k in counts:
                rows.append(run_dask(source, k, Path(logs), solver, loss, args.C,
                                     target if (solver, bias) == ("dcd", "none") else None,
                                     bias))
    write(args, X, rows, spark)


def write(args: argparse.Namespace, X: Any, rows: list[dict[str, Any]],
          spark: dict[str, Any] | None) -> None:
    lines = [
        "# Distributed fits on Dask",
        "",
        f"Generated by `python -m bench.distributed --rows {args.rows} --features "
        f"{args.features} --nnz {args.nnz:g}` on {platform.node()} "
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
    RESULTS.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
