"""The warm-up's scheduling (solvers.warmup.compile_groups; workers.training): processes that
share Numba's on-disk cache compile disjoint groups, a group held by another process is
skipped and then waited for, and the kernels of `auto` and `smo` come first. The kernels
themselves: tests/solvers/test_train.py (warmup() compiles every kernel Python calls)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app.settings import Settings
from solvers import warmup
from solvers.params import SOLVERS
from workers.warmup import compiler_count


@pytest.fixture
def warmed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """The groups warmed, in order (the warming itself replaced by a record), with the
    locks and the marker in a folder of this test."""
    done: list[str] = []
    monkeypatch.setattr(warmup, "_warm_group", done.append)
    monkeypatch.setattr(warmup, "_lock_dir", lambda: tmp_path)
    return done


def test_auto_and_smo_come_first_and_every_solver_is_in_a_group() -> None:
    groups = list(warmup.WARMUP_GROUPS)
    assert groups[0] == "linear"
    assert {"dcd", "tron", "ocas", "newton", "gram", "auto"} <= set(warmup.WARMUP_GROUPS["linear"])
    assert set(warmup.PRIORITY_GROUPS) == {"linear", "smo", "smo-parallel"}
    assert groups.index("smo") < groups.index("other")
    named = {entry.partition(":")[0] for entries in warmup.WARMUP_GROUPS.values()
             for entry in entries}
    assert set(SOLVERS) <= named  # (one that none names would be warmed with "other")
    # make test's compile step takes them longest first: every group, once
    assert sorted(warmup.LONGEST_FIRST) == sorted(warmup.WARMUP_GROUPS)


def test_a_group_held_elsewhere_is_skipped_then_waited_for(warmed: list[str]) -> None:
    held = threading.Event()
    release = threading.Event()

    def other_process() -> None:  # flock: a second open file is a second holder
        with warmup._group_lock("smo", blocking=True):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=other_process)
    holder.start()
    assert held.wait(10)
    assert warmup.compile_groups(("linear", "smo", "other"), wait=False) == ["linear", "other"]
    finished: list[list[str]] = []
    waiter = threading.Thread(
        target=lambda: finished.append(warmup.compile_groups(("linear", "smo"))))
    waiter.start()
    time.sleep(0.5)
    assert not finished  # "linear" done, blocked on "smo" until its holder is done
    assert warmed == ["linear", "other", "linear"]
    release.set()
    holder.join(10)
    waiter.join(10)
    assert finished == [["linear", "smo"]] and warmed[-1] == "smo"
    with pytest.raises(ValueError, match="unknown"):
        warmup.compile_groups(("nope",))


def test_the_cache_is_complete_once_every_group_is_warmed(warmed: list[str]) -> None:
    assert not warmup.cache_is_complete()
    warmup.warmup(warmup.PRIORITY_GROUPS)
    assert not warmup.cache_is_complete()  # only some groups
    warmup.warmup()
    assert warmup.cache_is_complete()
    assert warmed[-len(warmup.WARMUP_GROUPS):] == list(warmup.WARMUP_GROUPS)


def test_helpers_share_the_cores_of_a_worker_process() -> None:
    groups = len(warmup.WARMUP_GROUPS)
    assert compiler_count(Settings(worker_concurrency=1), cores=2) == 1
    assert compiler_count(Settings(worker_concurrency=2), cores=2) == 1  # at least one
    assert compiler_count(Settings(worker_concurrency=1), cores=4) == 3
    assert compiler_count(Settings(worker_concurrency=1), cores=64) == groups - 1


def test_the_complete_marker_follows_the_digest_that_names_the_cache(
        warmed: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One fingerprint of the sources: the contents' digest (solvers.sources_digest),
    which also names the cache's folder; a change of contents outdates the marker."""
    import solvers

    monkeypatch.setattr(solvers, "sources_digest", lambda: "contents-a")
    warmup.warmup()
    assert warmup.cache_is_complete()
    monkeypatch.setattr(solvers, "sources_digest", lambda: "contents-b")
    assert not warmup.cache_is_complete()
