"""A TCP proxy in front of the hub that the test can cut: `sever()` drops
every open connection abruptly (no close frame, as a network failure would)
and `down()`/`up()` refuse or pass new ones."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit


class Proxy:
    def __init__(self, hub_base: str):
        target = urlsplit(hub_base)
        self._host, self._port = target.hostname or "127.0.0.1", target.port or 80
        self._writers: set[asyncio.StreamWriter] = set()
        self._accepting = True
        self.accepted = 0
        self.refused = 0
        self._server: asyncio.base_events.Server | None = None
        self.base = ""

    async def start(self) -> "Proxy":
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.base = f"http://127.0.0.1:{port}"
        return self

    def down(self) -> None:
        self._accepting = False

    def up(self) -> None:
        self._accepting = True

    def sever(self) -> int:
        """Aborts every open connection, both sides; answers how many."""
        n = len(self._writers)
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()
        return n // 2

    async def close(self) -> None:
        self.sever()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._accepting:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self._host, self._port)
        except OSError:
            writer.transport.abort()
            return
        self.accepted += 1
        self._writers.update({writer, up_writer})
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()
