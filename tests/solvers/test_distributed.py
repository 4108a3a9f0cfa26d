"""Distributed fits on a real Dask cluster (a `dask scheduler` and two `dask worker`
processes over TCP on loopback, one cluster for the module; three workers in network
namespaces: test_distributed_netns.py): tron equals the single-host tron, CoCoA+ and OCAS
are certified like the single-host dcd and ocas (with and without a regularised bias),
and the data plan says what travelled."""

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

WORKERS = 2


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:
    from solvers import _distributed_tasks

    _distributed_tasks.warmup()  # compiled once here, then loaded by each worker
    with dask_cluster(tmp_path_factory.mktemp("dask"), workers=WORKERS) as running:
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


def _assert_primal_of_the_model(result: Any, X: Any, y: np.ndarray, bias: str) -> None:
    """The result's primal is P(w, b) of its model (C = 1, the hinge loss)."""
    w, b = result.coef[0], float(result.intercept[0])
    assert (b != 0.0) == (bias == "augment")
    margins = (X @ w + b) * np.where(y == 7.0, 1.0, -1.0)
    primal = 0.5 * (w @ w + b * b) + np.maximum(0.0, 1.0 - margins).sum()
    assert _relative(result.primal_objective, primal) < 1e-9


@pytest.mark.parametrize("loss", ["l2", "logistic"])
def test_tron_equals_the_single_host_fit(client: Any, loss: str, tmp_path: Path) -> None:
    X, y = _data(rows=1600, features=2000)
    parts = split_rows(X, y, None, 320)
    # the workers open npz files themselves, or get the rows in the tasks (MemoryShards)
    source = (write_npz_shards(tmp_path / "shards", parts, X.shape[1]) if loss == "l2"
              else MemoryShards(parts, X.shape[1]))
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
        "distributed", WORKERS, 5, WORKERS)
    # a round per Newton step, per CG step, per line search (+ the last evaluation)
    cg = distributed.per_output[0]["cg_iterations"]
    assert plan["rounds"] == 1 + cg + 2 * distributed.iterations
    # at least the vectors: w, each CG direction and step go to each block; parts come back
    size = 8 * (X.shape[1] + 1)
    assert plan["bytes_to_workers"] >= WORKERS * size * plan["rounds"]
    assert plan["bytes_from_workers"] >= WORKERS * size * (plan["rounds"] - 1)
    assert plan["bytes_sent"] == plan["bytes_to_workers"] + plan["bytes_from_workers"]
    assert 0.0 <= plan["communication_s"] <= plan["wall_s"]
    assert plan["reloads"] == 0 and plan["round_retries"] == 0


# A regularised bias is a feature shared by every row: CoCoA+'s local subproblems (sigma'
# = K) cannot move its weight between blocks, and without the driver's transfer steps
# (solvers/distributed.py _CoCoA.transfer) bias "augment" took over 2,000 rounds here.
@pytest.mark.parametrize("bias", ["none", "augment"])
def test_cocoa_plus_is_certified_like_dcd(client: Any, bias: str) -> None:
    X, y = _data(rows=1500, features=20000, seed=7)
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    tol = 1e-3
    distributed = fit_on_dask(client, source, solver="dcd", loss="l1", C=1.0, tol=tol,
                              bias=bias, max_iter=100)
    single = fit(X, y, solver="dcd", loss="l1", C=1.0, tol=tol, bias=bias)
    assert distributed.converged and single.converged
    assert distributed.exit_reason == "converged" and distributed.iterations < 100
    for result in (distributed, single):
        assert result.relative_gap is not None and result.relative_gap <= tol
    # the certified gap is that of the returned model: P(w) - D(alpha) recomputed here
    _assert_primal_of_the_model(distributed, X, y, bias)
    assert distributed.dual_objective is not None and single.primal_objective is not None
    assert distributed.dual_objective <= single.primal_objective  # a valid lower bound
    # both within tol of the optimum: their objectives within tol of each other
    assert _relative(distributed.primal_objective, single.primal_objective) <= tol
    plan = distributed.data_plan
    assert plan is not None and plan["rounds"] == distributed.iterations + 1
    assert distributed.per_output[0]["sigma"] == float(WORKERS)


