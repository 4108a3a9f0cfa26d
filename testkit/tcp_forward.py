"""A small TCP forwarder, so a process in another network namespace (a "host" of the
share-nothing test) reaches servers that listen on 127.0.0.1 only.

    python -m testkit.tcp_forward LISTEN_HOST TARGET_HOST:PORT [TARGET_HOST:PORT ...]

listens on an ephemeral port of LISTEN_HOST for each target and prints one line,
`ready {"<target port>": <listening port>, ...}`, once every socket is bound. It runs until
it is terminated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(1 << 16):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _handler(host: str, port: int) -> Handler:
    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
    return forward


async def main(listen_host: str, targets: list[str]) -> None:
    ports: dict[str, int] = {}
    servers = []
    for target in targets:
        host, _, port = target.rpartition(":")
        server = await asyncio.start_server(_handler(host, int(port)), listen_host, 0)
        servers.append(server)
        ports[port] = server.sockets[0].getsockname()[1]
    print("ready " + json.dumps(ports), flush=True)
    await asyncio.gather(*(server.serve_forever() for server in servers))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2:]))
