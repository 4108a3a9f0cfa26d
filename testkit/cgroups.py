"""cgroup v1 memory cgroups for the tests and benchmarks that hold a process to a real
memory limit (/sys/fs/cgroup/memory; needs root): create one with a limit, put processes
in it, read its peak usage and its OOM kills, remove it.

    with memory_cgroup("hinge-test", 768 << 20) as group:
        group.add(pid)          # children forked afterwards are in it too
        ...
        group.peak_bytes(), group.oom_kills()
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup/memory")


def available() -> bool:
    """Whether this process can create memory cgroups (v1 controller mounted, writable)."""
    return (ROOT / "cgroup.procs").exists() and os.access(ROOT, os.W_OK)


@dataclass(frozen=True)
class MemoryCgroup:
    path: Path

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n")

    def pids(self) -> list[int]:
        return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]

    def _read(self, name: str) -> int:
        return int((self.path / name).read_text())

    def limit_bytes(self) -> int:
        return self._read("memory.limit_in_bytes")

    def usage_bytes(self) -> int:
        return self._read("memory.usage_in_bytes")

    def peak_bytes(self) -> int:
        """The most the group used at once (resident and page cache: memory.max_usage)."""
        return self._read("memory.max_usage_in_bytes")

    def peak_rss_bytes(self) -> int:
        """Peak of resident anonymous and mapped memory is not kept by cgroup v1; this is
        the current total_rss + total_mapped_file of memory.stat."""
        stat = dict(line.split() for line in
                    (self.path / "memory.stat").read_text().splitlines())
        return int(stat.get("total_rss", 0)) + int(stat.get("total_mapped_file", 0))

    def oom_kills(self) -> int:
        """OOM kills in the group (memory.oom_control's oom_kill, kernels >= 4.13), else
        the times the limit was hit with nothing to reclaim (under_oom)."""
        fields = dict(line.split() for line in
                      (self.path / "memory.oom_control").read_text().splitlines())
        return int(fields.get("oom_kill", fields.get("under_oom", 0)))

    def failures(self) -> int:
        """How many times usage hit the limit (memory.failcnt; reclaim then follows)."""
        return self._read("memory.failcnt")


def create(name: str, limit_bytes: int) -> MemoryCgroup:
    """A new memory cgroup `name`-<random> limited to `limit_bytes` (swap not counted)."""
    path = ROOT / f"{name}-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    (path / "memory.limit_in_bytes").write_text(f"{int(limit_bytes)}\n")
    return MemoryCgroup(path)


def remove(group: MemoryCgroup, timeout: float = 10.0) -> None:
    """Move what is left in the group to the root group, then remove it."""
    deadline = time.monotonic() + timeout
    while True:
        for pid in group.pids():
            with contextlib.suppress(OSError):
                (ROOT / "cgroup.procs").write_text(f"{pid}\n")
        try:
            group.path.rmdir()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextlib.contextmanager
def memory_cgroup(name: str, limit_bytes: int) -> Iterator[MemoryCgroup]:
    group = create(name, limit_bytes)
    try:
        yield group
    finally:
        remove(group)
