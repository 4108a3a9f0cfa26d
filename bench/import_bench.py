"""A multi-part import (POST /v1/imports) of a yahoo-korea-shaped set through a live
service: API and Celery worker processes (testkit.service), part files under
HINGE_IMPORT_ROOTS.

    python -m bench.import_bench [--scale 0.05] [--parts 8] [--workers 2]

The set has the shape of yahoo-korea in Hsieh et al. 2008 (460,554 rows x 3,052,939
features, about 339 non-zeros a row; here --scale of its rows), Zipf feature frequencies
(testkit.datagen.text_like), written as `--parts` svmlight part files, each part from a
seed of its own, values to 6 decimals. Reported: the import's wall time (from its
creation to its end, as the service records them), text MB/s, and beside it one process
parsing every part in turn
with the same parser (solvers.svmlight.load_svmlight): what a single core does. The
dataset's rows and non-zeros are checked against the files'. Results go to
bench/results/imports.md (a loaded shared machine makes every figure noisy).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

YAHOO_KOREA = (460_554, 3_052_939, 339.0)  # rows, features, non-zeros a row


def write_parts(directory: Path, rows: int, parts: int) -> list[Path]:
    from solvers.svmlight import dump_svmlight
    from testkit.datagen import text_like

    _rows, features, per_row = YAHOO_KOREA
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for part in range(parts):
        X, y = text_like(rows // parts, features, seed=1000 + part, nnz_per_row=per_row,
                         n_topics=4)
        X.data = np.round(X.data, 6)  # values as a data set's text has them, not repr()'s
        path = directory / f"part-{part:05d}.svm"
        dump_svmlight(X, y, path)
        paths.append(path)
    return paths


def main(scale: float, parts: int, workers: int) -> str:
    from solvers.svmlight import load_svmlight
    from testkit.service import embedded_settings, running_service

    rows = max(parts, int(YAHOO_KOREA[0] * scale))
    with tempfile.TemporaryDirectory(prefix="hinge-import-bench-") as scratch:
        root = Path(scratch) / "roots"
        paths = write_parts(root / "yk", rows, parts)
        text = sum(p.stat().st_size for p in paths)
        started = time.perf_counter()
        files = [load_svmlight(p) for p in paths]
        single = time.perf_counter() - started
        want = (sum(f.n_samples for f in files), sum(f.nnz for f in files))
        del files
        settings = embedded_settings(Path(scratch) / "home", import_roots=[str(root)],
                                     tenant_max_stored_bytes=1 << 40)
        with running_service(settings, Path(scratch), workers=workers) as (client, _w):
            created = client.post("/v1/imports", json={"source": f"file://{root}/yk/*",
                                                       "name": "yahoo-korea-shaped"})
            assert created.status_code == 202, created.text
            import_id = created.json()["id"]
            while (state := client.get(f"/v1/imports/{import_id}").json())["status"] in (
                    "queued", "running"):
                time.sleep(0.2)
        assert state["status"] == "succeeded", state
        assert (state["rows_done"], state["nnz_done"]) == want, (state, want)
        wall = (datetime.fromisoformat(state["finished_at"])
                - datetime.fromisoformat(state["created_at"])).total_seconds()
    mb = text / 1e6
    table = (
        f"| set | parts | workers | text | rows, non-zeros | import (wall) | import MB/s "
        f"| one process, load_svmlight in turn | MB/s |\n|---|---:|---:|---:|---|---:|---:|"
        f"---:|---:|\n| yahoo-korea-shaped x{scale:g} | {parts} | {workers} | {mb:.0f} MB | "
        f"{want[0]:,}, {want[1]:,} | {wall:.1f} s | {mb / wall:.0f} | {single:.1f} s | "
        f"{mb / single:.0f} |\n")
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=0.05)
    parser.add_argument("--parts", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    table = main(args.scale, args.parts, args.workers)
    print(table)
    out = Path(__file__).parent / "results" / "imports.md"
    out.write_text("# Imports (bench/import_bench.py)\n\n"
                   "Measured on a loaded, shared 2-core machine: the figures are noisy and "
                   "compare with nothing outside one run.\n\n" + table)
