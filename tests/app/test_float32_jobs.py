"""A compact dataset (float32 values, 8 bytes a non-zero with their int32 indices) trained
in memory by the worker: estimated at its stored size for a solver that reads float32
values as stored (SolverSpec.reads_float32), with a float64 copy for one that does not,
and read by the solver from the mapped blob without a copy."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.domain.memory import estimate_fit_bytes, reads_float32
from app.infra.mapped_arrays import is_mapped
from app.settings import Settings
from solvers.svmlight import dump_svmlight
from solvers.train import solver_module
from testkit.datagen import text_like
from workers.training import run_job

ROWS, FEATURES = 600, 200


def _float32_text() -> tuple[bytes, int]:
    """An svmlight set whose values are exactly float32, and its number of non-zeros."""
    X, y = text_like(ROWS, FEATURES, seed=4, nnz_per_row=10.0)
    X.data = X.data.astype(np.float32).astype(np.float64)
    buffer = io.BytesIO()
    dump_svmlight(X, y, buffer)
    return buffer.getvalue(), int(X.nnz)


def test_the_estimate_counts_a_float64_copy_only_for_a_solver_that_makes_one() -> None:
    nnz = 10_000
    stored = 8 * nnz + 8 * (ROWS + 1) + 8 * ROWS  # values and indices, indptr, y

    def parts(solver: str, **params: Any) -> dict[str, int]:
        return estimate_fit_bytes(solver, params, ROWS, FEATURES, 2, stored, nnz)

    for solver in ("dcd", "tron", "ocas", "logistic_dcd", "auto"):
        assert "float64 copy" not in parts(solver), solver
    assert parts("acf")["float64 copy"] == 8 * nnz
    assert parts("smo")["float64 copy"] == 8 * nnz
    assert parts("auto", penalty="l1")["float64 copy"] == 8 * nnz  # l1_cd
    assert "float64 copy" not in estimate_fit_bytes("acf", {}, ROWS, FEATURES, 2, stored)
    assert parts("dcd", scale="minmax")["scaled copy"] == stored + 4 * nnz  # float64
    assert parts("dcd", scale="minmax")["float64 copy"] == 8 * nnz  # the workflow's
    assert parts("tron", probability=True)["float64 copy"] == 8 * nnz
    assert reads_float32("auto", {"formulation": "c_svc"})
    assert not reads_float32("auto", {"formulation": "epsilon_svr"})


@pytest.mark.parametrize(("solver", "params"), [("dcd", {"loss": "l1"}),
                                                 ("tron", {"loss": "l2"}),
                                                 ("acf", {"loss": "l1"})])
def test_a_compact_dataset_trains_in_memory_at_its_stored_size(
        client: TestClient, settings: Settings, monkeypatch: pytest.MonkeyPatch,
        solver: str, params: dict[str, Any]) -> None:
    text, nnz = _float32_text()
    compact = client.post("/v1/datasets?dtype=float32", content=text).json()
    wide = client.post("/v1/datasets?dtype=float64", content=text).json()
    assert (compact["value_dtype"], wide["value_dtype"]) == ("float32", "float64")
    values_read: list[set[Any]] = [set(), set()]  # per job: the dtypes its solver read
    mapped: list[set[bool]] = [set(), set()]  # and whether they were the mapped blob's
    module = solver_module(solver)
    solve = module.solve

    def recording(problem: Any, applied: dict[str, Any], monitor: Any) -> Any:
        values_read[len(plans)].add(problem.X.data.dtype)
        mapped[len(plans)].add(is_mapped(problem.X.data))
        return solve(problem, applied, monitor)

    monkeypatch.setattr(module, "solve", recording)
    plans: list[dict[str, Any]] = []
    objectives: list[float] = []
    for dataset in (compact, wide):
        job = client.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": solver,
                                            "params": {"C": 1.0, **params}}).json()
        assert run_job(settings, job["id"], "test-worker") == "succeeded"
        result = client.get(f"/v1/jobs/{job['id']}").json()["result"]
        assert result["converged"] is True
        plans.append(result["data_plan"])
        objectives.append(result["primal_objective"])
    reader = solver != "acf"
    assert values_read == [{np.dtype(np.float32 if reader else np.float64)},
                           {np.dtype(np.float64)}]
    assert mapped == [{reader}, {True}]  # the blob's own pages: no copy of the values
    assert [plan["value_dtype"] for plan in plans] == [
        "float32" if reader else "float64", "float64"]
    # stored: 4 bytes less a value; estimated: that, or 4 more with the float64 copy
    assert plans[1]["dataset_bytes"] - plans[0]["dataset_bytes"] == 4 * nnz
    assert plans[1]["estimate_bytes"] - plans[0]["estimate_bytes"] == (
        4 * nnz if reader else -4 * nnz)
    assert objectives[0] == pytest.approx(objectives[1], rel=1e-3)
