"""LIBSVM's other formulations (nu-SVC, one-class, epsilon-SVR, nu-SVR) and weighted C-SVC:
Hinge's smo against LIBSVM 3.37 (scikit-learn's NuSVC / OneClassSVM / SVR / NuSVR / SVC,
which are LIBSVM) and oneDAL (scikit-learn-intelex's SVR, NuSVR, NuSVC; it has no
one-class SVM), 1 and 2 threads each.

Each engine trains the same problem (rbf, eps / tol 1e-3, cache 200 MB, shrinking) after a
warm-up fit (Numba's cache, oneDAL's first call); the training call alone is timed, the
median of `reps` repetitions (engines alternate). LIBSVM runs single-threaded (its
reference setting); oneDAL's threads are set by daal4py.daalinit(n), Hinge's by its
`threads` parameter. Beside the times: the dual objectives' relative difference with
LIBSVM's (computed from each model, the same formula) and the support-vector counts.

Problems: nu-SVC (nu 0.3) and one-class (nu 0.1) on a seeded sample of ijcnn1-like dense
data (testkit.datagen.dense, scaled); epsilon-SVR (C 10, epsilon 0.1) and nu-SVR (C 10,
nu 0.3) on Friedman #1 (scikit-learn's make_friedman1, noise 1, standardised target);
weighted C-SVC (weights uniform in [0.2, 3]). Full: 8,000 rows; quick: 2,000.

Done-when target (issue 26): Hinge 2t no slower than the faster of LIBSVM and oneDAL 2t,
one summary row per formulation.

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
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import results_dir, smaller  # noqa: E402

RESULTS_NAME = "formulations.md"
ENGINES = ("hinge1", "hinge2", "libsvm", "onedal1", "onedal2")
LABELS = {"hinge1": "Hinge 1t", "hinge2": "Hinge 2t", "libsvm": "LIBSVM",
          "onedal1": "oneDAL 1t", "onedal2": "oneDAL 2t"}
# formulation -> (hinge params, sklearn class name, sklearn params)
PROBLEMS: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "nu_svc": ({"nu": 0.3}, "NuSVC", {"nu": 0.3}),
    "one_class": ({"nu": 0.1}, "OneClassSVM", {"nu": 0.1}),
    "epsilon_svr": ({"C": 10.0, "epsilon": 0.1}, "SVR", {"C": 10.0, "epsilon": 0.1}),
    "nu_svr": ({"C": 10.0, "nu": 0.3}, "NuSVR", {"C": 10.0, "nu": 0.3}),
    "c_svc_weighted": ({"C": 1.0}, "SVC", {"C": 1.0}),
}
ONEDAL = {"SVR", "NuSVR", "NuSVC", "SVC"}  # sklearnex's SVMs


def problem_data(formulation: str, rows: int) -> tuple[np.ndarray, np.ndarray,
                                                       np.ndarray | None]:
    """(X dense, y, sample weights or None), seeded."""
    from sklearn.datasets import make_friedman1

    from testkit import datagen
    from testkit.bundled import scale_columns

    if "svr" in formulation:
        X, y = make_friedman1(n_samples=rows, noise=1.0, random_state=0)
        return scale_columns(X), (y - y.mean()) / y.std(), None
    X_sparse, y = datagen.dense(rows, 22, seed=7, separation=3)
    X = scale_columns(np.asarray(X_sparse.todense()))
    weights = (np.random.default_rng(1).uniform(0.2, 3.0, rows)
               if formulation == "c_svc_weighted" else None)
    return X, y, weights


def _hinge(formulation: str, threads: int) -> Callable[..., Any]:
    from solvers.kernels import KernelModel
    from solvers.train import fit

    params, _, _ = PROBLEMS[formulation]
    name = "c_svc" if formulation == "c_svc_weighted" else formulation

    def run(X: np.ndarray, y: np.ndarray, weights: np.ndarray | None, gamma: float) -> Any:
        result = fit(X, None if name == "one_class" else y, solver="smo", formulation=name,
                     kernel="rbf", gamma=gamma, eps=1e-3, threads=threads,
                     sample_weight=weights, **params)
        model = result.model
        assert isinstance(model, KernelModel)
        return model.n_support, model.support_vectors(), model.sv_coef[0], model.sv_rows
    return run


def _sklearn(formulation: str, engine: str) -> Callable[..., Any] | None:
    _, cls_name, params = PROBLEMS[formulation]
    if engine.startswith("onedal"):
        if cls_name not in ONEDAL:
            return None
        try:
            import daal4py
            import sklearnex.svm as module
        except ImportError:
            return None
        daal4py.daalinit(1 if engine == "onedal1" else 2)
    else:
        import sklearn.svm as module
    cls = getattr(module, cls_name)

    def run(X: np.ndarray, y: np.ndarray, weights: np.ndarray | None, gamma: float) -> Any:
        estimator = cls(kernel="rbf", gamma=gamma, tol=1e-3, cache_size=200, **params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if cls_name == "OneClassSVM":
                estimator.fit(X, sample_weight=weights)
            else:
                estimator.fit(X, y, sample_weight=weights)
        support = np.asarray(estimator.support_)
        return support.shape[0], X[support], np.asarray(estimator.dual_coef_)[0], support
    return run


def _objective(formulation: str, sv: Any, coef: np.ndarray, rows: np.ndarray, y: np.ndarray,
               gamma: float) -> float:
    """LIBSVM's dual objective from a model (the same formula for every engine; binary)."""
    from sklearn.metrics.pairwise import rbf_kernel

    dense = np.asarray(sv.todense()) if hasattr(sv, "todense") else np.asarray(sv)
    K = rbf_kernel(dense, dense, gamma=gamma)
    value = 0.5 * float(coef @ K @ coef)
    params = PROBLEMS[formulation][0]
    if formulation == "c_svc_weighted":
        value -= float(np.abs(coef).sum())
    elif "svr" in formulation:
        value -= float(y[rows] @ coef)
        if formulation == "epsilon_svr":
            value += params["epsilon"] * float(np.abs(coef).sum())
    return value


