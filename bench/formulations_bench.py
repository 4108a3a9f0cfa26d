"""LIBSVM's other formulations (nu-SVC, one-class, epsilon-SVR, nu-SVR) and weighted C-SVC
on real data: Hinge's smo against LIBSVM 3.37 (scikit-learn's NuSVC / OneClassSVM / SVR /
NuSVR / SVC, which are LIBSVM) and oneDAL (scikit-learn-intelex's SVR, NuSVR, NuSVC, SVC;
it has no one-class SVM), 1 and 2 threads each.

Each engine trains the same problem (rbf, eps / tol 1e-3, cache 200 MB, shrinking) after
a warm-up fit on the first 200 rows (Numba's cache, oneDAL's first call) and one on the
whole problem; the training call alone is timed (a fit shorter than BLOCK_SECONDS: the
mean of a block of fits that lasts about that long), the median of `reps` repetitions,
engines alternating in one process (the order reverses on odd repetitions), so that the
load of the machine hits every engine alike. The one-thread comparison (Hinge 1t,
LIBSVM, oneDAL 1t) is in CPU seconds of the process (time.process_time: robust to other
processes on the cores), the two-thread one (Hinge 2t, LIBSVM, oneDAL 2t) in wall
seconds. LIBSVM runs single-threaded (its reference setting); oneDAL's threads are set
by daal4py.daalinit(n), Hinge's by its `threads` parameter. Beside the times: the dual
objectives' relative difference with LIBSVM's (computed from each model, the same
formula) and the support-vector counts.

Problems (the shared LIBSVM sets of ../shared/data and scikit-learn's bundled diabetes):
- nu-SVC and one-class: ijcnn1's first 10,000 rows (22 dense features; nu 0.1, the
  classes are 9:1) and mushrooms (8,124 rows of 0/1 features; nu 0.3 / 0.1);
- epsilon-SVR (C 1, epsilon 0.1) and nu-SVR (C 1, nu 0.5): ijcnn1's first 10,000 rows with
  their +-1 labels as targets (what svm-train -s 3 / -s 4 does with them), pendigits (7,494
  rows, 16 features 0-100, gamma 1e-4) with the digit as the target, and diabetes (442 x 10,
  features scaled to [-1, 1], target standardised; C 10);
- weighted C-SVC: ijcnn1's first 10,000 rows, weights uniform in [0.2, 3] (seeded).
Quick (a smoke run): a seeded sample of 1,000 rows of each shared set.

Done-when target (issue 26): on every row, Hinge 1t no slower than the faster of LIBSVM
and oneDAL 1t, and Hinge 2t no slower than the faster of LIBSVM and oneDAL 2t.

Usage: python bench/formulations_bench.py [--quick] [--reps N]
Writes bench/results/formulations.md; `main(quick)` returns bench/run.py's rows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import results_dir, smaller  # noqa: E402

RESULTS_NAME = "formulations.md"
ENGINES = ("hinge1", "hinge2", "libsvm", "onedal1", "onedal2")
ONE_THREAD = ("hinge1", "libsvm", "onedal1")  # CPU seconds: the 1-thread comparison
TWO_THREADS = ("hinge2", "libsvm", "onedal2")  # wall seconds: the 2-thread comparison
COLUMNS = ("hinge1", "libsvm", "onedal1", "hinge2_wall", "libsvm_wall", "onedal2_wall")
LABELS = {"hinge1": "Hinge 1t CPU", "libsvm": "LIBSVM CPU", "onedal1": "oneDAL 1t CPU",
          "hinge2_wall": "Hinge 2t wall", "libsvm_wall": "LIBSVM wall",
          "onedal2_wall": "oneDAL 2t wall"}
PEERS = {"hinge1": ("libsvm", "onedal1"), "hinge2_wall": ("libsvm_wall", "onedal2_wall")}
ONEDAL = {"SVR", "NuSVR", "NuSVC", "SVC"}  # sklearnex's SVMs
ROWS = 10_000  # rows taken of ijcnn1
QUICK_ROWS = 1_000  # --quick, a smoke run: a seeded sample of every shared set


class Problem(NamedTuple):
    formulation: str  # Hinge's (c_svc_weighted: c_svc with instance weights)
    data: str
    hinge: dict[str, Any]
    sklearn_class: str
    sklearn: dict[str, Any]
    gamma: float | None = None  # None: 1 / n_features


PROBLEMS: tuple[Problem, ...] = (
    Problem("nu_svc", "ijcnn1", {"nu": 0.1}, "NuSVC", {"nu": 0.1}),
    Problem("nu_svc", "mushrooms", {"nu": 0.3}, "NuSVC", {"nu": 0.3}),
    Problem("one_class", "ijcnn1", {"nu": 0.1}, "OneClassSVM", {"nu": 0.1}),
    Problem("one_class", "mushrooms", {"nu": 0.1}, "OneClassSVM", {"nu": 0.1}),
    Problem("epsilon_svr", "ijcnn1", {"C": 1.0, "epsilon": 0.1}, "SVR",
            {"C": 1.0, "epsilon": 0.1}),
    Problem("epsilon_svr", "pendigits", {"C": 1.0, "epsilon": 0.1}, "SVR",
            {"C": 1.0, "epsilon": 0.1}, 1e-4),
    Problem("epsilon_svr", "diabetes", {"C": 10.0, "epsilon": 0.1}, "SVR",
            {"C": 10.0, "epsilon": 0.1}),
    Problem("nu_svr", "ijcnn1", {"C": 1.0, "nu": 0.5}, "NuSVR", {"C": 1.0, "nu": 0.5}),
    Problem("nu_svr", "pendigits", {"C": 1.0, "nu": 0.5}, "NuSVR", {"C": 1.0, "nu": 0.5},
            1e-4),
    Problem("nu_svr", "diabetes", {"C": 10.0, "nu": 0.3}, "NuSVR", {"C": 10.0, "nu": 0.3}),
    Problem("c_svc_weighted", "ijcnn1", {"C": 1.0}, "SVC", {"C": 1.0}),
)


def problem_data(problem: Problem, quick: bool) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """(X as CSR, y: labels or targets, sample weights or None)."""
    import scipy.sparse as sp

    if problem.data == "diabetes":
        from sklearn.datasets import load_diabetes

        from testkit.bundled import scale_columns

        features, target = load_diabetes(return_X_y=True)
        X = sp.csr_matrix(scale_columns(np.asarray(features, dtype=np.float64)))
        y = (target - target.mean()) / target.std()
    else:
        from bench.smo_bench import load

        X, y = load(problem.data)
        if quick:  # a seeded sample (the files' first rows can be of one class)
            count = min(smaller(QUICK_ROWS, 400), X.shape[0])
            take = np.sort(np.random.default_rng(0).choice(X.shape[0], count, replace=False))
        else:
            take = np.arange(min(ROWS, X.shape[0]) if problem.data == "ijcnn1" else X.shape[0])
        X, y = sp.csr_matrix(X[take]), np.asarray(y[take], dtype=np.float64)
    X.indices = X.indices.astype(np.int32)
    weights = (np.random.default_rng(1).uniform(0.2, 3.0, X.shape[0])
               if problem.formulation == "c_svc_weighted" else None)
    return X, y, weights


def _hinge(problem: Problem, threads: int) -> Callable[..., Any]:
    from solvers.kernels import KernelModel
    from solvers.train import fit

    name = "c_svc" if problem.formulation == "c_svc_weighted" else problem.formulation

    def run(X: Any, y: np.ndarray, weights: np.ndarray | None, gamma: float) -> Any:
        result = fit(X, None if name == "one_class" else y, solver="smo", formulation=name,
                     kernel="rbf", gamma=gamma, eps=1e-3, cache_mb=200.0, threads=threads,
                     sample_weight=weights, **problem.hinge)
        model = result.model
        assert isinstance(model, KernelModel)
        return model.n_support, model.support_vectors(), model.sv_coef[0], model.sv_rows
    return run


def _sklearn(problem: Problem, engine: str) -> Callable[..., Any] | None:
    if engine.startswith("onedal"):
        if problem.sklearn_class not in ONEDAL:
            return None
        try:
            import daal4py
            import sklearnex.svm as module
        except ImportError:
            return None
        daal4py.daalinit(1 if engine == "onedal1" else 2)
    else:
        import sklearn.svm as module
    cls = getattr(module, problem.sklearn_class)

    def run(X: Any, y: np.ndarray, weights: np.ndarray | None, gamma: float) -> Any:
        estimator = cls(kernel="rbf", gamma=gamma, tol=1e-3, cache_size=200,
                        **problem.sklearn)
        features = _dense_of(X) if engine.startswith("onedal") or _is_dense(X) else X
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if problem.sklearn_class == "OneClassSVM":
                estimator.fit(features, sample_weight=weights)
            else:
                estimator.fit(features, y, sample_weight=weights)
        support = np.asarray(estimator.support_)
        dual = estimator.dual_coef_  # sparse for a sparse input
        coef = dual.toarray() if hasattr(dual, "toarray") else np.asarray(dual)
        return support.shape[0], X[support], coef[0], support
    return run


_DENSE: dict[int, np.ndarray] = {}  # id(X) -> X as an array, made before the timing


def _is_dense(X: Any) -> bool:
    """The peers' input: a dense array when at least half the entries are stored (LIBSVM's
    dense build is then faster), else the CSR matrix (mushrooms); oneDAL always dense
    (its sparse path is much slower)."""
    return bool(X.nnz >= 0.5 * X.shape[0] * X.shape[1])


def _dense_of(X: Any) -> np.ndarray:
    return _DENSE[id(X)]


def _objective(problem: Problem, sv: Any, coef: np.ndarray, rows: np.ndarray, y: np.ndarray,
               gamma: float) -> float:
    """LIBSVM's dual objective from a model (the same formula for every engine; binary)."""
    from sklearn.metrics.pairwise import rbf_kernel

    dense = np.asarray(sv.todense()) if hasattr(sv, "todense") else np.asarray(sv)
    K = rbf_kernel(dense, dense, gamma=gamma)
    value = 0.5 * float(coef @ K @ coef)
    if problem.formulation == "c_svc_weighted":
        value -= float(np.abs(coef).sum())
    elif "svr" in problem.formulation:
        value -= float(y[rows] @ coef)
        if problem.formulation == "epsilon_svr":
            value += problem.hinge["epsilon"] * float(np.abs(coef).sum())
    return value


