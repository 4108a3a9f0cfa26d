"""The certified reference optimum itself is tested: hand-derived answers, independent
solvers (scipy L-BFGS on the smooth L2-loss primal, L-BFGS-B on the L1 dual), LIBLINEAR
-s 2 against clarabel, and certificates that must refuse a bad pair."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

from testkit.certified import (
    CertificationError,
    certified_optimum,
    certify_pair,
    cost_vector,
    primal_value,
)
from testkit.unscaled import load_case
from tests.solvers.naive import augment, dual_by_lbfgsb


def relative(a: float, b: float) -> float:
    return abs(a - b) / abs(b)


def random_problem(seed: int, n: int = 80, d: int = 6) -> tuple[sp.csr_matrix, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 3.0, size=d)
    X[rng.random(X.shape) < 0.3] = 0.0
    y = np.where(X @ rng.normal(size=d) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return sp.csr_matrix(X), y


# --------------------------------------------------------------------------------------
# hand-derived optima
#
# Two points, no bias: x = +1 (y = +1) and x = -1 (y = -1). P(w) = w^2/2 + 2C loss(1 - w).
#   l1: w* = min(1, 2C);       C = 1: P* = 1/2;   C = 1/4: w* = 1/2, P* = 1/8 + 1/4 = 3/8.
#   l2: w* = 4C / (1 + 4C);    C = 1: w* = 4/5, P* = 8/25 + 2/25 = 2/5.


@pytest.mark.parametrize(
    ("loss", "C", "w_star", "p_star"),
    [("l1", 1.0, 1.0, 0.5), ("l1", 0.25, 0.5, 0.375), ("l2", 1.0, 0.8, 0.4)],
)
def test_two_points_no_bias(loss: str, C: float, w_star: float, p_star: float) -> None:
    X = sp.csr_matrix(np.array([[1.0], [-1.0]]))
    y = np.array([1.0, -1.0])
    cert = certified_optimum(X, y, C, loss, None)
    assert cert.w == pytest.approx([w_star], abs=1e-8)
    assert cert.intercept == 0.0 and cert.bias_weight is None
    assert relative(cert.primal, p_star) <= 1e-9
    assert cert.dual_bound <= p_star * (1 + 1e-12)
    assert relative(cert.dual_bound, p_star) <= 1e-9


def test_two_points_augmented_bias_is_zero_by_symmetry() -> None:
    # rows (1, B) and (-1, B): the problem is symmetric under w_B -> -w_B, so w_B* = 0
    X = sp.csr_matrix(np.array([[1.0], [-1.0]]))
    cert = certified_optimum(X, np.array([1.0, -1.0]), 1.0, "l2", "augment", bias_scale=3.0)
    assert cert.bias_weight == pytest.approx(0.0, abs=1e-8)
    assert cert.w == pytest.approx([0.8], abs=1e-8)
    assert relative(cert.primal, 0.4) <= 1e-9


def test_free_bias_hard_margin() -> None:
    # x = 2 (y = +1), x = 0 (y = -1), free intercept: the two margins sum to 2w, so with
    # w < 1 the slacks sum to at least 2 - 2w: P = w^2/2 + C (2 - 2w), minimised at
    # w* = min(1, 2C). At C = 1: w* = 1, and zero slack forces b* = -1; P* = 1/2.
    X = sp.csr_matrix(np.array([[2.0], [0.0]]))
    y = np.array([1.0, -1.0])
    cert = certified_optimum(X, y, 1.0, "l1", "free")
    assert cert.w == pytest.approx([1.0], abs=1e-7)
    assert cert.intercept == pytest.approx(-1.0, abs=1e-7)
    assert relative(cert.primal, 0.5) <= 1e-9
    # the dual point behind the bound is feasible: box and y'a = 0
    assert np.all(cert.alpha >= 0) and np.all(cert.alpha <= 1.0)
    assert abs(cert.alpha @ y) <= 1e-15


def test_free_bias_beats_no_bias_and_augment() -> None:
    # the free intercept is unregularised, so its optimum is the lowest of the three
    X, y = random_problem(3)
    free = certified_optimum(X, y, 1.0, "l1", "free").primal
    augmented = certified_optimum(X, y, 1.0, "l1", "augment").primal
    none = certified_optimum(X, y, 1.0, "l1", None).primal
    assert free < augmented < none


# --------------------------------------------------------------------------------------
# independent solvers


def lbfgs_l2(
    X: np.ndarray, y: np.ndarray, cost: np.ndarray, free: bool
) -> tuple[float, np.ndarray]:
    """min 1/2||w||^2 + sum C_i max(0, 1 - y_i (x_i.w + b))^2 by L-BFGS (smooth)."""
    d = X.shape[1]

    def f(v: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = v[:d], (v[d] if free else 0.0)
        slack = np.maximum(0.0, 1.0 - y * (X @ w + b))
        value = 0.5 * w @ w + cost @ slack**2
        g_margin = -2.0 * cost * slack * y
        grad = np.concatenate([w + X.T @ g_margin, [g_margin.sum()] if free else []])
        return value, grad

    result = scipy.optimize.minimize(
        f, np.zeros(d + (1 if free else 0)), jac=True, method="L-BFGS-B",
        options={"ftol": 1e-16, "gtol": 1e-11, "maxiter": 50_000, "maxcor": 30},
    )
    return float(result.fun), result.x


@pytest.mark.parametrize("bias", [None, "augment", "free"])
@pytest.mark.parametrize("seed", [0, 1])
def test_l2_loss_agrees_with_lbfgs(bias: str | None, seed: int) -> None:
    X, y = random_problem(seed)
    rng = np.random.default_rng(10 + seed)
    sample_weight = rng.uniform(0.5, 2.0, size=y.shape[0])
    class_weight = {1: 3.0, -1: 0.5}
    cost = cost_vector(y, 2.0, class_weight, sample_weight)
    dense = augment(X.toarray(), 1.5 if bias == "augment" else None)
    value, v = lbfgs_l2(dense, y, cost, free=bias == "free")
    cert = certified_optimum(X, y, 2.0, "l2", bias, 1.5 if bias == "augment" else None,
                             class_weight, sample_weight)
    assert cert.relative_gap <= 1e-9
    # L-BFGS is not certified: it may only be *above* the certified optimum, barely
    assert value >= cert.dual_bound
    assert relative(value, cert.primal) <= 1e-9
    d = X.shape[1]
    assert cert.w == pytest.approx(v[:d], abs=1e-5)
    if bias == "augment":
        assert cert.bias_weight == pytest.approx(v[d], abs=1e-5)
        assert cert.intercept == pytest.approx(1.5 * v[d], abs=1e-5)
    elif bias == "free":
        assert cert.intercept == pytest.approx(v[d], abs=1e-5)


@pytest.mark.parametrize("bias_scale", [None, 2.0])
def test_l1_loss_agrees_with_the_box_constrained_dual(bias_scale: float | None) -> None:
    X, y = random_problem(5, n=50, d=4)
    cost = cost_vector(y, 0.7)
    dense = augment(X.toarray(), bias_scale)
    _alpha, w_dual = dual_by_lbfgsb(dense, y, cost, "l1")
    slack = np.maximum(0.0, 1.0 - y * (dense @ w_dual))
    primal_of_dual = 0.5 * w_dual @ w_dual + cost @ slack
    cert = certified_optimum(X, y, 0.7, "l1", "augment" if bias_scale else None, bias_scale)
    assert primal_of_dual >= cert.dual_bound
    assert relative(primal_of_dual, cert.primal) <= 1e-6
    w_full = cert.w if bias_scale is None else np.append(cert.w, cert.bias_weight)
    assert w_full == pytest.approx(w_dual, abs=1e-4)


def test_liblinear_reference_agrees_with_clarabel_on_unscaled_data() -> None:
    X, y = load_case("wine-x2")
    by_qp = certified_optimum(X, y, 1.0, "l2", "augment", method="clarabel")
    by_newton = certified_optimum(X, y, 1.0, "l2", "augment", method="liblinear")
    assert by_newton.method == "liblinear" and by_qp.method == "clarabel"
    assert by_newton.relative_gap <= 1e-9
    assert relative(by_newton.primal, by_qp.primal) <= 2e-9
    scale = np.max(np.abs(by_qp.w))
    assert np.max(np.abs(by_newton.w - by_qp.w)) <= 1e-5 * scale
    assert by_newton.details["relative_gradient_norm"] <= 1e-6


def test_liblinear_reference_handles_class_weights_and_label_order() -> None:
    X, y = random_problem(7, n=200, d=8)
    y = -y  # a -1 row may come first: the sign of w must not depend on it
    weights = {1: 4.0, -1: 0.5}
    by_qp = certified_optimum(X, y, 1.0, "l2", None, class_weight=weights,
                              method="clarabel")
    by_newton = certified_optimum(X, y, 1.0, "l2", None, class_weight=weights,
                                  method="liblinear")
    assert relative(by_newton.primal, by_qp.primal) <= 2e-9
    assert by_newton.w == pytest.approx(by_qp.w, abs=1e-6)


def test_liblinear_refuses_what_it_cannot_certify() -> None:
    X, y = random_problem(0)
    with pytest.raises(ValueError, match="L2-loss"):
        certified_optimum(X, y, 1.0, "l1", None, method="liblinear")
    with pytest.raises(ValueError, match="constant within each class"):
        certified_optimum(X, y, 1.0, "l2", None, sample_weight=np.linspace(1, 2, y.shape[0]),
                          method="liblinear")


# --------------------------------------------------------------------------------------
# the certificate refuses what it cannot prove


def test_certify_pair_accepts_the_optimal_pair_and_refuses_a_perturbed_one() -> None:
    X, y = load_case("cancer-x1")
    cert = certified_optimum(X, y, 1.0, "l1", "augment")
    again = certify_pair(X, y, cert.w, cert.intercept, cert.alpha, 1.0, "l1", "augment")
    assert again.primal == pytest.approx(cert.primal, rel=1e-15)
    assert again.relative_gap <= 1e-9
    with pytest.raises(CertificationError, match="relative gap"):
        certify_pair(X, y, cert.w * (1 + 1e-3), cert.intercept, cert.alpha, 1.0, "l1",
                     "augment")
    with pytest.raises(CertificationError, match="relative gap"):
        certify_pair(X, y, cert.w, cert.intercept, cert.alpha * 0.999, 1.0, "l1", "augment")


def test_an_infeasible_dual_point_is_projected_not_trusted() -> None:
    # alpha far outside the box would give a huge (invalid) "lower bound" if used as is
    X, y = random_problem(2)
    cert = certified_optimum(X, y, 1.0, "l1", None)
    with pytest.raises(CertificationError):
        certify_pair(X, y, cert.w, 0.0, cert.alpha + 5.0, 1.0, "l1", None)
    projected = certify_pair(X, y, cert.w, 0.0, cert.alpha + 5.0, 1.0, "l1", None,
                             rel_gap=np.inf)
    assert np.all(projected.alpha <= 1.0) and projected.dual_bound <= cert.primal


def test_primal_value_matches_the_certificate_and_the_naive_objective() -> None:
    X, y = random_problem(4)
    cert = certified_optimum(X, y, 1.0, "l1", "augment", bias_scale=2.0)
    value = primal_value(X, y, cert.w, cert.intercept, C=1.0, loss="l1", bias="augment",
                         bias_scale=2.0)
    assert value == cert.primal
    dense = augment(X.toarray(), 2.0)
    w_full = np.append(cert.w, cert.intercept / 2.0)
    slack = np.maximum(0.0, 1.0 - y * (dense @ w_full))
    assert relative(value, 0.5 * w_full @ w_full + slack.sum()) <= 1e-13
    with pytest.raises(ValueError, match="intercept"):
        primal_value(X, y, cert.w, 0.5, loss="l1", bias=None)


def test_sample_weight_two_equals_a_duplicated_row() -> None:
    X, y = random_problem(6, n=40, d=5)
    weight = np.ones(y.shape[0])
    weight[3] = 2.0
    weighted = certified_optimum(X, y, 1.0, "l1", "free", sample_weight=weight)
    doubled = certified_optimum(sp.vstack([X, X[3]], format="csr"), np.append(y, y[3]),
                                1.0, "l1", "free")
    assert relative(weighted.primal, doubled.primal) <= 1e-9
    assert weighted.w == pytest.approx(doubled.w, abs=1e-6)


def test_labels_must_be_binary_plus_minus_one() -> None:
    X, y = random_problem(0)
    with pytest.raises(ValueError, match="-1 or \\+1"):
        certified_optimum(X, (y + 1) / 2, 1.0, "l1", None)


def test_results_are_cached_per_problem() -> None:
    X, y = random_problem(8)
    first = certified_optimum(X, y, 1.0, "l2", "free")
    assert certified_optimum(X.copy(), y.copy(), 1.0, "l2", "free") is first
    assert certified_optimum(X, y, 2.0, "l2", "free") is not first


@pytest.mark.parametrize("case", ["madelon-like",
                                  pytest.param("madelon.t", marks=pytest.mark.parity)])
@pytest.mark.parametrize("loss", ["l1", "l2"])
def test_unscaled_madelon_is_certified(loss: str, case: str) -> None:
    # separable, tiny optimum on values up to ~800 (madelon.t: 0.0132; clarabel's default
    # tolerances stopped at 4e-9 relative there); the reference must still certify 1e-9
    X, y = load_case(case)
    cert = certified_optimum(X, y, 1.0, loss, "augment")
    assert cert.relative_gap <= 1e-9
    assert cert.primal < 1e-3 * X.shape[0]  # separable: far below the n of w = 0
    value = primal_value(X, y, cert.w, cert.intercept, C=1.0, loss=loss, bias="augment")
    assert relative(value, cert.primal) <= 1e-12
    if case == "madelon.t":
        assert 0.0131 < cert.primal < 0.0133
