"""LIBLINEAR's logistic regression (-s 0 tron, -s 7 logistic_dcd) and L1-regularised
models (-s 5, -s 6: l1_cd): primal objectives against a certified optimum, `converged`
only with a certificate, the support of the L1 models against LIBLINEAR's, instance
weights, probabilities, `auto`'s choice and the LIBLINEAR model file.

The lower bounds here are computed by dense NumPy, independently of the solvers'
certificates (solvers/certificate.py, solvers/l1_objectives.py):
- L2-regularised logistic: P is 1-strongly convex, P* >= P(w) - ||grad P(w)||^2 / 2;
- L1-regularised: weak duality with the multipliers a(w) of the loss scaled into the
  dual's feasible set {||Z'(y a)||_inf <= 1} (scipy's bounded scalar search for the
  scale), D(t a) <= P*.
A reference (LIBLINEAR at -e 1e-6) counts only as far as such a bound at its w says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp
from scipy.special import expit, xlogy

from solvers.auto import DataShape, choose
from solvers.formats import liblinear_model_text
from solvers.models import Pipeline, estimator_of, predictions
from solvers.params import ParamError, validate_params
from solvers.train import fit
from testkit import bundled
from testkit.datasets import load_dataset

# (name, fit params, LIBLINEAR -s): the formulations of this module
FORMULATIONS = {
    "lr_primal": ({"solver": "tron", "loss": "logistic"}, 0),
    "lr_dual": ({"solver": "logistic_dcd"}, 7),
    "l1r_l2": ({"solver": "l1_cd", "loss": "l2"}, 5),
    "l1r_lr": ({"solver": "l1_cd", "loss": "logistic"}, 6),
}
TOL = 1e-3
MIN_PROBABILITY = 1e-7  # solvers.probability.ovo_probabilities' clip (two classes)


def binary_set(name: str) -> tuple[sp.csr_matrix, np.ndarray]:
    """The bundled sets as binary problems: digits < 5 against the rest."""
    X, y = bundled.load(name)
    if name == "digits":
        y = np.where(y < 5, -1.0, 1.0)
    return X, y


def augmented(X: sp.csr_matrix) -> sp.csr_matrix:
    return sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")


def naive_primal_and_bound(
    Z: sp.csr_matrix, y: np.ndarray, cost: np.ndarray, w: np.ndarray, loss: str, penalty: str
) -> tuple[float, float]:
    """(P(w), a lower bound on P*) by dense formulas (module docstring)."""
    m = y * (Z @ w)
    if loss == "logistic":
        losses, slope = np.logaddexp(0.0, -m), expit(-m)  # a_i / C_i
    else:
        losses, slope = np.maximum(0.0, 1.0 - m) ** 2, 2.0 * np.maximum(0.0, 1.0 - m)
    a = cost * slope
    if penalty == "l2":
        primal = 0.5 * w @ w + cost @ losses
        grad = w - Z.T @ (y * a)
        return float(primal), float(primal - 0.5 * grad @ grad)
    primal = float(np.abs(w).sum() + cost @ losses)
    t_max = 1.0 / max(float(np.abs(Z.T @ (y * a)).max()), 1e-300)
    if loss == "logistic":
        t_max = min(t_max, 1.0 / float(slope.max()))

        def dual(t: float) -> float:
            p = t * slope
            return float(-(cost @ (xlogy(p, p) + xlogy(1 - p, 1 - p))))
    else:

        def dual(t: float) -> float:
            return float(t * a.sum() - t * t * (a * a / (4 * cost)).sum())

    best = scipy.optimize.minimize_scalar(
        lambda t: -dual(t), bounds=(0.0, t_max), method="bounded", options={"xatol": 1e-12}
    )
    return primal, max(dual(float(best.x)), dual(t_max), 0.0)


def hinge_w(result: Any) -> np.ndarray:
    return np.append(result.coef[0], result.intercept[0])


def liblinear_w(X: sp.csr_matrix, y: np.ndarray, options: str) -> np.ndarray:
    """LIBLINEAR's w (bias last, -B 1) oriented positive for the larger label."""
    from liblinear.liblinearutil import parameter, problem, train

    model = train(problem(y, X), parameter(options + " -B 1 -q"))
    w = np.array([model.w[i] for i in range(X.shape[1] + 1)])
    return w if model.label[0] == np.max(y) else -w


def penalty_and_loss(params: dict[str, Any]) -> tuple[str, str]:
    return ("l1" if params["solver"] == "l1_cd" else "l2"), params.get("loss", "logistic")


