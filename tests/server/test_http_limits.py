"""What one connection may make the rollout server hold before its app (and the bearer check)
sees a request (`core.serving.http_limits`): real uvicorn on a loopback port, raw sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from core.serving.http_limits import HttpLimits
from core.serving.loopback import serve_in_loop
from server_stub import LocalBackend, create_rollout_server
from tests.hostile_heads import (
    SHORT_SEC,
    Check,
    Listener,
    Start,
    exchange,
    port_of,
    read_answer,
    read_to_close,
    status_of,
)
from tests.server.plugins import Echo, ExactMatch

KEY = "server-key-0123456789"


@pytest.fixture
def start() -> Start:
    """The rollout server, behind a bearer, held to `HttpLimits(**limits)`."""

    @asynccontextmanager
    async def serving(**limits: Any) -> AsyncIterator[Listener]:
        app = create_rollout_server(
            backend=LocalBackend(workflow=Echo, grader=ExactMatch), api_key=KEY
        )
        async with serve_in_loop(app, limits=HttpLimits(**limits)) as url:
            yield Listener(port_of(url), "/health", 200, (f"Authorization: Bearer {KEY}",))

    return serving


async def test_hostile_heads_are_bounded(start: Start, hostile_check: Check) -> None:
    """Each check of `tests.hostile_heads`, against the rollout server."""
    await hostile_check(start)


async def test_the_header_timeout_leaves_a_kept_alive_connection_alone(start: Start) -> None:
    """The wait between requests is the keep-alive timeout's, not the header timeout's."""
    async with start(header_timeout_sec=SHORT_SEC) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        try:
            writer.write(listener.request().replace(b"Connection: close", b"X-Kept: alive"))
            assert status_of(await read_answer(reader)) == 200
            # Idle since before a stalled head arrived, and still open after it was closed.
            stalled = await exchange(listener.port, b"GET / HTTP/1.1\r\n")
            assert status_of(stalled) == 408
            writer.write(listener.request())
            assert status_of(await read_to_close(reader)) == 200
        finally:
            writer.close()
