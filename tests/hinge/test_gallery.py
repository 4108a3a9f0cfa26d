"""scikit-learn's gallery examples for its SVMs, ported (tests/hinge/scripts/gallery/,
one script per example, each saying which example it follows and what it prints), run
as written and again with `from sklearn.svm import` (and scikit-learn's
LogisticRegression) swapped for `from hinge.sklearn import`, as a user would: both run
to the end and print the same lines.

The kernel estimators (Hinge's SMO) print what scikit-learn's print, line for line. A
linear estimator (LinearSVC, LinearSVR, LogisticRegression) stops at a tolerance, so
its scripts print what is determined: each fit's primal objective P (in LIBLINEAR's
form, with `tol` and the penalty on the line) and, for the L2 penalty, its weights
w = (coef_, intercept_ / intercept_scaling). Those lines are compared at the tolerance
Hinge certifies: every Hinge fit reports its relative duality gap g = (P - L) / P (L a
lower bound of the optimum P*), and with G = max(tol, the largest g of the script's
linear fits), P* >= L = (1 - G) P_hinge for each fit, hence
  - L <= P_sklearn (P_sklearn >= P*) and P_hinge <= P_sklearn + G P_hinge;
  - for the L2 penalty, P is 1-strongly convex in w, so ||w - w*||^2 <= 2 (P(w) - P*) for
    both fits, and ||w_hinge - w_sklearn|| <= sqrt(2 (P_hinge - L)) + sqrt(2 (P_sklearn - L));
plus the rounding of the printed digits (P to 10 significant digits, w to 6). (Under the
default tol_rule="liblinear" a fit stops at LIBLINEAR's rule, which does not always
bring g below tol: at some seeds plot_logistic_path's fits end at g = 1.4e-5, tol=1e-6.)
Both runs also issue the same ConvergenceWarnings.
Every other line is compared as it is, the linear fits' accuracies and prediction
counts too (plot_svm_scale_c's validation curves, plot_iris_svc's LinearSVC): a
prediction can differ only at a row within the two fits' distance of the boundary, and
these examples have none.

The scripts run in two interpreters (scikit-learn's and Hinge's variant side by side),
each running every script in its own namespace (tests/hinge/gallery_runner.py).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
GALLERY = Path(__file__).parent / "scripts" / "gallery"
RUNNER = Path(__file__).parent / "gallery_runner.py"
SCRIPTS = sorted(GALLERY.glob("plot_*.py"))
# examples whose Hinge run differs from scikit-learn's in a way not fixed yet
KNOWN: dict[str, str] = {}
LINEAR = ("LinearSVC", "LinearSVR", "LogisticRegression")

OBJECTIVE = re.compile(r"^(?P<label>.*) primal objective \(tol=(?P<tol>[^,]+), "
                       r"penalty=(?P<penalty>l1|l2)\) (?P<value>\S+)$")
WEIGHTS = re.compile(r"^(?P<label>.*) weights and scaled intercept (?P<values>.*)$")


def swap_imports(source: str) -> str:
    """The user's one change: scikit-learn's SVM imports become Hinge's."""
    return source.replace("from sklearn.svm import", "from hinge.sklearn import").replace(
        "from sklearn.linear_model import LogisticRegression",
        "from hinge.sklearn import LogisticRegression")