def bench(formulation: str, rows: int, reps: int) -> dict[str, Any]:
    X, y, weights = problem_data(formulation, rows)
    gamma = 1.0 / X.shape[1]
    runners: dict[str, Callable[..., Any] | None] = {
        "hinge1": _hinge(formulation, 1), "hinge2": _hinge(formulation, 2),
        "libsvm": _sklearn(formulation, "libsvm"), "onedal1": _sklearn(formulation, "onedal1"),
        "onedal2": _sklearn(formulation, "onedal2")}
    times: dict[str, list[float]] = {e: [] for e in ENGINES}
    outputs: dict[str, Any] = {}
    small = slice(0, 200)
    for run in runners.values():  # warm-up
        if run is not None:
            run(X[small], y[small], None if weights is None else weights[small], gamma)
    for rep in range(reps):
        order = ENGINES if rep % 2 == 0 else tuple(reversed(ENGINES))
        for engine in order:
            run = runners[engine]
            if run is None:
                continue
            if engine.startswith("onedal"):  # its thread count is process-wide
                import daal4py
                daal4py.daalinit(1 if engine == "onedal1" else 2)
            start = time.perf_counter()
            outputs[engine] = run(X, y, weights, gamma)
            times[engine].append(time.perf_counter() - start)
    medians = {e: statistics.median(t) if t else math.nan for e, t in times.items()}
    libsvm_objective = _objective(formulation, outputs["libsvm"][1], outputs["libsvm"][2],
                                  outputs["libsvm"][3], y, gamma)
    agreement = {}
    for engine, (n_sv, sv, coef, sv_rows) in outputs.items():
        value = _objective(formulation, sv, coef, sv_rows, y, gamma)
        agreement[engine] = (abs(value - libsvm_objective) / abs(libsvm_objective), n_sv)
    return {"name": formulation, "rows": rows, "times": medians, "agreement": agreement}


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        t = r["times"]
        peers = [v for v in (t["libsvm"], t["onedal2"]) if math.isfinite(v)]
        best = min(peers)
        ratio = t["hinge2"] / best if best > 0 else math.nan
        rows.append({"experiment": "formulations",
                     "metric": f"{r['name']}: Hinge 2t s vs min(LIBSVM, oneDAL 2t)",
                     "hinge": float(t["hinge2"]), "reference": float(best),
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
        f"{os.cpu_count()} cores. {reps} alternating repetitions in one process, medians "
        f"of the training time (seconds). Load average (1 min) at the start "
        f"{load[0]:.2f}, at the end {load[1]:.2f}. Objective: |D - D_LIBSVM| / |D_LIBSVM| "
        "from each model (eps 1e-3 everywhere). '-': the engine has no such model.",
        "",
        "| problem | rows | " + " | ".join(LABELS[e] for e in ENGINES)
        + " | SVs Hinge / LIBSVM | objective rel. diff. Hinge / oneDAL |",
        "|---|---:|" + "---:|" * len(ENGINES) + "---|---|",
    ]
    for r in results:
        t, a = r["times"], r["agreement"]
        cells = [f"{t[e]:.3f}" if math.isfinite(t[e]) else "-" for e in ENGINES]
        onedal = f"{a['onedal2'][0]:.1e}" if "onedal2" in a else "-"
        lines.append(f"| {r['name']} | {r['rows']} | " + " | ".join(cells)
                     + f" | {a['hinge1'][1]} / {a['libsvm'][1]} | "
                     f"{a['hinge1'][0]:.1e} / {onedal} |")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n")


def main(quick: bool = False, reps: int | None = None,
         output: Path | None = None) -> list[dict[str, Any]]:
    reps = reps or (1 if quick else 3)
    rows = smaller(2000, 400) if quick else 8000
    load_start = os.getloadavg()[0]
    results = []
    for formulation in PROBLEMS:
        print(f"== {formulation}", flush=True)
        results.append(bench(formulation, rows, reps))
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
