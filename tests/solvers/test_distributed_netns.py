"""A Dask cluster across network namespaces (testkit/netns_cluster.py): the scheduler and
three workers each on a "host" of its own, joined by a bridge, each worker in a memory
cgroup of its own. A dataset larger than one worker's memory limit trains across the
three, and the model equals the single-host fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from solvers import fit
from solvers.distributed import fit_on_dask
from solvers.shards import split_rows, write_npz_shards
from testkit.netns_cluster import namespaced_cluster, unavailable_reason
from tests.support import IN_CI

WORKER_LIMIT = 300 * 2**20  # Dask's --memory-limit of each worker: its budget
WORKER_CGROUP = 512 * 2**20  # the cgroup each worker process runs in (a worker process
# is about 200 MB before any data: one holding the whole set would pass the cgroup's limit)


def _wide(rows: int, features: int, per_row: int, seed: int) -> tuple[sp.csr_matrix,
                                                                       np.ndarray]:
    """Uniform sparse rows of unit norm, labels from a planted model with 5% noise."""
    rng = np.random.default_rng(seed)
    columns = rng.integers(0, features, size=rows * per_row, dtype=np.int32)
    values = rng.random(rows * per_row)
    indptr = np.arange(0, rows * per_row + 1, per_row, dtype=np.int64)
    X = sp.csr_matrix((values, columns, indptr), shape=(rows, features))
    X.sum_duplicates()
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(X.multiply(X).sum(axis=1).A.ravel())) @ X)
    X.indices = X.indices.astype(np.int32)
    teacher = rng.normal(size=features)
    y = np.where(X @ teacher > 0, 1.0, -1.0)
    flip = rng.random(rows) < 0.05
    y[flip] = -y[flip]
    return X, y


@pytest.mark.slow
def test_a_set_over_one_workers_memory_trains_across_three_hosts(tmp_path: Path) -> None:
    reason = unavailable_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(reason)
        pytest.skip(reason)
    X, y = _wide(200_000, 100_000, 140, seed=4)
    arrays = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes + y.nbytes
    assert arrays > WORKER_LIMIT and arrays + 200 * 2**20 > WORKER_CGROUP  # nor one worker
    source = write_npz_shards(tmp_path / "shards", split_rows(X, y, None, 20_000),
                              X.shape[1])
    from distributed import Client

    with namespaced_cluster(tmp_path, 3, WORKER_CGROUP, str(WORKER_LIMIT)) as (cluster,
                                                                               hosts):
        assert cluster.address.startswith(f"tcp://{hosts[0].address}:")
        with Client(cluster.address, timeout=60, set_as_default=False) as client:
            workers = client.scheduler_info()["workers"]
            assert sorted(w.split("//")[1].split(":")[0] for w in workers) == sorted(
                h.address for h in hosts[1:])
            distributed = fit_on_dask(client, source, solver="tron", C=1.0, tol=1e-4)
            # no worker was killed by its cgroup's limit (nor lost otherwise)
            assert all(w.process.poll() is None for w in cluster.workers)
            assert len(client.scheduler_info()["workers"]) == 3
            for worker, host in zip(cluster.workers, hosts[1:], strict=True):
                assert host.cgroup is not None  # the worker ran in its cgroup, and used it
                assert str(worker.process.pid) in (host.cgroup / "cgroup.procs").read_text()
                usage = int((host.cgroup / "memory.max_usage_in_bytes").read_text())
                assert 0 < usage <= WORKER_CGROUP
    single = fit(X, y, solver="tron", C=1.0, tol=1e-4)
    assert distributed.converged and single.converged
    assert distributed.primal_objective is not None and single.primal_objective is not None
    assert abs(distributed.primal_objective - single.primal_objective) \
        < 1e-6 * single.primal_objective
    plan = distributed.data_plan
    assert plan is not None and (plan["workers"], plan["shards"]) == (3, 10)
