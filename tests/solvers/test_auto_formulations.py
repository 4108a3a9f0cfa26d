"""`auto` reaches every LIBLINEAR formulation: by the loss and penalty for classification
(tests/solvers/test_linear_formulations_lr_l1.py), by `formulation` for Crammer-Singer,
linear SVR and the linear one-class SVM, each with the parameters of its choice (the SVR's
method by the data's shape), refusing what the formulation does not read."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_diabetes

from solvers.auto import DataShape, choose
from solvers.params import ParamError, task_of, validate_params
from solvers.train import fit
from testkit import bundled

DENSE = DataShape(5000, 50, 250_000, 1.0)
TEXT = DataShape(5000, 50_000, 100_000, 1.0)
UNSCALED = DataShape(5000, 50_000, 100_000, 300.0)


def _svr(shape: DataShape, C: float = 1.0) -> dict[str, int | str]:
    return dict(choose(shape, "l2", C, "augment", formulation="epsilon_svr").settings)


def test_each_formulation_has_its_solver() -> None:
    for shape in (DENSE, TEXT, UNSCALED):
        assert choose(shape, "l2", 1.0, "augment", formulation="crammer_singer")[0] == (
            "crammer_singer")
        assert choose(shape, "l2", 1.0, "augment", formulation="one_class")[0] == (
            "linear_one_class")
        for loss in ("l1", "l2"):
            assert choose(shape, loss, 1.0, "augment", formulation="epsilon_svr")[0] == (
                "linear_svr")
        assert choose(shape, "l1", 1.0, "augment", formulation="epsilon_svr").settings == {
            "method": "dual"}  # -s 13
    # l2: Newton on the primal (-s 11) on few features, unscaled ones or a large C; the
    # dual CD (-s 12) on scaled text
    assert _svr(DENSE) == {"method": "primal"}
    assert _svr(UNSCALED) == {"method": "primal"}
    assert _svr(TEXT, 1000.0) == {"method": "primal"}
    assert _svr(TEXT) == {"method": "dual"}
    assert "-s 12" in choose(TEXT, "l2", 1.0, "augment", formulation="epsilon_svr")[1]


def test_the_formulation_says_the_task() -> None:
    tasks = {f: task_of("auto", validate_params("auto", {"formulation": f}))
             for f in ("c_svc", "crammer_singer", "epsilon_svr", "one_class")}
    assert tasks == {"c_svc": "classification", "crammer_singer": "classification",
                     "epsilon_svr": "regression", "one_class": "outlier"}


@pytest.mark.parametrize(("params", "field", "words"), [
    ({"formulation": "one_class", "C": 2.0}, "C", "not a parameter"),
    ({"formulation": "crammer_singer", "loss": "l1"}, "loss", "loss of its own"),
    ({"formulation": "epsilon_svr", "loss": "logistic"}, "loss", "takes loss"),
    ({"formulation": "epsilon_svr", "penalty": "l1"}, "penalty", "classification"),
    ({"nu": 0.3}, "nu", "not a parameter"),
    ({"epsilon": 0.3}, "epsilon", "not a parameter"),
    ({"formulation": "epsilon_svr", "class_weight": {"1": 2.0}}, "class_weight", "classes"),
])
def test_what_a_formulation_does_not_read_is_refused(params: dict, field: str,
                                                     words: str) -> None:
    with pytest.raises(ParamError, match=words) as caught:
        validate_params("auto", params)
    assert caught.value.field == field


def test_applied_params_given_back_pass() -> None:
    """A search's refit and a stored job pass the applied params (defaults included)."""
    for formulation in ("crammer_singer", "epsilon_svr", "one_class"):
        applied = validate_params("auto", {"formulation": formulation})
        assert validate_params("auto", applied) == applied


def _diabetes() -> tuple[sp.csr_matrix, np.ndarray]:
    X, y = load_diabetes(return_X_y=True)
    return sp.csr_matrix(X / np.abs(X).max(axis=0)), (y - y.mean()) / y.std()


@pytest.mark.parametrize(("loss", "method"), [("l1", "dual"), ("l2", "primal")])
def test_auto_trains_linear_svr_as_the_solver_itself(loss: str, method: str) -> None:
    X, y = _diabetes()
    chosen = fit(X, y, solver="auto", formulation="epsilon_svr", loss=loss, epsilon=0.05,
                 C=2.0)
    assert chosen.auto is not None and chosen.auto["chosen"] == "linear_svr"
    assert chosen.converged
    direct = fit(X, y, solver="linear_svr", loss=loss, method=method, epsilon=0.05, C=2.0)
    assert direct.converged
    # both certified within tol 1e-3 of the same optimum
    assert chosen.primal_objective == pytest.approx(direct.primal_objective, rel=2e-3)
    assert chosen.model.predict(X)[0].dtype.kind == "f"


def test_auto_trains_crammer_singer_and_one_class() -> None:
    X, y = bundled.load("wine")
    joint = fit(X, y, solver="auto", formulation="crammer_singer", C=0.5)
    assert joint.auto is not None and joint.auto["chosen"] == "crammer_singer"
    assert joint.converged
    assert joint.primal_objective == pytest.approx(
        fit(X, y, solver="crammer_singer", C=0.5).primal_objective, rel=2e-3)
    outlier = fit(X, None, solver="auto", formulation="one_class", nu=0.2)
    assert outlier.auto is not None and outlier.auto["chosen"] == "linear_one_class"
    assert outlier.converged
    labels = outlier.model.predict(X)[0]
    assert set(np.unique(labels)) <= {-1.0, 1.0}
    assert outlier.primal_objective == pytest.approx(
        fit(X, None, solver="linear_one_class", nu=0.2).primal_objective, rel=2e-3)
