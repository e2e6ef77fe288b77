"""A loopback TCP proxy that misbehaves on demand: delays, dropped or black-holed connections,
cuts of live ones (a network failure, as the client sees it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass(eq=False)
class _Link:
    """One proxied connection: the client's side, the server's side, and whether a request
    went up with no byte of answer back yet (and since when)."""

    client: asyncio.StreamWriter
    server: asyncio.StreamWriter | None = None
    asked_at: float | None = None

    def abort(self) -> None:
        self.client.transport.abort()
        if self.server is not None:
            self.server.transport.abort()


class Proxy:
    """A loopback TCP proxy in front of `target_port`.

    `mode` decides what a *new* connection gets: "pass" (forwarded, each chunk held back
    `delay` seconds), "drop" (accepted, then closed at once), "blackhole" (accepted and read,
    never answered). `cut()` closes live connections, as a network failure would.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.mode = "pass"
        self.delay = 0.0
        self.accepted = 0
        self.url = ""
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> Proxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"
        return self

    async def close(self) -> None:
        """Stop listening (new connections are refused) and cut the live ones."""
        if self._server is not None:
            self._server.close()
        self.cut()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=5)

    def cut(self, *, waiting_longer_than: float | None = None) -> int:
        """Abort live connections; with `waiting_longer_than`, only those whose request has
        waited that long for its answer (long-polls, not a quick admission or an idle
        kept-alive connection). Returns how many were cut."""
        now = asyncio.get_running_loop().time()
        cut = 0
        for link in list(self._links):
            if waiting_longer_than is not None and (
                link.asked_at is None or now - link.asked_at < waiting_longer_than
            ):
                continue
            link.abort()
            self._links.discard(link)
            cut += 1
        return cut

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        link = _Link(writer)
        self._links.add(link)
        try:
            if self.mode == "drop":
                writer.transport.abort()
                return
            if self.mode == "blackhole":
                while await reader.read(65536):
                    pass
                return
            up_reader, link.server = await asyncio.open_connection("127.0.0.1", self.target_port)
            await asyncio.gather(
                self._pump(reader, link.server, link, asking=True),
                self._pump(up_reader, writer, link, asking=False),
                return_exceptions=True,
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.abort()
            self._links.discard(link)
            self._tasks.discard(task)

    async def _pump(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: _Link,
        *,
        asking: bool,
    ) -> None:
        loop = asyncio.get_running_loop()
        try:
            while chunk := await reader.read(65536):
                if asking:
                    link.asked_at = link.asked_at or loop.time()
                else:
                    link.asked_at = None
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(chunk)
                await writer.drain()
        finally:
            link.abort()


@asynccontextmanager
async def proxy_to(url: str) -> AsyncIterator[Proxy]:
    proxy = await Proxy(int(url.rsplit(":", 1)[1])).start()
    try:
        yield proxy
    finally:
        await proxy.close()
