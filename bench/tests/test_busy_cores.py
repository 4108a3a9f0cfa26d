"""bench/busy_cores_bench.py: the neighbour burns CPU, the thread counts alternate. (The
whole experiment's smoke run is test_run.py's, on stand-in data.)"""

from __future__ import annotations

import time

import pytest

from bench import busy_cores_bench as busy


def test_the_neighbour_keeps_a_core_busy_until_terminated() -> None:
    neighbour = busy.busy_neighbour()
    try:
        time.sleep(0.2)
        start = busy.cpu_seconds(neighbour.pid)
        time.sleep(1.0)
        assert busy.cpu_seconds(neighbour.pid) - start > 0.05  # it runs (a loaded machine
        # shares the core: the share is reported, not asserted)
    finally:
        neighbour.terminate()
        neighbour.wait()
    assert neighbour.returncode is not None


def test_compare_alternates_the_thread_counts_and_takes_medians(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(busy, "BLOCK_SECONDS", 0.0)  # one run per block
    order: list[int] = []
    runs = {1: lambda: order.append(1), 2: lambda: order.append(2)}
    seconds = busy.compare(runs, reps=4)
    warm_up, timed = order[:2], order[2:]
    assert warm_up == [1, 2] and timed == [1, 2, 2, 1, 1, 2, 2, 1]  # reversed on odd reps
    assert set(seconds) == {1, 2} and all(value >= 0 for value in seconds.values())
