"""`osmosis-tui serve`: the embedded rollout server as a standalone uvicorn process."""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass
from typing import Any

import uvicorn

from core.serving.loopback import bind_socket, serve_in_loop, uvicorn_config
from server_stub.app import create_rollout_server
from server_stub.local_backend import LocalBackend
from server_stub.workflow import AgentWorkflowConfig, ConcurrencyConfig


@dataclass(frozen=True)
class ServeOptions:
    host: str
    port: int
    api_key: str | None
    workflow: Any
    grader: Any
    max_concurrent: int
    max_pending: int | None
    result_wait_timeout_sec: float
    polling_lease_timeout_sec: float
    result_retention_sec: float
    demo: bool


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_app(options: ServeOptions) -> Any:
    backend = LocalBackend(
        workflow=options.workflow,
        grader=options.grader,
        workflow_config=AgentWorkflowConfig(
            name="osmosis-tui serve",
            concurrency=ConcurrencyConfig(max_concurrent=options.max_concurrent),
        ),
        max_pending=options.max_pending,
    )
    return create_rollout_server(
        backend=backend,
        api_key=options.api_key,
        result_wait_timeout_sec=options.result_wait_timeout_sec,
        polling_lease_timeout_sec=options.polling_lease_timeout_sec,
        result_retention_sec=options.result_retention_sec,
    )


async def serve(options: ServeOptions) -> None:
    """Serve until SIGINT/SIGTERM; with `demo`, the stub chat endpoint runs alongside."""
    if not is_loopback(options.host) and options.api_key is None:
        print(
            f"warning: serving on {options.host} without --api-key: anyone who can reach this "
            "address can start and cancel rollouts",
            file=sys.stderr,
        )
    app = build_app(options)
    sock = bind_socket(options.host, options.port)
    shown = f"[{options.host}]" if ":" in options.host else options.host
    config = uvicorn_config(app)
    server = uvicorn.Server(config)
    # Listening before the URL is printed: a script that reads it and connects at once is
    # queued until uvicorn accepts, never refused.
    sock.listen(config.backlog)
    print(f"rollout server: http://{shown}:{sock.getsockname()[1]}", flush=True)
    if not options.demo:
        await server.serve(sockets=[sock])
        return
    from server_stub.demo import demo_chat_settings
    from server_stub.llm import create_chat_app

    async with serve_in_loop(create_chat_app(demo_chat_settings())) as chat_url:
        print(f"stub chat endpoint: {chat_url}/v1  (POST <base>/chat/completions)", flush=True)
        await server.serve(sockets=[sock])
