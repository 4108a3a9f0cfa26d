"""Parser throughput: solvers.svmlight.load_svmlight vs sklearn's load_svmlight_file.

Decompresses the shared LIBSVM files (xz) into bench/scratch/ (git-ignored), warms both
engines (Numba compilation excluded), then times them alternately, several repetitions
each, and reports medians in MB/s (10**6 bytes of uncompressed text per second) in
bench/results/parser.md. The one-off Numba compile time and the cached start-up time are
measured in fresh subprocesses.

A generated text-like svmlight file (testkit.datagen.text_like written by
solvers.svmlight.dump_svmlight, ~1 GB; ~10 MB with --quick) is written once into
bench/scratch/parser/ and reused; both engines parse it, and each engine parses it once
more in a fresh subprocess that reports its peak RSS (resource.getrusage in the child).

    .venv/bin/python bench/parser_bench.py [--quick] [--repeats 7] [--files ijcnn1 a9a]
    (or, from the repository: .venv/bin/python -m bench.run --only parser)
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import lzma
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from solvers.svmlight import dump_svmlight, load_svmlight  # noqa: E402

SCRATCH = REPO / "bench" / "scratch" / "parser"
from bench.paths import DATA_DIR, results_dir, smaller  # noqa: E402

RESULT = results_dir() / "parser.md"
DEFAULT_FILES = ["ijcnn1", "a9a", "w8a", "news20"]
QUICK_FILES = ["ijcnn1", "a9a"]
TARGET_RATIO = 3.0  # ours must parse at least 3x as many MB/s as sklearn
GENERATED_FEATURES = 100_000
GENERATED_SEED = 1
DIGITS_ROWS = {False: 5000, True: smaller(2000, 300)}  # by quick

COMPILE_PROBE = """
import time
started = time.perf_counter()
from solvers.svmlight import parse_stream
imported = time.perf_counter()
parse_stream([b"1 qid:1 1:0.5 2:1e-30 # c\\n-1 3:1\\n"])
done = time.perf_counter()
print(imported - started, done - imported)
"""

# Run in a fresh interpreter: parse one file with one engine, print RSS high-water marks
# (KiB on Linux) before and after the parse, the parse time and the result's array bytes.
MEMORY_PROBE = """
import resource, sys, time
engine, path = sys.argv[1], sys.argv[2]
if engine == "ours":
    from solvers.svmlight import load_svmlight, parse_stream
    parse_stream([b"1 1:1\\n-1 2:1\\n"])  # load the compiled kernels before the baseline
    def load(p):
        d = load_svmlight(p)
        return d.data, d.indices, d.indptr, d.y
else:
    from sklearn.datasets import load_svmlight_file
    def load(p):
        X, y = load_svmlight_file(p, zero_based=False)
        return X.data, X.indices, X.indptr, y
baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
arrays = load(path)
seconds = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(baseline, peak, seconds, sum(a.nbytes for a in arrays))
"""


def decompressed(name: str) -> Path:
    """bench/scratch/parser/<name>: the uncompressed text of the shared <name>.xz."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    target = SCRATCH / name
    source = DATA_DIR / f"{name}.xz"
    if not target.exists() or target.stat().st_mtime < source.stat().st_mtime:
        partial = target.with_suffix(".partial")
        with lzma.open(source) as src, open(partial, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        partial.replace(target)
    return target


def six_digits(values: np.ndarray) -> np.ndarray:
    """Values rounded to 6 significant digits, as the LIBSVM collection's files write them
    (repr() then prints them short); 17-digit values are measured in *Long mantissas*."""
    magnitude = np.floor(np.log10(np.abs(values), where=values != 0,
                                  out=np.zeros_like(values)))
    scale = 10.0 ** (5 - magnitude)
    return np.round(values * scale) / scale


def generated(megabytes: int) -> Path:
    """bench/scratch/parser/text-<MB>MB-v<VERSION>-...svm, ~MB * 10**6 bytes of text-like svmlight.

    Written once (through a .partial file, so an interrupted run leaves nothing half
    written under the final name) and reused by later runs.
    """
    from testkit.datagen import VERSION, text_like

    SCRATCH.mkdir(parents=True, exist_ok=True)
    target = SCRATCH / f"text-{megabytes}MB-v{VERSION}-seed{GENERATED_SEED}-6digits.svm"
    if target.exists():
        return target
    sample = io.BytesIO()
    X, y = text_like(2000, GENERATED_FEATURES, seed=GENERATED_SEED + 1000)
    X.data = six_digits(X.data)
    dump_svmlight(X, y, sample)
    rows = max(1000, round(megabytes * 1e6 / (len(sample.getvalue()) / 2000)))
    print(f"writing {target.relative_to(REPO)}: {rows} rows x {GENERATED_FEATURES} "
          "features (once; reused by later runs)", flush=True)
    started = time.perf_counter()
    X, y = text_like(rows, GENERATED_FEATURES, seed=GENERATED_SEED)
    X.data = six_digits(X.data)
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as handle:
        for start in range(0, rows, 20_000):
            stop = min(rows, start + 20_000)
            dump_svmlight(X[start:stop], y[start:stop], handle)
    partial.replace(target)
    print(f"  written in {time.perf_counter() - started:.0f} s "
          f"({target.stat().st_size / 1e6:.0f} MB)", flush=True)
    return target


def digits_probe(repeats: int, rows: int) -> list[dict[str, Any]]:
    """The same generated rows with values written with 17, 15 and 6 significant digits.

    In memory (no file): isolates the cost of long decimal mantissas in each parser.
    """
    from sklearn.datasets import load_svmlight_file

    from solvers.svmlight import parse_stream
    from testkit.datagen import text_like

    X, y = text_like(rows, GENERATED_FEATURES, seed=GENERATED_SEED + 2000)
    X.sort_indices()  # svmlight wants increasing indices within a row
    dumped = io.BytesIO()
    dump_svmlight(X, y, dumped)
    texts = {"repr() (up to 17 digits; dump_svmlight)": dumped.getvalue()}
    columns = (X.indices + 1).tolist()
    values = X.data.tolist()
    indptr = X.indptr.tolist()
    for label, spec in (("%.15g", ".15g"), ("%.6g", ".6g")):
        lines = []
        for i, target in enumerate(y.tolist()):
            pairs = " ".join(f"{c}:{v:{spec}}" for c, v in zip(
                columns[indptr[i]:indptr[i + 1]], values[indptr[i]:indptr[i + 1]], strict=True))
            lines.append(f"{target:g} {pairs}\n")
        texts[label] = "".join(lines).encode()
    measured = []
    for label, text in texts.items():
        parse_stream([text])
        ours_s, sklearn_s = [], []
        for _ in range(repeats):
            started = time.perf_counter()
            parse_stream([text])
            ours_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            load_svmlight_file(io.BytesIO(text), zero_based=False)
            sklearn_s.append(time.perf_counter() - started)
        measured.append({"label": label, "size": len(text),
                         "ours": len(text) / statistics.median(ours_s) / 1e6,
                         "sklearn": len(text) / statistics.median(sklearn_s) / 1e6})
    return measured


def ours(path: Path) -> Any:
    return load_svmlight(path)


def sklearn(path: Path) -> Any:
    from sklearn.datasets import load_svmlight_file

    return load_svmlight_file(str(path), zero_based=False)


def assert_same(mine: Any, theirs: Any, path: Path) -> None:
    X, y = theirs
    assert mine.data.tobytes() == X.data.tobytes(), path
    assert np.array_equal(mine.indices, X.indices), path
    assert np.array_equal(mine.indptr, X.indptr), path
    assert mine.y.tobytes() == y.tobytes(), path


def check_same(path: Path) -> None:
    assert_same(ours(path), sklearn(path), path)


def timed(function: Any, path: Path) -> float:
    started = time.perf_counter()
    function(path)
    return time.perf_counter() - started


def compile_times(cold: bool = True) -> tuple[float, float, float]:
    """(import s, first parse with a cold Numba cache s, first parse with a warm cache s).
    Without `cold` (--quick): the probe once, on the project's own cache; the cold one NaN."""
    with tempfile.TemporaryDirectory(prefix="hinge-numba-cache-") as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, PYTHONPATH=str(REPO))
        if not cold:
            del env["NUMBA_CACHE_DIR"]
        runs = []
        for _ in range(2 if cold else 1):  # cold cache, then the cache the first run wrote
            out = subprocess.run(
                [sys.executable, "-c", COMPILE_PROBE],
                env=env,
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.split()
            runs.append((float(out[0]), float(out[1])))
    return runs[0][0], runs[0][1] if cold else math.nan, runs[-1][1]


# Linux keeps a process's RSS high-water mark across execve: a child exec'd straight from
# this (large) process would report at least our own peak. A small launcher in between
# gives the probe a clean high-water mark: the probe is forked from the launcher.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:]).returncode)"


def peak_memory(engine: str, path: Path) -> dict[str, float]:
    """Peak RSS of a fresh interpreter that parses `path` with `engine` ('ours'/'sklearn')."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, sys.executable, "-c", MEMORY_PROBE, engine, str(path)],
        env=env, cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()
    baseline_kib, peak_kib, seconds, result_bytes = out[-4:]
    return {"baseline_mb": int(baseline_kib) * 1024 / 1e6, "peak_mb": int(peak_kib) * 1024 / 1e6,
            "seconds": float(seconds), "result_mb": int(result_bytes) / 1e6}


def row(metric: str, hinge: float, reference: float, target: str, met: bool | None,
        ratio: float | None = None) -> dict[str, Any]:
    if ratio is None:
        ratio = hinge / reference if reference and math.isfinite(reference) else math.nan
    return {"experiment": "parser", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(ratio), "target": target,
            "met": bool(met) if met is not None else True}


def throughput(path: Path, repeats: int, warm: bool = True) -> tuple[float, float]:
    """(ours MB/s, sklearn MB/s), medians of `repeats` alternated runs.

    warm=False (large files, read just before by the memory probes, so in the page cache):
    no warm-up, and the equality check uses the first timed repetition instead of two
    extra parses.
    """
    size = path.stat().st_size
    if warm:
        check_same(path)  # also warms both engines (and the page cache)
    ours_s, sklearn_s = [], []
    for repetition in range(repeats):  # alternate, so drifting machine load hits both
        started = time.perf_counter()
        mine = ours(path)
        ours_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        theirs = sklearn(path)
        sklearn_s.append(time.perf_counter() - started)
        if repetition == 0 and not warm:
            assert_same(mine, theirs, path)
        del mine, theirs
    return size / statistics.median(ours_s) / 1e6, size / statistics.median(sklearn_s) / 1e6


def main(quick: bool = False, repeats: int | None = None, files: list[str] | None = None,
         generated_mb: int | None = None, generated_repeats: int | None = None
         ) -> list[dict[str, Any]]:
    """Run the parser benchmark, write bench/results/parser.md, return summary rows."""
    repeats = repeats or (1 if quick else 7)
    files = files or (QUICK_FILES if quick else DEFAULT_FILES)
    if generated_mb is None:
        generated_mb = smaller(10, 2) if quick else 1000  # quick: a smoke run
    generated_repeats = generated_repeats or (1 if quick else 3)

    import_s, cold_s, warm_s = compile_times(cold=not quick)  # quick: no cold compile
    results: list[dict[str, Any]] = []
    summary: list[dict[str, Any]] = []
    for name in files:
        path = decompressed(name)
        size = path.stat().st_size
        check_same(path)  # also warms both engines (and the page cache)
        ours_s, sklearn_s, xz_s = [], [], []
        for _ in range(repeats):  # alternate, so drifting machine load hits both
            ours_s.append(timed(ours, path))
            sklearn_s.append(timed(sklearn, path))
            xz_s.append(timed(ours, DATA_DIR / f"{name}.xz"))
        ours_mbs = size / statistics.median(ours_s) / 1e6
        sklearn_mbs = size / statistics.median(sklearn_s) / 1e6
        xz_mbs = size / statistics.median(xz_s) / 1e6
        results.append({"name": name, "size": size, "ours": ours_mbs, "sklearn": sklearn_mbs,
                        "xz": f"{xz_mbs:.0f}", "repeats": repeats})
        summary.append(row(f"{name}: parse MB/s (ours / sklearn)", ours_mbs, sklearn_mbs,
                           f">= {TARGET_RATIO:g}", ours_mbs / sklearn_mbs >= TARGET_RATIO))
        print(f"{name}: ours {ours_mbs:.0f} MB/s, sklearn {sklearn_mbs:.1f} MB/s", flush=True)

    memory: dict[str, dict[str, float]] = {}
    big_name = ""
    if generated_mb > 0:
        path = generated(generated_mb)
        big_name = path.name
        size = path.stat().st_size
        for engine in ("ours", "sklearn"):  # first: they also bring the file into the cache
            memory[engine] = peak_memory(engine, path)
        ours_mbs, sklearn_mbs = throughput(path, generated_repeats, warm=False)
        results.append({"name": f"{big_name} (generated)", "size": size, "ours": ours_mbs,
                        "sklearn": sklearn_mbs, "xz": "-", "repeats": generated_repeats})
        summary.append(row(f"{big_name}: parse MB/s (ours / sklearn)", ours_mbs, sklearn_mbs,
                           f">= {TARGET_RATIO:g}", ours_mbs / sklearn_mbs >= TARGET_RATIO))
        print(f"{big_name}: ours {ours_mbs:.0f} MB/s, sklearn {sklearn_mbs:.1f} MB/s",
              flush=True)
        summary.append(row(f"{big_name}: peak RSS MB of a fresh process (ours / sklearn)",
                           memory["ours"]["peak_mb"], memory["sklearn"]["peak_mb"], "—", None))
        print(f"peak RSS: ours {memory['ours']['peak_mb']:.0f} MB, "
              f"sklearn {memory['sklearn']['peak_mb']:.0f} MB", flush=True)

    digits = digits_probe(3, DIGITS_ROWS[quick])
    for measured in digits:
        print(f"values {measured['label']}: ours {measured['ours']:.0f} MB/s, "
              f"sklearn {measured['sklearn']:.1f} MB/s", flush=True)
    summary.append(row("Numba compile of the parser, cold cache (s, one-off)"
                       + (" (not measured with --quick)" if quick else ""), cold_s,
                       math.nan, "—", None))
    summary.append(row("first parse loading the Numba cache (s, every process start)", warm_s,
                       math.nan, "—", None))
    write_report(results, memory, big_name, digits, (import_s, cold_s, warm_s), quick)
    return summary


def write_report(results: list[dict[str, Any]], memory: dict[str, dict[str, float]],
                 big_name: str, digits: list[dict[str, Any]],
                 compile_s: tuple[float, float, float], quick: bool) -> None:
    import_s, cold_s, warm_s = compile_s
    load = os.getloadavg()
    repeats = sorted({r["repeats"] for r in results})
    lines = [
        "# svmlight parser throughput",
        "",
        f"Generated by `bench/parser_bench.py`{' --quick' if quick else ''} on "
        f"{dt.date.today().isoformat()} "
        f"({platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}; load average at the end "
        f"{load[0]:.2f}/{load[1]:.2f}/{load[2]:.2f}; it counts this benchmark's own "
        "processes, and README.md gives the CPU other processes used).",
        "",
        "MB/s = 10^6 bytes of uncompressed text per second, median of "
        f"{'/'.join(str(r) for r in repeats)} runs (see the last column), engines alternated "
        "run by run, after a warm-up run (the generated file: after the memory probes below, "
        "which read it, so it is in the page cache); both engines' data/indices/indptr/y "
        "were checked identical. *ours* = "
        "`solvers.svmlight.load_svmlight(path)` (1 MiB reads, magic-byte detection, "
        "sha256 of the text, limits); *sklearn* = "
        "`sklearn.datasets.load_svmlight_file(path, zero_based=False)`. The *from .xz* column "
        "is ours reading the shared `.xz` directly (xz decoding included), for reference. "
        f"Target: ours / sklearn >= {TARGET_RATIO:g}x.",
        "",
        "| file | MB | ours MB/s | sklearn MB/s | ours / sklearn | ours from .xz MB/s | runs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| {r['name']} | {r['size'] / 1e6:.1f} | {r['ours']:.0f} | {r['sklearn']:.1f} | "
            f"{r['ours'] / r['sklearn']:.1f}x | {r['xz']} | {r['repeats']} |"
        )
    if big_name:
        lines += [
            "",
            f"The generated file `bench/scratch/parser/{big_name}` is "
            f"`testkit.datagen.text_like(rows, {GENERATED_FEATURES}, seed={GENERATED_SEED})` "
            "(power-law feature frequencies, 60 words drawn per row, ~44 distinct, unit-norm "
            "rows) written by "
            "`solvers.svmlight.dump_svmlight` (1-based indices) after rounding the values to 6 "
            "significant digits, as the LIBSVM collection's files are written; it is written "
            "once and reused. Values of 16-17 digits (what `repr()` of an arbitrary double "
            "gives): see *Long mantissas* below, and bench/results/parse.md.",
            "",
            "## Peak memory",
            "",
            "Each engine parses the generated file once in a fresh interpreter; the child reads "
            "its own RSS high-water mark (`resource.getrusage(RUSAGE_SELF).ru_maxrss`) after "
            "its imports (ours: also after loading the compiled kernels from the Numba cache) "
            "and after the parse. *result* = bytes of the returned data/indices/indptr/y "
            "arrays, the least any parser must hold.",
            "",
            "| engine | baseline RSS MB | peak RSS MB | peak - baseline MB | result MB | "
            "(peak - baseline) / result | parse s |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for engine, facts in memory.items():
            grown = facts["peak_mb"] - facts["baseline_mb"]
            lines.append(
                f"| {engine} | {facts['baseline_mb']:.0f} | {facts['peak_mb']:.0f} | "
                f"{grown:.0f} | {facts['result_mb']:.0f} | {grown / facts['result_mb']:.2f} | "
                f"{facts['seconds']:.1f} |")
        if {"ours", "sklearn"} <= memory.keys():
            lines += ["", f"Peak RSS ours / sklearn: "
                          f"{memory['ours']['peak_mb'] / memory['sklearn']['peak_mb']:.2f}."]
    if digits:
        lines += [
            "",
            "## Long mantissas",
            "",
            f"The same {DIGITS_ROWS[quick]:,} generated rows (in memory, no file I/O), their "
            "values "
            "written "
            "three ways; median of 3 alternated runs: what long decimal mantissas cost each "
            "parser.",
            "",
            "| values written as | MB | ours MB/s | sklearn MB/s | ours / sklearn |",
            "|---|---:|---:|---:|---:|",
        ]
        for m in digits:
            lines.append(f"| {m['label']} | {m['size'] / 1e6:.1f} | {m['ours']:.0f} | "
                         f"{m['sklearn']:.1f} | {m['ours'] / m['sklearn']:.1f}x |")
    lines += [
        "",
        "One-off costs (fresh subprocess, `NUMBA_CACHE_DIR` set to a new empty directory): "
        f"import {import_s:.2f} s; first parse with a cold cache (Numba compilation) "
        + (f"{cold_s:.1f} s" if not math.isnan(cold_s) else "not measured with --quick")
        + f"; first parse in the next process, loading the cache, {warm_s:.2f} s.",
        "",
    ]
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text("\n".join(lines))
    print(f"wrote {RESULT}")


def _cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="fewer files and repetitions, a ~10 MB generated file")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--files", nargs="+", default=None)
    parser.add_argument("--generated-mb", type=int, default=None,
                        help="size of the generated file (0: skip it)")
    args = parser.parse_args()
    main(quick=args.quick, repeats=args.repeats, files=args.files,
         generated_mb=args.generated_mb)


if __name__ == "__main__":
    _cli()
