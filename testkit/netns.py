"""Separate "hosts" on one machine for the share-nothing test: a network namespace per
host, joined to this one by a veth pair (10.77.N.2 inside, 10.77.N.1 outside), with a TCP
forwarder (testkit.tcp_forward) on 10.77.N.1 to each server that listens on 127.0.0.1.

A process started with `Host.run_prefix` sees only its own loopback and the veth link: it
reaches PostgreSQL, the broker and the object store at 10.77.N.1 on the ports in
`Host.ports`, and nothing else of this machine's network. Needs root (`ip netns`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from testkit.paths import REPO


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True, timeout=30)


def netns_unavailable_reason() -> str | None:
    """None when network namespaces can be made here, else why not."""
    probe = f"hinge-probe-{os.getpid()}"
    try:
        _ip("netns", "add", probe)
        _ip("netns", "del", probe)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        return f"ip netns does not work here: {detail.strip()[:300]}"
    return None


@dataclass
class Host:
    namespace: str
    gateway: str  # this side of the veth pair: where the forwarders listen
    address: str  # the namespace's own address
    ports: dict[int, int] = field(default_factory=dict)  # 127.0.0.1 port -> gateway port

    @property
    def run_prefix(self) -> list[str]:
        return ["ip", "netns", "exec", self.namespace]

    def url_host(self, port: int) -> str:
        """`host:port` under which a server on 127.0.0.1:`port` is reached from inside."""
        return f"{self.gateway}:{self.ports[port]}"


def _free_subnet() -> int:
    used = subprocess.run(["ip", "-4", "-o", "addr"], capture_output=True, text=True).stdout
    for _ in range(100):
        subnet = random.randint(1, 254)
        if f"10.77.{subnet}." not in used:
            return subnet
    raise RuntimeError("no free 10.77.N.0/24 subnet")


@contextlib.contextmanager
def separate_host(log_dir: Path, forward_ports: list[int]) -> Iterator[Host]:
    """A namespace that reaches 127.0.0.1:`forward_ports` of this one through forwarders."""
    tag = uuid.uuid4().hex[:6]
    namespace, outside, inside = f"hinge-{tag}", f"hv{tag}o", f"hv{tag}i"
    subnet = _free_subnet()
    host = Host(namespace, f"10.77.{subnet}.1", f"10.77.{subnet}.2")
    forwarder: subprocess.Popen[str] | None = None
    _ip("netns", "add", namespace)
    try:
        _ip("link", "add", outside, "type", "veth", "peer", "name", inside, "netns", namespace)
        _ip("addr", "add", f"{host.gateway}/24", "dev", outside)
        _ip("link", "set", outside, "up")
        _ip("-n", namespace, "addr", "add", f"{host.address}/24", "dev", inside)
        _ip("-n", namespace, "link", "set", inside, "up")
        _ip("-n", namespace, "link", "set", "lo", "up")
        log = open(log_dir / f"forward-{namespace}.log", "w")  # noqa: SIM115 - closed below
        forwarder = subprocess.Popen(
            [sys.executable, "-m", "testkit.tcp_forward", host.gateway,
             *(f"127.0.0.1:{port}" for port in forward_ports)],
            cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True)
        assert forwarder.stdout is not None
        line = forwarder.stdout.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"the forwarder did not start: {line!r}")
        host.ports = {int(k): int(v) for k, v in json.loads(line[len("ready "):]).items()}
        yield host
    finally:
        if forwarder is not None:
            forwarder.terminate()
            forwarder.wait(timeout=10)
            log.close()
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("link", "del", outside)  # takes its peer in the namespace with it
        with contextlib.suppress(subprocess.SubprocessError):
            _ip("netns", "del", namespace)
