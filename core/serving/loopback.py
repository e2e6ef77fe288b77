"""Serving an ASGI app with uvicorn inside the caller's event loop, on a socket bound first.

Every server we run starts here: the rollout server and the stub chat endpoint (`server_stub`,
in a test's loop, as the demo's own process, or as `osmosis-tui serve`) and the eval's own
loopback listeners (the model gateway, the event receiver). The socket is bound before uvicorn
starts (never pick-a-free-port-then-bind), so port 0 is race-free and a busy fixed port fails
at once with the OS's reason; every server is held to `HttpLimits`; and uvicorn leaves the
process's signal handlers to the program that owns them.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from types import TracebackType
from typing import Any, ClassVar, TypeVar

import uvicorn

from core.serving.http_limits import HttpLimits
from core.serving.warning_pace import pace_server_warnings

T = TypeVar("T")

# A rollout server's idle keep-alive: it outlives a 2100 s load-balancer idle timeout, as the
# official entrypoints configure it.
KEEP_ALIVE_SEC = 2160
# The eval's listeners': longer than the idle expiry of the clients' own pools (httpx and the
# OpenAI SDK: 5 s, aiohttp: 15 s, Go: 90 s), so that the client always closes an idle
# connection first. With uvicorn's 5 s default a request sent on a connection the server is
# closing fails with a bare read error, which a rollout without retries (the demo's) reports
# as its failure.
LISTENER_KEEP_ALIVE_SEC = 120
# What one connection may make a server hold: any local process can reach these ports.
HTTP_LIMITS = HttpLimits()


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a server's main coroutine on uvloop when it is installed, else on asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A TCP socket bound to `host:port`; port 0 picks a free one (read it back with
    getsockname()). Not inheritable: a child that serves on it is given it with `pass_fds`."""
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto says
    # TCP, and without it every response that uvicorn writes in two parts stalls ~40 ms.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def uvicorn_config(
    app: Any, *, limits: HttpLimits = HTTP_LIMITS, **overrides: Any
) -> uvicorn.Config:
    """uvicorn serving `app` held to `limits`, its repeated warnings paced; `overrides` are
    further `uvicorn.Config` options."""
    pace_server_warnings()
    options: dict[str, Any] = {
        # httptools, the C parser (about a third less CPU per request than h11), with bounds.
        **limits.uvicorn_options(),
        "log_level": "warning",
        "access_log": False,
        "timeout_keep_alive": KEEP_ALIVE_SEC,
        "lifespan": "on",
    }
    options.update(overrides)
    return uvicorn.Config(app, **options)


def listener_options(shutdown_grace_sec: int = 2) -> dict[str, Any]:
    """The `uvicorn_config` overrides of an eval listener: no lifespan (a bare ASGI app),
    the listeners' keep-alive, and `shutdown_grace_sec` for requests in flight at a stop."""
    return {
        "lifespan": "off",
        "interface": "asgi3",  # told, not guessed: a bound method is not detected as one
        "timeout_keep_alive": LISTENER_KEEP_ALIVE_SEC,
        "timeout_graceful_shutdown": shutdown_grace_sec,
    }


class HostedServer(uvicorn.Server):
    """uvicorn hosted by a program that owns the process's signal handlers: it installs none."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class LoopbackServer:
    """`app` on `host:port` (0 = a free port) between `start()` and `stop()`, in this loop."""

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        limits: HttpLimits = HTTP_LIMITS,
        **overrides: Any,
    ) -> None:
        """`limits`: what one connection may make the server hold; `overrides`: further
        `uvicorn.Config` options (`listener_options()` for an eval listener)."""
        self._app = app
        self._host = host
        self._port = port
        self._limits = limits
        self._overrides = overrides
        self._socket: socket.socket | None = None
        self._server: HostedServer | None = None
        self._serving: asyncio.Future[None] | None = None
        self.base_url: str | None = None
        """`http://HOST:PORT` while serving."""

    async def start(self) -> str:
        """Bind and serve; returns the base URL. `OSError` when the port cannot be bound."""
        if self.base_url is not None:
            return self.base_url
        sock = self._socket = bind_socket(self._host, self._port)
        server = self._server = HostedServer(
            uvicorn_config(self._app, limits=self._limits, **self._overrides)
        )
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
        shown = f"[{self._host}]" if ":" in self._host else self._host
        self.base_url = f"http://{shown}:{sock.getsockname()[1]}"
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


@asynccontextmanager
async def serve_in_loop(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, **overrides: Any
) -> AsyncIterator[str]:
    """Run `app` on this event loop for the duration of the block; yields its base URL.
    `overrides` go to `uvicorn_config` (`limits`, or any `uvicorn.Config` option)."""
    server = LoopbackServer(app, host=host, port=port, **overrides)
    try:
        yield await server.start()
    finally:
        await server.stop()


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
    #: The address it binds: loopback, unless the listener says otherwise.
    _host: str = "127.0.0.1"

    async def start(self) -> str:
        """Bind its address and serve on this event loop; returns the base URL."""
        try:
            return await self._listener.start()
        except OSError as exc:
            where = f"{self._host}:{self._port}" if self._port else self._host
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


__all__ = [
    "HTTP_LIMITS",
    "KEEP_ALIVE_SEC",
    "LISTENER_KEEP_ALIVE_SEC",
    "HostedServer",
    "LoopbackServer",
    "LoopbackService",
    "bind_socket",
    "listener_options",
    "run",
    "serve_in_loop",
    "uvicorn_config",
]
