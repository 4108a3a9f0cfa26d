"""Memory held to the plan, under a real limit (issue 44, item 5): an out-of-core fit in a
process of its own, inside a cgroup v1 memory cgroup (testkit/cgroups.py) whose limit is
below the size of the dataset's arrays, trains to a certified model without reaching the
limit (no reclaim forced, no OOM kill), its anonymous memory growing by no more than the
plan's working arrays and the selective cache.

The child is bench/out_of_core.py's child mode: the dataset is one aligned blob
(app.infra.mapped_arrays.write_npz), mapped as a worker's BlobShards maps a shard, read in
blocks of the size app.domain.memory.plan_fit gives for the budget, each block's pages
released (from the process and the page cache) behind. It loads its kernels first (with
--warm) and only then joins the cgroup, whose limit therefore holds what the fit itself
adds: the blocks read, the per-row arrays and whatever the solver allocates. The blob's
pages are dropped from the page cache before the fit, so every page the fit reads is
charged to the cgroup.

Before solvers/blocks.py's csr_view, each block was an anonymous copy of its values and
indices (SciPy's constructor copies a view of less than half of its base), two or three of
them at once: that fit hit this limit (memory.failcnt > 0, max usage at the limit).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.domain.memory import out_of_core_working_bytes, plan_fit
from app.infra.mapped_arrays import write_npz
from testkit import cgroups
from testkit.datagen import text_like
from testkit.paths import REPO

ROWS, FEATURES = 30_000, 20_000
BUDGET = 8 << 20
LIMIT = 12 << 20  # the budget and 4 MiB for the interpreter's own allocations
TIMEOUT = 120.0


def _blob(path: Path) -> int:
    """The generated set as an aligned blob on disk (synced: no dirty page left for the
    child to find in the page cache); its arrays' bytes."""
    X, y = text_like(ROWS, FEATURES, seed=21, nnz_per_row=80)
    arrays = {"data": X.data, "indices": X.indices.astype(np.int32),
              "indptr": X.indptr.astype(np.int64), "y": y}
    with open(path, "wb") as handle:
        write_npz(handle, arrays)
        handle.flush()
        os.fsync(handle.fileno())
    return sum(int(a.nbytes) for a in arrays.values())


def _ready(process: subprocess.Popen[str]) -> None:
    assert process.stdout is not None
    readable, _, _ = select.select([process.stdout], [], [], TIMEOUT)
    assert readable, "the child did not load its kernels in time"
    line = process.stdout.readline()
    assert line.strip() == "ready", (line, process.poll())


def test_a_fit_larger_than_its_cgroup_stays_within_it(tmp_path: Path) -> None:
    if not cgroups.available():
        if os.environ.get("CI") == "true":
            pytest.fail("no writable cgroup v1 memory controller")
        pytest.skip("no writable cgroup v1 memory controller (root, /sys/fs/cgroup/memory)")
    blob = tmp_path / "set.npz"
    nbytes = _blob(blob)
    assert nbytes > LIMIT  # the data does not fit the cgroup
    plan = plan_fit("dcd", {}, ROWS, FEATURES, 2, nbytes, BUDGET, ("dcd",))
    assert plan["mode"] == "blocks"
    command = [sys.executable, "-m", "bench.out_of_core", "--child", "--warm", "--mode",
               "blocks", "--solver", "dcd", "--loss", "l2", "--C", "0.1", "--blob", str(blob),
               "--features", str(FEATURES), "--block-bytes", str(plan["max_block_bytes"])]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        _ready(process)
        with cgroups.memory_cgroup("hinge-test", LIMIT) as group:
            group.add(process.pid)
            out, _ = process.communicate("go\n", timeout=TIMEOUT)
            assert process.returncode == 0, (process.returncode, out)
            oom_kills, failures, peak = group.oom_kills(), group.failures(), group.peak_bytes()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    row = json.loads(out.strip().splitlines()[-1])
    assert row["converged"] is True and row["relative_gap"] <= 1e-3, row
    assert row["plan"]["blocks"] >= 4, row
    assert oom_kills == 0 and failures == 0, (oom_kills, failures)  # the limit never hit
    assert plan["max_block_bytes"] <= peak < LIMIT, (peak, row)  # the blocks were charged
    # anonymous: the per-row arrays and weights, and the selective cache (solvers/
    # selective.py; twice while it is chosen again), not the blocks (mapped pages)
    working = out_of_core_working_bytes(ROWS, FEATURES, 2) + 2 * row["plan"]["cache_bytes"]
    assert row["anon_peak"] - row["anon_start"] <= working + (2 << 20), row
    assert row["plan"]["bytes_read"] >= row["plan"]["passes"] * 0.9 * nbytes
