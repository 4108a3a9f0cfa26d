"""Huge JSON bodies without a key against a real API process (uvicorn, as deployed): every
one is answered 413 at the first bytes past HINGE_MAX_JSON_BODY_BYTES (or at once, for a
declared Content-Length), the server closes the connection, and its memory stays flat.

Before app/api/body_limit.py, FastAPI read and parsed each whole body before it checked the
key: four 400 MB bodies grew the API from 510 MB to 4.7 GB, each answered 401.

The clients are raw sockets: the body comes from a generator of one 64 KiB piece (nothing
like 8 GB is ever allocated), half with a Content-Length, half chunked; each client stops
sending as soon as the answer arrives or the server closes, and the test is bounded in
time by the sockets' timeouts.
"""

from __future__ import annotations

import re
import select
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.support import embedded_settings, migrate, start_api

MB = 1 << 20
PIECE = 64 << 10
ROUTES = ["/v1/jobs", "/v1/searches", "/v1/datasets/d/split", "/v1/models/m/evaluations",
          "/v1/admin/tenants"]


def _json_pieces(total: int) -> Iterator[bytes]:
    """`total` bytes of one JSON object ({"pad": "aaaa..."}), in pieces of PIECE bytes."""
    head, tail = b'{"pad": "', b'"}'
    filler = b"a" * PIECE
    yield head
    left = total - len(head) - len(tail)
    while left > 0:
        piece = filler if left >= PIECE else filler[:left]
        left -= len(piece)
        yield piece
    yield tail


@dataclass
class Answer:
    status: int | None
    sent: int  # body bytes the client got to send
    seconds: float
    text: str


def post_huge(port: int, path: str, total: int, chunked: bool, timeout: float = 60.0
              ) -> Answer:
    started = time.monotonic()
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                     f"Content-Type: application/json\r\n{framing}\r\n\r\n".encode())
        try:
            for piece in _json_pieces(total):
                if select.select([sock], [], [], 0)[0]:
                    break  # the answer (or the close) came: stop sending
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
            else:
                if chunked:
                    sock.sendall(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # closed by the server: its answer may still be in our receive buffer
        received = b""
        try:
            while len(received) < 1 << 16:
                data = sock.recv(1 << 16)
                if not data:
                    break
                received += data
                head, _, body = received.partition(b"\r\n\r\n")
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if length and len(body) >= int(length.group(1)):
                    break
        except (ConnectionResetError, TimeoutError):
            pass
    match = re.match(rb"HTTP/1\.1 (\d{3})", received)
    return Answer(int(match.group(1)) if match else None, sent, time.monotonic() - started,
                  received.decode("latin-1"))


def _rss(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field}")


def _socket_buffers() -> int:
    """The most a client can have sent that the server never read: the largest send and
    receive buffers TCP may grow to on this host (loopback autotuning)."""
    return sum(int(Path(f"/proc/sys/net/ipv4/tcp_{kind}").read_text().split()[2])
               for kind in ("wmem", "rmem"))


def test_huge_bodies_without_a_key_are_refused_and_memory_stays_flat(tmp_path: Path
                                                                     ) -> None:
    clients, megabytes = 20, 400
    settings = embedded_settings(tmp_path / "home")
    settings.ensure_dirs()
    migrate(settings.database_url)
    api, base = start_api(settings, tmp_path)
    try:
        port = int(base.rsplit(":", 1)[1])
        pid = api.process.pid
        for path in ROUTES:  # warm up every route class once (imports, first allocations)
            assert post_huge(port, path, 2 * MB, chunked=True).status == 413
        before, peak_before = _rss(pid), _rss(pid, "VmHWM")
        samples: list[int] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                samples.append(_rss(pid))
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            answers = list(pool.map(
                lambda i: post_huge(port, ROUTES[i % len(ROUTES)], megabytes * MB,
                                    chunked=bool(i % 2)), range(clients)))
        elapsed = time.monotonic() - started
        done.set()
        sampler.join()
        peak_after = _rss(pid, "VmHWM")
        peak = max([*samples, peak_after if peak_after > peak_before else 0])
        growth = peak - before
        sent = [a.sent for a in answers]
        print(f"\n{clients} x {megabytes} MB without a key: {elapsed:.2f} s, statuses "
              f"{sorted({a.status for a in answers}, key=str)}, RSS {before / MB:.0f} MB -> "
              f"peak {peak / MB:.0f} MB (+{growth / MB:.1f} MB), body bytes sent per client "
              f"{min(sent) / MB:.2f}..{max(sent) / MB:.2f} MB, slowest answer "
              f"{max(a.seconds for a in answers):.2f} s")
        assert [a.status for a in answers] == [413] * clients, [a.text for a in answers]
        assert all("HINGE_MAX_JSON_BODY_BYTES" in a.text for a in answers)
        assert growth < 100 * MB
        # refused at the limit, not after the whole body: what a client got to send is
        # the limit and what the sockets' buffers took before it saw the answer
        assert max(sent) <= settings.max_json_body_bytes + _socket_buffers() + 2 * PIECE
        assert api.process.poll() is None
    finally:
        api.stop()
