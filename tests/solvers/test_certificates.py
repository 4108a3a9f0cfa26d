"""Issue 12: `converged` means a certificate holds, checked against certified optima.

References come from testkit.certified (clarabel QP to a relative gap of 1e-9), never from
a solver under test. The default suite uses small local sets (testkit.datasets), the local
unscaled cases that train in seconds (testkit.unscaled.LOCAL_CASES) and random small
problems (hypothesis); the full-size sets are marked slow, the shared LIBLINEAR sets
`parity`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from solvers import fit
from solvers.auto import DUAL_CD_SWEEPS, SPARSE_L1_SWEEPS, DataShape, choose
from testkit.certified import certified_optimum, primal_value
from testkit.datagen import text_like
from testkit.datasets import load_any, load_dataset, load_local
from testkit.linear_fits import LINEAR_FITS
from testkit.unscaled import binary_labels, load_case

TOL = 1e-3
SOLVERS = LINEAR_FITS


def suboptimality(X: Any, y: np.ndarray, label: str, C: float = 1.0,
                  **extra: Any) -> tuple[float, Any]:
    kwargs, (loss, bias) = SOLVERS[label]
    scale = 1.0 if bias == "augment" else None
    best = certified_optimum(X, y, C, loss, bias, bias_scale=scale).primal
    result = fit(X, y, C=C, **kwargs, **extra)
    primal = primal_value(X, y, result.coef[0], float(result.intercept[0]), C=C, loss=loss,
                          bias=bias, bias_scale=scale)
    return (primal - best) / best, result


ROUNDING = 1e-8  # relative precision of the computed objectives (see check_honest)


def check_honest(label: str, subopt: float, result: Any) -> None:
    """converged implies within tol of the certified optimum; if not converged, a warning
    says so; the reported relative gap bounds the true suboptimality."""
    assert result.relative_gap is not None
    if result.relative_gap < 1.0:  # (P - P*) / P* <= gap / (1 - gap), gap = (P - L) / P
        # + ROUNDING: P, L and the reference are sums computed in floating point; on the
        # tiny objectives hypothesis finds (|w| ~ 1e-6) they agree to ~1e-9 relative, not
        # better (seen: a bound 1.05e-9 above the reference's value)
        assert subopt <= result.relative_gap / (1 - result.relative_gap) + ROUNDING, label
    # (a fit may also carry the workflow's advice about unscaled features; only the
    # warnings about the certificate are the subject here)
    uncertified = [text for text in result.warnings if "certified lower bound" in text]
    if result.converged:
        assert subopt <= TOL, (label, subopt, result.path)
        assert not uncertified
    else:
        assert uncertified and result.exit_reason != "converged", label


@pytest.mark.parametrize("label", list(SOLVERS))
@pytest.mark.parametrize("name", ["cancer", "wine", "iris"])
def test_scaled_sets_at_defaults(name: str, label: str) -> None:
    X, y = load_local(name)
    subopt, result = suboptimality(X, binary_labels(y), label)
    check_honest(label, subopt, result)
    if label.startswith(("auto", "dcd", "acf", "ocas", "tron", "newton")):
        assert result.converged and subopt <= TOL, (label, subopt, result.path)
    if label == "pegasos":
        assert not result.converged and result.exit_reason == "epochs_done"


FAST_CASES = ["cancer_raw", "wine-x2", "onehot-5k-x4"]


@pytest.mark.parametrize("label", ["auto l1", "auto l2", "dcd l2", "acf l1", "alm p=1",
                                   "alm p=2", "pegasos"])
@pytest.mark.parametrize("name", FAST_CASES)
def test_unscaled_cases_auto_certified_others_honest(name: str, label: str) -> None:
    X, y = load_case(name)
    subopt, result = suboptimality(X, y, label, max_seconds=60.0)
    check_honest(label, subopt, result)
    if label.startswith(("auto", "dcd")):
        assert result.converged and subopt <= TOL, (label, subopt, result.path)


def test_stalled_dual_cd_falls_back_and_records_its_path() -> None:
    X, y = load_case("wine-x2")
    for loss, follow_up in (("l1", "ocas"), ("l2", "tron")):
        result = fit(X, y, solver="dcd", loss=loss)
        assert result.path[0]["solver"] == "dcd" and result.path[0]["exit"] == "max_iter"
        assert result.path[1]["solver"] == follow_up and "max_iter" in (
            result.path[1]["reason"])
        assert result.converged
        off = fit(X, y, solver="dcd", loss=loss, fallback=False)
        assert [s["solver"] for s in off.path] == ["dcd"] and not off.converged


@pytest.mark.parity
def test_tron_that_stalls_hands_over_to_newton() -> None:
    """mushrooms-x5 (no local set found yet where the trust region stalls: cancer_raw,
    onehot-x5, onehot-5k-x4 and onehot3-3-x3 converge): the trust-region TRON makes no
    headway (max_iter 1000 far above the optimum); the rule continues with exact Newton
    steps, whatever the fit's threads. The line search (tron's default) certifies it by itself."""
    X, y = load_case("mushrooms-x5")
    subopt, result = suboptimality(X, y, "tron", threads=2, method="trust_region")
    assert [(s["solver"], s["exit"]) for s in result.path] == [
        ("tron", "max_iter"), ("newton", "converged")]
    assert result.converged and subopt <= TOL
    subopt, result = suboptimality(X, y, "tron", threads=2)
    assert [(s["solver"], s["exit"]) for s in result.path] == [("tron", "converged")]
    assert result.converged and subopt <= TOL


def test_alm_no_longer_claims_a_stalled_objective() -> None:
    """alm p=1 on breast-cancer-x2 used to say converged 4.6e-2 above the optimum; on
    wine-x2 it stalls 5e-3 above it."""
    X, y = load_case("wine-x2")
    subopt, result = suboptimality(X, y, "alm p=1")
    assert subopt > TOL and not result.converged
    assert result.exit_reason in ("stalled", "max_iter")


def test_auto_rule() -> None:
    text = DataShape(n=20_000, d=1_000_000, nnz=2_000_000, max_abs=1.0)
    dense = DataShape(n=30_000, d=100, nnz=1_000_000, max_abs=1.0)
    raw = DataShape(n=600, d=500, nnz=300_000, max_abs=822.0)
    assert choose(text, "l2", 1.0, "augment")[0] == "dcd"
    assert choose(text, "l2", 1000.0, "augment")[0] == "tron"
    assert choose(text, "l1", 1000.0, "augment")[0] == "ocas"
    assert choose(dense, "l2", 1.0, "augment")[0] == "tron"
    assert choose(dense, "l1", 1.0, None)[0] == "ocas"
    w8a = DataShape(n=49_749, d=300, nnz=579_586, max_abs=1.0)  # sparse (3.9%), 300 features
    assert choose(w8a, "l2", 1.0, "augment")[0] == "tron"
    assert choose(w8a, "l1", 1.0, "augment")[0] == "ocas"
    assert choose(DataShape(n=15_935, d=62_061, nnz=1_272_569, max_abs=1.0), "l2", 1.0,
                  "augment")[0] == "dcd"  # news20: text
    assert choose(raw, "l2", 1.0, "augment")[0] == "gram"
    assert choose(raw, "l1", 1.0, "augment")[0] == "gram"
    narrow_raw = DataShape(n=683, d=10, nnz=6830, max_abs=900.0)
    assert choose(narrow_raw, "l2", 1.0, "augment")[0] == "newton"
    assert choose(narrow_raw, "l1", 1.0, "augment")[0] == "ocas"
    big_raw = DataShape(n=8124, d=112, nnz=170_000, max_abs=900.0)
    assert choose(big_raw, "l1", 1.0, "augment")[0] == "dcd"
    assert choose(big_raw, "l1", 1.0, "augment").settings == {"max_iter": DUAL_CD_SWEEPS}
    choice = choose(text, "l1", 1.0, "augment")
    assert (choice.solver, choice.settings) == ("dcd", {})
    # unscaled, high-dimensional and sparse (word counts): dcd, then tron from its w;
    # or ocas; l2 with dcd's own 1000 sweeps, l1 with SPARSE_L1_SWEEPS
    news20 = DataShape(n=15_935, d=62_061, nnz=1_272_569, max_abs=549.0)
    assert choose(news20, "l2", 1.0, "augment")[0] == "dcd"
    assert "sparse" in choose(news20, "l2", 1.0, "augment")[1]
    assert choose(news20, "l1", 1.0, "augment")[0] == "dcd"
    assert "ocas" in choose(news20, "l1", 1.0, "augment")[1]
    assert choose(news20, "l2", 1.0, "augment").settings == {}
    assert choose(news20, "l1", 1.0, "augment").settings == {"max_iter": SPARSE_L1_SWEEPS}
    wide_raw = DataShape(n=20_000, d=1_000_000, nnz=2_000_000, max_abs=50.0)
    assert choose(wide_raw, "l2", 1.0, "augment")[0] == "dcd"
    dense_wide_raw = DataShape(n=20_000, d=3_000, nnz=30_000_000, max_abs=50.0)  # 50%
    assert choose(dense_wide_raw, "l2", 1.0, "augment")[0] == "tron"
    assert choose(news20, "l2", 1000.0, "augment")[0] == "dcd"  # unscaled: not by C
    assert "unscaled" in choose(raw, "l1", 1.0, "augment")[1]


@st.composite
def small_problems(draw: Any) -> tuple[sp.csr_matrix, np.ndarray, float]:
    n = draw(st.integers(8, 40))
    d = draw(st.integers(1, 6))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.exp(rng.uniform(np.log(1e-2), np.log(1e3), size=d))
    X[rng.random(size=(n, d)) < 0.3] = 0.0
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y[:2] = [-1.0, 1.0]
    C = float(draw(st.sampled_from([0.01, 1.0, 100.0])))
    return sp.csr_matrix(X), y, C


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=small_problems())
def test_converged_implies_within_tol_of_the_certified_optimum(
        problem: tuple[sp.csr_matrix, np.ndarray, float]) -> None:
    X, y, C = problem
    for label in SOLVERS:
        subopt, result = suboptimality(X, y, label, C=C, max_seconds=20.0)
        check_honest(label, subopt, result)


@pytest.mark.slow
@pytest.mark.parametrize("label", list(SOLVERS))
@pytest.mark.parametrize("name", [
    "madelon-like", "onehot3-3-x3", "onehot", "dense",
    *(pytest.param(name, marks=pytest.mark.parity)
      for name in ["madelon.t", "dna.scale-3-x3", "a9a", "w8a", "ijcnn1"])])
def test_full_size_and_madelon(name: str, label: str) -> None:
    unscaled = name.startswith("madelon") or name.endswith("x3")
    X, y = load_case(name) if unscaled else load_any(name)
    subopt, result = suboptimality(X, binary_labels(y), label, max_seconds=120.0)
    check_honest(label, subopt, result)
    if label == "auto l2" or (label == "auto l1" and name.startswith("madelon")):  # gram
        assert result.converged and subopt <= TOL, (label, subopt, result.path)


def test_progress_of_a_path_counts_iterations_from_its_start() -> None:
    """Events of the follow-up solver name it and continue the iteration count."""
    X, y = load_case("onehot-5k-x4")  # dcd: 1000 sweeps; ocas from its w: seconds
    events: list[dict[str, Any]] = []
    # an event after every compiled call, however quick the machine
    result = fit(X, y, solver="dcd", loss="l1", progress=events.append, progress_interval=0.0)
    assert [s["solver"] for s in result.path] == ["dcd", "ocas"]
    assert {e["solver"] for e in events} <= {"dcd", "ocas"}
    assert any(e["solver"] == "ocas" for e in events)
    iterations = [e["iteration"] for e in events]
    assert iterations == sorted(iterations)
    assert all(e["iteration"] > 1000 for e in events if e["solver"] == "ocas")


# --------------------------------------------------------------------------------------
# Handover on unscaled madelon-like data (600 x 500, values ~480 +- 35, like madelon.t):
# dcd, acf and ocas crawl there; gram, the interior point on the dual, does not.


@pytest.mark.parametrize("label", ["acf l1", "ocas"])
def test_time_share_hands_a_crawling_solver_over_to_gram(label: str) -> None:
    """With max_seconds, a step that has a follow-up gets half the time left: acf / ocas
    crawl on madelon until their share is spent, then gram certifies the fit (before the
    share, the whole budget went to the crawling solver and the fit ended uncertified)."""
    X, y = load_case("madelon-like")
    # 6 s: the crawling solver gets 3 s, gram (0.5 s on an idle machine) the other 3 s
    subopt, result = suboptimality(X, y, label, max_seconds=6.0)
    check_honest(label, subopt, result)
    steps, last = result.path[:-1], result.path[-1]
    assert {step["solver"] for step in steps} == {label.split()[0]}
    assert last["solver"] == "gram"
    if label == "ocas":  # (acf's own rule may hold first: acf with eps / 10 to max_iter)
        assert steps[-1]["exit"] == "max_seconds" and "share" in last["reason"]
    assert result.converged and subopt <= TOL, result.path


def test_uncertified_end_says_converged_false_with_the_relative_gap() -> None:
    X, y = load_case("madelon-like")
    subopt, result = suboptimality(X, y, "dcd l1", fallback=False, max_iter=50)
    check_honest("dcd l1", subopt, result)
    assert not result.converged and result.exit_reason == "max_iter"
    assert [s["solver"] for s in result.path] == ["dcd"]
    (warning,) = [w for w in result.warnings if "certified lower bound" in w]
    assert f"relative gap {result.relative_gap:.2e}" in warning


@pytest.mark.slow
@pytest.mark.parametrize("label", ["dcd l1", "acf l1", "dcd l2"])
def test_dual_cd_at_defaults_on_madelon_ends_certified_through_gram(label: str) -> None:
    """No time limit: the dual CD's 1000 sweeps, then straight to gram (few wide examples),
    not ocas / tron, which crawl from its w (they ended 60 s later uncertified)."""
    X, y = load_case("madelon-like")
    subopt, result = suboptimality(X, y, label)
    check_honest(label, subopt, result)
    assert [s["solver"] for s in result.path] == [label.split()[0], "gram"]
    assert result.converged and subopt <= TOL


# --------------------------------------------------------------------------------------
# Unscaled word counts, high-dimensional and sparse (news20: 15,935 x 62,061, counts up
# to 549): tron alone ends at max_iter 0.3%..37% above the optimum on every output (its
# trust region shrinks to tiny steps: about 3 CG steps per iteration, a third rejected);
# dcd's 1000 sweeps, then tron from its w, certify every output.


def word_counts(n_rows: int = 4000, n_features: int = 20_000) -> tuple[sp.csr_matrix,
                                                                          np.ndarray]:
    """testkit.datagen.text_like's documents as counts 1..18 instead of tf-idf rows."""
    X, y = text_like(n_rows, n_features, seed=1)
    X = X.copy()
    X.data = np.ceil(X.data * 20.0)
    return X, y


