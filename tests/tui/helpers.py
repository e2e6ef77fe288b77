"""Helpers for the dashboard tests: the live eval a test drives, rows, and how to read what the
app draws. The fixtures that create them live in conftest.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from core.board import RolloutBoard
from core.types import RolloutStatus
from server_stub.registry import RolloutEntry
from tests.polling import eventually
from tui.app import DashboardApp, create_app
from tui.sources.live import LiveSource
from tui.widgets.event_log import EventLog

# The Echo workflow calls no model; the in-process stub still answers the run's preflight.
CHAT_URL = "stub"
SIZE = (150, 40)


@dataclass
class Live:
    """One live eval: the server app the test serves, and the dashboard's source."""

    server: FastAPI
    url: str
    source: LiveSource
    folder: Path
    serving: AsyncExitStack
    closing: asyncio.Future[None] | None = None

    async def take_server_down(self) -> None:
        """Stop the server as a crash would look to its clients: new connections refused.

        Uvicorn closes its listening socket at once, then drains (up to its drain time while
        rollouts run); the teardown cancels those server-side, which no client can see.
        """
        self.closing = asyncio.ensure_future(self.serving.aclose())
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 5.0
        while loop.time() < deadline:
            try:
                _reader, writer = await asyncio.open_connection(host, int(port))
            except OSError:
                break
            writer.close()
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the server kept accepting connections")

    @property
    def entries(self) -> dict[str, RolloutEntry]:
        """The server's registry: what the server itself knows of each rollout."""
        entries: dict[str, RolloutEntry] = self.server.state.rollout_futures
        return entries

    def server_status(self, rollout_id: str) -> str | None:
        entry = self.entries.get(rollout_id)
        return None if entry is None or entry.result is None else entry.result.status.value

    def row_id(self, row_index: int) -> str:
        """The rollout id of a dataset row's (first) attempt."""
        return next(r.rollout_id for r in self.source.board if r.row_index == row_index)


def row(**metadata: Any) -> dict[str, Any]:
    """A dataset row for Echo: answers metadata["answer"] (default "42") after metadata["sleep"]."""
    return {"user_prompt": "What is 6 * 7?", "ground_truth": "42", "metadata": metadata}


LiveFactory = Callable[..., Any]


def make_app(live: Live, **options: Any) -> DashboardApp:
    return create_app(live.source, export_dir=live.folder.parent, **options)


def row_text(app: DashboardApp, rollout_id: str) -> str:
    """The table line of a rollout as drawn now (it must be scrolled into view)."""
    table = app.table
    y = table.order.index(rollout_id) - int(table.scroll_offset.y) + 1
    assert 1 <= y < table.size.height, "the row is not in view"
    return table.render_line(y).text


def text_of(widget: Widget) -> str:
    """What a widget draws, as plain lines."""
    region = Region(0, 0, widget.size.width, widget.size.height)
    return "\n".join(strip.text.rstrip() for strip in widget.render_lines(region))


def screen_lines(app: DashboardApp) -> list[str]:
    """The whole screen as the terminal shows it: every widget and layer composed (what one
    widget draws cannot show a neighbour spilling into it)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def status_line(app: DashboardApp) -> str:
    return text_of(app.query_one("#status-line", Static))


def details_text(app: DashboardApp) -> str:
    return text_of(app.query_one("#details-body", Static))


def log_lines(app: DashboardApp) -> list[str]:
    return list(app.query_one(EventLog).lines)


def toasts(app: DashboardApp, severity: str = "error") -> list[str]:
    """The toasts shown now (only with `run_test(notifications=True)`)."""
    return [text_of(toast) for toast in app.screen.query(f"Toast.-{severity}")]


async def until(pilot: Pilot[Any], predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Let the app run until `predicate()` holds: tests/polling.py's one poll, paced by the
    pilot so the app repaints and handles its messages meanwhile."""
    what = getattr(predicate, "__qualname__", repr(predicate))
    await eventually(predicate, what, timeout=timeout, sleep=pilot.pause)


def selected_status(app: DashboardApp) -> RolloutStatus | None:
    """The status of the rollout under the cursor (None without one)."""
    record = app.selected()
    return None if record is None else record.status


async def running_rollout(pilot: Pilot[Any], app: DashboardApp) -> str:
    """Wait until the rollout under the cursor runs; its id."""
    await until(pilot, lambda: selected_status(app) == RolloutStatus.RUNNING)
    rollout_id = app.table.cursor_id
    assert rollout_id is not None
    return rollout_id


def board_view(board: RolloutBoard) -> dict[str, tuple[object, ...]]:
    """What a dashboard shows of each rollout on `board`, clock aside: rows, status, the phase
    track's marks and their sources, skip reasons, cancels, untracking, result, server, model
    calls; in the board's order. Two boards that show the same rollouts have the same view."""
    view: dict[str, tuple[object, ...]] = {}
    for record in board:
        result = record.latest_result
        view[record.rollout_id] = (
            record.row_index,
            record.run_index,
            record.source_row_index,
            record.display_status,
            tuple((mark.status.value, mark.source) for mark in record.timeline()),
            tuple(sorted((phase.value, why) for phase, why in record.skipped_phases().items())),
            tuple(cancel.disposition for cancel in record.cancels),
            record.untracked,
            None if result is None or result.sample is None else result.sample.reward,
            None if result is None or result.err_category is None else result.err_category.value,
            record.admission_error,
            record.server,
            record.model.calls,
        )
    return view


def counts_view(board: RolloutBoard) -> dict[str, int]:
    """The summary's counts, the clock-dependent stuck count aside."""
    counts = dict(board.counts())
    counts.pop("stuck", None)
    return counts