BLOCK_SECONDS = 0.1  # a fit shorter than this is timed over a block of fits (the mean)


def _timed(run: Callable[..., Any], *args: Any, times: int = 1) -> tuple[float, float, Any]:
    """(CPU seconds of the process, wall seconds, the run's output) per fit, of `times`
    fits in a row."""
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(times):
        output = run(*args)
    return ((time.process_time() - cpu) / times, (time.perf_counter() - wall) / times,
            output)


def _block(run: Callable[..., Any], *args: Any) -> int:
    """How many fits make a block of about BLOCK_SECONDS (1 for a longer fit): a fit of a
    few milliseconds timed alone is at the mercy of one time slice."""
    _, wall, _ = _timed(run, *args)
    if wall >= BLOCK_SECONDS:
        return 1
    return min(100, math.ceil(BLOCK_SECONDS / max(wall, 1e-4)))


def bench(problem: Problem, quick: bool, reps: int) -> dict[str, Any]:
    X, y, weights = problem_data(problem, quick)
    _DENSE.clear()
    _DENSE[id(X)] = X.toarray()
    gamma = problem.gamma if problem.gamma is not None else 1.0 / X.shape[1]
    runners: dict[str, Callable[..., Any] | None] = {
        "hinge1": _hinge(problem, 1), "hinge2": _hinge(problem, 2),
        "libsvm": _sklearn(problem, "libsvm"), "onedal1": _sklearn(problem, "onedal1"),
        "onedal2": _sklearn(problem, "onedal2")}
    few = np.linspace(0, X.shape[0] - 1, 200).astype(np.int64)  # spread: both classes
    small = X[few]
    _DENSE[id(small)] = small.toarray()
    for engine, run in runners.items():  # warm-up
        if run is not None:
            _onedal_threads(engine)
            run(small, y[few], None if weights is None else weights[few], gamma)
    blocks = {}
    for engine, run in runners.items():  # one fit on the data: its block size
        if run is not None:
            _onedal_threads(engine)
            blocks[engine] = _block(run, X, y, weights, gamma)
    times: dict[str, list[float]] = {e: [] for e in COLUMNS}
    outputs: dict[str, Any] = {}
    for rep in range(reps):
        order = ENGINES if rep % 2 == 0 else tuple(reversed(ENGINES))
        for engine in order:
            run = runners[engine]
            if run is None:
                continue
            _onedal_threads(engine)
            cpu, wall, outputs[engine] = _timed(run, X, y, weights, gamma,
                                                times=blocks[engine])
            if engine in ONE_THREAD:
                times[engine].append(cpu)
            if engine in TWO_THREADS:
                times[engine + "_wall"].append(wall)
    medians = {c: statistics.median(t) if t else math.nan for c, t in times.items()}
    libsvm_objective = _objective(problem, outputs["libsvm"][1], outputs["libsvm"][2],
                                  outputs["libsvm"][3], y, gamma)
    agreement = {}
    for engine, (n_sv, sv, coef, sv_rows) in outputs.items():
        value = _objective(problem, sv, coef, sv_rows, y, gamma)
        agreement[engine] = (abs(value - libsvm_objective) / abs(libsvm_objective), n_sv)
    return {"name": problem.formulation, "data": problem.data, "rows": X.shape[0],
            "times": medians, "runs": times, "agreement": agreement}