def test_auto_l2_on_unscaled_word_counts_ends_certified() -> None:
    X, y = word_counts()
    assert X.data.max() > 10.0  # unscaled for the rule
    best = certified_optimum(X, y, 1.0, "l2", "augment", bias_scale=1.0,
                             method="liblinear").primal
    result = fit(X, y, solver="auto", loss="l2")
    assert result.auto is not None and result.auto["chosen"] == "dcd", result.auto
    assert result.path[0]["solver"] == "dcd"
    primal = primal_value(X, y, result.coef[0], float(result.intercept[0]), C=1.0,
                          loss="l2", bias="augment", bias_scale=1.0)
    subopt = (primal - best) / best
    check_honest("auto l2", subopt, result)
    assert result.relative_gap is not None
    assert result.converged and result.relative_gap <= TOL and subopt <= TOL, result.path


@pytest.mark.slow
@pytest.mark.parity
@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_auto_on_news20_certifies_every_output(loss: str) -> None:
    """All 20 one-vs-rest outputs certified at default settings (before: auto l2 = tron,
    every output at max_iter, relative gap 0.85); l2's first output against LIBLINEAR."""
    X, y = load_dataset("news20")
    result = fit(X, y, solver="auto", loss=loss)
    assert result.auto is not None and result.auto["chosen"] == "dcd"
    assert result.relative_gap is not None
    assert result.converged and result.relative_gap <= TOL, result.warnings
    assert all(row["converged"] and row["relative_gap"] <= TOL for row in result.per_output)
    if loss == "l2":
        first = binary_labels(y, float(np.unique(y)[0]))
        best = certified_optimum(X, first, 1.0, "l2", "augment", bias_scale=1.0,
                                 method="liblinear").primal
        primal = primal_value(X, first, result.coef[0], float(result.intercept[0]), C=1.0,
                              loss="l2", bias="augment", bias_scale=1.0)
        assert (primal - best) / best <= TOL