def fit_against_liblinear(
    X: sp.csr_matrix, y: np.ndarray, formulation: str
) -> tuple[Any, float, float, float]:
    """Hinge's fit at C = 1, P(w) of it, the best lower bound on P* (at its w or at
    LIBLINEAR's -e 1e-6 w), and P of LIBLINEAR's w."""
    params, liblinear_type = FORMULATIONS[formulation]
    penalty, loss = penalty_and_loss(params)
    result = fit(X, y, C=1.0, **params)
    Z, cost = augmented(X), np.ones(X.shape[0])
    primal, bound = naive_primal_and_bound(Z, y, cost, hinge_w(result), loss, penalty)
    reference = liblinear_w(X, y, f"-s {liblinear_type} -c 1 -e 1e-6")
    ref_primal, ref_bound = naive_primal_and_bound(Z, y, cost, reference, loss, penalty)
    return result, primal, max(bound, ref_bound), ref_primal  # both bounds <= P*


# -- objectives against a certified optimum --------------------------------------------


@pytest.mark.parametrize("formulation", list(FORMULATIONS))
@pytest.mark.parametrize("name", ["cancer", "digits", "text"])
def test_primal_within_tol_of_certified_optimum(name: str, formulation: str) -> None:
    result, primal, lower, ref_primal = fit_against_liblinear(*binary_set(name), formulation)
    assert result.primal_objective == pytest.approx(primal, rel=1e-9)
    assert result.converged, result.warnings
    assert (primal - lower) / primal <= TOL
    assert primal <= ref_primal * (1 + TOL)


@pytest.mark.parametrize("formulation", list(FORMULATIONS))
def test_converged_false_without_a_certificate(formulation: str) -> None:
    """A fit stopped after one iteration says so, with a gap at least its true distance
    from the optimum (LIBLINEAR's tight w bounds P* from above). The text set has more
    than auto.NEWTON_MAX_WEIGHTS weights: tron has no follow-up there."""
    X, y = binary_set("text")
    params, liblinear_type = FORMULATIONS[formulation]
    penalty, loss = penalty_and_loss(params)
    extra = {"fallback": False} if params["solver"] == "logistic_dcd" else {}
    result = fit(X, y, C=10.0, max_iter=1, **extra, **params)
    Z, cost = augmented(X), np.full(X.shape[0], 10.0)
    primal, _ = naive_primal_and_bound(Z, y, cost, hinge_w(result), loss, penalty)
    best, _ = naive_primal_and_bound(
        Z, y, cost, liblinear_w(X, y, f"-s {liblinear_type} -c 10 -e 1e-6"), loss, penalty
    )
    assert not result.converged
    assert result.exit_reason == "max_iter"
    assert result.relative_gap > TOL
    assert result.relative_gap >= (primal - best) / primal


@pytest.mark.parametrize("loss", ["l2", "logistic"])
def test_the_newton_polish_certifies_the_first_solve(loss: str) -> None:
    """Once LIBLINEAR's rule holds, l1_cd's orthant-wise Newton steps remove the violations
    that coordinate descent leaves along high-curvature directions (the bias column) until
    the certificate holds: on the text set the first solve (eps 0.01) ends certified, with
    no eps / 10 restart (without the polish: five solves for l2, three for logistic), and
    the bound computed here agrees."""
    X, y = binary_set("text")
    result = fit(X, y, solver="l1_cd", loss=loss, C=1.0)
    primal, lower = naive_primal_and_bound(
        augmented(X), y, np.ones(X.shape[0]), hinge_w(result), loss, "l1"
    )
    assert result.converged
    assert len(result.path) == 1
    assert result.per_output[0]["newton_polish"] >= 1
    assert (primal - lower) / primal <= TOL


def test_the_dual_of_logistic_dcd_is_a_lower_bound() -> None:
    X, y = binary_set("digits")
    result = fit(X, y, solver="logistic_dcd", C=4.0, tol=1e-8)
    reference = liblinear_w(X, y, "-s 0 -c 4 -e 1e-8")
    ref_primal, _ = naive_primal_and_bound(
        augmented(X), y, np.full(X.shape[0], 4.0), reference, "logistic", "l2"
    )
    assert result.converged
    assert result.dual_objective <= min(ref_primal, result.primal_objective)
    assert result.primal_objective - result.dual_objective <= 1e-6 * ref_primal


