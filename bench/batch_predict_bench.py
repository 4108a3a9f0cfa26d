"""Batch predictions (POST /v1/predictions): the worker's block path against the ceiling.

    python -m bench.batch_predict_bench [--quick]

On 1,000,000 dense rows (50,000 with --quick, a smoke run: four blocks of the default
HINGE_PREDICT_BLOCK_ROWS; 20,000 in the test suite's smoke run;
10 features, testkit.datagen.dense) and a linear model (dcd, C=1, fitted on the first
20,000 rows): rows per second of the worker's path
(app.domain.services.predictions.predict_blocks into the output .npz, blocks of
HINGE_PREDICT_BLOCK_ROWS) against one in-process `model.predict` of every row (the
ceiling), and the peak of memory each allocates on top of the dataset's arrays
(tracemalloc, which sees NumPy's allocations). Then the same number of rows through a
live service (bench/batch_service.py: API and Celery worker processes, POST
/v1/predictions, the peaks of their resident memory, the output checked against the
in-process and the online predict, the rows posted through the predict route, a worker
SIGKILLed halfway).
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.batch_service import ROUTE_BATCH
from bench.paths import SMOKE, results_dir

FULL_ROWS, QUICK_ROWS = 1_000_000, 50_000


def _timed(work: Any) -> tuple[float, float]:
    """Seconds and peak MiB allocated by work()."""
    tracemalloc.start()
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return seconds, peak


def row(metric: str, hinge: float, reference: float = math.nan) -> dict[str, Any]:
    ratio = hinge / reference if reference and math.isfinite(reference) else math.nan
    return {"experiment": "batch_predict", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(ratio), "target": "—",
            "met": True}


def main(quick: bool = False) -> list[dict[str, Any]]:
    from app.domain.batch_output import OutputWriter
    from app.domain.services.predictions import predict_blocks
    from app.settings import Settings
    from solvers import fit
    from testkit.datagen import dense

    rows = 20_000 if SMOKE else QUICK_ROWS if quick else FULL_ROWS
    X, y = dense(rows, n_features=10, seed=1)
    model = fit(X[:20_000], y[:20_000], solver="dcd", C=1.0).model
    model.predict(X[:1000])  # compiled and warm
    seconds, ceiling_mb = _timed(lambda: model.predict(X))
    ceiling = rows / seconds
    block_rows = Settings().predict_block_rows
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.npz"

        def blocks() -> None:
            with OutputWriter(rows, Path(tmp) / "parts") as writer:
                assert predict_blocks(model, X, ("labels", "decision_values"), block_rows,
                                      writer, lambda _done: True)
                writer.close(out)

        seconds, worker_mb = _timed(blocks)
        worker = rows / seconds
        size_mb = out.stat().st_size / 2**20
    data_mb = (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
    results = [row("worker block path, rows/s vs in-process model.predict", worker, ceiling),
               row("peak MiB allocated vs in-process model.predict", worker_mb, ceiling_mb)]
    from bench.batch_service import run as service_run

    live = service_run(rows)
    results.append(row("live service: POST /v1/predictions rows/s vs in-process "
                       "model.predict", rows / live["batch_seconds"],
                       live["in_process_rows_per_s"]))
    for clients, rate in live["route_rows_per_s"].items():
        results.append(row(f"live service: POST /v1/predictions rows/s vs the predict "
                           f"route ({ROUTE_BATCH} rows a request, {clients} client(s))",
                           rows / live["batch_seconds"], rate))
    lines = ["# Batch predictions: the worker's block path", "",
             f"{rows:,} dense rows, 10 features, linear model (dcd); blocks of "
             f"{block_rows:,} rows; output {size_mb:.1f} MiB (.npz).", "",
             "| metric | hinge | reference | ratio |", "|---|---|---|---|"]
    lines += [f"| {r['metric']} | {r['hinge']:,.1f} | {r['reference']:,.1f} | "
              f"{r['ratio']:.2f} |" for r in results]
    lines += ["", f"The dataset's CSR arrays: {data_mb:,.1f} MiB (held by both in the "
              "in-process rows).", ""]
    lines += service_lines(live)
    path = results_dir() / "batch_predict.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return results


def service_lines(live: dict[str, Any]) -> list[str]:
    mib = 2**20
    lines = [f"## A live service: {live['rows']:,} rows through the API and a worker", "",
             f"One uvicorn API process and one Celery worker (concurrency 1) on the embedded "
             f"default, SQLite; the dataset uploaded as {live['upload_mib']:,.0f} MiB of "
             f"svmlight text ({live['dataset_mib']:,.1f} MiB of CSR arrays, stored mapped). "
             f"POST /v1/predictions to `succeeded`: {live['batch_seconds']:.2f} s "
             f"({live['rows'] / live['batch_seconds']:,.0f} rows/s); the .npz output "
             f"downloaded in {live['download_seconds']:.2f} s.", "",
             "Resident memory from the POST to the end of the download (peak of 50 ms "
             "samples; VmHWM reset through /proc/<pid>/clear_refs just before the POST, so "
             "it starts at the resident size then):", "",
             "| process | before: RSS (anon + file) | peak VmHWM | peak RssAnon | "
             "peak RssFile |", "|---|---|---|---|---|"]
    for name in ("worker", "api"):
        before, peak = live["before"][name], live["peaks"][name]
        lines.append(f"| {name} | {before['VmRSS'] / mib:,.0f} MiB ({before['RssAnon'] / mib:,.0f}"
                     f" + {before['RssFile'] / mib:,.0f}) | {live['vmhwm'][name] / mib:,.0f} MiB"
                     f" | {peak['RssAnon'] / mib:,.0f} MiB | {peak['RssFile'] / mib:,.0f} MiB |")
    rates = ", ".join(f"{rate:,.0f} rows/s with {clients} client(s)"
                      for clients, rate in live["route_rows_per_s"].items())
    recovered = live["recovered"]
    lines += ["", "RssAnon is the process's own memory; RssFile includes the pages of the "
              "mapped dataset (clean, shared with every process of the host, reclaimable; "
              "the worker hands each passed block's pages back).", "",
              f"- Output = in-process `model.predict` of every row: labels equal "
              f"{live['labels_equal']}, largest decision-value difference "
              f"{live['max_value_diff']:.1e}; 1,000 sampled rows through POST "
              f"/v1/models/{{id}}/predict equal: {live['online_sample_equal']}.",
              f"- In-process `model.predict` (the ceiling): "
              f"{live['in_process_rows_per_s']:,.0f} rows/s.",
              f"- The rows posted through the predict route ({ROUTE_BATCH:,} rows a request): "
              f"{rates}.",
              f"- A worker SIGKILLed halfway (fault injected: {live['killed']}): "
              f"{recovered['status']} on attempt {recovered['attempt']}, output equal to "
              f"the first run's: {live['recovered_equal']}; output files: "
              f"{len(live['output_files'])} (one per prediction)."]
    return lines


if __name__ == "__main__":
    for line in main(quick="--quick" in sys.argv):
        print(line)
