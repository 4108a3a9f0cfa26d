"""Memory held to the plan, under a real limit: an out-of-core fit in a process of its own
inside a cgroup v1 memory cgroup (testkit/cgroups.py) whose limit is below the dataset's
size trains to a certified model without an OOM kill (issue 44, item 5).

The dataset is one aligned blob (app.infra.mapped_arrays.write_npz), mapped by the child
(bench/out_of_core.py's child mode: the source a worker's BlobShards gives, without a blob
store), read in blocks of the size app.domain.memory.plan_fit gives for the budget.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from app.domain.memory import plan_fit
from app.infra.mapped_arrays import write_npz
from testkit import cgroups
from testkit.datagen import text_like
from testkit.paths import REPO

LIMIT = 320 << 20
BUDGET = 100 << 20


@pytest.mark.slow
def test_a_fit_larger_than_its_cgroup_converges_without_an_oom_kill(tmp_path: Path) -> None:
    if not cgroups.available():
        if os.environ.get("CI") == "true":
            pytest.fail("no writable cgroup v1 memory controller")
        pytest.skip("no writable cgroup v1 memory controller (root, /sys/fs/cgroup/memory)")
    X, y = text_like(250_000, 200_000, seed=21, nnz_per_row=120)
    blob = tmp_path / "set.npz"
    arrays = {"data": X.data, "indices": X.indices.astype(np.int32),
              "indptr": X.indptr.astype(np.int64), "y": y}
    nbytes = sum(int(a.nbytes) for a in arrays.values())
    with open(blob, "wb") as handle:
        write_npz(handle, arrays)
    del X, arrays
    assert nbytes > LIMIT  # the data does not fit the cgroup
    plan = plan_fit("dcd", {}, len(y), 200_000, 2, nbytes, BUDGET, ("dcd",))
    assert plan["mode"] == "blocks"
    command = [sys.executable, "-m", "bench.out_of_core", "--child", "--mode", "blocks",
               "--solver", "dcd", "--loss", "l2", "--blob", str(blob), "--features",
               "200000", "--block-bytes", str(plan["max_block_bytes"])]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               text=True, cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)})
    with cgroups.memory_cgroup("hinge-test", LIMIT) as group:
        group.add(process.pid)
        out, _ = process.communicate("go\n", timeout=1500)
        assert process.returncode == 0, (process.returncode, out)
        assert group.oom_kills() == 0
        peak = group.peak_bytes()
    row = json.loads(out.strip().splitlines()[-1])
    assert row["converged"] is True and row["relative_gap"] <= 1e-3, row
    assert row["plan"]["blocks"] >= 4, row
    assert peak <= LIMIT  # the limit held (reclaiming page cache), with no OOM kill
    assert row["plan"]["bytes_read"] >= row["plan"]["passes"] * 0.9 * nbytes