def _run_all(variants: dict[str, list[dict[str, str]]]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    running = {name: subprocess.Popen([sys.executable, str(RUNNER)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env, cwd=ROOT)
               for name in variants}
    results = {}
    for name, process in running.items():
        out, err = process.communicate(json.dumps(variants[name]), timeout=600)
        assert process.returncode == 0, err
        results[name] = json.loads(out)
    return results


@pytest.fixture(scope="module")
def gallery_outputs() -> dict[str, Any]:
    scripts = [{"name": path.stem, "path": str(path), "source": path.read_text()}
               for path in SCRIPTS]
    swapped = [{**script, "source": swap_imports(script["source"])} for script in scripts]
    return _run_all({"sklearn": scripts, "hinge": swapped})


def _compare_objective(mine: re.Match[str], theirs: re.Match[str], gap: float) -> float:
    """Checks the certified bounds on P; returns L = (1 - G) P_hinge."""
    assert mine["label"] == theirs["label"] and mine["tol"] == theirs["tol"]
    assert mine["penalty"] == theirs["penalty"]
    certified, p_hinge, p_sklearn = max(float(mine["tol"]), gap), float(mine["value"]), \
        float(theirs["value"])
    rounding = 1e-9 * max(abs(p_hinge), abs(p_sklearn))
    lower = (1.0 - certified) * p_hinge
    assert lower <= p_sklearn + rounding, (mine.group(0), theirs.group(0))
    assert p_hinge <= p_sklearn + certified * p_hinge + rounding, (mine.group(0),
                                                                   theirs.group(0))
    return lower


def _compare_weights(mine: re.Match[str], theirs: re.Match[str],
                     objectives: tuple[float, float, float]) -> None:
    lower, p_hinge, p_sklearn = objectives
    assert mine["label"] == theirs["label"]
    ours = [float(v) for v in mine["values"].split()]
    ref = [float(v) for v in theirs["values"].split()]
    assert len(ours) == len(ref)
    distance = math.dist(ours, ref)
    bound = math.sqrt(2 * max(p_hinge - lower, 0.0)) + math.sqrt(
        2 * max(p_sklearn - lower, 0.0))
    rounding = 1e-5 * math.hypot(*ref) + 1e-9 * math.sqrt(len(ref))
    assert distance <= bound + rounding, (mine["label"], distance, bound)


def compare_outputs(hinge_out: str, sklearn_out: str, gap: float = 0.0) -> int:
    """Line by line: equal, or for a linear fit's objective and weights within the
    certified bounds (module docstring; `gap` the largest relative gap Hinge's fits
    certified). Returns how many lines were compared so."""
    mine_lines, their_lines = hinge_out.splitlines(), sklearn_out.splitlines()
    assert len(mine_lines) == len(their_lines), (hinge_out, sklearn_out)
    objectives: dict[str, tuple[float, float, float]] = {}
    certified = 0
    for mine_line, their_line in zip(mine_lines, their_lines, strict=True):
        mine, theirs = OBJECTIVE.match(mine_line), OBJECTIVE.match(their_line)
        if mine and theirs:
            lower = _compare_objective(mine, theirs, gap)
            objectives[mine["label"]] = (lower, float(mine["value"]), float(theirs["value"]))
            certified += 1
            continue
        mine, theirs = WEIGHTS.match(mine_line), WEIGHTS.match(their_line)
        if mine and theirs and mine["label"] in objectives:
            _compare_weights(mine, theirs, objectives[mine["label"]])
            certified += 1
            continue
        assert mine_line == their_line
    return certified


@pytest.mark.parametrize("script", [
    pytest.param(path, marks=pytest.mark.xfail(strict=True, reason=KNOWN[path.stem]))
    if path.stem in KNOWN else path for path in SCRIPTS], ids=[path.stem for path in SCRIPTS])
def test_gallery_example_prints_the_same_with_hinge_s_import(
        script: Path, gallery_outputs: dict[str, Any]) -> None:
    source = script.read_text()
    if "matplotlib" in source and importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib (a dev dependency) is not installed")
    assert swap_imports(source) != source
    assert source.startswith('"""Follows scikit-learn\'s gallery example')
    ours, theirs = (gallery_outputs[variant][script.stem] for variant in ("hinge", "sklearn"))
    assert theirs["error"] is None, theirs["error"]
    assert ours["error"] is None, ours["error"]
    assert theirs["stdout"].count("\n") >= 3 and theirs["fits"] == []
    assert ours["fits"], "the swapped script fitted no Hinge estimator"
    assert ours["convergence_warnings"] == theirs["convergence_warnings"]
    linear = [fit for fit in ours["fits"] if fit["estimator"] in LINEAR]
    gaps = [fit["relative_gap"] for fit in linear]
    assert all(g is not None and 0.0 <= g < 1.0 for g in gaps)  # each fit has a certificate
    certified = compare_outputs(ours["stdout"], theirs["stdout"], max(gaps, default=0.0))
    assert (certified > 0) == bool(linear)
    kernel = [fit for fit in ours["fits"] if fit["estimator"] not in LINEAR]
    assert all(fit["converged"] for fit in kernel)  # SMO: LIBSVM's stop rule held


def test_the_certified_comparison_fails_outside_its_bounds() -> None:
    """The bounds compare_outputs checks are not vacuous."""
    line = "fit primal objective (tol=0.001, penalty=l2) {}\nfit weights and scaled " \
           "intercept {}\n"
    assert compare_outputs(line.format(10.0, "1 2"), line.format(10.005, "1.01 2")) == 2
    with pytest.raises(AssertionError):  # Hinge's objective above the certified gap
        compare_outputs(line.format(10.02, "1 2"), line.format(10.0, "1 2"))
    with pytest.raises(AssertionError):  # a certificate contradicted by scikit-learn's fit
        compare_outputs(line.format(10.0, "1 2"), line.format(9.9, "1 2"))
    with pytest.raises(AssertionError):  # weights farther apart than strong convexity allows
        compare_outputs(line.format(10.0, "1 2"), line.format(10.0, "1.5 2"))
    # a larger certified gap than tol: the bounds are the gap's
    assert compare_outputs(line.format(10.0, "1 2"), line.format(9.9, "1 2"), gap=0.02) == 2
    with pytest.raises(AssertionError):  # any other line: equal
        compare_outputs("n_support_ [3, 4]\n", "n_support_ [3, 5]\n")
