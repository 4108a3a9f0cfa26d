"""Distributed fits on a real Dask cluster (a `dask scheduler` and three `dask worker`
processes over TCP on loopback): tron equals the single-host tron, CoCoA+ is certified
like the single-host dcd, and the data plan says what travelled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from solvers import fit
from solvers.distributed import fit_on_dask
from solvers.shards import MemoryShards, split_rows, write_npz_shards
from testkit.dask_cluster import DaskCluster, dask_cluster
from testkit.datagen import text_like


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    with dask_cluster(tmp_path_factory.mktemp("dask"), workers=3) as running:
        yield running


@pytest.fixture(scope="module")
def client(cluster: DaskCluster) -> Iterator[Any]:
    from distributed import Client

    with Client(cluster.address, timeout=30, set_as_default=False) as connected:
        yield connected


def _data(rows: int = 2400, features: int = 3000, seed: int = 3) -> tuple[Any, np.ndarray]:
    X, y = text_like(rows, features, seed=seed, nnz_per_row=20)
    return X, np.where(y > 0, 2.0, 7.0)  # any two label values: 7 is the positive class


def _relative(a: float | None, b: float | None) -> float:
    assert a is not None and b is not None
    return abs(a - b) / abs(b)


@pytest.mark.parametrize("loss", ["l2", "logistic"])
def test_tron_equals_the_single_host_fit(client: Any, loss: str) -> None:
    X, y = _data()
    source = MemoryShards(split_rows(X, y, None, 500), X.shape[1])
    distributed = fit_on_dask(client, source, solver="tron", loss=loss, C=2.0, tol=1e-4)
    single = fit(X, y, solver="tron", loss=loss, C=2.0, tol=1e-4)
    assert distributed.converged and single.converged
    assert _relative(distributed.primal_objective, single.primal_objective) < 1e-6
    assert distributed.iterations == single.iterations  # the same Newton steps
    np.testing.assert_allclose(distributed.coef, single.coef, rtol=1e-5, atol=1e-8)
    assert list(distributed.classes) == [2.0, 7.0]
    assert np.array_equal(distributed.predict(X), single.predict(X))
    plan = distributed.data_plan
    assert plan is not None
    assert (plan["mode"], plan["workers"], plan["shards"], plan["blocks"]) == (
        "distributed", 3, 5, 3)
    # a round per Newton step, per CG step, per line search (+ the last evaluation)
    cg = distributed.per_output[0]["cg_iterations"]
    assert plan["rounds"] == 1 + cg + 2 * distributed.iterations
    # at least the vectors: w, each CG direction and step go to 3 blocks; parts come back
    assert plan["bytes_to_workers"] >= 3 * 8 * (X.shape[1] + 1) * plan["rounds"]
    assert plan["bytes_from_workers"] >= 3 * 8 * (X.shape[1] + 1) * (plan["rounds"] - 1)
    assert plan["bytes_sent"] == plan["bytes_to_workers"] + plan["bytes_from_workers"]
    assert 0.0 <= plan["communication_s"] <= plan["wall_s"]
    assert plan["reloads"] == 0 and plan["round_retries"] == 0


def test_workers_open_npz_shards_themselves(client: Any, tmp_path: Path) -> None:
    X, y = _data(rows=1800, seed=5)
    source = write_npz_shards(tmp_path / "shards", split_rows(X, y, None, 300), X.shape[1])
    distributed = fit_on_dask(client, source, solver="tron", C=1.0)
    single = fit(X, y, solver="tron", C=1.0)
    assert distributed.converged
    assert _relative(distributed.primal_objective, single.primal_objective) < 1e-6
    assert distributed.data_plan is not None and distributed.data_plan["shards"] == 6


def test_cocoa_plus_is_certified_like_dcd(client: Any) -> None:
    X, y = _data(rows=1500, features=20000, seed=7)
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    tol = 1e-3
    distributed = fit_on_dask(client, source, solver="dcd", loss="l1", C=1.0, tol=tol,
                              bias="none", max_iter=300)
    single = fit(X, y, solver="dcd", loss="l1", C=1.0, tol=tol, bias="none")
    assert distributed.converged and single.converged
    assert distributed.exit_reason == "converged"
    for result in (distributed, single):
        assert result.relative_gap is not None and result.relative_gap <= tol
    # the certified gap is that of the returned model: P(w) - D(alpha) recomputed here
    w = distributed.coef[0]
    margins = (X @ w) * np.where(y == 7.0, 1.0, -1.0)
    primal = 0.5 * w @ w + np.maximum(0.0, 1.0 - margins).sum()
    assert _relative(distributed.primal_objective, primal) < 1e-9
    assert distributed.dual_objective is not None and single.primal_objective is not None
    assert distributed.dual_objective <= single.primal_objective  # a valid lower bound
    # both within tol of the optimum: their objectives within tol of each other
    assert _relative(distributed.primal_objective, single.primal_objective) <= tol
    plan = distributed.data_plan
    assert plan is not None and plan["rounds"] == distributed.iterations + 1
    assert distributed.per_output[0]["sigma"] == 3.0


def test_cancel_stops_within_one_round(client: Any) -> None:
    X, y = _data(rows=1200, seed=9)
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    seen: list[dict[str, Any]] = []

    def progress(event: dict[str, Any]) -> bool:
        seen.append(event)
        return len(seen) >= 3

    result = fit_on_dask(client, source, solver="tron", C=4.0, tol=1e-8, eps=1e-8,
                         progress=progress, progress_interval=0.0)
    assert result.exit_reason == "cancelled" and not result.converged
    assert result.data_plan is not None
    assert result.data_plan["rounds"] == seen[-1]["rounds"]  # no round after the cancel


def test_bad_requests_say_what_to_use(client: Any) -> None:
    X, y = text_like(300, 50, seed=1, nnz_per_row=5)
    source = MemoryShards(split_rows(X, y, None, 100), 50)
    with pytest.raises(ValueError, match="use dcd"):
        fit_on_dask(client, source, solver="tron", loss="l1")
    with pytest.raises(ValueError, match="use tron"):
        fit_on_dask(client, source, solver="dcd", loss="l2")
    three = MemoryShards(split_rows(X, np.arange(300) % 3.0, None, 100), 50)
    with pytest.raises(ValueError, match="binary"):
        fit_on_dask(client, three, solver="tron")
