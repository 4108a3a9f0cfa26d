"""Benchmark our SMO kernel SVM against LIBSVM 3.37 (libsvm-official, its Python binding).

Same problem for both: C-SVC, RBF kernel, C = 1, gamma = 1/d, eps = 1e-3, 200 MB kernel
cache, shrinking on (LIBSVM's defaults). Reported per data set (ijcnn1, a9a, w8a; --quick,
a smoke run: a seeded 6,000-row sample of ijcnn1 and the first 2,000 test rows, once):

- training time, wall clock: LIBSVM with one thread; ours with threads=1 and threads=2.
  The pip wheel of LIBSVM is built with -fopenmp (its kernel columns are an OpenMP loop):
  it runs in a helper process with OMP_NUM_THREADS=1 (the single-thread reference the
  targets refer to), and, for information, with OMP_NUM_THREADS=2. Engines alternate
  within every repetition (the order reverses on odd ones); medians. Parsing is excluded,
  and so is Numba compilation: we warm up first; the cold compile and the cache load are
  measured in fresh interpreters (full mode) and reported separately.
- agreement: dual objective (LIBSVM's "obj = ..." line vs ours, same sign convention),
  support vectors, test accuracy, and the correlation of the test decision values (LIBSVM's
  model is read into a KernelModel: tests/solvers/test_kernels.py shows that predicts
  exactly as svm_predict).
- prediction throughput (rows/s) on the test split: ours (KernelModel's compiled decision
  function, dense scatter vs merged index walks, 1 and 2 threads) vs LIBSVM's
  svm_predict (which converts each row in Python and then calls the C library; timed on the
  first rows of the test split only: ~100-700 rows/s here).

Usage: python bench/smo_bench.py [--quick] [--reps 2 (quick: 1)] [--datasets ijcnn1 a9a w8a]
       [--output F]
Writes bench/results/smo.md; `main(quick)` returns the summary rows of bench/run.py.
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
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import DATA_DIR, results_dir  # noqa: E402

RESULTS = results_dir() / "smo.md"
DATASETS = ("ijcnn1", "a9a", "w8a")
QUICK_ROWS, QUICK_TEST_ROWS = 6_000, 2_000
LIBSVM_PREDICT_ROWS = {"quick": 500, "full": 1_000}
OURS_PREDICT_ROWS = 10_000  # throughput measured on the first rows of the test split


# --------------------------------------------------------------------------------------
# data


def load(name: str, n_features: int | None = None) -> tuple[sp.csr_matrix, np.ndarray]:
    from solvers.svmlight import load_svmlight

    parsed = load_svmlight(DATA_DIR / f"{name}.xz")
    return parsed.to_csr(n_features), parsed.y


def problem_data(name: str, quick: bool) -> tuple[sp.csr_matrix, np.ndarray, sp.csr_matrix,
                                                  np.ndarray]:
    """Training and test split; quick: a seeded training sample and the first test rows."""
    X, y = load(name)
    X_test, y_test = load(f"{name}.t", X.shape[1])
    if quick:
        count = min(QUICK_ROWS, X.shape[0])
        rows = np.sort(np.random.default_rng(0).choice(X.shape[0], count, replace=False))
        X, y = X[rows], y[rows]
        X_test, y_test = X_test[:QUICK_TEST_ROWS], y_test[:QUICK_TEST_ROWS]
    return X, y, X_test, y_test


# --------------------------------------------------------------------------------------
# LIBSVM in a helper process (so that OMP_NUM_THREADS applies to its OpenMP loop)


def libsvm_worker(spec_path: str) -> None:
    """Train (and time svm_predict) as the spec says; write the result JSON."""
    spec = json.loads(Path(spec_path).read_text())
    from libsvm import svmutil

    X, y, X_test, y_test = problem_data(spec["dataset"], spec["quick"])
    problem = svmutil.svm_problem(y, X)
    options = (f"-s 0 -t 2 -c 1 -g {spec['gamma']!r} -e 0.001 -m 200 -h 1")
    with tempfile.TemporaryFile(mode="w+b") as capture:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(capture.fileno(), 1)
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            model = svmutil.svm_train(problem, options)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        capture.seek(0)
        output = capture.read().decode(errors="replace")
    result: dict[str, Any] = {"wall": wall, "cpu": cpu, "n_sv": model.get_nr_sv()}
    for line in output.splitlines():
        if line.startswith("obj = "):
            result["objective"] = float(line.split(",")[0].split("=")[1])
        if "#iter = " in line:
            result["iterations"] = int(line.split("=")[1])
    if spec.get("model_path"):
        svmutil.svm_save_model(spec["model_path"], model)
    if spec.get("predict_rows"):
        rows = spec["predict_rows"]
        started = time.perf_counter()
        svmutil.svm_predict(y_test[:rows], X_test[:rows], model, "-q")
        result["predict_rows_per_s"] = rows / (time.perf_counter() - started)
    Path(spec["result_path"]).write_text(json.dumps(result))


def run_libsvm(dataset: str, quick: bool, gamma: float, omp_threads: int,
               model_path: str | None = None, predict_rows: int = 0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as directory:
        spec_path = Path(directory) / "spec.json"
        result_path = Path(directory) / "result.json"
        spec_path.write_text(json.dumps({
            "dataset": dataset, "quick": quick, "gamma": gamma, "model_path": model_path,
            "predict_rows": predict_rows, "result_path": str(result_path)}))
        env = {**os.environ, "OMP_NUM_THREADS": str(omp_threads)}
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--libsvm-worker",
                        str(spec_path)], check=True, env=env, cwd=REPO)
        result: dict[str, Any] = json.loads(result_path.read_text())
        return result


# --------------------------------------------------------------------------------------
# ours


def run_ours(X: sp.csr_matrix, y: np.ndarray, threads: int) -> tuple[dict[str, Any], Any]:
    from solvers import fit

    wall, cpu = time.perf_counter(), time.process_time()
    result = fit(X, y, solver="smo", kernel="rbf", C=1.0, eps=1e-3, cache_mb=200.0,
                 threads=threads)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    output = result.per_output[0]
    return {"wall": wall, "cpu": cpu, "n_sv": result.n_support,
            "objective": result.dual_objective, "iterations": result.iterations,
            "exit": result.exit_reason, "fine": f"{100 * result.params['fine_grained_share']:.0f}%",
            "hits": output["cache_hits"], "misses": output["cache_misses"],
            "evaluations": output["kernel_evaluations"]}, result


def prediction_throughput(model: Any, X_test: sp.csr_matrix, reps: int) -> dict[str, float]:
    from solvers.kernels import raw_decision_values

    out: dict[str, float] = {}
    for dot in ("scatter", "merge"):
        for threads in (1, 2):
            raw_decision_values(model, X_test[:64], threads=threads, dot=dot)
            times = []
            for _ in range(reps):
                started = time.perf_counter()
                raw_decision_values(model, X_test, threads=threads, dot=dot)
                times.append(time.perf_counter() - started)
            out[f"{dot} {threads}t"] = X_test.shape[0] / statistics.median(times)
    return out


def compile_times() -> dict[str, float]:
    """Cold compile (empty Numba cache) and cache load of every SMO/prediction kernel, each
    in a fresh interpreter."""
    code = ("import time; t = time.perf_counter(); import solvers.smo; "
            "i = time.perf_counter() - t; from solvers.warmup import warmup; w = warmup(); "
            "print(i, w)")
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache}
        for label in ("cold", "cached"):
            text = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO, check=True,
                                  capture_output=True, text=True).stdout.split()
            out[f"import_{label}"], out[f"warmup_{label}"] = float(text[0]), float(text[1])
    return out


# --------------------------------------------------------------------------------------
# the experiment


def bench_dataset(name: str, quick: bool, reps: int, libsvm_omp2: bool) -> dict[str, Any]:
    from solvers.formats import read_libsvm_model_text

    X, y, X_test, y_test = problem_data(name, quick)
    gamma = 1.0 / X.shape[1]
    runs: dict[str, list[dict[str, Any]]] = {"libsvm": [], "libsvm2": [], "ours1": [],
                                             "ours2": []}
    models: dict[str, Any] = {}
    predict_rows = LIBSVM_PREDICT_ROWS["quick" if quick else "full"]
    with tempfile.TemporaryDirectory() as directory:
        model_path = str(Path(directory) / "libsvm.model")
        for rep in range(reps):
            order = ["libsvm", "ours1", "ours2"] + (["libsvm2"] if libsvm_omp2 else [])
            for engine in order if rep % 2 == 0 else order[::-1]:
                print(f"  {name} rep {rep + 1}/{reps}: {engine}", flush=True)
                if engine.startswith("libsvm"):
                    first = engine == "libsvm" and rep == 0
                    runs[engine].append(run_libsvm(
                        name, quick, gamma, 1 if engine == "libsvm" else 2,
                        model_path if first else None, predict_rows if first else 0))
                else:
                    facts, result = run_ours(X, y, int(engine[-1]))
                    runs[engine].append(facts)
                    models[engine] = result.model
        with open(model_path) as handle:
            libsvm_model = read_libsvm_model_text(handle.read(), X.shape[1])
    ours = models["ours1"]
    ours_values = ours.decision_function(X_test)
    libsvm_values = libsvm_model.decision_function(X_test)
    accuracy = float(np.mean(ours.predict(X_test)[0] == y_test) * 100)
    libsvm_accuracy = float(np.mean(libsvm_model.predict(X_test)[0] == y_test) * 100)
    throughput = prediction_throughput(ours, X_test[:OURS_PREDICT_ROWS], reps=max(reps, 2))

    def median(engine: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs[engine]))

    libsvm_first = runs["libsvm"][0]
    return {
        "name": name, "rows": X.shape[0], "test_rows": X_test.shape[0], "features": X.shape[1],
        "libsvm_wall": median("libsvm", "wall"), "libsvm_cpu": median("libsvm", "cpu"),
        "libsvm2_wall": median("libsvm2", "wall") if libsvm_omp2 else math.nan,
        "ours1_wall": median("ours1", "wall"), "ours1_cpu": median("ours1", "cpu"),
        "ours2_wall": median("ours2", "wall"), "ours2_cpu": median("ours2", "cpu"),
        "fine_grained": [r["fine"] for r in runs["ours2"]],
        "walls": {k: [round(r["wall"], 2) for r in v] for k, v in runs.items() if v},
        "objective": runs["ours1"][0]["objective"], "libsvm_objective":
        libsvm_first["objective"], "n_sv": runs["ours1"][0]["n_sv"],
        "libsvm_n_sv": libsvm_first["n_sv"], "iterations": runs["ours1"][0]["iterations"],
        "libsvm_iterations": libsvm_first["iterations"], "exit": runs["ours1"][0]["exit"],
        "cache": (runs["ours1"][0]["hits"], runs["ours1"][0]["misses"],
                  runs["ours1"][0]["evaluations"]),
        "accuracy": accuracy, "libsvm_accuracy": libsvm_accuracy,
        "correlation": float(np.corrcoef(ours_values, libsvm_values)[0, 1]),
        "throughput": throughput,
        "libsvm_throughput": libsvm_first["predict_rows_per_s"],
        "libsvm_predict_rows": predict_rows,
    }


def row(metric: str, hinge: float, reference: float, target: str, met: bool | None = None
        ) -> dict[str, Any]:
    """A summary row; met=None: compare ratio = hinge / reference with "<= x" / ">= x"."""
    ratio = hinge / reference if reference and math.isfinite(reference) else math.nan
    if met is None:
        bound = float(target.split()[-1])
        met = math.isfinite(ratio) and (ratio <= bound if target.startswith("<=")
                                        else ratio >= bound)
    return {"experiment": "smo", "metric": metric, "hinge": float(hinge),
            "reference": float(reference), "ratio": float(ratio), "target": target,
            "met": bool(met)}


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        name = r["name"] + (" (sample)" if r["rows"] == QUICK_ROWS else "")
        rows += [
            row(f"{name}: train s, 1 thread vs LIBSVM", r["ours1_wall"], r["libsvm_wall"],
                "<= 1.0"),
            row(f"{name}: train s, 2 threads vs LIBSVM (1 thread)", r["ours2_wall"],
                r["libsvm_wall"], "<= 0.667"),
            row(f"{name}: prediction rows/s, 1 thread vs svm_predict",
                r["throughput"]["scatter 1t"], r["libsvm_throughput"], ">= 1.0"),
            row(f"{name}: dual objective (1/2 a'Qa - e'a)", r["objective"],
                r["libsvm_objective"], "within 1e-3 rel.",
                met=abs(r["objective"] / r["libsvm_objective"] - 1) < 1e-3),
            row(f"{name}: support vectors", r["n_sv"], r["libsvm_n_sv"], "within 2%",
                met=abs(r["n_sv"] / r["libsvm_n_sv"] - 1) <= 0.02),
            row(f"{name}: test accuracy %", r["accuracy"], r["libsvm_accuracy"],
                "within 0.2 points", met=abs(r["accuracy"] - r["libsvm_accuracy"]) <= 0.2),
        ]
    return rows


def write_markdown(results: list[dict[str, Any]], rows: list[dict[str, Any]], reps: int,
                   quick: bool, compile_s: dict[str, float] | None, load: tuple[float, float],
                   output: Path) -> None:
    import numba

    versions = _versions()
    lines = [
        "# SMO (kernel SVM) vs LIBSVM",
        "",
        f"Generated by `bench/smo_bench.py{' --quick' if quick else ''}` on "
        f"{dt.date.today()}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, Numba "
        f"{numba.__version__}, libsvm-official {versions}. {reps} alternating repetitions, "
        f"medians, wall clock. Load average (1 min) at the start {load[0]:.2f}, at the end "
        f"{load[1]:.2f} (it counts this benchmark's own processes; README.md gives the CPU "
        "other processes used, which would inflate both engines and, above all, any "
        "parallel speed-up).",
        "",
        "Problem: C-SVC, RBF, C = 1, gamma = 1/d, eps = 1e-3, cache 200 MB, shrinking. "
        "LIBSVM runs in a helper process with OMP_NUM_THREADS=1 (its wheel is built with "
        "OpenMP; `LIBSVM 2t` = OMP_NUM_THREADS=2, for information, quick mode only: under "
        "load its OpenMP loop is many times slower). Ours: `solvers.fit(solver=\"smo\")` on a "
        "parsed CSR matrix (validation included), after warm-up.",
        "",
        "## Training",
        "",
        "| data | rows | LIBSVM s (CPU s) | ours 1t s (CPU s) | ratio | ours 2t s | ratio | "
        "LIBSVM 2t s | iter ours / LIBSVM | cache hits / misses / kernel evals |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        hits, misses, evaluations = r["cache"]
        lines.append(
            f"| {r['name']} | {r['rows']:,} | {r['libsvm_wall']:.2f} ({r['libsvm_cpu']:.2f}) "
            f"| {r['ours1_wall']:.2f} ({r['ours1_cpu']:.2f}) | "
            f"{r['ours1_wall'] / r['libsvm_wall']:.2f} | {r['ours2_wall']:.2f} | "
            f"{r['ours2_wall'] / r['libsvm_wall']:.2f} | {_seconds(r['libsvm2_wall'])} | "
            f"{r['iterations']:,} / {r['libsvm_iterations']:,} | {hits:,} / {misses:,} / "
            f"{evaluations / 1e6:.0f} M |")
    lines += ["", "Every run, wall-clock seconds: " + "; ".join(
        f"{r['name']}: " + ", ".join(f"{k} {v}" for k, v in r["walls"].items())
        for r in results), ""]
    lines += [
        "## Agreement with LIBSVM",
        "",
        "| data | dual objective ours | LIBSVM | rel. diff | #SV ours | LIBSVM | test rows | "
        "test acc. ours % | LIBSVM % | decision-value correlation | exit |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r['name']} | {r['objective']:.6f} | {r['libsvm_objective']:.6f} | "
            f"{abs(r['objective'] / r['libsvm_objective'] - 1):.1e} | {r['n_sv']:,} | "
            f"{r['libsvm_n_sv']:,} | {r['test_rows']:,} | {r['accuracy']:.3f} | "
            f"{r['libsvm_accuracy']:.3f} | {r['correlation']:.7f} | {r['exit']} |")
    lines += [
        "",
        "## Prediction throughput (rows/s, test split)",
        "",
        f"Ours on the first {OURS_PREDICT_ROWS:,} test rows (or all), best of the "
        "repetitions' median; LIBSVM's svm_predict on its first rows (Python loop over rows).",
        "",
        "| data | SVs | LIBSVM svm_predict | ours scatter 1t | ours merge 1t | ours scatter 2t "
        "| ours merge 2t | ratio (scatter 1t) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        t = r["throughput"]
        lines.append(
            f"| {r['name']} | {r['n_sv']:,} | {r['libsvm_throughput']:,.0f} (first "
            f"{r['libsvm_predict_rows']:,} rows) | {t['scatter 1t']:,.0f} | "
            f"{t['merge 1t']:,.0f} | {t['scatter 2t']:,.0f} | {t['merge 2t']:,.0f} | "
            f"{t['scatter 1t'] / r['libsvm_throughput']:.1f} |")
    if compile_s:
        lines += ["", f"Compilation (excluded above): importing solvers.smo takes "
                  f"{compile_s['import_cold']:.2f} s; `solvers.warmup.warmup()` (every "
                  f"solver and prediction kernel, SMO's parallel variants included) takes "
                  f"{compile_s['warmup_cold']:.1f} s with an empty Numba cache and "
                  f"{compile_s['warmup_cached']:.2f} s loading the cache."]
    lines += ["", "## Summary", "", "| metric | hinge | reference | ratio | target | met |",
              "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['metric']} | {r['hinge']:.6g} | {r['reference']:.6g} | "
                     f"{r['ratio']:.3f} | {r['target']} | {'yes' if r['met'] else 'NO'} |")
    fine = sorted({str(v) for r in results for v in r["fine_grained"]})
    lines += ["", "## Notes", "",
              f"- Our 2-thread runs' share of steps with the parallel loops: {', '.join(fine)} "
              "(solvers/grain.py measures it as the fit runs: on a busy machine a "
              "fork/join per SMO step costs milliseconds waiting for a descheduled thread, "
              "and the fit keeps its loops on one thread). Both give the same solution.",
              "- Ratios are ours / LIBSVM: below 1 is faster for times, above 1 is faster "
              "for throughput.",
              "- Compare ratios measured side by side, not times across documents: the "
              "LIBSVM reference times in the shared data's MANIFEST.md were taken on "
              "another machine, and this machine's LIBSVM times differ from them by more "
              "than the noise of one run (see the LIBSVM column above)."]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n")


def _seconds(value: float) -> str:
    return f"{value:.2f}" if math.isfinite(value) else "—"


def _versions() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("libsvm-official")
    except importlib.metadata.PackageNotFoundError:
        return "?"


def main(quick: bool = False, reps: int | None = None,
         datasets: tuple[str, ...] | None = None, output: Path = RESULTS
         ) -> list[dict[str, Any]]:
    """reps: 2 (quick: 1)."""
    from solvers.warmup import warmup

    reps = reps or (1 if quick else 2)

    load_start = os.getloadavg()[0]
    compile_s = None if quick else compile_times()
    warmup()
    names = datasets or (("ijcnn1",) if quick else DATASETS)
    results = []
    for name in names:
        print(f"== {name}", flush=True)
        results.append(bench_dataset(name, quick, reps, libsvm_omp2=quick))
    rows = summary_rows(results)
    write_markdown(results, rows, reps, quick, compile_s, (load_start, os.getloadavg()[0]),
                   output)
    return rows


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--libsvm-worker":
        libsvm_worker(sys.argv[2])
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None, help="2 (quick: 1)")
    parser.add_argument("--datasets", nargs="*", default=None)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    for summary in main(args.quick, args.reps, tuple(args.datasets) if args.datasets else None,
                        args.output):
        print(summary)
