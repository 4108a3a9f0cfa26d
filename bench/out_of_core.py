"""Out of core vs in memory (issue 44): the same dcd / logistic_dcd fit on a generated set,
once with the data in memory (solvers.fit on the mapped blob) and once in blocks
(solvers/out_of_core.py over the same blob, cut into row ranges), each in a process of its
own (optionally inside a cgroup v1 memory cgroup, testkit/cgroups.py), beside the disk's
sequential read rate measured on the blob (cold cache: POSIX_FADV_DONTNEED first).

    python -m bench.out_of_core --rows 460554 --features 3052939 --nnz-per-row 310 \
        --budget-mb 400 --cgroup-mb 768 --solvers dcd

(310 words a row before the generator merges repeated ones: 99M non-zeros, 1.2 GB)
writes bench/results/out_of_core.md (a table per run; the data goes to a scratch folder,
--scratch, never into the repository). Figures from a loaded shared machine are noisy.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.paths import REPO, results_dir

CHILD = "bench.out_of_core"


class MappedBlob:
    """A ShardSource of one aligned .npz blob, mapped (app.infra.mapped_arrays): what the
    service's BlobShards gives a worker, without a blob store."""

    def __init__(self, path: Path, n_features: int) -> None:
        self.path, self.n_features = path, n_features
        self._arrays: dict[str, np.ndarray] | None = None
        self._by_rows = False

    def __len__(self) -> int:
        return 1

    def _map(self) -> dict[str, np.ndarray]:
        from app.infra.mapped_arrays import read_npz

        if self._arrays is None:
            with open(self.path, "rb") as handle:
                self._arrays = read_npz(handle)
        return self._arrays

    def info(self, index: int) -> Any:
        from solvers.shards import ShardInfo

        arrays = self._map()
        return ShardInfo(len(arrays["y"]), len(arrays["data"]),
                         sum(int(a.nbytes) for a in arrays.values()))

    def load(self, index: int) -> Any:
        from solvers.shards import shard_from_arrays

        return shard_from_arrays(self._map(), self.n_features)

    def prefetch(self, index: int) -> None:
        return None

    def _ranges(self, start: int, stop: int) -> list[tuple[np.ndarray, int, int]]:
        arrays = self._map()
        lo, hi = int(arrays["indptr"][start]), int(arrays["indptr"][stop])
        return [(arrays["data"], lo, hi), (arrays["indices"], lo, hi),
                (arrays["indptr"], start, stop + 1), (arrays["y"], start, stop)]

    def prefetch_rows(self, index: int, start: int, stop: int) -> None:
        """As app.infra.storage.BlobShards: a blob read by rows is advised random at its
        first range (a fault reads its page only; the in-memory fit keeps the kernel's
        readahead, as the service's does)."""
        from app.infra.mapped_arrays import advise_random, prefetch

        if not self._by_rows:
            self._by_rows = True
            for values in self._map().values():
                advise_random(values)
        for values, lo, hi in self._ranges(start, stop):
            prefetch(values, lo, hi)

    def release_rows(self, index: int, start: int, stop: int) -> None:
        """Hand the rows' mapped pages back (MADV_DONTNEED) and drop them from the page
        cache (POSIX_FADV_DONTNEED over their bytes of the file): a block done with
        holds no memory of the process nor of its cgroup."""
        from app.infra.mapped_arrays import drop_cached, release

        for values, lo, hi in self._ranges(start, stop):
            release(values, lo, hi)
            drop_cached(values, lo, hi)

    def release(self, index: int) -> None:
        from app.infra.mapped_arrays import release

        for values in self._map().values():
            release(values, 0, len(values))
        _drop_cache(self.path)


def _drop_cache(path: Path) -> None:
    """POSIX_FADV_DONTNEED over the whole file."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def generate(path: Path, rows: int, features: int, nnz_per_row: float, seed: int) -> None:
    """The seeded Zipf text-like set (testkit.datagen.text_like) as an aligned blob."""
    from app.infra.mapped_arrays import write_npz
    from testkit.datagen import text_like

    X, y = text_like(rows, features, seed=seed, nnz_per_row=nnz_per_row)
    arrays = {"data": X.data, "indices": X.indices.astype(np.int32),
              "indptr": X.indptr.astype(np.int64), "y": y}
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        write_npz(handle, arrays)


def read_rate(path: Path) -> float:
    """The disk's sequential read rate (MB/s) over the blob, from a cold page cache."""
    _drop_cache(path)
    started = time.perf_counter()
    total = 0
    with open(path, "rb", buffering=0) as handle:
        while chunk := handle.read(8 << 20):
            total += len(chunk)
    seconds = time.perf_counter() - started
    _drop_cache(path)
    return total / seconds / 1e6


