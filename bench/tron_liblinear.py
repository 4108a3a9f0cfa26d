"""tron vs LIBLINEAR -s 2 (L2-loss primal Newton), one thread, C = 1, bias B = 1.

Both stop on the same rule, ||grad P(w)|| <= eps * max(min(#pos, #neg), 1) / n *
||grad P(0)||, at eps 0.01 (the default) and 1e-4. Our tron is called directly
(solvers.tron.solve, no continuation), so the times compare the same amount of work;
LIBLINEAR 2.50 runs its line-search Newton (newton.cpp). REPEATS blocks each, interleaved
(ours, theirs, ours, ...), timed in CPU seconds of this process (time.process_time: both
run on one thread in this process, and CPU time is what a loaded machine distorts least);
a block repeats the fit until it has taken about BLOCK_SECONDS (a9a trains in ~10 ms: one
run alone is mostly noise), and the median time per fit over the blocks is reported. The
ratio is tron / LIBLINEAR (target <= 1.0x); the primal values and the iteration counts
(Newton steps / CG steps: ours from the result, LIBLINEAR's from its own log of one more
untimed run) are shown side by side.
"""

from __future__ import annotations

import math
import os
import re
import statistics
import sys
import tempfile
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
BLOCK_SECONDS = 0.25
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


def _ours(problem: LinearProblem, eps: float) -> tuple[float, Any]:
    started = time.process_time()
    solution = tron.solve(problem, {**tron.DEFAULTS, "eps": eps, "threads": 1},
                          ProgressMonitor(None, None))
    return time.process_time() - started, solution


def _liblinear(problem: Any, eps: float) -> tuple[float, Any]:
    """CPU seconds of one LIBLINEAR -s 2 fit, and its model. Nothing else runs between the
    clock reads: NumPy after the fit (the primal value) made OpenBLAS threads spin into the
    next timed fit and nearly doubled LIBLINEAR's measured time (ijcnn1: 45 ms against 24)."""
    from liblinear import liblinearutil

    started = time.process_time()
    model = liblinearutil.train(problem, liblinearutil.parameter(f"-s 2 -c 1 -B 1 -e {eps} -q"))
    return time.process_time() - started, model


def _liblinear_primal(model: Any, X: sp.csr_matrix, y: np.ndarray) -> float:
    coef, b = model.get_decfun()
    w = np.append(np.asarray(coef[: X.shape[1]], dtype=np.float64), b)
    if model.get_labels()[0] != 1:
        w = -w
    margins = y * (X @ w[:-1] + w[-1])
    slack = np.maximum(0.0, 1.0 - margins)
    return 0.5 * float(w @ w) + float(slack @ slack)


def _liblinear_counts(problem: Any, eps: float) -> tuple[int, int]:
    """(Newton steps, CG steps) of one LIBLINEAR -s 2 run, read from its log (printed by the
    C library to file descriptor 1)."""
    from liblinear import liblinearutil

    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile() as log:
        os.dup2(log.fileno(), 1)
        try:
            liblinearutil.train(problem, liblinearutil.parameter(f"-s 2 -c 1 -B 1 -e {eps}"))
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        log.seek(0)
        text = log.read().decode(errors="replace")
    steps = [int(cg) for cg in re.findall(r"iter\s+\d+ .*?CG\s+(\d+)", text)]
    return len(steps), sum(steps)


def _block(run: Any, count: int) -> float:
    """Mean CPU seconds per run over `count` runs."""
    return sum(run()[0] for _ in range(count)) / count


def _compare(X: sp.csr_matrix, y: np.ndarray, eps: float) -> dict[str, Any]:
    """Median CPU s per fit (ours, LIBLINEAR's), primal values, iteration counts."""
    from liblinear import liblinearutil

    ours_problem = LinearProblem(as_csr_arrays(X), y, np.ones(X.shape[0]), 1.0)
    order = np.argsort(-y, kind="stable")  # +1 first: LIBLINEAR's label order
    their_problem = liblinearutil.problem(y[order], X[order])
    _ours(ours_problem, eps)  # the first call of a fresh problem pays dispatch warm-ups
    first, solution = _ours(ours_problem, eps)
    count = max(1, min(100, round(BLOCK_SECONDS / max(first, 1e-4))))
    ours, theirs = [], []
    for _ in range(REPEATS):
        ours.append(_block(lambda: _ours(ours_problem, eps), count))
        theirs.append(_block(lambda: _liblinear(their_problem, eps), count))
    newton, cg = _liblinear_counts(their_problem, eps)
    return {"ours": statistics.median(ours), "theirs": statistics.median(theirs),
            "our_primal": float(solution.primal or math.nan),
            "their_primal": _liblinear_primal(_liblinear(their_problem, eps)[1], X, y),
            "our_counts": (solution.details["newton_steps"], solution.iterations,
                           solution.details["cg_iterations"]),
            "their_counts": (newton, cg), "runs": count, "exit": solution.exit_reason}


def tron_rows(quick: bool) -> tuple[list[str], list[dict[str, Any]]]:
    names = ("a9a",) if quick else ("a9a", "w8a", "ijcnn1", "news20-1",
                                                     "text")
    lines = [f"## tron vs LIBLINEAR -s 2 (one thread, CPU s per fit: median of {REPEATS} "
             "interleaved blocks)", "",
             "Newton / CG: accepted steps (all trust-region iterations in brackets when some "
             "were rejected) / CG steps; LIBLINEAR 2.50: line-search Newton steps / CG steps.",
             "", "| data | eps | tron s | LIBLINEAR s | ratio | tron Newton / CG | LIBLINEAR "
             "Newton / CG | tron exit | tron P | LIBLINEAR P | runs per block |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for name in names:
        X, y = _data(name, quick)
        X = sp.csr_matrix(X, dtype=np.float64)
        X.sort_indices()
        for eps in EPS:
            found = _compare(X, y, eps)
            ours, theirs = found["ours"], found["theirs"]
            ratio = ours / theirs
            accepted, iterations, cg = found["our_counts"]
            steps = f"{accepted}" + (f" ({iterations})" if iterations != accepted else "")
            lines.append(f"| {name} | {eps:g} | {ours:.4f} | {theirs:.4f} | {ratio:.2f} | "
                         f"{steps} / {cg} | {found['their_counts'][0]} / "
                         f"{found['their_counts'][1]} | {found['exit']} | "
                         f"{found['our_primal']:.8g} | {found['their_primal']:.8g} | "
                         f"{found['runs']} |")
            rows.append({"experiment": "certified",
                         "metric": f"tron / LIBLINEAR -s 2 time, {name}, eps {eps:g}",
                         "hinge": ours, "reference": theirs, "ratio": ratio,
                         "target": "<= 1.0x, tron converged",
                         "met": ratio <= 1.0 and found["exit"] == "converged"})
            print(lines[-1], flush=True)
    return lines, rows
