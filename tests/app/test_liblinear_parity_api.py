"""Every LIBLINEAR formulation through the API on three shared LIBSVM sets: a job trained
by the worker's own code (real database, real blob store) reaches a primal objective
within 1e-3 relative of LIBLINEAR 2.50's at -e 1e-6 (same C, -B 1), and says
`converged: true` (its certificate holds).

The reference objective is computed here, from LIBLINEAR's model file, by plain NumPy
formulas (testkit.certified_tasks for Crammer-Singer, SVR and one-class), never from
Hinge's code. Linear SVR trains on the labels as targets (+1 for the larger label, -1
for the other), uploaded as a regression dataset; one-class ignores the labels.

a9a is left out: -s 5 on it ends `converged: false` after 10,000 sweeps (its one-hot
groups sum to the bias column; see tests/solvers/test_linear_formulations_lr_l1.py,
UNCERTIFIED), and its 32,561 rows would make this module slow.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from fastapi.testclient import TestClient

from app.settings import Settings
from testkit import bundled
from testkit import certified_tasks as ref
from testkit.datasets import load_dataset
from workers.training import run_job

REL = 1e-3
NU = 0.1
EPSILON = 0.1

# LIBLINEAR -s: (solver, params of the job, the objective's kind)
FORMULATIONS: dict[int, tuple[str, dict[str, Any], str]] = {
    0: ("tron", {"loss": "logistic"}, "l2r_lr"),
    4: ("crammer_singer", {}, "cs"),
    5: ("l1_cd", {"loss": "l2"}, "l1r_l2"),
    6: ("l1_cd", {"loss": "logistic"}, "l1r_lr"),
    7: ("logistic_dcd", {}, "l2r_lr"),
    11: ("linear_svr", {"loss": "l2", "method": "primal", "epsilon": EPSILON}, "svr_l2"),
    12: ("linear_svr", {"loss": "l2", "method": "dual", "epsilon": EPSILON}, "svr_l2"),
    13: ("linear_svr", {"loss": "l1", "epsilon": EPSILON}, "svr_l1"),
    21: ("linear_one_class", {"nu": NU}, "one_class"),
}
BINARY_SETS = ("heart_scale", "breast-cancer_scale", "mushrooms")
SETS = {s: ("dna.scale", "heart_scale", "breast-cancer_scale") if s == 4 else BINARY_SETS
        for s in FORMULATIONS}
CASES = [(s, name) for s in FORMULATIONS for name in SETS[s]]


def _liblinear(args: str, y: np.ndarray, X: sp.csr_matrix, tmp_path: Path
               ) -> tuple[np.ndarray, dict[str, list[str]]]:
    pytest.importorskip("liblinear.liblinearutil")
    return ref.liblinear_model(args, y, X, tmp_path / "reference.model")


def _reference(s: int, kind: str, X: sp.csr_matrix, y: np.ndarray, tmp_path: Path
               ) -> float:
    """P(w) of LIBLINEAR's -e 1e-6 model, C = 1."""
    if kind == "one_class":
        weights, header = _liblinear(f"-s 21 -n {NU} -e 1e-6", y, X, tmp_path)
        return ref.one_class_primal(X, np.ones(y.size), weights[:, 0],
                                    float(header["rho"][0]), NU)
    Z = sp.hstack([X, np.ones((X.shape[0], 1))], format="csr")  # -B 1
    if kind.startswith("svr"):
        # -s 11 is LIBLINEAR's exact Newton; its dual CD (-s 12) at 1e-6 can stop at its
        # sweep limit, so both l2 jobs are measured against -s 11
        solver_type = 11 if kind == "svr_l2" else 13
        weights, _ = _liblinear(f"-s {solver_type} -p {EPSILON} -B 1 -e 1e-6", y, X,
                                tmp_path)
        return ref.svr_primal(Z, y, np.ones(y.size), weights[:, 0], kind[-2:], EPSILON)
    weights, header = _liblinear(f"-s {s} -c 1 -B 1 -e 1e-6", y, X, tmp_path)
    labels = [float(v) for v in header["label"]]
    if kind == "cs":
        classes = np.unique(y)
        W = np.zeros((classes.size, weights.shape[0]))
        W[np.searchsorted(classes, labels)] = weights.T
        return ref.cs_primal(Z, np.searchsorted(classes, y), np.ones(y.size), W)
    w = weights[:, 0]  # positive for labels[0]
    margins = np.where(y == labels[0], 1.0, -1.0) * (Z @ w)
    if kind.endswith("lr"):
        losses = np.logaddexp(0.0, -margins)
    else:
        losses = np.maximum(0.0, 1.0 - margins) ** 2
    penalty = np.abs(w).sum() if kind.startswith("l1r") else 0.5 * float(w @ w)
    return float(penalty + losses.sum())


@pytest.mark.parity
@pytest.mark.parametrize(("s", "name"), CASES, ids=[f"s{s}-{n}" for s, n in CASES])
def test_each_formulation_through_the_api_matches_liblinear(
        client: TestClient, settings: Settings, tmp_path: Path, s: int, name: str) -> None:
    solver, params, kind = FORMULATIONS[s]
    X, labels = load_dataset(name)
    X = sp.csr_matrix(X)
    regression = kind.startswith("svr")
    y = np.where(labels == labels.max(), 1.0, -1.0) if regression else labels
    upload = client.post("/v1/datasets" + ("?task=regression" if regression else ""),
                         content=bundled.dump_svmlight(X, y))
    assert upload.status_code == 201, upload.text
    created = client.post("/v1/jobs", json={"dataset_id": upload.json()["id"],
                                            "solver": solver, "params": params})
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    assert run_job(settings, job_id, "parity-worker") == "succeeded"
    result = client.get(f"/v1/jobs/{job_id}").json()["result"]
    reference = _reference(s, kind, X, y, tmp_path)
    assert result["converged"] is True, result
    primal = result["primal_objective"]
    # within 1e-3 of LIBLINEAR's optimum, or below it (LIBLINEAR stopped above)
    assert primal <= reference + REL * abs(reference), (primal, reference)
    # and the certificate is honest: P(w) - gap is a lower bound, at most LIBLINEAR's P
    lower = primal - result["relative_gap"] * abs(primal)
    assert lower <= reference + 1e-9 * abs(reference), (lower, reference)