def _onedal_threads(engine: str) -> None:
    if engine.startswith("onedal"):  # its thread count is process-wide
        import daal4py

        daal4py.daalinit(1 if engine == "onedal1" else 2)


def _best(t: dict[str, float], engines: tuple[str, ...]) -> float:
    values = [t[e] for e in engines if math.isfinite(t[e])]
    return min(values) if values else math.nan


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        t = r["times"]
        for ours, label in (("hinge2_wall", "2t wall s vs min(LIBSVM, oneDAL 2t)"),
                            ("hinge1", "1t CPU s vs min(LIBSVM, oneDAL 1t)")):
            best = _best(t, PEERS[ours])
            ratio = t[ours] / best if best > 0 else math.nan
            rows.append({"experiment": "formulations",
                         "metric": f"{r['name']} {r['data']}: Hinge {label}",
                         "hinge": float(t[ours]), "reference": float(best),
                         "ratio": float(ratio), "target": "<= 1.0",
                         "met": bool(math.isfinite(ratio) and ratio <= 1.0)})
    return rows


def write_markdown(results: list[dict[str, Any]], reps: int, quick: bool,
                   load: tuple[float, float], output: Path) -> None:
    lines = [
        "# LIBSVM's formulations: Hinge vs LIBSVM and oneDAL",
        "",
        f"Generated by `bench/formulations_bench.py{' --quick' if quick else ''}` on "
        f"{dt.date.today()}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}. {reps} alternating "
        "repetitions in one process (the order reverses on odd ones), medians of the "
        "training time in seconds: CPU seconds of the process for the one-thread "
        "comparison (Hinge 1t, LIBSVM, oneDAL 1t), wall seconds for the two-thread one "
        "(Hinge 2t, LIBSVM, oneDAL 2t); a fit shorter than "
        f"{BLOCK_SECONDS:g} s is timed over a block of fits that lasts about that long "
        "(the mean per fit). Load "
        f"average (1 min) at the start {load[0]:.2f}, at the end {load[1]:.2f}. rbf, "
        "eps 1e-3, cache 200 MB everywhere. Objective: |D - D_LIBSVM| / |D_LIBSVM| from "
        "each model. '-': the engine has no such model. Bold: Hinge no slower than the "
        "faster peer with as many threads.",
        "",
        "| problem | data | rows | " + " | ".join(LABELS[c] for c in COLUMNS)
        + " | SVs Hinge / LIBSVM | objective rel. diff. Hinge / oneDAL |",
        "|---|---|---:|" + "---:|" * len(COLUMNS) + "---|---|",
    ]
    for r in results:
        t, a = r["times"], r["agreement"]
        cells = []
        for e in COLUMNS:
            cell = f"{t[e]:.3f}" if math.isfinite(t[e]) else "-"
            peers = PEERS.get(e)
            if peers and math.isfinite(t[e]) and t[e] <= _best(t, peers):
                cell = f"**{cell}**"
            cells.append(cell)
        onedal = f"{a['onedal2'][0]:.1e}" if "onedal2" in a else "-"
        lines.append(f"| {r['name']} | {r['data']} | {r['rows']:,} | " + " | ".join(cells)
                     + f" | {a['hinge1'][1]:,} / {a['libsvm'][1]:,} | "
                     f"{a['hinge1'][0]:.1e} / {onedal} |")
    lines += ["", "Every run, seconds: " + "; ".join(
        f"{r['name']} {r['data']}: " + ", ".join(
            f"{LABELS[e]} " + "/".join(f"{v:.3f}" for v in r["runs"][e])
            for e in COLUMNS if r["runs"][e]) for r in results)]
    rows = summary_rows(results)
    lines += ["", "## Summary (done when every row is met)", "",
              "| metric | hinge | reference | ratio | target | met |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {row['metric']} | {row['hinge']:.4g} | {row['reference']:.4g} | "
              f"{row['ratio']:.3f} | {row['target']} | {'yes' if row['met'] else 'no'} |"
              for row in rows]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n")


def main(quick: bool = False, reps: int | None = None,
         output: Path | None = None) -> list[dict[str, Any]]:
    reps = reps or (1 if quick else 3)
    load_start = os.getloadavg()[0]
    results = []
    for problem in PROBLEMS:
        print(f"== {problem.formulation} {problem.data}", flush=True)
        results.append(bench(problem, quick, reps))
    write_markdown(results, reps, quick, (load_start, os.getloadavg()[0]),
                   output or results_dir() / RESULTS_NAME)
    return summary_rows(results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    for summary in main(args.quick, args.reps, args.output):
        print(summary)
