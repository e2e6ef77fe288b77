"""`cancel_and_wait`: end a task that may still run, and wait until it has."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel `task` if it still runs and wait for it to end; its error, if any, is retrieved
    (what it was is already reported by whoever awaited it, or irrelevant once it is ended).

    Through `asyncio.wait`, never `await task`: should the waiting task be cancelled too (a
    rollout gone mid-stream cancels the gateway's handler again and again), awaiting `task`
    itself would pass each of those cancellations on to it and cut its own cleanup short.
    """
    if not task.done():
        task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()


__all__ = ["cancel_and_wait"]
