"""bench/distributed.py's done-when table (--shape yahoo): rendered from a run's report."""

from __future__ import annotations

import argparse

from bench.distributed import yahoo_section


def test_the_yahoo_table_compares_each_job_with_its_in_memory_fit() -> None:
    group = {"max_usage": 650 << 20, "failcnt": 0, "oom_kills": 0, "usage": 1}
    report = {
        "started": "2026-12-02 18:58 UTC", "load_start": "5.3 5.2 3.7", "load_end": "6 6 5",
        "set": {"rows": 460_554, "features": 3_052_939, "nnz": 98_994_482,
                "array_bytes": 1_193_460_436},
        "dataset": {"shards": 36},
        "jobs": [{"solver": "tron", "loss": "l2", "status": "succeeded", "wall_s": 214.1,
                  "dask_cpu_s": 196.6, "celery_cpu_s": 22.8, "celery_peak_rss": 760 << 20,
                  "cgroups": [group] * 3, "converged": True, "relative_gap": 3.3e-4,
                  "primal_objective": 209377.716,
                  "data_plan": {"workers": 3, "blocks": 3, "rounds": 131,
                                "bytes_per_round": 147_100_558, "communication_s": 36.6,
                                "wall_s": 209.8}}],
        "in_memory": [{"solver": "tron", "wall_s": 90.0, "cpu_s": 80.0, "primal": 209377.7,
                       "converged": True, "relative_gap": 3.3e-4, "iterations": 19,
                       "exit_reason": "converged"}]}
    args = argparse.Namespace(cgroup_mb=768, memory_limit="600MB", budget_mb=400,
                              workers_n=3, no_spill=True)
    text = yahoo_section(report, args)
    rows = [line for line in text.splitlines() if line.startswith("| tron")]
    assert len(rows) == 2
    dask_row = rows[0].split(" | ")
    assert "3 workers, 3 blocks" in dask_row[1] and dask_row[4] == "131"
    assert dask_row[5] == "147,100,558" and dask_row[6] == "17%"
    assert dask_row[10] == "7.6e-08"  # |209377.716 - 209377.7| / 209377.7
    assert "650 (0, 0)" in dask_row[12]
    assert "98,994,482 non-zeros" in text and "36 row shards" in text
