"""A job's `engine` (auto, local, dask): what the API accepts, and how a worker decides."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.api.main import create_app
from app.domain.lifecycle import Claim
from app.domain.memory import plan_fit
from app.domain.services.jobs import DISTRIBUTED_SOLVERS, JOBS, JobWork, cluster_refusal
from app.settings import Settings
from solvers.out_of_core import SOLVERS as OUT_OF_CORE
from workers.dask_fit import plan_job


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
        for solver in ("tron", "ocas"):  # ocas: the hinge, its one loss (no loss param)
            accepted = client.post("/v1/jobs", json={"dataset_id": dataset["id"],
                                                     "solver": solver, "engine": "dask"})
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["params"]["engine"] == "dask"


def test_the_app_lists_what_the_distributed_solvers_train() -> None:
    from solvers.distributed import SOLVERS

    assert DISTRIBUTED_SOLVERS == SOLVERS


def _claim(solver: str = "tron", **params: object) -> Claim[JobWork]:
    return Claim(JOBS, "j", 1, JobWork(
        tenant_id="t", solver=solver,
        params={"loss": "l2" if solver != "smo" else None, **params}, dataset_id="d",
        dataset_name="n", blob_path="b", features=10, shards=[]))


MIB = 1 << 20


def test_auto_is_the_data_plan_distributed_only_for_a_job_over_the_budget(
        settings: Settings) -> None:
    dask = settings.model_copy(update={"dask_scheduler": "tcp://h:8786",
                                       "worker_memory_bytes": 8 * MIB})

    def mode(claim: Claim[JobWork], nbytes: int, on: Settings = dask, classes: int = 2) -> str:
        return str(plan_job(on, claim, claim.work.params, 1000, nbytes, classes)["mode"])

    big, small = 20 * MIB, MIB
    plan = plan_job(dask, _claim(), _claim().work.params, 1000, big, 2)
    assert plan["mode"] == "distributed"
    assert plan["budget_bytes"] == 8 * MIB and plan["estimate_bytes"] > 8 * MIB
    assert plan["dataset_bytes"] == big
    assert mode(_claim(), small) == "in_memory"
    assert mode(_claim(engine="dask"), small) == "distributed"  # asked for
    # what the cluster cannot train plans as on one host: blocks, or refused
    assert mode(_claim(engine="local"), big) == "blocks"
    assert mode(_claim("dcd"), big) == "blocks"  # the squared hinge: tron's, not CoCoA+'s
    assert mode(_claim("dcd", loss="l1"), big) == "distributed"
    assert mode(_claim(), big, classes=3) == "blocks"
    assert mode(_claim(scale="minmax"), big) == "refused"
    assert mode(_claim(sample_weight=[1.0] * 1000), big) == "blocks"
    assert mode(_claim("smo"), big) == "refused"
    no_scheduler = dask.model_copy(update={"dask_scheduler": ""})
    assert mode(_claim(), big, no_scheduler) == "blocks"
    # the decision is plan_fit's, the one every fit makes: without a cluster, the same plan
    local = plan_fit("tron", {"loss": "l2"}, 1000, 10, 2, big, 8 * MIB, OUT_OF_CORE)
    assert plan_job(no_scheduler, _claim(), _claim().work.params, 1000, big, 2) == local
    assert local["mode"] == "blocks"  # where "auto" with a cluster says distributed
    # no HINGE_WORKER_MEMORY_BYTES: the budget is what the host has free
    no_limit = dask.model_copy(update={"worker_memory_bytes": 0})
    assert mode(_claim(), 1 << 50, no_limit) == "distributed"
    assert mode(_claim(), small, no_limit) == "in_memory"


def test_dask_jobs_the_cluster_cannot_train_are_refused_for_what_they_ask() -> None:
    assert cluster_refusal("tron", {"loss": "l2"}, 2) is None
    assert cluster_refusal("dcd", {"loss": "l1", "sample_weight": "dataset"}, 2) is None
    assert cluster_refusal("ocas", {"eps_abs": None}, 2) is None
    cases: list[tuple[str, dict[str, object], int, str]] = [
            ("tron", {"loss": "l1"}, 2, "with loss 'l1'"),
            ("tron", {"loss": "l2"}, 3, "binary problems; the dataset has 3 classes"),
            ("tron", {"loss": "l2", "scale": "standard"}, 2, "params scale"),
            ("tron", {"loss": "l2", "sample_weight": [1.0, 2.0]}, 2, "sample_weight"),
            ("dcd", {"loss": "l1", "probability": True}, 2, "params probability"),
            ("ocas", {"eps_abs": 0.5}, 2, "params eps_abs")]
    for solver, params, classes, fragment in cases:
        refusal = cluster_refusal(solver, params, classes)
        assert refusal is not None and fragment in refusal, (solver, params, refusal)
