"""Serving an ASGI app with uvicorn on a loopback port, inside the running event loop."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any, TypeVar

import uvicorn

from server_stub.http_limits import HttpLimits

T = TypeVar("T")

# Outlives a 2100 s load-balancer idle timeout, as the official entrypoints configure it.
KEEP_ALIVE_SEC = 2160
# What one connection may make the servers hold (server_stub.http_limits).
HTTP_LIMITS = HttpLimits()


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run a server's main coroutine on uvloop when it is installed, else on asyncio."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    return uvloop.run(main)


def bind_socket(host: str = "127.0.0.1", port: int = 0) -> socket.socket:
    """A listening TCP socket; port 0 picks a free one (read it back with getsockname())."""
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets whose proto says
    # TCP, and without it every response that uvicorn writes in two parts stalls ~40 ms.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def uvicorn_config(
    app: Any, *, limits: HttpLimits = HTTP_LIMITS, **overrides: Any
) -> uvicorn.Config:
    """uvicorn serving `app` held to `limits`; `overrides` are further `uvicorn.Config` options."""
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


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers to its owner."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serve_in_loop(
    app: Any, *, host: str = "127.0.0.1", port: int = 0, **overrides: Any
) -> AsyncIterator[str]:
    """Run `app` on this event loop for the duration of the block; yields its base URL.
    `overrides` go to `uvicorn_config` (`limits`, or any `uvicorn.Config` option)."""
    sock = bind_socket(host, port)
    server = EmbeddedServer(uvicorn_config(app, **overrides))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            if task.done():
                task.result()
                raise RuntimeError("uvicorn stopped before it started")
            await asyncio.sleep(0.005)
        bound_port = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        yield f"http://{shown}:{bound_port}"
    finally:
        server.should_exit = True
        await task
        sock.close()
