"""Two workers training on one dataset: one copy of its arrays per host, not per process.

    python -m bench.shared_memory_bench [--quick]

A generated dataset of about 1 GiB of CSR arrays (2,000,000 rows x 45 non-zeros, float64
values, int32 indices; ~50 MiB with --quick, ~20 MiB in the smoke run) is stored as a
blob (app.infra.storage.save_dataset_arrays) in a temporary HINGE_HOME. Two processes then
each load it through the worker's path (app.infra.storage.load_dataset, as
workers/training.py does) and train on it (dcd, C=1, 3 epochs: max_iter 3), side by side,
while this process samples their /proc/<pid>/smaps_rollup every 0.2 s; then the same with
the arrays read into each process's memory (np.load, how every blob was read before, and
how a blob written by np.savez still is). Figures: the peak of each over the run.

- Rss: resident memory; Pss: the proportional share (a page shared by two counts half);
- Shared_Clean: pages another process also maps (the dataset's file pages, once per host);
- Private (Clean + Dirty) and Anonymous: this process's own memory.
Writes bench/results/shared_memory.md. The temporary files are deleted at the end.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.paths import REPO, SMOKE, results_dir

PER_ROW = 45
FULL_ROWS, QUICK_ROWS, SMOKE_ROWS = 2_000_000, 100_000, 40_000  # quick: a smoke run
FIELDS = ("Rss", "Pss", "Shared_Clean", "Private", "Anonymous")

CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    import numpy as np
    from app.infra.blobs import LocalBlobStore
    from app.infra.storage import csr_from_arrays, load_dataset
    from solvers import fit
    home, ref, features, mode = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    store = LocalBlobStore(Path(home))
    if mode == "mapped":
        X, y = load_dataset(store, ref, features)
    else:
        with np.load(store.path(ref.partition("#")[0]), allow_pickle=False) as blob:
            arrays = {name: blob[name] for name in blob.files}
        X, y = csr_from_arrays(arrays, features), arrays["y"]
    print("loaded", flush=True)
    fit(X, y, solver="dcd", C=1.0, max_iter=3)
    print("done", flush=True)
    sys.stdin.readline()
""")


def generate(rows: int, seed: int = 0) -> tuple[dict[str, np.ndarray], int]:
    """`rows` rows of PER_ROW sorted distinct columns among PER_ROW * 22; labels from a
    linear rule."""
    rng = np.random.default_rng(seed)
    spread = 22
    columns = (np.arange(PER_ROW, dtype=np.int32) * spread)[None, :] + rng.integers(
        0, spread, size=(rows, PER_ROW), dtype=np.int32)
    data = rng.standard_normal((rows, PER_ROW))
    y = np.where(data[:, :5].sum(axis=1) > 0, 1.0, -1.0)
    return ({"data": data.ravel(), "indices": columns.ravel(),
             "indptr": np.arange(0, rows * PER_ROW + 1, PER_ROW, dtype=np.int64), "y": y},
            PER_ROW * spread)


def rollup(pid: int) -> dict[str, int]:
    figures: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value, *_unit = line.split()
        figures[name.rstrip(":")] = int(value) * 1024
    figures["Private"] = figures["Private_Clean"] + figures["Private_Dirty"]
    return figures


def two_workers(home: Path, ref: str, features: int, mode: str) -> list[dict[str, int]]:
    """Two processes loading and training side by side; each one's peak figures."""
    command = [sys.executable, "-c", CHILD, str(home), ref, str(features), mode]
    children = [subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for _ in range(2)]
    peaks: list[dict[str, int]] = [{}, {}]
    try:
        import selectors

        selector = selectors.DefaultSelector()
        for child in children:
            assert child.stdout is not None
            selector.register(child.stdout, selectors.EVENT_READ, child)
        finished: set[int] = set()
        while len(finished) < 2:
            for key, _events in selector.select(timeout=0.2):
                line = key.fileobj.readline()  # type: ignore[union-attr]
                if line.startswith("done"):
                    finished.add(key.data.pid)
                elif not line:
                    raise RuntimeError(f"a worker exited ({key.data.wait()})")
            for peak, child in zip(peaks, children, strict=True):
                for name, value in rollup(child.pid).items():
                    peak[name] = max(peak.get(name, 0), value)
            time.sleep(0.2)
    finally:
        for child in children:
            child.communicate("\n", timeout=120)
    return peaks


def row(metric: str, hinge: float, reference: float) -> dict[str, Any]:
    return {"experiment": "shared_memory", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(hinge / reference)
            if reference else math.nan, "target": "—", "met": True}


def main(quick: bool = False) -> list[dict[str, Any]]:
    from app.infra.blobs import LocalBlobStore
    from app.infra.storage import save_dataset_arrays

    rows = SMOKE_ROWS if SMOKE else QUICK_ROWS if quick else FULL_ROWS
    mib = 2**20
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        arrays, features = generate(rows)
        size = sum(values.nbytes for values in arrays.values())
        stored = save_dataset_arrays(LocalBlobStore(home), "shared", arrays)
        del arrays
        figures = {mode: two_workers(home, str(stored.ref), features, mode)
                   for mode in ("mapped", "in memory")}
    lines = ["# Two workers, one dataset: memory per host", "",
             f"{rows:,} rows x {PER_ROW} non-zeros: {size / mib:,.0f} MiB of arrays (data "
             "float64, indices int32, indptr int64, y float64) in one blob. Two processes "
             "load it through the worker's path and train on it (dcd, 3 epochs) side by "
             "side; peaks of /proc/<pid>/smaps_rollup over the run, MiB.", "",
             "| arrays | process | " + " | ".join(FIELDS) + " |",
             "|---|---|" + "---|" * len(FIELDS)]
    for mode, peaks in figures.items():
        for index, peak in enumerate(peaks, 1):
            lines.append(f"| {mode} | worker {index} | "
                         + " | ".join(f"{peak[f] / mib:,.0f}" for f in FIELDS) + " |")
    mapped, loaded = figures["mapped"], figures["in memory"]
    host_mapped = sum(p["Pss"] for p in mapped)
    host_loaded = sum(p["Pss"] for p in loaded)
    lines += ["", f"Both processes together (sum of peak Pss): {host_mapped / mib:,.0f} MiB "
              f"mapped, {host_loaded / mib:,.0f} MiB with a copy each: the dataset is held "
              "once per host when mapped (Shared_Clean: the same file pages in both), twice "
              "otherwise. Each process's own memory (Private, Anonymous) is the "
              "interpreter, the libraries, the compiled kernels and the solver's working "
              "arrays (a peak of Private above Anonymous, mapped: the file pages one worker "
              "read before the other mapped them, private to it until then); blobs written "
              "by np.savez (before the aligned format) are still read "
              "into memory."]
    path = results_dir() / "shared_memory.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return [row("two workers, one dataset: host Pss MiB, mapped vs a copy each",
                host_mapped / mib, host_loaded / mib),
            row("private MiB per worker, mapped vs a copy each",
                max(p["Private"] for p in mapped) / mib,
                max(p["Private"] for p in loaded) / mib)]


if __name__ == "__main__":
    for line in main(quick="--quick" in sys.argv):
        print(line)
