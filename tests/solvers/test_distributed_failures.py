"""Distributed fits when the cluster fails under them (real processes, SIGKILL): a worker
that dies mid-fit costs a reload of its block elsewhere and the same model; a scheduler
that dies ends the fit with a clear error within the round timeout."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from solvers.distributed import DistributedFitError, fit_on_dask
from solvers.shards import MemoryShards, split_rows
from testkit.dask_cluster import dask_cluster
from testkit.datagen import text_like


def _source(seed: int = 11) -> MemoryShards:
    X, y = text_like(1500, 2000, seed=seed, nnz_per_row=20)
    return MemoryShards(split_rows(X, y, None, 300), X.shape[1])


def _killer(kill: Any, after_events: int) -> Any:
    events: list[dict[str, Any]] = []

    def progress(event: dict[str, Any]) -> bool:
        events.append(event)
        if len(events) == after_events:
            kill()
        return False

    progress.events = events  # type: ignore[attr-defined]
    return progress


@pytest.mark.slow
@pytest.mark.parametrize(("solver", "loss"), [("tron", "l2"), ("dcd", "l1"),
                                              ("ocas", "l1")])
def test_a_worker_killed_mid_fit_gives_the_same_model(tmp_path: Path, solver: str,
                                                      loss: str) -> None:
    from distributed import Client

    source = _source()
    options: dict[str, Any] = {"solver": solver, "loss": loss, "C": 1.0, "tol": 1e-3,
                               "bias": "none", "max_iter": 300}
    with dask_cluster(tmp_path, workers=3) as cluster, \
            Client(cluster.address, timeout=30, set_as_default=False) as client:
        undisturbed = fit_on_dask(client, source, **options)
        progress = _killer(lambda: cluster.kill_worker(1), after_events=3)
        disturbed = fit_on_dask(client, source, progress=progress, progress_interval=0.0,
                                **options)
        assert len(progress.events) > 3  # the fit went on after the kill
        assert len(client.scheduler_info()["workers"]) == 2
    assert undisturbed.converged and disturbed.converged
    plan = disturbed.data_plan
    assert plan is not None and plan["reloads"] >= 1  # the lost block was loaded again
    # the same sums in the same (block) order: the same model, bit for bit
    assert np.array_equal(disturbed.coef, undisturbed.coef)
    assert disturbed.primal_objective == undisturbed.primal_objective
    assert disturbed.iterations == undisturbed.iterations


@pytest.mark.slow
def test_a_scheduler_gone_fails_the_fit_clearly(tmp_path: Path) -> None:
    from distributed import Client

    source = _source(seed=12)
    with dask_cluster(tmp_path, workers=2) as cluster, \
            Client(cluster.address, timeout=30, set_as_default=False) as client:
        progress = _killer(lambda: cluster.scheduler.stop(9), after_events=2)
        started = time.monotonic()
        with pytest.raises(DistributedFitError,
                           match=r"lost the Dask scheduler|a round was not done"):
            fit_on_dask(client, source, solver="tron", C=8.0, tol=1e-9, eps=1e-9,
                        progress=progress, progress_interval=0.0, round_timeout=20.0)
        assert time.monotonic() - started < 60.0


def test_no_scheduler_at_the_address_fails_within_the_connect_timeout() -> None:
    from testkit.service import free_port

    started = time.monotonic()
    with pytest.raises(DistributedFitError, match="cannot reach the Dask scheduler"):
        fit_on_dask(f"tcp://127.0.0.1:{free_port()}", _source(), connect_timeout=3.0)
    assert time.monotonic() - started < 30.0


@pytest.mark.slow
def test_ocas_killed_between_its_two_rounds_gives_the_same_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker killed after OCAS's first round of an iteration (its blocks' outputs at
    w_t lost with it, and the outputs at w_best that were scattered to it: every vector
    scattered here) makes the second round fail; it is run again from states made from
    the driver's outputs (the resend), and the model is the same bit for bit."""
    from distributed import Client

    import solvers.dask_rounds
    import solvers.distributed

    monkeypatch.setattr(solvers.dask_rounds, "INLINE_BYTES", 1024)
    source = _source()
    options: dict[str, Any] = {"solver": "ocas", "C": 1.0, "tol": 1e-3, "bias": "none"}
    with dask_cluster(tmp_path, workers=3) as cluster, \
            Client(cluster.address, timeout=30, set_as_default=False) as client:
        undisturbed = fit_on_dask(client, source, **options)
        line_search = solvers.distributed._Ocas.line_search

        def killing(self: Any) -> float:
            if self.iteration == 4:
                cluster.kill_worker(1)
            return line_search(self)

        monkeypatch.setattr(solvers.distributed._Ocas, "line_search", killing)
        disturbed = fit_on_dask(client, source, **options)
    assert undisturbed.converged and disturbed.converged
    plan = disturbed.data_plan
    assert plan is not None and plan["reloads"] >= 1 and plan["round_retries"] >= 1
    assert np.array_equal(disturbed.coef, undisturbed.coef)
    assert disturbed.primal_objective == undisturbed.primal_objective
    assert disturbed.iterations == undisturbed.iterations
