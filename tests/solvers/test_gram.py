"""gram (solvers/gram.py): the interior-point dual solver on the Gram matrix, against
certified optima (clarabel via testkit.certified), never against another solver."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from solvers import fit, gram
from solvers.backbone import LinearProblem, ProgressMonitor
from solvers.inputs import as_csr_arrays
from solvers.params import validate_params
from testkit.certified import CertificationError, certified_optimum, primal_value
from testkit.datasets import load_local
from testkit.unscaled import binary_labels, load_case

TOL = 1e-3


def suboptimality(X: Any, y: np.ndarray, loss: str, C: float = 1.0, bias: str = "augment",
                  class_weight: dict[Any, float] | None = None, **extra: Any
                  ) -> tuple[float, Any]:
    scale = 1.0 if bias == "augment" else None
    best = certified_optimum(X, y, C, loss, bias if bias == "augment" else None,
                             bias_scale=scale, class_weight=class_weight).primal
    solver = extra.pop("solver", "gram")
    if solver != "ocas":  # ocas: hinge loss only, no loss parameter
        extra["loss"] = loss
    result = fit(X, y, solver=solver, C=C, bias=bias, class_weight=class_weight, **extra)
    primal = primal_value(X, y, result.coef[0], float(result.intercept[0]), C=C, loss=loss,
                          bias=bias if bias == "augment" else None, bias_scale=scale,
                          class_weight=class_weight)
    return (primal - best) / best, result


def check_honest(subopt: float, result: Any) -> None:
    assert result.relative_gap is not None
    if result.relative_gap < 1.0:
        assert subopt <= result.relative_gap / (1 - result.relative_gap) + 1e-9
    if result.converged:
        assert subopt <= TOL, (subopt, result.path)


@st.composite
def small_problems(draw: Any) -> tuple[sp.csr_matrix, np.ndarray, float, str, str]:
    n = draw(st.integers(4, 60))
    d = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.exp(rng.uniform(np.log(1e-2), np.log(1e3), size=d))
    X[rng.random(size=(n, d)) < 0.3] = 0.0
    y = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    y[:2] = [-1.0, 1.0]
    C = float(draw(st.sampled_from([0.01, 1.0, 100.0])))
    return (sp.csr_matrix(X), y, C, draw(st.sampled_from(["l1", "l2"])),
            draw(st.sampled_from(["augment", "none"])))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=small_problems())
def test_converged_implies_within_tol_of_the_certified_optimum(
        problem: tuple[sp.csr_matrix, np.ndarray, float, str, str]) -> None:
    X, y, C, loss, bias = problem
    try:
        subopt, result = suboptimality(X, y, loss, C=C, bias=bias, max_seconds=20.0)
    except CertificationError:
        # no judge for this draw: the interior point could not certify the optimum to
        # 1e-9 (once: C = 0.01 on 1e-2-scaled features, P* = 3.8e-6, gap 1.2e-9 relative)
        reject()
    check_honest(subopt, result)
    assert result.converged, (subopt, result.path)  # an IPM on <= 60 rows: always


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("name", ["madelon-300", "cancer-x1", "wine-x2", "onehot3-3-x3"])
def test_unscaled_cases_certified(name: str, loss: str) -> None:
    if name == "madelon-300":
        X, y = load_case("madelon-like")
        X, y = X[:300], y[:300]
    else:
        X, y = load_case(name)
        if X.shape[0] > gram.MAX_ROWS:
            pytest.skip("more rows than gram takes")
    subopt, result = suboptimality(X, y, loss)
    check_honest(subopt, result)
    assert result.converged and subopt <= TOL, (subopt, result.path)


@pytest.mark.parametrize("loss", ["l1", "l2"])
@pytest.mark.parametrize("name", ["cancer", "wine"])
def test_scaled_sets_certified(name: str, loss: str) -> None:
    X, y = load_local(name)
    subopt, result = suboptimality(X, binary_labels(y), loss)
    check_honest(subopt, result)
    assert result.converged and subopt <= TOL, (subopt, result.path)


def test_madelon_l1_auto_chooses_gram_and_is_certified() -> None:
    """madelon.t, loss l1: dcd -> warm ocas ended 2e-2 above the optimum at the time cap;
    auto now picks gram, certified well within tol (here on madelon-like data)."""
    X, y = load_case("madelon-like")
    subopt, result = suboptimality(X, y, "l1", solver="auto", max_seconds=60.0)
    assert result.auto["chosen"] == "gram"
    assert [s["solver"] for s in result.path] == ["gram"]
    assert result.converged and subopt <= TOL, (subopt, result.path)


def test_class_weights() -> None:
    X, y = load_case("cancer-x1")
    weights = {1.0: 5.0, -1.0: 0.5}
    for loss in ("l1", "l2"):
        subopt, result = suboptimality(X, y, loss, class_weight=weights)
        assert result.converged and subopt <= TOL, (loss, subopt)
        unweighted = fit(X, y, solver="gram", loss=loss)
        assert not np.allclose(unweighted.coef, result.coef)


def _problem(name: str) -> LinearProblem:
    X, y = load_case(name)
    return LinearProblem(as_csr_arrays(X), y, np.ones(X.shape[0]), 1.0)


def test_limits_and_cancellation() -> None:
    problem = _problem("wine-x2")
    params = validate_params("gram", {"loss": "l1", "max_iter": 2})
    result = gram.solve(problem, params, ProgressMonitor(None, None))
    assert result.exit_reason == "max_iter" and result.iterations == 2
    assert result.dual is not None and result.primal is not None
    assert result.dual <= result.primal  # a feasible dual point: a lower bound
    params = validate_params("gram", {"loss": "l1"})
    result = gram.solve(problem, params, ProgressMonitor(None, 1e-9))
    assert result.exit_reason == "max_seconds" and np.all(np.isfinite(result.w))
    events: list[dict[str, Any]] = []

    def cancel_third(event: dict[str, Any]) -> bool:
        events.append(event)
        return len(events) >= 3

    result = gram.solve(problem, params, ProgressMonitor(cancel_third, None, interval=0.0))
    assert result.exit_reason == "cancelled" and len(events) == 3
    assert result.iterations == events[-1]["iteration"]
    assert all(e["gap"] == pytest.approx(e["primal"] - e["dual"]) for e in events)


def test_too_many_rows_is_refused() -> None:
    n = gram.MAX_ROWS + 1
    X = sp.csr_matrix(np.ones((n, 1)))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    with pytest.raises(ValueError, match="at most"):
        fit(X, y, solver="gram")


def test_ocas_that_stops_uncertified_on_few_rows_hands_over_to_gram() -> None:
    X, y = load_case("cancer-x1")
    subopt, result = suboptimality(X, y, "l1", solver="ocas", max_iter=3)
    assert [(s["solver"], s["exit"]) for s in result.path] == [
        ("ocas", "max_iter"), ("gram", "converged")]
    assert "few examples" in result.path[1]["reason"]
    assert result.converged and subopt <= TOL, (subopt, result.path)
