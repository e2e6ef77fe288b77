"""Steering the run from the dashboard (`P`, `]`, `[`, `R`, and `d` on the servers panel, `V`):
pause and resume dispatch, raise or lower max-in-flight, drain a server and undrain it, and
requeue rollouts after one confirmation. Each goes through the
source, which records it in the run's logs.txt and transitions.jsonl; the event log says what
became of it.

Each runs in a worker: a dashboard attached from another process waits for the run's answer,
and the screen goes on meanwhile. They take their turns in the order the keys were pressed,
each reading the dispatch the one before left (two quick `]` are two steps up)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from rich.text import Text

from core.eval.attach.unix_socket import ControlError
from core.eval.timeline.model import DRAINED
from core.rollout_record import RolloutRecord
from tui.screens.dialogs import ConfirmScreen
from tui.sources.base import ServerView
from tui.widgets.format import money, plain

if TYPE_CHECKING:
    from tui.flows.host import FlowHost

#: What a source raises when the run does not do what was asked: the run's own refusal
#: (`ControlRefused`, a RuntimeError, as a replay's), or, from an attached dashboard, the
#: run's answer or a connection that ended (`ControlActionError`, `ControlLost`).
NOT_DONE = (RuntimeError, ControlError)
#: The topic of the max-in-flight notices: each `]` or `[` updates the one toast (`report`).
MAX_IN_FLIGHT = "max-in-flight"
#: `$` raises the budget by this share of it: a few presses reach any sum, none overshoots far.
BUDGET_STEP = 0.25


def can_requeue(record: RolloutRecord) -> bool:
    """A work item's rollout that has not finished (in flight, or untracked and left to its
    lease on the server), not requeued already."""
    return (
        not record.manual
        and record.run_index is not None
        and record.client is not None
        and not record.finished
        and record.requeued_as is None
    )


class ControlFlow:
    """Acts on the run's dispatch through the source, and says what it did."""

    def __init__(self, app: FlowHost) -> None:
        self.app = app
        self._turn = asyncio.Lock()

    def toggle_pause(self) -> None:
        """`P`: pause dispatch, or resume it."""
        self._start(self._toggle_pause)

    def step_limit(self, step: int) -> None:
        """`]` and `[`: max-in-flight one up or down."""
        self._start(lambda: self._step_limit(step))

    def raise_budget(self) -> None:
        """`$`: the run's budget a quarter higher."""
        self._start(self._raise_budget)

    def toggle_drain(self, server: ServerView) -> None:
        """`d` on the servers panel: drain `server` (no new work item is sent there), or
        undrain it."""
        self._start(lambda: self._toggle_drain(server))

    def _start(self, action: Callable[[], Awaitable[None]]) -> None:
        async def in_turn() -> None:
            async with self._turn:
                await action()

        self.app.run_worker(in_turn(), group="control", exit_on_error=False)

    async def _toggle_pause(self) -> None:
        app, source = self.app, self.app.source
        state = source.dispatch()
        if state is None:
            return
        try:
            await source.pause_dispatch(not state.paused)
        except NOT_DONE as exc:
            doing = "resume" if state.paused else "pause"
            app.report(f"could not {doing} dispatch: {exc}", severity="error")
            return
        if state.paused:
            app.report("dispatch resumed")
        else:
            app.report("dispatch paused: no new work item is sent; those in flight go on")
        app.update_summary()

    async def _raise_budget(self) -> None:
        app, source = self.app, self.app.source
        budget = source.spend().budget_usd
        if budget is None:
            return
        raised = budget * (1 + BUDGET_STEP)
        try:
            await source.set_budget(raised)
        except NOT_DONE as exc:
            app.report(f"could not raise the budget: {exc}", severity="error")
            return
        app.report(f"budget {money(budget)} -> {money(raised)}")
        app.update_summary()

    async def _toggle_drain(self, server: ServerView) -> None:
        app, url = self.app, server.url
        drain = server.state != DRAINED
        try:
            await app.source.drain(url, drained=drain)
        except NOT_DONE as exc:
            doing = "drain" if drain else "undrain"
            app.report(f"could not {doing} {url}: {exc}", severity="error")
            return
        if drain:
            app.report(
                f"server {url} drained: no new work item is sent there; those in flight go on"
            )
        else:
            app.report(f"server {url} undrained: work items are sent there again")
        app.update_summary()

    async def _step_limit(self, step: int) -> None:
        app, source = self.app, self.app.source
        state = source.dispatch()
        if state is None or state.max_in_flight is None:
            return
        try:
            limit = await source.set_max_in_flight(state.max_in_flight + step)
        except NOT_DONE as exc:
            app.report(
                f"could not change max in flight: {exc}", severity="error", topic=MAX_IN_FLIGHT
            )
            return
        if limit == state.max_in_flight:
            bound = "the servers' capacity" if step > 0 else "the least there is"
            app.report(
                f"max in flight stays {limit}: {bound}", severity="warning", topic=MAX_IN_FLIGHT
            )
        elif limit < state.max_in_flight and state.in_flight > limit:
            app.report(
                f"max in flight {limit}: nothing is cancelled; no new work item is sent "
                f"until fewer than {limit} are in flight",
                topic=MAX_IN_FLIGHT,
            )
        else:
            app.report(f"max in flight {limit}", topic=MAX_IN_FLIGHT)
        app.update_summary()

    def ask_requeue(self) -> None:
        """`R`: the marked rollouts that can be requeued, or, with none marked, the selected."""
        app, table = self.app, self.app.table
        if table.marks:
            records = [record for record in app.board if record.rollout_id in table.marks]
        else:
            selected = app.selected()
            records = [] if selected is None else [selected]
        targets = [record for record in records if can_requeue(record)]
        if not targets:
            app.report(
                "nothing to requeue: only a work item's rollout that has not finished can be",
                severity="warning",
            )
            return
        if len(targets) == 1:
            record = targets[0]
            question = Text.assemble(
                "Requeue rollout ",
                plain(record.rollout_id, "bold"),
                f" (row {record.row_index}, try {record.run_index})?\n\n",
                "It is cancelled on its server, and its work item runs again under a new id; "
                "the cancelled attempt is not the item's result.",
            )
        else:
            question = Text(
                f"Requeue {len(targets)} marked rollouts?\n\nEach is cancelled on its server, "
                "and its work item runs again under a new id."
            )
        ids = [record.rollout_id for record in targets]

        def answered(yes: bool | None) -> None:
            if yes:
                self._start(lambda: self._requeue(ids))

        app.push_screen(ConfirmScreen(question), answered)

    async def _requeue(self, ids: list[str]) -> None:
        app = self.app
        app.table.clear_marks(ids)
        for rollout_id in ids:
            try:
                new_id = await app.source.requeue(rollout_id)
            except NOT_DONE as exc:
                app.report(f"could not requeue {rollout_id[:10]}: {exc}", severity="error")
                continue
            paused = (state := app.source.dispatch()) is not None and state.paused
            app.report(
                f"requeued {rollout_id[:10]} as {new_id[:10]}"
                + (" (sent once dispatch resumes)" if paused else "")
            )
        app.repaint()
