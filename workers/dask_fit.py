"""A job's fit on the Dask cluster (HINGE_DASK_SCHEDULER): the Celery worker that claimed
the job is the Dask client and drives solvers.distributed; each Dask worker opens its
shards of the dataset from the blob store itself (`StoreShards`, picklable: it carries
the settings, not an open store), so the dataset never passes through this process.

`plan_job` decides where a job runs: the data plan of every fit (app.domain.memory.
plan_fit), which says "distributed" where a Dask cluster can take a job that does not
fit this worker's budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import SecretStr

from app.domain.lifecycle import Claim
from app.domain.memory import ENGINE_AUTO, ENGINE_LOCAL, host_free_bytes, plan_fit
from app.domain.services.jobs import JobWork, cluster_refusal
from app.infra.storage import BlobShards, blob_store, dataset_shards
from app.settings import Settings
from solvers.shards import Shard, ShardInfo

if TYPE_CHECKING:
    from solvers.result import FitResult


class StoreShards:
    """A dataset's shards over the blob store of `settings`, opened where it is loaded."""

    def __init__(self, settings: Settings, blob_paths: list[str], n_features: int,
                 infos: list[ShardInfo] | None = None) -> None:
        # what a Dask worker needs to open the blobs: not the key that signs sessions
        self.settings = settings.model_copy(update={"secret_key": SecretStr("")})
        self.blob_paths = list(blob_paths)
        self.n_features = n_features
        self.infos = infos
        self._source: BlobShards | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_source": None}

    def _open(self) -> BlobShards:
        if self._source is None:
            self._source = dataset_shards(blob_store(self.settings), self.blob_paths,
                                          self.n_features, self.infos)
        return self._source

    def __len__(self) -> int:
        return len(self.blob_paths)

    def info(self, index: int) -> ShardInfo:
        return self._open().info(index)

    def load(self, index: int) -> Shard:
        return self._open().load(index)

    def prefetch(self, index: int) -> None:
        self._open().prefetch(index)

    def release(self, index: int) -> None:
        self._open().release(index)


def job_source(settings: Settings, claimed: Claim[JobWork]) -> StoreShards:
    assert claimed.work.blob_path is not None
    if claimed.work.shards:
        paths = [str(s["blob_path"]) for s in claimed.work.shards]
        infos = [ShardInfo(int(s["rows"]), int(s["nnz"]), int(s["nbytes"]))
                 for s in claimed.work.shards]
        return StoreShards(settings, paths, claimed.work.features, infos)
    return StoreShards(settings, [claimed.work.blob_path], claimed.work.features)


def plan_job(settings: Settings, claimed: Claim[JobWork], params: Mapping[str, Any],
             rows: int, dataset_bytes: int, classes: int, nnz: int = 0) -> dict[str, Any]:
    """The job's data plan (app.domain.memory.plan_fit, the one decision of where and how
    a fit reads its data), under this worker's budget (HINGE_WORKER_MEMORY_BYTES, or what
    the host has free): "distributed" for engine "dask", and for engine "auto" (the
    default) when a Dask scheduler is configured, it can train the job and the job does
    not fit the budget; else "in_memory", "blocks" or "refused" as for every fit. `nnz`:
    the dataset's stored values (a compact dataset's float32 ones are counted at their
    size, and a float64 copy for a solver that does not read them)."""
    from solvers.out_of_core import SOLVERS as OUT_OF_CORE

    engine = str(params.get("engine", ENGINE_AUTO))
    if engine == ENGINE_AUTO and (not settings.dask_scheduler or cluster_refusal(
            claimed.work.solver, claimed.work.params, classes) is not None):
        engine = ENGINE_LOCAL
    budget = settings.worker_memory_bytes or host_free_bytes()
    fit_params = {key: value for key, value in params.items() if key != "engine"}
    float32_values = nnz if claimed.work.value_dtype == "float32" else 0
    return plan_fit(claimed.work.solver, fit_params, rows, claimed.work.features, classes,
                    dataset_bytes, budget, OUT_OF_CORE, engine=engine,
                    float32_values=float32_values)


def fit_on_cluster(settings: Settings, claimed: Claim[JobWork], params: dict[str, Any],
                   progress: Callable[[dict[str, Any]], bool]) -> FitResult:
    """The job's fit on the Dask workers, with its progress and cancellation."""
    from solvers.distributed import fit_on_dask

    taken = {key: params[key] for key in ("C", "loss", "bias", "bias_scale", "eps", "tol",
                                           "max_iter", "max_seconds", "threads", "seed",
                                           "weighted")
             if params.get(key) is not None}
    if params.get("bias") not in (None, "augment"):
        taken["bias"] = "none"
    return fit_on_dask(settings.dask_scheduler, job_source(settings, claimed),
                       solver=claimed.work.solver, progress=progress,
                       progress_interval=settings.progress_interval_seconds,
                       round_timeout=settings.dask_round_timeout_seconds,
                       connect_timeout=min(settings.dask_round_timeout_seconds, 60.0),
                       **taken)


def streamed_accuracy(result: FitResult, source: StoreShards) -> float:
    """The model's accuracy on the dataset, one shard in memory at a time."""
    right = total = 0
    for index in range(len(source)):
        shard = source.load(index)
        right += int(np.count_nonzero(result.predict(shard.X) == shard.y))
        total += shard.rows
        source.release(index)
    return right / max(total, 1)