# -- the sparse models ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "loss", "s"),
    [
        ("cancer", "logistic", 6),
        ("digits", "logistic", 6),
        ("text", "logistic", 6),
        ("digits", "l2", 5),
        ("text", "l2", 5),
    ],
)
def test_l1_support_is_liblinears(name: str, loss: str, s: int) -> None:
    """The non-zero weights of a model certified to 1e-6 against LIBLINEAR's at -e 1e-6
    (cancer, -s 5: LIBLINEAR stops at its 1000 sweeps 1e-3 above the optimum, with 14
    non-zeros where the certified optimum has 18; not a reference there)."""
    X, y = binary_set(name)
    result = fit(X, y, solver="l1_cd", loss=loss, C=1.0, tol=1e-6)
    ours = set(np.flatnonzero(result.coef[0]).tolist())
    theirs = set(np.flatnonzero(liblinear_w(X, y, f"-s {s} -c 1 -e 1e-6")[:-1]).tolist())
    assert result.converged
    assert result.per_output[0]["nonzero_weights"] == len(ours)
    assert len(ours) < X.shape[1]  # sparse
    assert len(ours ^ theirs) <= 0.01 * max(len(ours), len(theirs))


# -- instance weights ---------------------------------------------------------------------


@pytest.mark.parametrize("formulation", list(FORMULATIONS))
def test_sample_weights_equal_repeated_rows(formulation: str) -> None:
    X, y = binary_set("cancer")
    params, _ = FORMULATIONS[formulation]
    weights = np.random.default_rng(0).integers(0, 4, size=X.shape[0]).astype(float)
    repeat = np.repeat(np.arange(X.shape[0]), weights.astype(int))
    weighted = fit(X, y, C=0.5, tol=1e-6, sample_weight=weights, **params)
    repeated = fit(X[repeat], y[repeat], C=0.5, tol=1e-6, **params)
    assert weighted.converged and repeated.converged  # each within 1e-6 of one optimum
    assert weighted.primal_objective == pytest.approx(repeated.primal_objective, rel=2e-6)


# -- probabilities ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cancer", "wine"])
@pytest.mark.parametrize("formulation", ["lr_primal", "lr_dual", "l1r_lr"])
def test_logistic_models_give_their_probabilities(name: str, formulation: str) -> None:
    X, y = bundled.load(name)
    result = fit(X, y, C=1.0, **FORMULATIONS[formulation][0])
    assert isinstance(result.model, Pipeline)
    labels, values, probabilities = predictions(result.model, X)
    assert probabilities is not None
    if values.ndim == 1:  # P(classes[1]) = sigma(f), in [1e-7, 1 - 1e-7] as LIBSVM's
        expected = np.clip(expit(values), MIN_PROBABILITY, 1 - MIN_PROBABILITY)
        # (computed as 1 - P(classes[0]): absolute rounding 1e-16)
        np.testing.assert_allclose(probabilities[:, 1], expected, rtol=1e-12, atol=1e-15)
    else:  # one-vs-rest: sigma(f_k) / sum_k sigma(f_k), LIBLINEAR's rule
        expected = expit(values) / expit(values).sum(axis=1, keepdims=True)
        np.testing.assert_allclose(probabilities, expected, rtol=1e-12)
    np.testing.assert_array_equal(result.classes[np.argmax(probabilities, axis=1)], labels)


def test_svm_losses_give_no_probabilities() -> None:
    X, y = binary_set("cancer")
    result = fit(X, y, solver="l1_cd", loss="l2")
    assert predictions(result.model, X)[2] is None


# -- auto and the parameters ----------------------------------------------------------------


def test_auto_picks_by_loss_and_penalty() -> None:
    dense = DataShape(5000, 50, 250_000, 1.0)
    text = DataShape(5000, 50_000, 100_000, 1.0)
    unscaled = DataShape(5000, 50, 250_000, 300.0)
    assert choose(dense, "logistic", 1.0, "augment")[0] == "tron"
    assert choose(text, "logistic", 1.0, "augment")[0] == "logistic_dcd"
    assert choose(text, "logistic", 1000.0, "augment")[0] == "tron"
    assert choose(unscaled, "logistic", 1.0, "augment")[0] == "newton"
    for shape in (dense, text, unscaled):
        assert choose(shape, "l2", 1.0, "augment", "l1")[0] == "l1_cd"
        assert choose(shape, "logistic", 1.0, "augment", "l1")[0] == "l1_cd"


def test_auto_fits_a_sparse_logistic_model() -> None:
    X, y = binary_set("text")
    result = fit(X, y, solver="auto", loss="logistic", penalty="l1")
    assert result.auto is not None and result.auto["chosen"] == "l1_cd"
    assert result.converged
    assert result.per_output[0]["nonzero_weights"] < X.shape[1]
    assert isinstance(result.model, Pipeline)


def test_penalty_l1_refuses_the_hinge_loss() -> None:
    with pytest.raises(ParamError, match="penalty 'l1' takes loss"):
        validate_params("auto", {"penalty": "l1", "loss": "l1"})
    with pytest.raises(ParamError, match="must be one of"):
        validate_params("l1_cd", {"penalty": "l2"})


