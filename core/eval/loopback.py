"""An ASGI app served by uvicorn on 127.0.0.1, inside the caller's event loop.

The eval's own listeners (the model gateway) run in the session's loop, so they share its
lifetime and never need a thread. The socket is bound before uvicorn starts (never
pick-a-free-port-then-bind), so port 0 is race-free and a busy fixed port fails at once with
the OS's reason.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import TracebackType
from typing import Any, ClassVar, TypeVar

import uvicorn

from core.eval.servers.embedded import HttpLimits

# Longer than the idle expiry of the clients' own pools (httpx and the OpenAI SDK: 5 s,
# aiohttp: 15 s, Go: 90 s), so that the client always closes an idle connection first: with
# uvicorn's 5 s default a request sent on a connection the server is closing fails with a bare
# read error, which a rollout without retries (the demo's) reports as its failure.
KEEP_ALIVE_SEC = 120
# What one connection may make a listener hold (server_stub.http_limits, through
# core.eval.servers.embedded): any local process can reach these ports.
HTTP_LIMITS = HttpLimits()


class _Server(uvicorn.Server):
    """uvicorn that leaves the process's signal handlers to the session that owns them."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class LoopbackServer:
    """`app` on `127.0.0.1:port` (0 = a free port) between `start()` and `stop()`."""

    def __init__(
        self,
        app: Any,
        *,
        port: int = 0,
        shutdown_grace_sec: int = 2,
        limits: HttpLimits = HTTP_LIMITS,
    ) -> None:
        """`shutdown_grace_sec`: how long `stop()` lets requests in flight finish before
        uvicorn cancels them; `limits`: what one connection may make the listener hold."""
        self._app = app
        self._port = port
        self._grace = shutdown_grace_sec
        self._limits = limits
        self._socket: socket.socket | None = None
        self._server: _Server | None = None
        self._serving: asyncio.Future[None] | None = None
        self.base_url: str | None = None
        """`http://127.0.0.1:PORT` while serving."""

    async def start(self) -> str:
        """Bind and serve; returns the base URL. `OSError` when the port cannot be bound."""
        if self.base_url is not None:
            return self.base_url
        # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that say TCP, and
        # without it a response written in two parts stalls ~40 ms.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", self._port))
        except OSError:
            sock.close()
            raise
        self._socket = sock
        config = uvicorn.Config(
            self._app,
            **self._limits.uvicorn_options(),
            log_level="warning",
            access_log=False,
            lifespan="off",
            interface="asgi3",  # told, not guessed: a bound method is not detected as one
            timeout_keep_alive=KEEP_ALIVE_SEC,
            timeout_graceful_shutdown=self._grace,
        )
        server = self._server = _Server(config)
        serving = self._serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        try:
            while not server.started:
                if serving.done():
                    serving.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.005)
        except BaseException:
            await self.stop()
            raise
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self.base_url

    async def stop(self) -> None:
        server, serving, sock = self._server, self._serving, self._socket
        self._server = self._serving = self._socket = None
        self.base_url = None
        try:
            if server is not None and serving is not None:
                server.should_exit = True
                with suppress(asyncio.CancelledError):
                    await serving
        finally:
            if sock is not None:
                sock.close()


__all__ = ["LoopbackServer"]


_Service = TypeVar("_Service", bound="LoopbackService")


class LoopbackService:
    """What the eval's loopback listeners (the model gateway, the event receiver) share: a
    `LoopbackServer` started and stopped with them, `async with`, and a bind failure turned
    into their own error naming the port."""

    #: How a bind failure names the listener ("the model gateway").
    service_name: ClassVar[str]
    #: The error a bind failure raises (the part's own root).
    bind_error: ClassVar[type[Exception]]
    _listener: LoopbackServer
    _port: int

    async def start(self) -> str:
        """Bind 127.0.0.1 and serve on this event loop; returns the base URL."""
        try:
            return await self._listener.start()
        except OSError as exc:
            where = f"127.0.0.1:{self._port}" if self._port else "127.0.0.1"
            raise self.bind_error(f"could not bind {self.service_name} on {where}: {exc}") from exc

    async def stop(self) -> None:
        await self._listener.stop()

    async def __aenter__(self: _Service) -> _Service:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
