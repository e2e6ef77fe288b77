"""`StoppedTogether`: every context it holds is left at once, each whatever the others do."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from core.eval.stopped_together import StoppedTogether

# Far longer than the other context's stop takes (a few event-loop turns).
STUCK_SEC = 10.0


async def test_each_context_is_left_while_the_others_are_still_stopping() -> None:
    first_stopping, second_stopping = asyncio.Event(), asyncio.Event()
    left: list[str] = []

    @asynccontextmanager
    async def member(name: str, mine: asyncio.Event, other: asyncio.Event) -> AsyncIterator[str]:
        yield name
        mine.set()
        # Left one after the other, the first would wait for ever: the bound turns that
        # hang into this test's failure.
        await asyncio.wait_for(other.wait(), STUCK_SEC)
        left.append(name)

    async with StoppedTogether() as together:
        assert (
            await together.enter_async_context(member("gateway", first_stopping, second_stopping))
            == "gateway"
        )
        await together.enter_async_context(member("server", second_stopping, first_stopping))
        assert left == []
    assert sorted(left) == ["gateway", "server"]


async def test_a_failing_stop_is_raised_once_the_others_have_stopped() -> None:
    stopped: list[str] = []

    @asynccontextmanager
    async def failing() -> AsyncIterator[None]:
        yield
        raise OSError("cannot stop")

    @asynccontextmanager
    async def slow() -> AsyncIterator[None]:
        yield
        await asyncio.sleep(0.05)
        stopped.append("slow")

    with pytest.raises(OSError, match="cannot stop"):
        async with StoppedTogether() as together:
            await together.enter_async_context(failing())
            await together.enter_async_context(slow())
    assert stopped == ["slow"]


async def test_the_blocks_error_reaches_every_context_and_goes_on() -> None:
    seen: list[BaseException] = []

    @asynccontextmanager
    async def watching() -> AsyncIterator[None]:
        try:
            yield
        except BaseException as exc:
            seen.append(exc)
            raise

    with pytest.raises(RuntimeError, match="the run failed"):
        async with StoppedTogether() as together:
            await together.enter_async_context(watching())
            await together.enter_async_context(watching())
            raise RuntimeError("the run failed")
    assert [str(exc) for exc in seen] == ["the run failed", "the run failed"]


async def test_a_context_that_fails_to_start_is_not_left_and_the_others_are() -> None:
    left: list[str] = []

    @asynccontextmanager
    async def started() -> AsyncIterator[None]:
        try:
            yield
        finally:
            left.append("started")

    @asynccontextmanager
    async def refused() -> AsyncIterator[None]:
        raise ConnectionRefusedError("port taken")
        yield  # pragma: no cover

    with pytest.raises(ConnectionRefusedError):
        async with StoppedTogether() as together:
            await together.enter_async_context(started())
            await together.enter_async_context(refused())
    assert left == ["started"]