# -- LIBLINEAR's model file -------------------------------------------------------------


@pytest.mark.parametrize("name", ["cancer", "wine"])
@pytest.mark.parametrize(
    ("formulation", "solver_type"),
    [
        ("lr_primal", "L2R_LR"),
        ("lr_dual", "L2R_LR_DUAL"),
        ("l1r_l2", "L1R_L2LOSS_SVC"),
        ("l1r_lr", "L1R_LR"),
    ],
)
def test_liblinear_predict_reproduces_the_exported_model(
    tmp_path: Path, name: str, formulation: str, solver_type: str
) -> None:
    from liblinear.liblinearutil import load_model, predict

    X, y = bundled.load(name)
    params = FORMULATIONS[formulation][0]
    result = fit(X, y, C=1.0, **params)
    text = liblinear_model_text(
        estimator_of(result.model), {**result.params, "solver": params["solver"]}
    )
    assert text.startswith(f"solver_type {solver_type}\n")
    path = tmp_path / "model.txt"
    path.write_text(text)
    model = load_model(str(path))
    labels, _, probabilities = predictions(result.model, X)
    options = "-b 1 -q" if probabilities is not None else "-q"
    their_labels, _, their_values = predict(y, X, model, options)
    np.testing.assert_array_equal(np.array(their_labels), labels)
    if probabilities is not None:  # columns in the file's label order; ours of two
        # classes are kept within [1e-7, 1 - 1e-7] (LIBSVM's clip), LIBLINEAR's are not
        order = [list(result.classes).index(label) for label in model.get_labels()]
        np.testing.assert_allclose(
            np.array(their_values), probabilities[:, order], rtol=1e-9, atol=MIN_PROBABILITY
        )


# -- the shared LIBSVM sets ---------------------------------------------------------------


# a9a at -s 5 runs its 10,000 sweeps (35-55 s on 2 cores, the suite's longest test): `slow`
# (make test-slow). The default suite keeps -s 5 against LIBLINEAR on the other two sets,
# and `converged` false without a certificate for every formulation
# (test_converged_false_without_a_certificate).
PARITY_CASES = [pytest.param(name, formulation, marks=pytest.mark.slow)
                if (name, formulation) == ("a9a", "l1r_l2") else (name, formulation)
                for name in ("a9a", "breast-cancer_scale", "heart_scale")
                for formulation in FORMULATIONS]


@pytest.mark.parity
@pytest.mark.parametrize(("name", "formulation"), PARITY_CASES)
def test_parity_on_shared_sets(name: str, formulation: str) -> None:
    X, y = load_dataset(name)
    result, primal, lower, ref_primal = fit_against_liblinear(sp.csr_matrix(X), y, formulation)
    assert primal <= ref_primal * (1 + TOL)
    if (name, formulation) in UNCERTIFIED:
        assert not result.converged
        assert result.relative_gap >= (primal - ref_primal) / primal
        return
    assert result.converged, result.warnings
    assert (primal - lower) / primal <= TOL


# a9a, -s 5: the one-hot groups sum to the bias column, and coordinate descent creeps
# along those collinear directions (10000 sweeps; LIBLINEAR's -e 1e-6 ends 6e-5 above
# ours); some |Z'(y a(w))|_j stay near 4 where the optimum has <= 1, so the scaled dual
# point proves only a gap of 0.2 to 0.6: converged false, honestly
UNCERTIFIED = {("a9a", "l1r_l2")}


@pytest.mark.parametrize("formulation", list(FORMULATIONS))
def test_class_weight_is_a_weight_on_its_rows(formulation: str) -> None:
    """C_i = C * class_weight * w_i: a class weight of 3 is a weight of 3 on its rows."""
    X, y = binary_set("cancer")
    params, _ = FORMULATIONS[formulation]
    by_class = fit(X, y, C=0.5, tol=1e-6, class_weight={"1": 3.0}, **params)
    by_row = fit(X, y, C=0.5, tol=1e-6, sample_weight=np.where(y == 1, 3.0, 1.0), **params)
    assert by_class.converged and by_row.converged
    assert by_class.primal_objective == pytest.approx(by_row.primal_objective, rel=2e-6)


@pytest.mark.parametrize("formulation", list(FORMULATIONS))
def test_a_progress_callback_cancels(formulation: str) -> None:
    X, y = binary_set("text")
    events: list[dict[str, Any]] = []

    def cancel(event: dict[str, Any]) -> bool:
        events.append(event)
        return True

    result = fit(X, y, progress=cancel, progress_interval=0.0, **FORMULATIONS[formulation][0])
    assert events and result.exit_reason == "cancelled"
    assert not result.converged
