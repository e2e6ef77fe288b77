"""The dashboard's view of `osmosis-tui watch`: every rollout of the servers that send their
ownership events to it (`core.eval.watch`), whoever submitted them.

Nothing is sent from here, so the keys that send or steer a run are not offered; a rollout
can be cancelled on its server when the watch knows servers (`--server`). The counts are of
rollouts, not work items: a watched rollout has no result here (its caller has it), so the
progress says how many ended and nothing of a pass rate or reward.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from core.eval.cost.spend import Spend, board_spend
from core.eval.dispatch_gate import DispatchState
from core.eval.results.metrics import Progress
from core.eval.results.records import ItemKey, ItemResult
from core.eval.watch import WatchPlan, WatchSession
from tui.sources.base import NewRollout, RunEnding, ServerView, slot_view
from tui.sources.pass_rule import PassRule
from tui.sources.watch_progress import rollouts_ended

#: Why the keys that send or steer work are not offered.
NOTHING_SENT = "a watch sends nothing: the rollouts are their callers'"


def health_text(health: Mapping[str, Any]) -> str:
    """What a server's /health says of its load, in a few words: `cap 8 run 3 queue 1`;
    only what it said (the official backend's default says nothing of it)."""
    concurrency = health.get("concurrency")
    said = []
    if isinstance(concurrency, dict):
        for key, word in (("max_concurrent", "cap"), ("running", "run"), ("queued", "queue")):
            value = concurrency.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                said.append(f"{word} {value}")
    return " ".join(said)


class WatchSource:
    """A `WatchSession` for the dashboard."""

    def __init__(self, plan: WatchPlan, *, on_notice: Callable[[str], None] | None = None) -> None:
        self.session = WatchSession(plan, on_notice=on_notice)
        self.board = self.session.board
        self._running: asyncio.Task[None] | None = None
        self.pass_rule = PassRule(1, 1.0)

    @property
    def playback(self) -> None:
        return None

    @property
    def sends_by_hand(self) -> bool:
        return False

    @property
    def is_watch(self) -> bool:
        return True

    @property
    def detaches_on_quit(self) -> bool:
        return True  # the rollouts run on whoever sent them: leaving stops only the watch

    @property
    def servers_stop_with_run(self) -> bool:
        return False

    @property
    def title(self) -> str:
        return "watch"

    @property
    def subtitle(self) -> str:
        session = self.session
        endpoint = session.endpoint
        if endpoint is None:
            return "starting"
        # Short enough for 80 columns beside a server; the whole setting is printed at start.
        said = f"events at {endpoint}"
        for slot in session.slots:
            load = health_text(slot.health)
            if load:
                said += f" · {slot.url.removeprefix('http://')} {load}"
        return said

    @property
    def read_only(self) -> bool:
        return False

    @property
    def finished(self) -> bool:
        return self.session.ended

    @property
    def can_send(self) -> bool:
        # Only cancels are sent (to the `--server` servers, whose clients are closed at the end).
        return not self.session.ended

    @property
    def preview_root(self) -> Path | None:
        return self.session.plan.previews

    @property
    def trials_root(self) -> Path | None:
        return None

    @property
    def ending(self) -> RunEnding | None:
        if not self.session.ended:
            return None
        output = self.session.plan.output
        return RunEnding(
            "The watch ended" + (f": recorded in {output}" if output is not None else ""),
            next_steps=(f"osmosis-tui replay {output}",) if output is not None else (),
        )

    def progress(self) -> Progress:
        return rollouts_ended(self.board)

    def carried_results(self) -> Mapping[ItemKey, ItemResult]:
        return {}

    def servers(self) -> list[ServerView]:
        ended = self.session.ended
        return [slot_view(slot, slot.state, watched=not ended) for slot in self.session.slots]

    @property
    def event_silence(self) -> None:
        return None

    @property
    def baseline(self) -> None:
        return None

    def baseline_counts(self) -> None:
        return None

    def spend(self) -> Spend:
        return board_spend(self.board.total_cost_usd, self.progress())

    async def run(self) -> None:
        if self._running is None:
            self._running = asyncio.ensure_future(self.session.run())
        await asyncio.shield(self._running)

    async def interrupt(self, *, cancel_in_flight: bool) -> None:
        self.session.stop()

    async def close(self) -> None:
        self.session.stop()
        if self._running is not None:
            with contextlib.suppress(Exception):
                await self._running

    async def submit(self, rollout: NewRollout) -> str:
        raise ValueError(NOTHING_SENT)

    async def rerun(self, rollout_id: str) -> str:
        raise ValueError(NOTHING_SENT)

    def dispatch(self) -> DispatchState | None:
        return None

    async def pause_dispatch(self, paused: bool) -> None:
        raise ValueError(NOTHING_SENT)

    async def set_max_in_flight(self, limit: int) -> int:
        raise ValueError(NOTHING_SENT)

    async def set_budget(self, usd: float) -> None:
        raise ValueError(NOTHING_SENT)

    async def requeue(self, rollout_id: str) -> str:
        raise ValueError(NOTHING_SENT)

    async def drain(self, url: str, *, drained: bool) -> None:
        raise ValueError(NOTHING_SENT)
