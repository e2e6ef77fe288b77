"""What one connection may make the event receiver hold before its endpoint sees a request
(`server_stub.http_limits`, which the eval's listeners use too): real uvicorn on a loopback
port, raw sockets."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from core.eval.embedded import HttpLimits
from core.eval.event_receiver import LOGS_PATH, EventReceiver
from core.eval.ownership_events import OwnershipEvent
from tests.hostile_heads import (
    Listener,
    Start,
    check_a_stalled_head_is_closed,
    check_an_endless_header_is_cut_off,
    check_half_open_connections_are_reclaimed,
    check_half_open_connections_past_the_limit,
    check_too_many_headers_are_refused,
    port_of,
)


@pytest.fixture
def start(events: list[OwnershipEvent]) -> Start:
    """The receiver held to `HttpLimits(**limits)`; a `GET` of its endpoint is answered 405."""

    @asynccontextmanager
    async def serving(**limits: Any) -> AsyncIterator[Listener]:
        async with EventReceiver(events.append, http_limits=HttpLimits(**limits)) as receiver:
            yield Listener(port_of(receiver.endpoint), LOGS_PATH, 405)

    return serving


async def test_an_endless_header_value_is_cut_off_while_others_are_answered(
    start: Start,
) -> None:
    await check_an_endless_header_is_cut_off(start)


async def test_more_headers_than_the_limit_are_refused_431(start: Start) -> None:
    await check_too_many_headers_are_refused(start)


async def test_a_stalled_or_trickled_head_is_closed_after_the_header_timeout(
    start: Start,
) -> None:
    await check_a_stalled_head_is_closed(start)


async def test_half_open_connections_past_the_limit_are_refused_not_waited_for(
    start: Start,
) -> None:
    await check_half_open_connections_past_the_limit(start)


async def test_half_open_connections_are_reclaimed_by_the_header_timeout(start: Start) -> None:
    await check_half_open_connections_are_reclaimed(start)
