"""tron vs LIBLINEAR -s 2 (L2-loss primal Newton), one thread, C = 1, bias B = 1.

Both stop on the same rule, ||grad P(w)|| <= eps * max(min(#pos, #neg), 1) / n *
||grad P(0)||, at eps 0.01 (the default) and 1e-4. Our tron is called directly
(solvers.tron.solve, no continuation), so the times compare the same amount of work;
LIBLINEAR 2.50 runs its line-search Newton (newton.cpp). REPEATS runs each, interleaved
(ours, theirs, ours, ...), timed in CPU seconds of this process (time.process_time: both
run on one thread in this process, and CPU time is what a loaded machine distorts least);
the median is reported. The ratio is tron / LIBLINEAR (target <= 1.0x) and the primal
values are shown side by side.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from solvers import tron
from solvers.backbone import LinearProblem, ProgressMonitor
from solvers.inputs import as_csr_arrays
from testkit.datagen import text_like
from testkit.datasets import load_dataset
from testkit.unscaled import binary_labels

REPEATS = 5
EPS = (0.01, 1e-4)


def _data(name: str, quick: bool) -> tuple[sp.csr_matrix, np.ndarray]:
    if name == "text":
        rows, features = (20_000, 20_000) if quick else (200_000, 100_000)
        return text_like(rows, features, seed=0)
    if name == "news20-1":
        X, y = load_dataset("news20")
        return X, binary_labels(y, 1)
    X, y = load_dataset(name)
    return X, binary_labels(y)


def _ours(problem: LinearProblem, eps: float) -> tuple[float, float]:
    started = time.process_time()
    solution = tron.solve(problem, {**tron.DEFAULTS, "eps": eps, "threads": 1},
                          ProgressMonitor(None, None))
    return time.process_time() - started, float(solution.primal or np.nan)


def _liblinear(problem: Any, X: sp.csr_matrix, y: np.ndarray, eps: float
               ) -> tuple[float, float]:
    from liblinear import liblinearutil

    started = time.process_time()
    model = liblinearutil.train(problem, liblinearutil.parameter(f"-s 2 -c 1 -B 1 -e {eps} -q"))
    seconds = time.process_time() - started
    coef, b = model.get_decfun()
    w = np.append(np.asarray(coef[: X.shape[1]], dtype=np.float64), b)
    if model.get_labels()[0] != 1:
        w = -w
    margins = y * (X @ w[:-1] + w[-1])
    slack = np.maximum(0.0, 1.0 - margins)
    return seconds, 0.5 * float(w @ w) + float(slack @ slack)


def _compare(X: sp.csr_matrix, y: np.ndarray, eps: float
             ) -> tuple[float, float, float, float]:
    """(our median s, LIBLINEAR median s, our P, their P), runs interleaved."""
    from liblinear import liblinearutil

    ours_problem = LinearProblem(as_csr_arrays(X), y, np.ones(X.shape[0]), 1.0)
    order = np.argsort(-y, kind="stable")  # +1 first: LIBLINEAR's label order
    their_problem = liblinearutil.problem(y[order], X[order])
    ours, theirs = [], []
    our_primal = their_primal = math.nan
    for _ in range(REPEATS):
        seconds, our_primal = _ours(ours_problem, eps)
        ours.append(seconds)
        seconds, their_primal = _liblinear(their_problem, X, y, eps)
        theirs.append(seconds)
    return statistics.median(ours), statistics.median(theirs), our_primal, their_primal


def tron_rows(quick: bool) -> tuple[list[str], list[dict[str, Any]]]:
    names = ("a9a", "ijcnn1", "text") if quick else ("a9a", "w8a", "ijcnn1", "news20-1",
                                                     "text")
    lines = [f"## tron vs LIBLINEAR -s 2 (one thread, median CPU s of {REPEATS}, interleaved)", "",
             "| data | eps | tron s | LIBLINEAR s | ratio | tron P | LIBLINEAR P |",
             "|---|---|---|---|---|---|---|"]
    rows = []
    for name in names:
        X, y = _data(name, quick)
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sort_indices()
        for eps in EPS:
            ours, theirs, our_primal, their_primal = _compare(X, y, eps)
            ratio = ours / theirs
            lines.append(f"| {name} | {eps:g} | {ours:.3f} | {theirs:.3f} | {ratio:.2f} | "
                         f"{our_primal:.8g} | {their_primal:.8g} |")
            rows.append({"experiment": "certified",
                         "metric": f"tron / LIBLINEAR -s 2 time, {name}, eps {eps:g}",
                         "hinge": ours, "reference": theirs, "ratio": ratio,
                         "target": "<= 1.0x", "met": ratio <= 1.0})
            print(lines[-1], flush=True)
    return lines, rows
