"""Kernel SVMs against their peers: Hinge's smo, LIBSVM 3.37 (libsvm-official) and oneDAL
(Intel's SVC through scikit-learn-intelex), 1 and 2 threads each.

Every run is its own process (`--worker SPEC`): it loads the data (not timed), warms up
(Hinge: Numba's cache; oneDAL: one tiny fit), then times the training call alone and
reports the test accuracy. Engines alternate within each repetition (the order reverses
on odd ones); medians of the repetitions. LIBSVM's wheel is built with OpenMP: it runs
with OMP_NUM_THREADS=1 (its reference setting; the "1 thread" column). oneDAL's threads are
set by daal4py.daalinit(n). Hinge's parallel grain (model.parallel_grain: "pairs",
"columns" or "none") is read from the fit's params and reported beside its time.

Problems (C-SVC, rbf, eps / tol 1e-3, cache 200 MB; one-vs-one for several classes):
- the shared sets of the smo experiment (bench/smo_bench.py): ijcnn1, a9a, w8a, C = 1,
  gamma = 1/d (with --quick, which runs only dna: a seeded 12,000-row sample of ijcnn1 and
  its first 5,000 test rows when asked for with --datasets);
- pendigits (10 classes, unscaled features 0-100: gamma = 1e-4, C = 1) and dna (3 classes,
  gamma = 1/d, C = 1), with their test splits;
- letter-like (testkit.datagen.letter_like: 26 classes, 16 dense features, pairs of ~800
  rows, C = 10, gamma = 0.5), 400 training and 100 test rows per class.

Done-when targets (issue 18), one summary row each: Hinge 2 threads no slower than the
faster of LIBSVM and oneDAL 2 threads; Hinge 1 thread no slower than LIBSVM.

Usage: python bench/kernel_peers_bench.py [--quick] [--reps 3 (quick: 1)] [--datasets ...]
Writes bench/results/kernel_peers.md; `main(quick)` returns the summary rows of
bench/run.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import results_dir, smaller  # noqa: E402

RESULTS_NAME = "kernel_peers.md"
ENGINES = ("hinge1", "hinge2", "hinge1b", "hinge2b", "libsvm", "onedal1", "onedal2")
LABELS = {"hinge1": "Hinge 1t", "hinge2": "Hinge 2t", "hinge1b": "Hinge batched 1t",
          "hinge2b": "Hinge batched 2t", "libsvm": "LIBSVM", "onedal1": "oneDAL 1t",
          "onedal2": "oneDAL 2t"}
# working_set="batched" (issue 46) runs on the binary sets: one problem, all the threads
BATCHED = ("hinge1b", "hinge2b")
BINARY = ("ijcnn1", "w8a", "a9a")
S2_TARGET = 1.87  # issue 46: a 16-thread ceiling of 8x needs a serial share below 7%


def engines_of(name: str) -> tuple[str, ...]:
    return ENGINES if name in BINARY else tuple(e for e in ENGINES if e not in BATCHED)
# name -> (C, gamma or None for 1/d)
SETTINGS: dict[str, tuple[float, float | None]] = {
    "ijcnn1": (1.0, None), "a9a": (1.0, None), "w8a": (1.0, None),
    "pendigits": (1.0, 1e-4), "dna": (1.0, None), "letter-like": (10.0, 0.5)}
FULL = ("letter-like", "pendigits", "dna", "ijcnn1", "w8a", "a9a")
# --quick is a smoke run (make bench-quick, 5 minutes in all): dna (3 classes, 2,000 rows),
# every engine once (each run is a process of its own: ~5 CPU s of start-up, more than the
# fit); the full run has every set
QUICK = ("dna",)
QUICK_ROWS, QUICK_TEST_ROWS = 12_000, 5_000
LETTER_ROWS_PER_CLASS = smaller(500, 60)  # 400 (smoke: 48) of each class train


# --------------------------------------------------------------------------------------
# data


def problem_data(name: str, quick: bool) -> tuple[Any, np.ndarray, Any, np.ndarray]:
    if name == "letter-like":
        from testkit.datagen import letter_like

        X, y = letter_like(rows_per_class=LETTER_ROWS_PER_CLASS)
        train = np.zeros(X.shape[0], dtype=bool)
        for label in np.unique(y):  # the first 400 rows of each class train
            train[np.flatnonzero(y == label)[:LETTER_ROWS_PER_CLASS * 4 // 5]] = True
        return X[train], y[train], X[~train], y[~train]
    from bench.smo_bench import load

    stem = "dna.scale" if name == "dna" else name
    X, y = load(stem)
    X_test, y_test = load(f"{stem}.t", X.shape[1])
    if quick and name == "ijcnn1":
        count = min(QUICK_ROWS, X.shape[0])
        rows = np.sort(np.random.default_rng(0).choice(X.shape[0], count, replace=False))
        X, y = X[rows], y[rows]
        X_test, y_test = X_test[:QUICK_TEST_ROWS], y_test[:QUICK_TEST_ROWS]
    return X, y, X_test, y_test


# --------------------------------------------------------------------------------------
# one run, in its own process


def worker(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    engine, name, quick = spec["engine"], spec["dataset"], spec["quick"]
    X, y, X_test, y_test = problem_data(name, quick)
    C, gamma = SETTINGS[name]
    gamma = gamma if gamma is not None else 1.0 / X.shape[1]
    result: dict[str, Any] = {}
    if engine.startswith("hinge"):
        from solvers import fit
        from solvers.warmup import PRIORITY_GROUPS, warmup

        warmup(PRIORITY_GROUPS if quick else None)  # quick: smo's kernels (and linear's)
        started = time.perf_counter()
        fitted = fit(X, y, solver="smo", kernel="rbf", C=C, gamma=gamma, eps=1e-3,
                     cache_mb=200.0, threads=int(engine[5]),
                     working_set="batched" if engine in BATCHED else "pair")
        result["seconds"] = time.perf_counter() - started
        predicted = fitted.predict(X_test)
        result["grain"] = f"{fitted.params['parallel_grain']}"
        result["kernel_values"] = sorted({o["kernel_values"] for o in fitted.per_output})
        result["iterations"] = fitted.iterations
        result["n_sv"] = fitted.n_support
        result["serial_share"] = fitted.per_output[0].get("serial_share")
        # positive for the larger label
        result["decision"] = np.ravel(fitted.model.decision_function(X_test[:2000])).tolist()
    elif engine == "libsvm":
        from libsvm import svmutil

        problem = svmutil.svm_problem(y, X)
        options = f"-s 0 -t 2 -c {C!r} -g {gamma!r} -e 0.001 -m 200 -h 1 -q"
        started = time.perf_counter()
        model = svmutil.svm_train(problem, options)
        result["seconds"] = time.perf_counter() - started
        labels, _, _ = svmutil.svm_predict(y_test, X_test, model, "-q")
        predicted = np.asarray(labels)
        result["n_sv"] = model.get_nr_sv()
        _, _, values = svmutil.svm_predict(y_test[:2000], X_test[:2000], model, "-q")
        # LIBSVM's decision values are positive for its first label (the first seen),
        # Hinge's for the larger of the two: flipped when the first seen is the smaller
        first = model.get_labels()[0]
        sign = -1.0 if first == min(model.get_labels()) else 1.0
        result["decision"] = (sign * np.asarray(values).ravel()).tolist()
    else:
        import daal4py
        from sklearnex.svm import SVC

        daal4py.daalinit(int(engine[-1]))
        with warnings.catch_warnings():  # a warm-up fit on a few rows of two classes
            warnings.simplefilter("ignore")
            two = np.unique(y)[:2]  # 20 rows of each (the first 40 may all be one class)
            few = np.concatenate([np.flatnonzero(y == label)[:20] for label in two])
            SVC(C=C, gamma=gamma).fit(X[few], y[few])
        svc = SVC(C=C, gamma=gamma, tol=1e-3, cache_size=200.0, kernel="rbf")
        started = time.perf_counter()
        svc.fit(X, y)
        result["seconds"] = time.perf_counter() - started
        predicted = svc.predict(X_test)
        result["n_sv"] = int(svc.support_.shape[0])
    result["accuracy"] = float(np.mean(np.asarray(predicted) == y_test) * 100)
    Path(spec["result_path"]).write_text(json.dumps(result))


def run(engine: str, name: str, quick: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        spec_path = Path(directory) / "spec.json"
        result_path = Path(directory) / "result.json"
        spec_path.write_text(json.dumps({"engine": engine, "dataset": name, "quick": quick,
                                         "result_path": str(result_path)}))
        env = {**os.environ, "OMP_NUM_THREADS": "1" if engine == "libsvm" else
               os.environ.get("OMP_NUM_THREADS", "2")}
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker",
                        str(spec_path)], check=True, env=env, cwd=REPO)
        result: dict[str, Any] = json.loads(result_path.read_text())
        return result


# --------------------------------------------------------------------------------------
# the experiment


def bench_dataset(name: str, quick: bool, reps: int) -> dict[str, Any]:
    engines = engines_of(name)
    runs: dict[str, list[dict[str, Any]]] = {engine: [] for engine in engines}
    for rep in range(reps):
        for engine in engines if rep % 2 == 0 else engines[::-1]:
            print(f"  {name} rep {rep + 1}/{reps}: {engine}", flush=True)
            runs[engine].append(run(engine, name, quick))
    out: dict[str, Any] = {"name": name, "runs": runs, "engines": engines}
    for engine in engines:
        out[engine] = float(statistics.median(r["seconds"] for r in runs[engine]))
        out[f"{engine}_accuracy"] = runs[engine][0]["accuracy"]
        out[f"{engine}_n_sv"] = runs[engine][0]["n_sv"]
    out["grain"] = sorted({r["grain"] for r in runs["hinge2"]})
    out["kernel_values"] = sorted({v for r in runs["hinge1"] for v in r["kernel_values"]})
    for engine in ("hinge1", "hinge1b"):  # agreement of the decision values with LIBSVM's
        if engine in runs and runs["libsvm"][0].get("decision"):
            ours = np.asarray(runs[engine][0]["decision"])
            out[f"{engine}_correlation"] = float(np.corrcoef(
                ours, np.asarray(runs["libsvm"][0]["decision"]))[0, 1])
    if "hinge1b" in runs:  # Amdahl's s as the 1-thread batched fit measured it
        out["serial_share"] = float(statistics.median(
            float(r["serial_share"]) for r in runs["hinge1b"]))
    for r in (x for e in engines for x in runs[e]):
        r.pop("decision", None)
    return out


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        best_peer = min(r["libsvm"], r["onedal2"])
        rows.append(_row(f"{r['name']}: Hinge 2t s vs min(LIBSVM, oneDAL 2t)", r["hinge2"],
                         best_peer))
        rows.append(_row(f"{r['name']}: Hinge 1t s vs LIBSVM", r["hinge1"], r["libsvm"]))
        if "hinge2b" in r:
            rows.append(_row(f"{r['name']}: Hinge batched 2t s vs min(LIBSVM, oneDAL 2t)",
                             r["hinge2b"], best_peer))
            rows.append(_row(f"{r['name']}: Hinge batched 1t s vs LIBSVM", r["hinge1b"],
                             r["libsvm"]))
            rows.append(_speedup(f"{r['name']}: batched 2-thread speedup (1t / 2t)",
                                 r["hinge1b"], r["hinge2b"]))
            rows.append(_speedup(f"{r['name']}: pair 2-thread speedup (1t / 2t), "
                                 "for comparison", r["hinge1"], r["hinge2"], target=False))
    return rows


def _speedup(metric: str, one: float, two: float, target: bool = True) -> dict[str, Any]:
    ratio = one / two if two > 0 else math.nan
    return {"experiment": "kernel_peers", "metric": metric, "hinge": float(one),
            "reference": float(two), "ratio": float(ratio),
            "target": f">= {S2_TARGET}" if target else "-",
            "met": bool(math.isfinite(ratio) and ratio >= S2_TARGET) if target else None}


def _row(metric: str, hinge: float, reference: float) -> dict[str, Any]:
    ratio = hinge / reference if reference > 0 else math.nan
    return {"experiment": "kernel_peers", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(ratio), "target": "<= 1.0",
            "met": bool(math.isfinite(ratio) and ratio <= 1.0)}


def steal_seconds() -> float:
    """CPU seconds stolen from this (virtual) machine since boot (/proc/stat; 0 if none)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
        return int(fields[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def write_markdown(results: list[dict[str, Any]], rows: list[dict[str, Any]], reps: int,
                   quick: bool, load: tuple[float, float], output: Path,
                   steal: float = 0.0, elapsed: float = 0.0) -> None:
    lines = [
        "# Kernel SVMs: Hinge vs LIBSVM and oneDAL",
        "",
        f"Generated by `bench/kernel_peers_bench.py{' --quick' if quick else ''}` on "
        f"{dt.date.today()}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}. {reps} alternating "
        f"repetitions, medians of the training time (wall clock, seconds; data loading, "
        f"warm-up and prediction excluded), each run in its own process. Load average "
        f"(1 min) at the start {load[0]:.2f}, at the end {load[1]:.2f}.",
        "",
        "| data (rbf) | rows | classes | " + " | ".join(LABELS[e] for e in ENGINES)
        + " | Hinge grain (2t) | Hinge dot products | test acc. % Hinge / LIBSVM / oneDAL "
        "| #SV Hinge / LIBSVM |",
        "|---|---:|---:|" + "---:|" * len(ENGINES) + "---|---|---|---|",
    ]
    for r in results:
        fastest = min(r[e] for e in r["engines"])
        cells = [("-" if e not in r else f"**{r[e]:.3f}**" if r[e] == fastest
                  else f"{r[e]:.3f}") for e in ENGINES]
        lines.append(
            f"| {r['name']} | {r['rows']:,} | {r['classes']} | " + " | ".join(cells)
            + f" | {', '.join(r['grain'])} | {', '.join(r['kernel_values'])} | "
            f"{r['hinge1_accuracy']:.2f} / "
            f"{r['libsvm_accuracy']:.2f} / {r['onedal2_accuracy']:.2f} | "
            f"{r['hinge1_n_sv']:,} / {r['libsvm_n_sv']:,} |")
    lines += ["", "Every run, seconds: " + "; ".join(
        f"{r['name']}: " + ", ".join(
            f"{LABELS[e]} " + "/".join(f"{x['seconds']:.3f}" for x in r["runs"][e])
            for e in r["engines"]) for r in results), ""]
    lines += ["Batched working sets against LIBSVM (binary sets): " + "; ".join(
        f"{r['name']}: #SV {r['hinge1b_n_sv']:,} against {r['libsvm_n_sv']:,} "
        f"({100 * abs(r['hinge1b_n_sv'] - r['libsvm_n_sv']) / r['libsvm_n_sv']:.2f}%), "
        f"decision values on 2,000 test rows correlated at "
        f"{r.get('hinge1b_correlation', math.nan):.7f} (pair: "
        f"{r.get('hinge1_correlation', math.nan):.7f}), test acc. "
        f"{r['hinge1b_accuracy']:.2f} %; the 1-thread fit's time outside its parallel "
        f"passes (Amdahl's s) {r['serial_share']:.3f}, a 2-thread ceiling of "
        f"{2 / (1 + r['serial_share']):.2f}x and 16-thread of "
        f"{1 / (r['serial_share'] + (1 - r['serial_share']) / 16):.1f}x"
        for r in results if "hinge1b" in r), ""]
    lines += [f"CPU time the hypervisor took from this virtual machine during the run "
              f"(/proc/stat steal): {steal:.1f} s over {elapsed / 60:.1f} minutes; with "
              "a CPU taken, a 2-thread run is a 1-thread one.", ""]
    lines += ["## Summary (done when every row is met)", "",
              "| metric | hinge | reference | ratio | target | met |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['metric']} | {row['hinge']:.4g} | {row['reference']:.4g} | "
                     f"{row['ratio']:.3f} | {row['target']} | "
                     f"{'-' if row['met'] is None else 'yes' if row['met'] else 'NO'} |")
    lines += ["", "Settings: C-SVC, rbf, eps/tol 1e-3, cache 200 MB; C and gamma per data "
              "set in the module docstring. Grain \"pairs\": binary problems trained at once, "
              "one thread each; \"columns\": one problem at a time, its per-step loops in "
              "parallel when the fit measures that they pay (solvers/grain.py); \"none\": "
              "one thread. \"Hinge batched\": `working_set: \"batched\"` "
              "(solvers/smo/batched.py: ThunderSVM's working sets of up to 512 variables; "
              "the pair solver is the default, LIBSVM's trajectory). "
              "Dot products of the kernel columns (solvers/smo/__init__.py): \"dense\" rows, "
              "\"bits\" (0/1 features: popcounts, rbf values from a table by squared "
              "distance), \"columns\" (a positional CSC) or \"rows\" (the row gather)."]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n")


def main(quick: bool = False, reps: int | None = None,
         datasets: tuple[str, ...] | None = None,
         output: Path | None = None) -> list[dict[str, Any]]:
    """reps: 3 (quick: 1)."""
    reps = reps or (1 if quick else 3)
    load_start = os.getloadavg()[0]
    steal_start, started = steal_seconds(), time.perf_counter()
    results = []
    for name in datasets or (QUICK if quick else FULL):
        print(f"== {name}", flush=True)
        result = bench_dataset(name, quick, reps)
        X, y, _, _ = problem_data(name, quick)
        result["rows"], result["classes"] = X.shape[0], len(np.unique(y))
        results.append(result)
    rows = summary_rows(results)
    write_markdown(results, rows, reps, quick, (load_start, os.getloadavg()[0]),
                   output or results_dir() / RESULTS_NAME, steal_seconds() - steal_start,
                   time.perf_counter() - started)
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(sys.argv[2])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    for summary in main(args.quick, args.reps,
                        tuple(args.datasets) if args.datasets else None, args.output):
        print(summary)
