"""The driver's side of a distributed fit (solvers/distributed.py): the blocks of a
dataset on the Dask workers, rounds of one task per block, and what they cost.

The dataset's shards are cut into one block of consecutive shards per Dask worker;
`load_block` runs once per block, pinned to its worker (`workers=[address]`,
`allow_other_workers=True`), and the block stays in that worker's memory as the task's
result for the whole fit. A round submits one task per block whose inputs include the
block's future, so it runs where the block is; the results come back in block order (the
sums over blocks do not depend on which worker computed a block). Vectors go out with
`Client.scatter` (broadcast to every worker, or to one block's worker).

Failures: a worker that dies takes its blocks with it; Dask runs the lost tasks again
elsewhere, loading the block again from the source (its lineage). A round whose tasks
fail anyway is submitted again (up to `round_retries` times, with fresh arguments from
the driver's state); a client that has lost its scheduler fails the fit with
DistributedFitError; every wait has a timeout (`round_timeout`), so a fit never hangs.
Dask is imported lazily (only a driver that has a client needs it).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from solvers import _distributed_tasks as tasks
from solvers.shards import ShardSource

INLINE_BYTES = 1 << 18  # vectors up to this size travel inside the tasks, not scattered


class DistributedFitError(RuntimeError):
    """The cluster could not run the fit (no workers, the scheduler gone, a round that
    kept failing or took longer than round_timeout)."""


def assign_blocks(n_shards: int, n_blocks: int) -> list[tuple[int, ...]]:
    """Consecutive shards in `n_blocks` blocks as even as possible (no empty block)."""
    n_blocks = max(1, min(n_blocks, n_shards))
    edges = np.linspace(0, n_shards, n_blocks + 1).round().astype(int)
    return [tuple(range(edges[k], edges[k + 1])) for k in range(n_blocks)]


class Cluster:
    """The driver's view of the fit's blocks on the Dask workers, and its accounting."""

    def __init__(self, client: Any, source: ShardSource, *, threads: int = 1,
                 round_timeout: float = 600.0, round_retries: int = 3) -> None:
        self.client = client
        self.source = source
        self.round_timeout = round_timeout
        self.round_retries = round_retries
        self.tag = uuid.uuid4().hex[:8]
        self.started = time.perf_counter()
        self.rounds = 0
        self.retries = 0
        self.bytes_to_workers = 0
        self.bytes_from_workers = 0
        self.communication_s = 0.0
        self.compute_s = 0.0
        workers = self._workers()
        if not workers:
            raise DistributedFitError(f"the Dask scheduler {self._address()} has no workers")
        self.n_workers = len(workers)
        self.layout = assign_blocks(len(source), len(workers))
        self.blocks = [client.submit(tasks.load_block, source, k, shards, threads,
                                     workers=[workers[k % len(workers)]],
                                     allow_other_workers=True, pure=False,
                                     key=f"hinge-block-{self.tag}-{k}")
                       for k, shards in enumerate(self.layout)]
        self.where: list[str | None] = [workers[k % len(workers)]
                                        for k in range(len(self.blocks))]
        self.pids: list[int | None] = [None] * len(self.blocks)
        self.reloads = 0
        facts = self.each(tasks.block_facts, [(b,) for b in self.blocks], track=False)
        self.facts = facts
        for k, fact in enumerate(facts):
            self.pids[k] = int(fact["pid"])

    # -- cluster state

    def _address(self) -> str:
        return str(getattr(self.client.scheduler, "address", "?"))

    def _workers(self) -> list[str]:
        try:
            info = self.client.scheduler_info()
        except Exception as exc:
            raise DistributedFitError(
                f"the Dask scheduler {self._address()} does not answer: {exc}") from exc
        return sorted(info.get("workers", {}))

    def holders(self, futures: Sequence[Any] | None = None) -> list[str | None]:
        """Where each block is: the worker it was loaded on, or where `refresh` found it
        (None: nowhere now; the task then goes where the scheduler puts its inputs)."""
        return list(self.where)

    def refresh(self) -> None:
        """Ask the scheduler where the blocks are now (after a failure or a reload)."""
        try:
            who = self.client.who_has(self.blocks)
        except Exception:
            who = {}
        self.where = [sorted(who.get(f.key, ()))[0] if who.get(f.key) else None
                      for f in self.blocks]

    def note_pids(self, pids: Sequence[int]) -> None:
        """Count blocks computed by another process than before (loaded again there)."""
        moved = False
        for k, pid in enumerate(pids):
            if self.pids[k] is not None and pid != self.pids[k]:
                self.reloads += 1
                moved = True
            self.pids[k] = pid
        if moved:
            self.refresh()

    def _check_client(self, error: BaseException | None = None) -> None:
        status = getattr(self.client, "status", "running")
        if status not in ("running", "connecting"):
            raise DistributedFitError(
                f"lost the Dask scheduler {self._address()} (client {status})"
                + (f": {error}" if error else "")) from error

    # -- moving vectors

    def broadcast(self, vector: np.ndarray) -> Any:
        """A vector for every block's task: itself when small (it travels in the tasks),
        else one future scattered to every worker."""
        self.bytes_to_workers += int(vector.nbytes) * len(self.blocks)
        if vector.nbytes <= INLINE_BYTES:
            return vector
        self._check_client()
        started = time.perf_counter()
        future = self._guarded(lambda: self.client.scatter(
            vector, broadcast=True, hash=False, timeout=self.round_timeout))
        self.communication_s += time.perf_counter() - started
        return future

    def send(self, vectors: Sequence[np.ndarray]) -> list[Any]:
        """One vector to each block's worker (small ones travel in the tasks)."""
        self.bytes_to_workers += sum(int(v.nbytes) for v in vectors)
        started = time.perf_counter()
        futures = [v if v.nbytes <= INLINE_BYTES else self._scatter_to(v, a)
                   for v, a in zip(vectors, self.where, strict=True)]
        self.communication_s += time.perf_counter() - started
        return futures

    def _scatter_to(self, vector: np.ndarray, address: str | None) -> Any:
        def scatter(to: str | None) -> Any:
            return self.client.scatter(vector, workers=None if to is None else [to],
                                       hash=False, timeout=self.round_timeout)

        if address is not None:
            try:
                return scatter(address)
            except Exception as exc:  # the block's worker is gone: to any, then to it
                self._check_client(exc)
        return self._guarded(lambda: scatter(None))

    def _guarded(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:
            self._check_client(exc)
            raise DistributedFitError(f"Dask refused the data: {exc}") from exc

    # -- rounds

    def submit_each(self, function: Callable[..., Any], arguments: Sequence[tuple[Any, ...]],
                    where: Sequence[str | None] | None = None) -> list[Any]:
        """One task per block, placed where `where` says (else where its inputs are)."""
        where = where if where is not None else [None] * len(arguments)
        return [self.client.submit(function, *args, pure=False) if a is None else
                self.client.submit(function, *args, pure=False, workers=[a],
                                   allow_other_workers=True)
                for args, a in zip(arguments, where, strict=True)]

    def gather(self, futures: Sequence[Any]) -> list[Any]:
        """The futures' results in order, within round_timeout in all."""
        deadline = time.monotonic() + self.round_timeout
        results = []
        for future in futures:
            try:
                results.append(future.result(timeout=max(deadline - time.monotonic(), 0.01)))
            except TimeoutError as exc:
                self._check_client()
                raise DistributedFitError(
                    f"a round was not done after {self.round_timeout} s on the Dask "
                    f"cluster {self._address()}") from exc
        return results

    def each(self, function: Callable[..., Any], arguments: Sequence[tuple[Any, ...]],
             track: bool = True, seconds: Callable[[Any], float] | None = None,
             where: Sequence[str | None] | None = None,
             resend: Callable[[], Sequence[tuple[Any, ...]]] | None = None) -> list[Any]:
        """Run `function` on every block (one round), gather the results in block order.

        A failed round is submitted again (`resend` makes fresh arguments, e.g. vectors
        scattered again) up to round_retries times; the client's connection is checked
        first (a lost scheduler ends the fit)."""
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                results = self.gather(self.submit_each(function, arguments, where))
                break
            except Exception as exc:
                if not _lost(exc):
                    raise
                self._check_client(exc)
                attempt += 1
                self.retries += 1
                if attempt > self.round_retries:
                    raise DistributedFitError(
                        f"a round failed {attempt} times on the Dask cluster "
                        f"{self._address()}: {type(exc).__name__}: {exc}") from exc
                self.refresh()
                where = self.where
                if resend is not None:
                    arguments = resend()
        wall = time.perf_counter() - started
        if track:
            self.rounds += 1
            busy = max((seconds(r) for r in results), default=0.0) if seconds else 0.0
            self.compute_s += busy
            self.communication_s += max(wall - busy, 0.0)
            self.bytes_from_workers += sum(_nbytes(r) for r in results)
        return results

    def plan(self) -> dict[str, Any]:
        sent = self.bytes_to_workers + self.bytes_from_workers
        return {"mode": "distributed", "engine": "dask", "workers": self.n_workers,
                "blocks": len(self.blocks), "shards": len(self.source),
                "rows": int(sum(f["rows"] for f in self.facts)),
                "rounds": self.rounds, "bytes_sent": sent,
                "bytes_to_workers": self.bytes_to_workers,
                "bytes_from_workers": self.bytes_from_workers,
                "bytes_per_round": sent // max(self.rounds, 1),
                "communication_s": round(self.communication_s, 4),
                "compute_s": round(self.compute_s, 4),
                "wall_s": round(time.perf_counter() - self.started, 4),
                "reloads": self.reloads, "round_retries": self.retries}

    def release(self) -> None:
        for future in self.blocks:
            future.release()


def _lost(error: BaseException) -> bool:
    """Whether an error is Dask losing work (a worker gone, a connection closed, a task
    cancelled with its data), which a new round may overcome; not the task's own error."""
    import concurrent.futures

    from distributed import KilledWorker
    from distributed.comm.core import CommClosedError

    return isinstance(error, KilledWorker | CommClosedError | OSError |
                      concurrent.futures.CancelledError | asyncio.CancelledError)


def _nbytes(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if isinstance(value, tuple | list):
        return sum(_nbytes(v) for v in value)
    return 8 if isinstance(value, int | float) else 0
