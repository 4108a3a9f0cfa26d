"""Issue 26's first done-when, through the API: for each of nu-SVC, one-class, epsilon-SVR
and nu-SVR, on three of the shared LIBSVM sets (../shared/data; small sets or the first
rows of larger ones), a job trained by a real Celery worker behind a real API server has
LIBSVM 3.37's (libsvm-official, the same eps) dual objective within 1e-6 relative, its
support-vector count within 1%, and decision values (predicted over HTTP) correlated
>= 0.99999 with svm_predict's.

The shared sets are classification sets; the regression rows use their +-1 labels as real
targets (uploaded with task=regression), what svm-train -s 3 / -s 4 does with them (as
tests/solvers/test_smo_formulations.py's parity tests). Marked `parity`: skipped, with one
reason, without ../shared/data (failed under CI=true).
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from solvers.svmlight import load_svmlight
from tests.solvers.naive_kernels import libsvm_train
from tests.support import SharedService, data_file, wait_for_job

pytestmark = pytest.mark.parity
libsvm = pytest.importorskip("libsvm.svmutil")

EPS = 1e-8
SVM_TYPE = {"nu_svc": 1, "one_class": 2, "epsilon_svr": 3, "nu_svr": 4}
# (set, rows, nu for nu_svc / one_class): mushrooms' first 1,500 rows hold 177 of one
# class, so nu <= 0.236 is feasible for nu-SVC
CLASSIFICATION_SETS = [("heart_scale", 270, 0.3), ("breast-cancer_scale", 683, 0.3),
                       ("mushrooms", 1500, 0.2)]
# not mushrooms: separable rows, the nu-SVR tube shrinks to nothing and LIBSVM itself
# runs into its iteration cap
REGRESSION_SETS = [("heart_scale", 270), ("breast-cancer_scale", 683), ("a9a", 1000)]


@pytest.fixture(scope="module")
def service(shared_service: SharedService) -> Iterator[httpx.Client]:
    """The shared service (tests/e2e/conftest.py), as a tenant of this module's own."""
    with shared_service.tenant() as client:
        yield client


def shared_rows(name: str, rows: int) -> tuple[sp.csr_matrix, np.ndarray]:
    parsed = load_svmlight(str(data_file(f"{name}.xz")))
    X = sp.csr_matrix(parsed.to_csr()[:rows])
    return X, np.asarray(parsed.y[:rows], dtype=np.float64)


def upload(service: httpx.Client, name: str, X: sp.csr_matrix, y: np.ndarray,
           task: str) -> dict[str, Any]:
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)  # %.16g: the stored values
    response = service.post(f"/v1/datasets?name={name}&task={task}",
                            content=buffer.getvalue())
    assert response.status_code == 201, response.text
    return dict(response.json())


def check(service: httpx.Client, name: str, X: sp.csr_matrix, y: np.ndarray,
          formulation: str, params: dict[str, float]) -> None:
    task = "regression" if formulation in ("epsilon_svr", "nu_svr") else "classification"
    dataset = upload(service, name, X, y, task)
    X = sp.csr_matrix(X[:, :dataset["features"]])  # the stored width (largest index)
    gamma = 1.0 / X.shape[1]
    spec = {"formulation": formulation, "kernel": "rbf", "gamma": gamma, "eps": EPS,
            **params}
    submitted = service.post("/v1/jobs", json={"dataset_id": dataset["id"],
                                               "solver": "smo", "params": spec})
    assert submitted.status_code == 202, submitted.text
    job = wait_for_job(service.get, submitted.json()["id"], timeout=300)
    assert job["status"] == "succeeded", job
    result = job["result"]
    assert result["exit_reason"] == "converged", result

    options = (f"-s {SVM_TYPE[formulation]} -t 2 -g {gamma!r} -e {EPS!r} -m 200 "
               f"-c {params.get('C', 1.0)!r} -n {params.get('nu', 0.5)!r} "
               f"-p {params.get('epsilon', 0.1)!r}")
    labels = np.ones(X.shape[0]) if formulation == "one_class" else y
    reference = libsvm_train(X, labels, options)
    assert "reaching max number of iterations" not in reference.output
    theirs = reference.kernel_model

    buffer = io.BytesIO()
    dump_svmlight_file(X, np.zeros(X.shape[0]), buffer, zero_based=False)
    predicted = service.post(f"/v1/models/{job['model_id']}/predict",
                             content=buffer.getvalue(),
                             headers={"content-type": "text/plain"})
    assert predicted.status_code == 200, predicted.text
    ours = np.asarray(predicted.json()["decision_values"], dtype=np.float64).reshape(-1)
    expected = np.asarray(theirs.decision_function(X), dtype=np.float64).reshape(-1)

    # LIBSVM prints "obj = %f": 6 decimals, half a unit of rounding
    printed = 5e-7 / max(abs(reference.objective), 1e-300)
    relative = abs(result["dual_objective"] - reference.objective) / abs(reference.objective)
    figures = {"objective_rel": relative, "n_sv": result["n_support"],
               "libsvm_n_sv": theirs.n_support,
               "correlation": float(np.corrcoef(ours, expected)[0, 1])}
    assert relative < 1e-6 + printed, figures
    assert abs(result["n_support"] - theirs.n_support) <= 0.01 * theirs.n_support, figures
    assert figures["correlation"] >= 0.99999, figures


@pytest.mark.parametrize(("name", "rows", "nu"), CLASSIFICATION_SETS)
@pytest.mark.parametrize("formulation", ["nu_svc", "one_class"])
def test_nu_svc_and_one_class_through_the_api_match_libsvm(
        service: httpx.Client, name: str, rows: int, nu: float, formulation: str) -> None:
    X, y = shared_rows(name, rows)
    check(service, name, X, y, formulation, {"nu": nu})


@pytest.mark.parametrize(("name", "rows"), REGRESSION_SETS)
@pytest.mark.parametrize("formulation", ["epsilon_svr", "nu_svr"])
def test_svr_through_the_api_matches_libsvm(
        service: httpx.Client, name: str, rows: int, formulation: str) -> None:
    X, y = shared_rows(name, rows)
    params = {"C": 1.0, "epsilon": 0.5} if formulation == "epsilon_svr" else {
        "C": 1.0, "nu": 0.5}
    check(service, name, X, y, formulation, params)

