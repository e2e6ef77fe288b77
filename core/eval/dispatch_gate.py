"""When the eval runner's workers may send the next work item (EVAL.md §7, and the dashboard's
pause and max-in-flight keys, DESIGN.md §2): never while dispatch is paused, and by no more
workers than the limit.

Neither cancels anything. While paused, the items in flight go on and no new one is sent.
A lowered limit only stops dispatching: the workers over it retire as they come back for
their next item, so the rollouts in flight drop to the new limit as they end. The limit is
capped by the servers' advertised capacity (`within_capacity`), as the run's first one is,
and by the gate's `ceiling`, the most rollouts the process has file descriptors for
(core/eval/servers/fd_budget.py); it is never below 1 (that would be a pause). `DispatchState` is
what a front end shows of it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass


def within_capacity(wanted: int, capacity: int | None) -> int:
    """`wanted` rollouts in flight, capped by the servers' advertised `capacity` (None: they
    advertise none, so nothing caps it); at least 1."""
    return max(1, min(wanted, capacity) if capacity else wanted)


@dataclass(frozen=True)
class DispatchState:
    """What a front end shows of the run's dispatch."""

    #: No new work item is sent (those in flight go on).
    paused: bool
    #: The most work items in flight at once; None until the servers are up (the run's
    #: first limit depends on their capacity).
    max_in_flight: int | None = None
    #: Work items in flight now.
    in_flight: int = 0
    #: Rollouts sent by hand so far: beside the work items, never in the progress.
    manual: int = 0
    #: Hedges sent so far (--hedge-after), those whose outcome was the item's, and work items
    #: requeued by the --requeue-stuck rule (core/eval/hedging.py).
    hedges_sent: int = 0
    hedges_won: int = 0
    requeued_by_rule: int = 0


class DispatchGate:
    """The pause and the limit the runner's workers look at before each work item."""

    def __init__(self, limit: int, *, ceiling: int | None = None) -> None:
        #: The most work items in flight the process can hold, whatever is asked (None: no
        #: bound).
        self.ceiling = ceiling
        #: How many workers may send work items at once: the run's max-in-flight.
        self.limit = self._bounded(limit)
        #: No new work item is sent while this holds.
        self.paused = False
        #: Workers waiting for the next change now (held by the pause).
        self.waiting = 0
        # Replaced at each change: everyone waiting on the old one wakes up.
        self._change = asyncio.Event()

    def pause(self) -> None:
        self.paused = True
        self.notify()

    def resume(self) -> None:
        self.paused = False
        self.notify()

    def set_limit(self, wanted: int, capacity: int | None) -> int:
        """Make `wanted` the limit, within the servers' `capacity` and the gate's ceiling;
        returns the limit set."""
        self.limit = self._bounded(within_capacity(wanted, capacity))
        self.notify()
        return self.limit

    def _bounded(self, limit: int) -> int:
        return max(1, limit if self.ceiling is None else min(limit, self.ceiling))

    def notify(self) -> None:
        """Wake every worker waiting for a change (also when dispatch stops for good)."""
        self._change.set()
        self._change = asyncio.Event()

    async def next_change(self) -> None:
        """Return at the next pause, resume, limit or `notify`."""
        self.waiting += 1
        try:
            await self._change.wait()
        finally:
            self.waiting -= 1
