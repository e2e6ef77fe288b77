"""What one connection may make the event receiver hold before its endpoint sees a request
(`core.serving.http_limits`, which the eval's listeners use too): real uvicorn on a loopback
port, raw sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from core.eval.events.ownership import OwnershipEvent
from core.eval.events.receiver import LOGS_PATH, EventReceiver
from core.serving.http_limits import HttpLimits
from tests.hostile_heads import Check, Listener, Start, port_of


@pytest.fixture
def start(events: list[OwnershipEvent]) -> Start:
    """The receiver held to `HttpLimits(**limits)`; a `GET` of its endpoint is answered 405."""

    @asynccontextmanager
    async def serving(**limits: Any) -> AsyncIterator[Listener]:
        async with EventReceiver(events.append, http_limits=HttpLimits(**limits)) as receiver:
            yield Listener(port_of(receiver.endpoint), LOGS_PATH, 405)

    return serving


async def test_hostile_heads_are_bounded(start: Start, hostile_check: Check) -> None:
    """Each check of `tests.hostile_heads`, against the event receiver."""
    await hostile_check(start)
