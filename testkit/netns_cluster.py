"""A Dask cluster across "hosts" on one machine: the scheduler and each worker in a
network namespace of its own, all joined by a bridge of their own (10.78.S.0/24; this
namespace is 10.78.S.1 on it, host i is 10.78.S.(i + 2)), each worker under its own cgroup
v1 memory limit (/sys/fs/cgroup/memory). Needs root. Everything made here is removed at
the end (processes by their pid, then links, bridge, namespaces and cgroups).
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from testkit.dask_cluster import DaskCluster, start_scheduler

CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
NO_SPILL_NO_PAUSE = {f"DASK_DISTRIBUTED__WORKER__MEMORY__{name}": "False"
                     for name in ("TARGET", "SPILL", "PAUSE", "TERMINATE")}


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def unavailable_reason() -> str | None:
    """None when namespaces, bridges and memory cgroups can be made here, else why not."""
    if os.geteuid() != 0:
        return "needs root (ip netns, bridges, cgroups)"
    if not (CGROUP_MEMORY / "cgroup.procs").exists():
        return f"no cgroup v1 memory controller at {CGROUP_MEMORY}"
    probe = f"hinge-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
        _ip("netns", "del", probe)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"ip netns does not work here: {getattr(exc, 'stderr', '') or exc}"
    return None


@dataclass
class Host:
    namespace: str
    address: str
    cgroup: Path | None = None

    def prefix(self) -> list[str]:
        """Run a command in the namespace."""
        return ["ip", "netns", "exec", self.namespace]

    def join_cgroup(self, pid: int) -> None:
        """Put a process (and what it starts) in this host's cgroup. From this namespace:
        `ip netns exec` mounts a sysfs of the namespace's own, without the cgroups."""
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text(str(pid))


def _free_subnet() -> int:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for _ in range(100):
        subnet = random.randint(1, 254)
        if f"10.78.{subnet}." not in used:
            return subnet
    raise RuntimeError("no free 10.78.N.0/24 subnet")


@contextlib.contextmanager
def bridged_hosts(count: int, memory_limits: list[int | None]) -> Iterator[list[Host]]:
    tag = uuid.uuid4().hex[:6]
    bridge, subnet = f"hb{tag}", _free_subnet()
    hosts: list[Host] = []
    _ip("link", "add", bridge, "type", "bridge")
    try:
        _ip("addr", "add", f"10.78.{subnet}.1/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for i in range(count):
            namespace, outside, inside = f"hinge-{tag}-{i}", f"hv{tag}{i}o", f"hv{tag}{i}i"
            _ip("netns", "add", namespace)
            host = Host(namespace, f"10.78.{subnet}.{i + 2}")
            hosts.append(host)
            _ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns",
                namespace)
            _ip("link", "set", outside, "master", bridge)
            _ip("link", "set", outside, "up")
            _ip("-n", namespace, "addr", "add", f"{host.address}/24", "dev", inside)
            _ip("-n", namespace, "link", "set", inside, "up")
            _ip("-n", namespace, "link", "set", "lo", "up")
            limit = memory_limits[i] if i < len(memory_limits) else None
            if limit is not None:
                host.cgroup = CGROUP_MEMORY / f"hinge-{tag}-{i}"
                host.cgroup.mkdir()
                (host.cgroup / "memory.limit_in_bytes").write_text(str(limit))
        yield hosts
    finally:
        for i, host in enumerate(hosts):
            with contextlib.suppress(subprocess.SubprocessError):
                _ip("link", "del", f"hv{tag}{i}o")
            with contextlib.suppress(subprocess.SubprocessError):
                _ip("netns", "del", host.namespace)
            if host.cgroup is not None:
                with contextlib.suppress(OSError):
                    host.cgroup.rmdir()
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("link", "del", bridge)


@contextlib.contextmanager
def namespaced_cluster(log_dir: Path, workers: int, worker_cgroup_bytes: int,
                       memory_limit: str) -> Iterator[tuple[DaskCluster, list[Host]]]:
    """A scheduler on host 0 and `workers` workers on hosts 1.., each in a memory cgroup
    of `worker_cgroup_bytes` with Dask's own `--memory-limit` (its budget: the blocks of
    a fit are not spilled, and a worker over 80% of it does not pause, which would stall
    the rounds; the cgroup is the hard limit)."""
    limits: list[int | None] = [None] + [worker_cgroup_bytes] * workers
    with bridged_hosts(workers + 1, limits) as hosts:
        cluster = start_scheduler(log_dir, host=hosts[0].address, prefix=hosts[0].prefix())
        try:
            started = []
            for host in hosts[1:]:
                worker = cluster.start_worker(memory_limit=memory_limit, host=host.address,
                                              prefix=host.prefix(), wait=False,
                                              env=NO_SPILL_NO_PAUSE)
                host.join_cgroup(worker.process.pid)
                started.append(worker)
            for worker in started:
                worker.wait_for_log("Registered to:", timeout=120)
            yield cluster, hosts
        finally:
            cluster.stop()
