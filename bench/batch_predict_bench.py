"""Batch predictions (POST /v1/predictions): the worker's block path against the ceiling.

    python -m bench.batch_predict_bench [--quick]

On 1,000,000 dense rows (100,000 with --quick, 20,000 in the test suite's smoke run;
10 features, testkit.datagen.dense) and a linear model (dcd, C=1, fitted on the first
20,000 rows): rows per second of the worker's path
(app.domain.services.predictions.predict_blocks into the output .npz, blocks of
HINGE_PREDICT_BLOCK_ROWS) against one in-process `model.predict` of every row (the
ceiling), and the peak of memory each allocates on top of the dataset's arrays
(tracemalloc, which sees NumPy's allocations). Not measured here: posting the rows
through the predict route, and the API's and worker's RSS under a real service.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from bench.paths import SMOKE, results_dir

FULL_ROWS, QUICK_ROWS = 1_000_000, 100_000


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
    lines = ["# Batch predictions: the worker's block path", "",
             f"{rows:,} dense rows, 10 features, linear model (dcd); blocks of "
             f"{block_rows:,} rows; output {size_mb:.1f} MiB (.npz).", "",
             "| metric | hinge | reference | ratio |", "|---|---|---|---|"]
    lines += [f"| {r['metric']} | {r['hinge']:,.1f} | {r['reference']:,.1f} | "
              f"{r['ratio']:.2f} |" for r in results]
    lines += ["", f"The dataset's CSR arrays: {data_mb:,.1f} MiB (held by both). Not "
              "measured: posting the rows through the predict route; a live API and worker."]
    path = results_dir() / "batch_predict.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return results


if __name__ == "__main__":
    for line in main(quick="--quick" in sys.argv):
        print(line)
