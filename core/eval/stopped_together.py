"""`StoppedTogether`: what a run starts (its model gateway, its servers), stopped at once.

Each stop waits on something of its own: a launched rollout server on its drain, the gateway
on uvicorn's shutdown steps (0.1 s each). One after the other, as an `AsyncExitStack` leaves
them, they add up at the end of every run; together they take as long as the slowest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import TypeVar

_T = TypeVar("_T")

_Exit = Callable[
    [type[BaseException] | None, BaseException | None, TracebackType | None],
    Awaitable[bool | None],
]


class StoppedTogether:
    """`enter_async_context` as an `AsyncExitStack` has it; leaving the block leaves every
    context entered at once. Each is left whatever the others do; the first error is raised
    after all have ended. None suppresses the block's error."""

    def __init__(self) -> None:
        self._exits: list[_Exit] = []

    async def enter_async_context(self, context: AbstractAsyncContextManager[_T]) -> _T:
        value = await context.__aenter__()
        self._exits.append(context.__aexit__)
        return value

    async def __aenter__(self) -> StoppedTogether:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        exits, self._exits = self._exits, []
        ended = await asyncio.gather(
            *(leave(exc_type, exc, tb) for leave in exits), return_exceptions=True
        )
        for outcome in ended:
            if isinstance(outcome, BaseException) and outcome is not exc:
                raise outcome