@pytest.mark.parametrize("bias", ["none", "augment"])
def test_ocas_is_certified_like_the_single_host_ocas(client: Any, bias: str) -> None:
    X, y = _data(rows=1500, features=20000, seed=7)
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    tol = 1e-3
    distributed = fit_on_dask(client, source, solver="ocas", C=1.0, tol=tol, bias=bias,
                              max_iter=100)
    single = fit(X, y, solver="ocas", C=1.0, tol=tol, bias=bias)
    optimum = fit(X, y, solver="dcd", loss="l1", C=1.0, tol=1e-6, bias=bias)
    assert distributed.converged and single.converged and optimum.converged
    assert distributed.exit_reason == "converged" and distributed.iterations < 100
    assert distributed.relative_gap is not None and distributed.relative_gap <= tol
    # the certified primal is that of the returned model, recomputed here
    _assert_primal_of_the_model(distributed, X, y, bias)
    assert distributed.dual_objective is not None and optimum.primal_objective is not None
    assert optimum.dual_objective is not None
    # a valid lower bound, and within tol of the optimum
    assert distributed.primal_objective is not None
    assert distributed.dual_objective <= optimum.primal_objective
    assert distributed.primal_objective >= optimum.dual_objective
    assert _relative(distributed.primal_objective, optimum.primal_objective) <= tol
    # the same method as one host's: the same iterates up to summation order
    assert _relative(distributed.primal_objective, single.primal_objective) < 1e-6
    assert abs(distributed.iterations - single.iterations) <= 1
    plan = distributed.data_plan
    # the first plane, two rounds an iteration, P(w_best) summed again at the end
    assert plan is not None and plan["rounds"] == 2 * distributed.iterations + 2
    details = distributed.per_output[0]
    assert details["n_cuts"] == distributed.iterations
    assert 0 < details["peak_planes_bytes"] <= details["n_cuts"] * 8 * (X.shape[1] + 1)


def test_ocas_weighted_with_two_threads_is_certified_and_repeatable(client: Any) -> None:
    """The shards' instance weights (C_i = C w_i) and two Numba threads a task (two cut
    chunks a block): within tol of dcd's weighted optimum, and the same model twice."""
    X, y = _data(rows=1500, features=20000, seed=7)
    weights = np.random.default_rng(0).uniform(0.5, 2.0, size=X.shape[0])
    source = MemoryShards(split_rows(X, y, weights, 400), X.shape[1])
    first, second = (fit_on_dask(client, source, solver="ocas", C=1.0, tol=1e-3,
                                 threads=2) for _ in range(2))
    optimum = fit(X, y, solver="dcd", loss="l1", C=1.0, tol=1e-6, sample_weight=weights)
    assert first.converged and optimum.primal_objective is not None
    assert _relative(first.primal_objective, optimum.primal_objective) <= 1e-3
    assert np.array_equal(first.coef, second.coef)
    assert first.primal_objective == second.primal_objective


def test_ocas_planes_are_kept_sparse_and_pruned() -> None:
    from solvers.distributed import PRUNE_AFTER, _Planes

    size = 1000
    planes = _Planes(size)
    rng = np.random.default_rng(0)
    sparse = np.zeros(size)
    sparse[rng.choice(size, 50, replace=False)] = rng.normal(size=50)
    planes.add(sparse, 1.0)
    planes.add(rng.normal(size=size), 2.0)  # dense: stored dense
    assert planes.stored[0][0] is not None and planes.stored[0][0].dtype == np.int32
    assert planes.stored[1][0] is None
    assert planes.nbytes == 50 * 12 + size * 8
    w, dual = planes.solve(1e-12)
    # the QP of the two planes by SciPy (beta_0: the slack of beta_1 + beta_2 <= 1)
    from scipy.optimize import minimize

    S = np.stack([sparse, planes.stored[1][1]])
    offsets = np.array([1.0, 2.0])
    found = minimize(lambda t: 0.5 * float(np.sum((t @ S) ** 2)) - float(offsets @ t),
                     np.zeros(2), bounds=[(0, 1), (0, 1)], method="SLSQP", tol=1e-14,
                     constraints=[{"type": "ineq", "fun": lambda t: 1.0 - t.sum()}])
    assert dual == pytest.approx(-found.fun, rel=1e-7)
    np.testing.assert_allclose(w, planes.beta[1] * S[0] + planes.beta[2] * S[1])
    # a plane of weight 0 for PRUNE_AFTER solves goes; the dual value stays
    idle = int(np.argmin(planes.beta[1:3]))
    planes.beta[1 + idle], planes.beta[2 - idle] = 0.0, 0.5
    planes.grad[:3] = planes.H[:3, :3] @ planes.beta[:3] - planes.b[:3]
    for _ in range(PRUNE_AFTER):
        planes.solve(np.inf)  # no steps: beta as it is
    before = planes.nbytes
    dual_before = float(ocas_dual(planes))
    planes.prune()
    assert len(planes.stored) == 1 and planes.pruned == 1 and planes.nbytes < before
    assert float(ocas_dual(planes)) == pytest.approx(dual_before)
    assert planes.peak_nbytes == before


