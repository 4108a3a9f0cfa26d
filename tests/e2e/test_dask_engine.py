"""A job on the Dask engine through the real service: an API server, a Celery worker
process that drives the fit as a Dask client, a `dask scheduler` and two `dask worker`
processes that open the dataset's blob themselves."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from sklearn.datasets import dump_svmlight_file

from solvers import fit
from testkit.dask_cluster import dask_cluster
from testkit.datagen import text_like
from tests.support import embedded_settings, running_service, wait_for_job


@pytest.mark.slow
def test_a_dataset_over_one_workers_memory_trains_on_dask(tmp_path: Path) -> None:
    X, y = text_like(1500, 800, seed=21, nnz_per_row=15)
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)
    dataset_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    with dask_cluster(tmp_path, workers=2) as cluster:
        # the Celery worker's budget is below the dataset's arrays: it could not fit it
        settings = embedded_settings(tmp_path / "home", dask_scheduler=cluster.address,
                                     worker_memory_bytes=dataset_bytes // 2)
        with running_service(settings, tmp_path) as (service, _workers):
            upload = service.post("/v1/datasets", files={"file": ("text.svm",
                                                                   buffer.getvalue())},
                                  data={"name": "text"})
            assert upload.status_code == 201, upload.text
            dataset_id = upload.json()["id"]
            jobs = {engine: service.post("/v1/jobs", json={
                "dataset_id": dataset_id, "solver": "tron", "engine": engine,
                "params": {"C": 2.0}}).json()["id"] for engine in ("auto", "dask", "local")}
            done = {engine: wait_for_job(service.get, job_id, timeout=240)
                    for engine, job_id in jobs.items()}
    for engine in ("auto", "dask"):
        job = done[engine]
        assert job["status"] == "succeeded", job
        result = job["result"]
        assert result["converged"] and result["exit_reason"] == "converged"
        plan = result["data_plan"]
        assert plan["mode"] == "distributed" and plan["workers"] == 2
        assert plan["rounds"] > 0 and plan["bytes_sent"] > 0
        single = fit(X, y, solver="tron", C=2.0)
        assert single.primal_objective is not None
        assert abs(result["primal_objective"] - single.primal_objective) \
            <= 1e-6 * single.primal_objective
        assert result["train_accuracy"] == float(np.mean(single.predict(X) == y))
    # the same job on the Celery worker alone is refused: it does not fit its budget
    assert done["local"]["status"] == "failed", done["local"]


@pytest.mark.slow
def test_an_ocas_job_on_dask_is_certified_like_the_single_host_ocas(tmp_path: Path) -> None:
    """The hinge on the Dask engine with solver ocas (no loss param: the hinge is its one
    loss): the job succeeds, certified within tol, and its objective is within tol of
    the single-host ocas's."""
    X, y = text_like(1500, 800, seed=22, nnz_per_row=15)
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)
    with dask_cluster(tmp_path, workers=2) as cluster:
        settings = embedded_settings(tmp_path / "home", dask_scheduler=cluster.address)
        with running_service(settings, tmp_path) as (service, _workers):
            upload = service.post("/v1/datasets", files={"file": ("text.svm",
                                                                   buffer.getvalue())},
                                  data={"name": "text"})
            assert upload.status_code == 201, upload.text
            answer = service.post("/v1/jobs", json={
                "dataset_id": upload.json()["id"], "solver": "ocas", "engine": "dask",
                "params": {"C": 2.0, "tol": 1e-3}})
            assert answer.status_code == 202, answer.text
            job = wait_for_job(service.get, answer.json()["id"], timeout=240)
    assert job["status"] == "succeeded", job
    result = job["result"]
    assert result["converged"] and result["relative_gap"] <= 1e-3
    assert result["data_plan"]["mode"] == "distributed"
    single = fit(X, y, solver="ocas", C=2.0, tol=1e-3)
    assert single.primal_objective is not None
    assert abs(result["primal_objective"] - single.primal_objective) \
        <= 1e-3 * single.primal_objective
