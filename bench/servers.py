"""Benchmark servers, one per process: `rollout --impl ours|official` or `chat`.

Run inside the Python 3.12 conformance venv, which holds both osmosis-ai 0.3.8 and this
project, so that every pairing runs on the same interpreter. Prints `READY <port>` when
listening.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(1024)  # connections queue from READY on, before uvicorn starts accepting
    return sock


def rollout_app(impl: str) -> Any:
    os.environ["BENCH_PLUGIN_API"] = impl
    from workflow import AlwaysRight, ChatOnce  # type: ignore[import-not-found]

    if impl == "official":
        # Its default artifact root is ~/.osmosis; the per-rollout files are part of its cost,
        # so they are kept, but written to a scratch folder.
        os.environ.setdefault("_OSMOSIS_ROLLOUT_ARTIFACT_ROOT", tempfile.mkdtemp(prefix="bench-"))
        from osmosis_ai.rollout import (
            AgentWorkflowConfig,
            LocalBackend,
        )
        from osmosis_ai.rollout.server import (
            create_rollout_server,
        )
    else:
        from server_stub import AgentWorkflowConfig, LocalBackend, create_rollout_server
    backend = LocalBackend(
        workflow=ChatOnce,
        grader=AlwaysRight,
        workflow_config=AgentWorkflowConfig(name="bench"),  # no concurrency limit
    )
    return create_rollout_server(backend=backend)


def chat_app(latency_sec: float, jitter_sec: float) -> Any:
    from server_stub.llm import create_chat_app
    from server_stub.llm_behaviour import StubChatSettings
    from server_stub.llm_latency import FixedLatency, UniformLatency

    latency = (
        UniformLatency(latency_sec - jitter_sec, latency_sec + jitter_sec)
        if jitter_sec
        else FixedLatency(latency_sec)
    )
    return create_chat_app(StubChatSettings(latency=latency))


COUNT_PATH = "/__bench__/requests"


class RequestCounter:
    """Counts the HTTP requests a server answers; `GET /__bench__/requests` reads the count
    (not counted). Counted here, not by the client, so that every client is counted alike,
    including ours when it bypasses httpx and its hooks."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            if scope["path"] == COUNT_PATH:
                body = str(self.requests).encode()
                await send({"type": "http.response.start", "status": 200, "headers": []})
                await send({"type": "http.response.body", "body": body})
                return
            self.requests += 1
        await self.app(scope, receive, send)


async def serve(app: Any, sock: socket.socket, http: str) -> None:
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_keep_alive=2160,
        http=http,
    )
    await uvicorn.Server(config).serve(sockets=[sock])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("rollout", "chat"))
    parser.add_argument("--impl", choices=("ours", "official"), default="ours")
    parser.add_argument("--latency", type=float, default=0.0, help="chat: seconds per answer")
    parser.add_argument("--jitter", type=float, default=0.0, help="chat: latency +- uniform")
    parser.add_argument("--host", default="127.0.0.1", help="a loopback address to listen on")
    parser.add_argument("--port", type=int, default=0, help="0: a free one")
    args = parser.parse_args()
    if args.kind == "rollout":
        app = RequestCounter(rollout_app(args.impl))
    else:
        app = chat_app(args.latency, args.jitter)
    sock = _listen(args.host, args.port)
    print(f"READY {sock.getsockname()[1]}", flush=True)
    # Each server on the stack it installs with: the official `osmosis-ai[server]` brings
    # plain uvicorn (asyncio loop, h11 parser); ours brings uvloop and httptools.
    if args.impl == "ours" or args.kind == "chat":
        import uvloop

        uvloop.run(serve(app, sock, "httptools"))
    else:
        asyncio.run(serve(app, sock, "h11"))


if __name__ == "__main__":
    main()
