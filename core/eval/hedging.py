"""The long tail of a run (issue 28): hedging a slow rollout, and requeueing a stuck one by rule.

A hedge is a requeue that leaves the first attempt running: the work item goes to the front of
the queue under a new id (counted against max-in-flight like any attempt, sent to another server
when the pool has one), and the two attempts race. The first of the two to *finish* with a
result of its own (a success, or a failure its server reported) is the item's result, and the
other is cancelled on its server: a hedge buys time, never a second chance to pass, which would
lift the run's pass rate above what one attempt per item measures. An attempt that ends without
a result of its own (cancelled, its polling lost, the item's deadline passed on it) leaves the
item to the other. Either way exactly one outcome is journaled per item (`EvalRunner._claim`
decides, in one step of the event loop), and an item killed between the two has no record, so
a resume runs it once.

Requeue by rule (`--requeue-stuck N`) does what the dashboard's requeue key does, by itself, to
a work item whose rollout the board flags stuck, at most N times per item.

`TailRules.tick` applies both; the session calls it on a short interval while the run goes on.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from core.eval.results.records import ItemKey
    from core.eval.runner import EvalRunner
    from core.eval.steering import RunControl

# How often the rules look at what is in flight (s): a hedge or rule requeue is late by this much
# at most, which is small next to any threshold worth setting.
TICK_SEC = 0.25


@dataclass(frozen=True)
class HedgeAfter:
    """When a rollout in flight gets a hedge: after `seconds`, or after `factor` times the
    median duration of the items finished so far (never before one finished)."""

    seconds: float | None = None
    factor: float | None = None

    def threshold(self, median: float | None) -> float | None:
        """Seconds in flight after which a rollout is hedged, given the `median` time an item
        took so far (None: none finished yet); None while it cannot be said."""
        if self.seconds is not None:
            return self.seconds
        if median is None or self.factor is None:
            return None
        return self.factor * median

    def __str__(self) -> str:
        return f"{self.factor:g}x" if self.factor is not None else f"{self.seconds:g}"


@dataclass
class HedgeBook:
    """The hedges of one run: which items had one (at most one each), the hedge attempts'
    ids, and how many were sent and won (a hedge wins when its outcome is the item's)."""

    hedged: set[ItemKey] = field(default_factory=set)
    #: The first attempt of each hedge, by the hedge's id.
    hedge_of: dict[str, str] = field(default_factory=dict)
    #: The server each hedged item's first attempt ran on (a hedge goes elsewhere), by key.
    avoid: dict[ItemKey, str] = field(default_factory=dict)
    #: The hedged items whose outcome was claimed: a late attempt of theirs is cancelled.
    settled: set[ItemKey] = field(default_factory=set)
    sent: int = 0
    won: int = 0
    #: Work items requeued by the `--requeue-stuck` rule, and how often each.
    rule_requeues: dict[ItemKey, int] = field(default_factory=dict)

    @property
    def requeued_by_rule(self) -> int:
        return sum(self.rule_requeues.values())

    def counts(self) -> dict[str, int]:
        """What `--json` reports of them (the `osmosis_tui.tail` key)."""
        return {
            "hedges_sent": self.sent,
            "hedges_won": self.won,
            "requeued_by_rule": self.requeued_by_rule,
        }


@dataclass(frozen=True)
class TailRules:
    """The run's `--hedge-after` and `--requeue-stuck`, applied to its runner through its
    controls (so that each action is journaled as a dashboard's would be)."""

    runner: EvalRunner
    control: RunControl
    hedge_after: HedgeAfter | None = None
    requeue_stuck: int = 0

    @property
    def active(self) -> bool:
        return self.hedge_after is not None or self.requeue_stuck > 0

    async def run(self) -> None:
        """Apply the rules until cancelled (the session cancels it when the run ends)."""
        while True:
            await asyncio.sleep(TICK_SEC)
            self.tick(time.monotonic())

    def tick(self, now: float) -> None:
        runner = self.runner
        if not runner.dispatching:
            return
        if self.requeue_stuck > 0:
            book = runner.hedges
            for rollout_id in runner.board.stuck_ids(now):
                key = runner.attempt_key(rollout_id)
                # A hedged item has its second attempt already: the race settles it.
                if key is None or key in book.hedged:
                    continue
                if book.rule_requeues.get(key, 0) >= self.requeue_stuck:
                    continue
                book.rule_requeues[key] = book.rule_requeues.get(key, 0) + 1
                self.control.requeue(rollout_id, by_rule=True)
        if self.hedge_after is not None:
            for rollout_id in runner.due_for_hedge(self.hedge_after, now):
                self.control.hedge(rollout_id)