def _anon_bytes() -> int:
    """This process's resident anonymous memory now (/proc/self/status RssAnon)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return 0


def child(args: argparse.Namespace) -> None:
    """One fit, in this process (run by `run_child`); prints a JSON line. With --warm, it
    first compiles (or loads) the kernels of its mode (the out-of-core ones, or a fit of
    the solver on a few rows in memory) and prints "ready", before the parent puts it
    in its cgroup (what it held until then stays charged where it was): the cgroup then
    holds the fit's own memory only, and neither mode's time counts a compilation. Its
    anonymous memory is sampled at every progress event (anon_peak, anon_start: before
    the fit), every 0.5 s (every 0.02 s, the events took a third of a 46,055-row fit's
    time)."""
    if args.warm:
        from solvers import fit as fit_in_memory
        from solvers.out_of_core import fit_blocks, warmup
        from testkit.datagen import text_like

        if args.mode == "blocks":
            warmup()  # and the kernels' signatures of this blob: one pass of the fit
            warm_params = {"loss": args.loss} if args.solver == "dcd" else {}
            fit_blocks(MappedBlob(Path(args.blob), args.features), args.solver,
                       max_block_bytes=args.block_bytes, max_iter=1, **warm_params)
        else:
            X, y = text_like(200, 50, seed=1, nnz_per_row=5)
            fit_in_memory(X, y, solver=args.solver,
                          **({"loss": args.loss} if args.solver == "dcd" else {}))
        print("ready", flush=True)
    sys.stdin.readline()  # the parent has put this process in its cgroup
    from solvers import fit
    from solvers.out_of_core import fit_blocks

    source = MappedBlob(Path(args.blob), args.features)
    params: dict[str, Any] = {"loss": args.loss} if args.solver == "dcd" else {}
    params["C"] = args.C
    _drop_cache(Path(args.blob))
    anon_start = _anon_bytes()
    anon_peak = [anon_start]

    def sample(event: dict[str, Any]) -> None:
        anon_peak[0] = max(anon_peak[0], _anon_bytes())

    started, cpu_started = time.perf_counter(), time.process_time()
    main_started = time.thread_time()
    if args.mode == "blocks":
        sweeps = {"block_sweeps": args.block_sweeps} if args.block_sweeps else {}
        result = fit_blocks(source, args.solver, max_block_bytes=args.block_bytes,
                            progress=sample, progress_interval=0.5, **sweeps, **params)
        plan = result.data_plan or {}
    else:
        shard = source.load(0)
        result = fit(shard.X, shard.y, solver=args.solver, **params)
        plan = {"mode": "in_memory", "blocks": 1, "passes": 1,
                "bytes_read": source.info(0).nbytes}
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    main_cpu = time.thread_time() - main_started
    anon_peak[0] = max(anon_peak[0], _anon_bytes())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "main_cpu_seconds": main_cpu,
                      "primal": result.primal_objective,
                      "converged": result.converged, "relative_gap": result.relative_gap,
                      "exit": result.exit_reason, "plan": plan, "peak_rss": peak,
                      "anon_start": anon_start, "anon_peak": anon_peak[0]}),
          flush=True)


def run_child(args: argparse.Namespace, mode: str, solver: str, block_bytes: int,
              cgroup_bytes: int) -> dict[str, Any]:
    command = [sys.executable, "-m", CHILD, "--child", "--warm", "--mode", mode,
               "--solver", solver,
               "--blob", str(args.blob_path), "--features", str(args.features),
               "--loss", args.loss, "--block-bytes", str(block_bytes),
               "--block-sweeps", str(args.block_sweeps)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, env=env, cwd=REPO)
    assert process.stdout is not None
    while (line := process.stdout.readline()) and line.strip() != "ready":
        pass  # the kernels compiled (or loaded) outside the cgroup and the timing
    group = None
    if cgroup_bytes:
        from testkit import cgroups

        group = cgroups.create("hinge-bench", cgroup_bytes)
        group.add(process.pid)
    try:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
        out, _ = process.communicate()
        line = out.strip().splitlines()[-1] if out.strip() else "{}"
        load = os.getloadavg()[0]
        row: dict[str, Any] = json.loads(line) if process.returncode == 0 else {
            "failed": process.returncode}
        row["load"] = load
        if group is not None:
            row["cgroup_peak"] = group.peak_bytes()
            row["oom_kills"] = group.oom_kills()
        return row
    finally:
        if group is not None:
            from testkit import cgroups

            cgroups.remove(group)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--warm", action="store_true")
    parser.add_argument("--mode", default="blocks")
    parser.add_argument("--solver", default="dcd")
    parser.add_argument("--solvers", default="dcd")
    parser.add_argument("--blob")
    parser.add_argument("--loss", default="l1")
    parser.add_argument("--C", type=float, default=1.0)
    parser.add_argument("--block-bytes", type=int, default=0)
    parser.add_argument("--block-sweeps", type=int, default=0,
                        help="fit_blocks' block_sweeps (0: its default)")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--features", type=int, default=200_000)
    parser.add_argument("--nnz-per-row", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-mb", type=float, default=0.0)
    parser.add_argument("--cgroup-mb", type=float, default=0.0)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--scratch", default="/tmp/hinge-bench-out-of-core")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from app.domain.memory import plan_fit
    from solvers.out_of_core import SOLVERS as OUT_OF_CORE

    name = f"text-{args.rows}x{args.features}-{args.nnz_per_row:g}-s{args.seed}.npz"
    args.blob_path = Path(args.scratch) / name
    if not args.blob_path.exists():
        # in a process of its own: the fits' processes are this one's children, and Linux
        # keeps a parent's peak RSS in a child's ru_maxrss (the 1.2 GB set's generation
        # made every fit's peak RSS read 3.8 GB)
        with concurrent.futures.ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn")) as pool:
            pool.submit(generate, args.blob_path, args.rows, args.features,
                        args.nnz_per_row, args.seed).result()
    source = MappedBlob(args.blob_path, args.features)
    info = source.info(0)
    rate = read_rate(args.blob_path)
    budget = int(args.budget_mb * 1e6) or info.nbytes // 3
    cgroup_bytes = int(args.cgroup_mb * 1e6)
    lines = [f"\n## {args.rows:,} x {args.features:,}, {info.nnz:,} non-zeros "
             f"({info.nbytes / 1e6:,.0f} MB of arrays), loss {args.loss}"
             + (f", block_sweeps {args.block_sweeps}" if args.block_sweeps else ""),
             "", f"Disk sequential read rate (cold cache, 8 MB reads): {rate:,.0f} MB/s. "
             f"Budget (HINGE_WORKER_MEMORY_BYTES) {budget / 1e6:,.0f} MB"
             + (f", cgroup limit {cgroup_bytes / 1e6:,.0f} MB" if cgroup_bytes else "")
             + ". A loaded shared machine (2 cores, several engineers): timings are noisy; "
             "each solver's two fits run one after the other, load = the 1-minute load "
             "average (`uptime`) at each fit's end; ratio = blocks / in-memory seconds, "
             "primal diff = |P_blocks - P_memory| / P_memory; CPU s: the fit's process (all "
             "its threads), main-thread CPU s: the thread that runs the solver's sweeps "
             "alone (the read-ahead, release and certificate threads run beside it), the "
             "least wall time of the fit on an idle machine.", "",
             "| solver | mode | seconds | ratio | CPU s | CPU ratio | main-thread CPU s | "
             "main-thread ratio | load | passes | blocks | "
             "bytes read | peak RSS | cgroup peak | OOM kills | converged | relative gap | "
             "primal | primal diff |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
             "---:|---:|---:|"]
    for solver in args.solvers.split(","):
        plan = plan_fit(solver, {}, info.rows, args.features, 2, info.nbytes, budget,
                        OUT_OF_CORE)
        if plan["mode"] != "blocks":
            raise SystemExit(f"{solver}: the plan is {plan}, not blocks")
        block = int(plan.get("max_block_bytes", info.nbytes))
        modes = ([] if args.skip_memory else [("in_memory", 0)]) + [("blocks", cgroup_bytes)]
        memory: dict[str, Any] = {}
        for mode, limit in modes:
            row = run_child(args, mode, solver, block, limit)
            if "failed" in row:
                lines.append(f"| {solver} | {mode} | failed (exit {row['failed']}) |"
                             + " |" * 16)
                continue
            p = row["plan"]
            if mode == "in_memory":
                memory = row
            ratio = (f"{row['seconds'] / memory['seconds']:.2f}"
                     if mode == "blocks" and memory else "-")
            cpu_ratio = (f"{row['cpu_seconds'] / memory['cpu_seconds']:.2f}"
                         if mode == "blocks" and memory else "-")
            main_ratio = (f"{row['main_cpu_seconds'] / memory['main_cpu_seconds']:.2f}"
                          if mode == "blocks" and memory else "-")
            diff = (f"{abs(row['primal'] - memory['primal']) / memory['primal']:.1e}"
                    if mode == "blocks" and memory else "-")
            lines.append(
                f"| {solver} | {mode} | {row['seconds']:.1f} | {ratio} | "
                f"{row['cpu_seconds']:.1f} | {cpu_ratio} | "
                f"{row['main_cpu_seconds']:.1f} | {main_ratio} | {row['load']:.1f} | "
                f"{p.get('passes')} | "
                f"{p.get('blocks')} | {p.get('bytes_read', 0) / 1e6:,.0f} MB | "
                f"{row['peak_rss'] / 1e6:,.0f} MB | "
                + (f"{row['cgroup_peak'] / 1e6:,.0f} MB | " if "cgroup_peak" in row else "- | ")
                + f"{row.get('oom_kills', '-')} | "
                f"{row['converged']} | {row['relative_gap']:.2e} | {row['primal']:.6g} | "
                f"{diff} |")
            print(lines[-1], flush=True)
    out = results_dir() / "out_of_core.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    header = "" if out.exists() else (
        "# Out of core vs in memory (bench/out_of_core.py)\n\nBlock minimization "
        "(solvers/out_of_core.py) against the in-memory fit of the same generated set, "
        "each in a process of its own; peak RSS is the process's ru_maxrss (mapped file "
        "pages touched count, also those released later), cgroup peak its memory "
        "cgroup's max_usage_in_bytes (page cache included).\n")
    with open(out, "a") as handle:
        handle.write(header + "\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
