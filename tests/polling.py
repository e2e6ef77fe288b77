"""The one way the tests wait for something to happen: poll a condition until it holds, within a
bound, and fail saying what never happened. A fixed sleep would be too short on a loaded machine
and too long everywhere else.

`eventually` waits on the running event loop (the awaited sleep lets the code under test run);
`eventually_sync` blocks the calling thread, for conditions that other processes or threads
make true.
"""

from __future__ import annotations

import asyncio
import reprlib
import time
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

import pytest

T = TypeVar("T")

TIMEOUT_SEC = 60.0
INTERVAL_SEC = 0.05


async def eventually(
    condition: Callable[[], T],
    what: str,
    *,
    timeout: float = TIMEOUT_SEC,
    interval: float = INTERVAL_SEC,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> T:
    """Call `condition` every `interval` seconds until it returns something truthy, and return
    that; fail after `timeout` seconds, naming `what` was awaited. `sleep` is how to let the
    code under test run meanwhile (a Textual test passes `pilot.pause`)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            _timed_out(what, timeout, value)
        await sleep(interval)


def eventually_sync(
    condition: Callable[[], T],
    what: str,
    *,
    timeout: float = TIMEOUT_SEC,
    interval: float = INTERVAL_SEC,
    explain: Callable[[], str] | None = None,
) -> T:
    """`eventually` for a thread that has no event loop to yield to: sleeps between calls.
    `explain` says what else the failure should show (another process's output, say)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            _timed_out(what, timeout, value, explain() if explain is not None else "")
        time.sleep(interval)


def _timed_out(what: str, timeout: float, last: object, explained: str = "") -> NoReturn:
    message = f"timed out after {timeout} s waiting for {what} (last seen: {reprlib.repr(last)})"
    pytest.fail(f"{message}\n{explained}" if explained else message)
