"""A job's `engine` (auto, local, dask): what the API accepts, and how a worker decides."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.domain.lifecycle import Claim
from app.domain.services.jobs import DISTRIBUTED_SOLVERS, JOBS, JobWork
from app.settings import Settings
from workers.dask_fit import engine_for


def test_dask_without_a_scheduler_is_422(client: TestClient, cancer_id: str) -> None:
    response = client.post("/v1/jobs", json={"dataset_id": cancer_id, "solver": "tron",
                                             "engine": "dask"})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["detail"]["field"] == "engine"
    assert "HINGE_DASK_SCHEDULER" in error["message"]
    assert client.get("/v1/jobs").json()["count"] == 0


def test_an_unknown_engine_is_422(client: TestClient, cancer_id: str) -> None:
    response = client.post("/v1/jobs", json={"dataset_id": cancer_id, "engine": "spark"})
    assert response.status_code == 422


@pytest.mark.parametrize(("spec", "fragment"), [
    ({"solver": "smo"}, "trains dcd with loss l1; tron with loss l2 or logistic"),
    ({"solver": "dcd", "params": {"loss": "l2"}}, "with loss 'l2'"),
    ({"solver": "tron", "params": {"method": "trust_region"}}, "params method"),
])
def test_dask_jobs_the_cluster_cannot_train_are_422(settings: Settings, admin_key: str,
                                                    cancer_bytes: bytes, spec: dict,
                                                    fragment: str) -> None:
    configured = settings.model_copy(update={"dask_scheduler": "tcp://127.0.0.1:1"})
    with TestClient(create_app(configured),
                    headers={"Authorization": f"Bearer {admin_key}"}) as client:
        dataset = client.post("/v1/datasets?name=cancer", content=cancer_bytes).json()
        response = client.post("/v1/jobs", json={"dataset_id": dataset["id"],
                                                 "engine": "dask", **spec})
        assert response.status_code == 422, response.text
        assert fragment in response.json()["error"]["message"]
        accepted = client.post("/v1/jobs", json={"dataset_id": dataset["id"],
                                                 "solver": "tron", "engine": "dask"})
        assert accepted.status_code == 202, accepted.text
        assert accepted.json()["params"]["engine"] == "dask"


def test_the_app_lists_what_the_distributed_solvers_train() -> None:
    from solvers.distributed import SOLVERS

    assert DISTRIBUTED_SOLVERS == SOLVERS


def _claim(solver: str = "tron", nbytes: int = 1000, **params: object) -> Claim[JobWork]:
    return Claim(JOBS, "j", 1, JobWork(
        tenant_id="t", solver=solver, params=dict(params), dataset_id="d", dataset_name="n",
        blob_path="b", features=10,
        shards=[{"blob_path": "b", "rows": 10, "nnz": 10, "nbytes": nbytes}]))


def test_auto_goes_to_dask_only_for_a_dataset_over_one_workers_memory(
        settings: Settings) -> None:
    def unused() -> int:
        raise AssertionError("the shards' sizes are known")

    dask = settings.model_copy(update={"dask_scheduler": "tcp://h:8786",
                                       "worker_memory_bytes": 5000})
    assert engine_for(dask, _claim(nbytes=6000), "auto", unused) == "dask"
    assert engine_for(dask, _claim(nbytes=4000), "auto", unused) == "local"
    assert engine_for(dask, _claim("smo", nbytes=6000), "auto", unused) == "local"
    assert engine_for(dask, _claim("dcd", nbytes=6000, loss="l2"), "auto", unused) == "local"
    assert engine_for(dask, _claim(nbytes=10), "dask", unused) == "dask"
    assert engine_for(dask, _claim(nbytes=6000), "local", unused) == "local"
    no_limit = dask.model_copy(update={"worker_memory_bytes": 0})
    assert engine_for(no_limit, _claim(nbytes=10**12), "auto", unused) == "local"
    no_scheduler = dask.model_copy(update={"dask_scheduler": ""})
    assert engine_for(no_scheduler, _claim(nbytes=6000), "auto", unused) == "local"