@pytest.mark.parametrize("front", [True, False])
def test_ocas_planes_merged_are_one_cutting_plane_with_the_same_qp_value(front: bool
                                                                         ) -> None:
    from solvers.distributed import _Planes

    size = 400
    rng = np.random.default_rng(1)
    planes = _Planes(size, budget=1 << 30)
    for k in range(6):
        planes.add(rng.normal(size=size) * (rng.random(size) < 0.3 + 0.1 * k), 1.0 + k)
    w, dual = planes.solve(1e-12)
    in_use = [j for j in range(6) if planes.beta[j + 1] > 0.0]
    assert len(in_use) >= 2
    dense = [planes._combination([(j, 1.0)]) for j in range(6)]
    mean = sum(planes.beta[j + 1] * dense[j] for j in in_use[:2])
    planes._merge(in_use[:2], front=front)
    assert len(planes.stored) == 5 and planes.merged == 2
    assert float(ocas_dual(planes)) == pytest.approx(dual, rel=1e-12)
    m = planes.m
    beta = planes.beta[:m]
    assert beta.sum() == pytest.approx(1.0) and beta.min() >= 0.0
    weights = [(j, float(beta[j + 1])) for j in range(5)]
    np.testing.assert_allclose(planes._combination(weights), w, atol=1e-12)
    # H, b and the gradient are those of the planes now stored
    stored = [planes._combination([(j, 1.0)]) for j in range(5)]
    slot = 0 if front else -1
    np.testing.assert_allclose(stored[slot], mean / beta[1:][slot], atol=1e-12)
    gram = np.array([[a @ c for c in stored] for a in stored])
    np.testing.assert_allclose(planes.H[1:m, 1:m], gram, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(planes.grad[:m], planes.H[:m, :m] @ beta - planes.b[:m],
                               atol=1e-10)
    _, again = planes.solve(1e-12)  # the QP goes on from there, never below
    assert again >= dual - 1e-9


def test_ocas_merges_its_planes_over_the_budget(client: Any) -> None:
    """Planes over `planes_bytes`: planes in use are merged into one cutting plane (a
    convex combination of them): still certified, within tol of the optimum, and the
    planes never take more than the budget and the new one."""
    X, y = _data(rows=1500, features=20000, seed=7)
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    budget = 4 * 8 * (X.shape[1] + 1)  # four dense planes
    merged = fit_on_dask(client, source, solver="ocas", C=1.0, tol=1e-3, max_iter=300,
                         planes_bytes=budget)
    assert merged.params["planes_bytes"] == budget
    optimum = fit(X, y, solver="dcd", loss="l1", C=1.0, tol=1e-6)
    assert merged.converged and merged.relative_gap is not None
    assert merged.relative_gap <= 1e-3
    assert optimum.dual_objective is not None and merged.dual_objective is not None
    assert merged.primal_objective is not None and optimum.primal_objective is not None
    assert merged.primal_objective >= optimum.dual_objective
    assert merged.dual_objective <= optimum.primal_objective
    assert _relative(merged.primal_objective, optimum.primal_objective) <= 1e-3
    details = merged.per_output[0]
    assert details["n_merged_cuts"] > 0
    assert details["peak_planes_bytes"] <= budget + 8 * (X.shape[1] + 1)


def ocas_dual(planes: Any) -> float:
    m = planes.m
    beta, H, b = planes.beta[:m], planes.H[:m, :m], planes.b[:m]
    return float(b @ beta - 0.5 * beta @ H @ beta)


@pytest.mark.parametrize("solver", ["tron", "ocas"])
def test_cancel_stops_within_one_round(client: Any, solver: str) -> None:
    X, y = _data(rows=1200, seed=9)
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    seen: list[dict[str, Any]] = []

    def progress(event: dict[str, Any]) -> bool:
        seen.append(event)
        return len(seen) >= 3

    result = fit_on_dask(client, source, solver=solver, C=4.0, tol=1e-8, eps=1e-8,
                         progress=progress, progress_interval=0.0)
    assert result.exit_reason == "cancelled" and not result.converged
    assert result.data_plan is not None
    assert result.data_plan["rounds"] == seen[-1]["rounds"]  # no round after the cancel


def test_ocas_stops_at_max_iter_and_max_seconds_with_its_gap(client: Any) -> None:
    X, y = _data(rows=1200, seed=9)
    source = MemoryShards(split_rows(X, y, None, 400), X.shape[1])
    capped = fit_on_dask(client, source, solver="ocas", C=4.0, tol=1e-9, max_iter=3)
    timed = fit_on_dask(client, source, solver="ocas", C=4.0, tol=1e-9, max_seconds=0.0)
    for result, reason in ((capped, "max_iter"), (timed, "max_seconds")):
        assert result.exit_reason == reason and not result.converged
        assert result.relative_gap is not None and result.relative_gap > 1e-9
        assert result.warnings and "certified relative gap" in result.warnings[0]
    assert capped.iterations == 3 and timed.iterations == 1
    assert capped.data_plan is not None and capped.data_plan["rounds"] == 2 * 3 + 2


def test_bad_requests_say_what_to_use(client: Any) -> None:
    X, y = text_like(300, 50, seed=1, nnz_per_row=5)
    source = MemoryShards(split_rows(X, y, None, 100), 50)
    with pytest.raises(ValueError, match="use dcd"):
        fit_on_dask(client, source, solver="tron", loss="l1")
    with pytest.raises(ValueError, match="use tron"):
        fit_on_dask(client, source, solver="dcd", loss="l2")
    with pytest.raises(ValueError, match="use tron"):
        fit_on_dask(client, source, solver="ocas", loss="logistic")
    three = MemoryShards(split_rows(X, np.arange(300) % 3.0, None, 100), 50)
    with pytest.raises(ValueError, match="binary"):
        fit_on_dask(client, three, solver="tron")
