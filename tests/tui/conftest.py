"""Fixtures for the dashboard tests: a live eval over a real server_stub, and a clean terminal.

Behaviour tests run the real parts: an `EvalSource` over `server_stub` served by uvicorn on a
free loopback port that the test owns, so the test can read the server's own registry
(`app.state.rollout_futures`) to check what happened server-side.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Static

from core.eval import EvalRequest, prepare
from server_stub import AgentWorkflowConfig, ConcurrencyConfig, LocalBackend, create_rollout_server
from server_stub.registry import RolloutEntry
from server_stub.serving import serve_in_loop
from tests.server.plugins import Echo, ExactMatch
from tui.app import DashboardApp, create_app
from tui.sources.live import EvalSource
from tui.widgets.event_log import EventLog

# The Echo workflow needs no chat endpoint; the request still carries a URL.
DUMMY_CHAT_URL = "http://127.0.0.1:9/v1"
SIZE = (150, 40)


@dataclass
class Live:
    """One live eval: the server app the test serves, and the dashboard's source."""

    server: FastAPI
    url: str
    source: EvalSource
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


@pytest.fixture
def live_eval(tmp_path: Path) -> LiveFactory:
    """`async with live_eval(rows, **request) as live:` serves a fresh server_stub and
    prepares an eval of `rows` against it (the app is created by the test)."""

    @asynccontextmanager
    async def start(
        rows: list[dict[str, Any]], *, result_wait: float = 0.3, **request: Any
    ) -> AsyncIterator[Live]:
        backend = LocalBackend(
            workflow=Echo,
            grader=ExactMatch,
            workflow_config=AgentWorkflowConfig(
                name="echo", concurrency=ConcurrencyConfig(max_concurrent=16)
            ),
        )
        # A short long-poll hold, so status changes show up within a fraction of a second.
        server = create_rollout_server(
            backend=backend, configure_logging=False, result_wait_timeout_sec=result_wait
        )
        dataset = tmp_path / "rows.jsonl"
        dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
        serving = AsyncExitStack()
        url = await serving.enter_async_context(serve_in_loop(server))
        live: Live | None = None
        try:
            plan = prepare(
                EvalRequest(
                    servers=(url,),
                    dataset_file=dataset,
                    output=tmp_path / "out",
                    chat_url=DUMMY_CHAT_URL,
                    name="live",
                    **{"max_in_flight": 8, **request},
                )
            )
            live = Live(server, url, EvalSource(plan), tmp_path / "out" / "live", serving)
            yield live
        finally:
            # Rollouts still running would hold the server's shutdown for its drain time.
            registry = server.state.rollout_server.registry
            registry.cancel(list(registry.entries))
            if live is not None and live.closing is not None:
                await live.closing
            await serving.aclose()

    return start


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
    """Let the app run until `predicate()` holds (a bounded poll, never a fixed sleep)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        await pilot.pause(0.05)


@pytest.fixture
def clean_terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Snapshots must not depend on the developer's terminal settings."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)
    yield
