"""The zero-setup demo, in-process: its rollout server, the stub chat endpoint, its dataset.

Both servers are server_stub apps on free loopback ports. This is the one module of
`core.eval` that imports `server_stub` (DESIGN.md §1, the Embedded part); everything else in
the eval engine reaches rollout servers over HTTP only. The eval's own listeners (the model
gateway, the event receiver) take server_stub's bounds on request heads and connections,
`HttpLimits`, from here too: one hardened uvicorn set-up for every server we run.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import server_stub
from server_stub.app import create_rollout_server
from server_stub.demo import (
    ExactMatchGrader,
    MultiplyWorkflow,
    aclose_chat_client,
    demo_chat_settings,
    write_demo_dataset,
)
from server_stub.http_limits import HttpLimits
from server_stub.llm import create_chat_app
from server_stub.llm_behaviour import BEHAVIOUR_HEADER
from server_stub.local_backend import LocalBackend
from server_stub.serving import serve_in_loop
from server_stub.workflow import AgentWorkflowConfig, ConcurrencyConfig

# Slots for the demo: the few long-running rows hold three, the rest keep flowing, and the
# table has time to show rollouts moving through their phases.
DEMO_MAX_CONCURRENT = 8
CHAT_SHUTDOWN_GRACE_SEC = 1.0
# The demo rollout as a run's manifest names it: its code is server_stub's own.
DEMO_ROLLOUT_ENTRYPOINT = "demo.py"


@asynccontextmanager
async def stub_chat_endpoint() -> AsyncIterator[str]:
    """The stub OpenAI-compatible endpoint; yields the base URL rollouts append paths to."""
    # Chat calls still open at the end belong to rollouts the run left behind (an interrupt
    # that leaves them running, a server ignoring a cancel): not worth waiting for.
    async with serve_in_loop(
        create_chat_app(demo_chat_settings()), timeout_graceful_shutdown=CHAT_SHUTDOWN_GRACE_SEC
    ) as url:
        yield f"{url}/v1"


@asynccontextmanager
async def demo_rollout_server(
    *,
    max_concurrent: int = DEMO_MAX_CONCURRENT,
    artifact_root: Path | None = None,
    otlp_endpoint: str = "",
    preview_root: str = "",
    api_key: str | None = None,
) -> AsyncIterator[str]:
    """server_stub with the demo workflow and grader; yields its URL.

    `otlp_endpoint` and `preview_root` turn its feeds on (PROTOCOL.md §8), as the variables
    do for a launched server; empty, they stay off whatever the environment says. With
    `api_key`, every request needs it as its bearer (the eval gives one of its own, so that
    no other local process can cancel the run's rollouts)."""
    backend = LocalBackend(
        workflow=MultiplyWorkflow,
        grader=ExactMatchGrader,
        workflow_config=AgentWorkflowConfig(
            name="demo", concurrency=ConcurrencyConfig(max_concurrent=max_concurrent)
        ),
        artifact_root=artifact_root,
    )
    app = create_rollout_server(
        backend=backend,
        configure_logging=False,
        otlp_endpoint=otlp_endpoint,
        preview_root=preview_root,
        api_key=api_key,
    )
    registry = app.state.rollout_server.registry
    try:
        async with serve_in_loop(app) as url:
            try:
                yield url
            finally:
                # The run is over and this server dies with it: whatever it still runs (a
                # rollout untracked or left behind) is cancelled now, not after the 10 s
                # shutdown drain a shared server owes its other clients.
                registry.cancel(registry.select(None, None, True))
    finally:
        await aclose_chat_client()


def refresh_demo_dataset(target: Path) -> None:
    """Write the demo dataset at `target`, unless it already holds exactly these rows.

    Always this version's rows: an older osmosis-tui may have left other rows there. An
    `OSError` means the file could not be written.
    """
    fresh = write_demo_dataset(target.with_name(f".{target.name}.{os.getpid()}.tmp"))
    if target.is_file() and target.read_bytes() == fresh.read_bytes():
        fresh.unlink()
    else:
        os.replace(fresh, target)  # a run starting meanwhile reads the old rows or the new


def demo_rollout_source() -> Path:
    """The folder whose files are the demo rollout's code (for its manifest's source digest)."""
    return Path(server_stub.__file__).resolve().parent


__all__ = [
    # The demo rows' per-request behaviour, which the gateway passes on to the stub model.
    "BEHAVIOUR_HEADER",
    "DEMO_ROLLOUT_ENTRYPOINT",
    # server_stub's bounds on request heads and connections, for the eval's own listeners.
    "HttpLimits",
    "demo_rollout_server",
    "demo_rollout_source",
    "refresh_demo_dataset",
    "stub_chat_endpoint",
]
