"""LIBLINEAR's logistic regression and L1-regularised models: Hinge against LIBLINEAR 2.50
(liblinear-official), CPU time to the same certified suboptimality.

Formulations: L2-regularised logistic regression, primal (Hinge `tron`, LIBLINEAR -s 0)
and dual (`logistic_dcd`, -s 7); L1-regularised L2-loss SVM (`l1_cd` loss l2, -s 5) and
logistic regression (`l1_cd` loss logistic, -s 6); C = 1, bias feature B = 1.

For each set and formulation: Hinge at its defaults (tol 1e-3: converged means a proven
relative gap <= 1e-3), CPU seconds (time.process_time, after a warm-up fit that loads
Numba's cache) and its certified gap; LIBLINEAR at its default eps (0.01; -s 7: 0.1) and at
eps 1e-6, CPU seconds and its suboptimality (P(w) - L) / P(w) against the best lower bound
L known for the problem (Hinge's certificate, solvers/certificate.py, evaluated at every
model of the row, LIBLINEAR's included). The summary compares Hinge with the cheaper
LIBLINEAR setting that reaches 1e-3 (the tight one when the default does not).

Sets: quick, scikit-learn's breast_cancer and digits (< 5 against the rest) and a
generated sparse text set (testkit.bundled); full, also a generated sparse text set of
20,000 x 20,000 and, when present, a9a, breast-cancer_scale and heart_scale from the
shared data.

Usage: python bench/liblinear_formulations_bench.py [--quick]
Writes bench/results/liblinear_formulations.md; `main(quick)` returns bench/run.py's rows.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.paths import DATA_DIR, SMOKE, results_dir  # noqa: E402

RESULTS_NAME = "liblinear_formulations.md"
TARGET = 1e-3
# name -> (Hinge fit params, LIBLINEAR -s, its default eps)
FORMULATIONS: dict[str, tuple[dict[str, Any], int, float]] = {
    "LR primal": ({"solver": "tron", "loss": "logistic"}, 0, 0.01),
    "LR dual": ({"solver": "logistic_dcd"}, 7, 0.1),
    "L1 L2-loss SVM": ({"solver": "l1_cd", "loss": "l2"}, 5, 0.01),
    "L1 LR": ({"solver": "l1_cd", "loss": "logistic"}, 6, 0.01),
}
SHARED = ("a9a", "breast-cancer_scale", "heart_scale")


def data_sets(quick: bool) -> dict[str, tuple[sp.csr_matrix, np.ndarray]]:
    from testkit import bundled, datagen

    sets = {}
    for name in ("cancer", "digits", "text"):
        X, y = bundled.load(name)
        if name == "digits":
            y = np.where(y < 5, -1.0, 1.0)
        sets[name] = (X[:200] if SMOKE else X, y[:200] if SMOKE else y)
    if quick:
        return sets
    X, y = datagen.text_like(20_000, 20_000, seed=11)
    sets["text 20k"] = (sp.csr_matrix(X), y)
    from testkit.datasets import load_dataset

    for name in SHARED:
        if (DATA_DIR / f"{name}.xz").exists():
            X, y = load_dataset(name)
            sets[name] = (sp.csr_matrix(X), y)
    return sets


def problem_of(X: sp.csr_matrix, y: np.ndarray) -> Any:
    from solvers.backbone import LinearProblem
    from solvers.inputs import as_csr_arrays

    positive = np.where(y == np.max(y), 1.0, -1.0)
    return LinearProblem(as_csr_arrays(X), positive, np.ones(X.shape[0]), 1.0)


def hinge_run(X: sp.csr_matrix, y: np.ndarray, params: dict[str, Any]) -> dict[str, Any]:
    from solvers.train import fit

    fit(X[:50], y[:50], **params)  # warm-up: Numba's cache
    start = time.process_time()
    result = fit(X, y, C=1.0, **params)
    seconds = time.process_time() - start
    w = np.append(result.coef[0], result.intercept[0])
    return {
        "seconds": seconds,
        "w": w,
        "converged": result.converged,
        "gap": float(result.relative_gap or math.nan),
    }


def liblinear_run(X: sp.csr_matrix, y: np.ndarray, s: int, eps: float) -> dict[str, Any]:
    from liblinear.liblinearutil import parameter, problem, train

    prob = problem(y, X)
    start = time.process_time()
    model = train(prob, parameter(f"-s {s} -c 1 -e {eps:g} -B 1 -q"))
    seconds = time.process_time() - start
    w = np.array([model.w[i] for i in range(X.shape[1] + 1)])
    return {"seconds": seconds, "w": w if model.label[0] == np.max(y) else -w}


def bench(X: sp.csr_matrix, y: np.ndarray, formulation: str) -> dict[str, Any]:
    from solvers.certificate import bounds_at, problem_loss

    params, s, default_eps = FORMULATIONS[formulation]
    loss = problem_loss(
        {
            "penalty": "l1" if params["solver"] == "l1_cd" else "l2",
            "loss": params.get("loss", "logistic"),
        }
    )
    runs = {
        "hinge": hinge_run(X, y, params),
        "default": liblinear_run(X, y, s, default_eps),
        "tight": liblinear_run(X, y, s, 1e-6),
    }
    problem = problem_of(X, y)
    evaluated = {name: bounds_at(problem, run["w"], loss) for name, run in runs.items()}
    lower = max(max(bounds.values()) for _, bounds in evaluated.values())
    for name, run in runs.items():
        primal = evaluated[name][0]
        run["primal"] = primal
        run["suboptimality"] = max(primal - lower, 0.0) / primal
        run.pop("w")
    return runs


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        runs = r["runs"]
        reaching = [
            runs[k]["seconds"] for k in ("default", "tight") if runs[k]["suboptimality"] <= TARGET
        ]
        reference = min(reaching) if reaching else math.nan
        hinge = runs["hinge"]["seconds"] if runs["hinge"]["converged"] else math.nan
        ratio = hinge / reference if reference > 0 else math.nan
        rows.append(
            {
                "experiment": "liblinear_formulations",
                "metric": f"{r['formulation']}, {r['set']}: CPU s to a certified 1e-3",
                "hinge": float(hinge),
                "reference": float(reference),
                "ratio": float(ratio),
                "target": "<= 1.0",
                "met": bool(math.isfinite(ratio) and ratio <= 1.0),
            }
        )
    return rows


NOTES = (
    "Why rows miss (ratio > 1, or nan: no model within 1e-3 to compare with):",
    "",
    "- LIBLINEAR's models are judged with the best bound of the row, often one that only "
    "Hinge's certificate at a more accurate w provides; Hinge's own model must prove its "
    "gap by itself. Hinge pays for that proof: the certificate pass, and on L1 models the "
    "extra iterations below.",
    "- L2-regularised LR on sets that train in a few milliseconds: Hinge's fixed cost per "
    "fit (validation, the certificate's pass over the data, Python between sweeps) is of "
    "the order of LIBLINEAR's whole run; on the larger sets the ratios are near or below 1.",
    "- L1-regularised models: the certificate is a feasible dual point, the loss's "
    "multipliers at w scaled until ||Z'(y a)||_inf <= 1; it proves 1e-3 only once every "
    "coordinate's violation is about that small, while the objective is 1e-3-accurate much "
    "earlier: coordinate descent leaves large violations along directions of high curvature "
    "(the bias column first). Once LIBLINEAR's rule holds Hinge polishes w by orthant-wise "
    "Newton steps until the proof holds (on text 20k: one solve of LIBLINEAR's 99 sweeps, "
    "then 5 Newton steps; before, six eps / 10 restarts); the rows left above 1 pay for "
    "those steps, and on the smallest sets for the fixed cost per fit. On cancer (unscaled) "
    "and a9a the polish stalls after the first solve and the eps / 10 restarts continue. On "
    "a9a with the squared hinge, coordinate descent creeps along the one-hot groups that "
    "sum to the bias column, and neither Hinge (10,000 sweeps) nor LIBLINEAR reaches a point "
    "that this bound certifies: Hinge reports converged false with the honest gap.",
)


def write_markdown(
    results: list[dict[str, Any]], quick: bool, output: Path, load: tuple[float, float]
) -> None:
    lines = [
        "# LIBLINEAR's logistic regression and L1 models: Hinge vs LIBLINEAR 2.50",
        "",
        f"Generated by `bench/liblinear_formulations_bench.py{' --quick' if quick else ''}` "
        f"on {dt.date.today()}: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, one thread, C = 1, B = 1. CPU seconds of one training "
        "call; 'gap' is (P(w) - L) / P(w) with L the best certified lower bound of the row "
        "(Hinge: converged means its own certificate proved <= 1e-3). Ratio: Hinge over "
        "the cheaper LIBLINEAR setting whose model is within 1e-3. Load average (1 min) at "
        f"the start {load[0]:.2f}, at the end {load[1]:.2f}.",
        "",
        "| set | formulation | Hinge s | Hinge gap | converged | LIBLINEAR default s | "
        "its gap | LIBLINEAR 1e-6 s | its gap | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r, row in zip(results, summary_rows(results), strict=True):
        runs = r["runs"]
        lines.append(
            f"| {r['set']} | {r['formulation']} | {runs['hinge']['seconds']:.3f} | "
            f"{runs['hinge']['suboptimality']:.1e} | {runs['hinge']['converged']} | "
            f"{runs['default']['seconds']:.3f} | {runs['default']['suboptimality']:.1e} | "
            f"{runs['tight']['seconds']:.3f} | {runs['tight']['suboptimality']:.1e} | "
            f"{row['ratio']:.2f} |"
        )
    lines += ["", *NOTES]
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text("\n".join(lines) + "\n")


def main(quick: bool = False, output: Path | None = None) -> list[dict[str, Any]]:
    results = []
    load_start = os.getloadavg()[0]
    for set_name, (X, y) in data_sets(quick).items():
        for formulation in FORMULATIONS:
            print(f"== {set_name}: {formulation}", flush=True)
            results.append(
                {"set": set_name, "formulation": formulation, "runs": bench(X, y, formulation)}
            )
    write_markdown(
        results, quick, output or results_dir() / RESULTS_NAME, (load_start, os.getloadavg()[0])
    )
    return summary_rows(results)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    for summary in main(args.quick, args.output):
        print(summary)
