"""Errors never end the dashboard: each becomes a toast, an event-log line and a row flag."""

from __future__ import annotations

import asyncio
import json

import pytest
from rich.console import Console, ConsoleOptions, RenderResult
from textual.pilot import Pilot

from tests.tui.helpers import (
    SIZE,
    LiveFactory,
    log_lines,
    make_app,
    row,
    row_text,
    running_rollout,
    toasts,
    until,
)
from tui.commands.dashboard import run_and_close
from tui.screens.dialogs import ConfirmScreen

IN_FLIGHT = {"sleep": 30}


async def test_a_cancel_that_fails_because_the_server_is_gone(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            rollout_id = await running_rollout(pilot, app)
            # Asked while the server was up, answered once it is gone (and before the
            # dashboard's own polling could notice and stop tracking the rollout).
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen)
            await live.take_server_down()
            await pilot.press("y")
            record = app.board.records[rollout_id]
            await until(pilot, lambda: record.cancels and record.cancels[-1].error is not None)
            await until(pilot, lambda: any("failed" in toast for toast in toasts(app)))
            assert any(f"cancel {rollout_id[:10]} failed" in line for line in log_lines(app))
            await until(pilot, lambda: "cancel failed" in row_text(app, rollout_id))
            assert app.return_code is None


async def test_a_polling_error_is_shown_not_raised(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            rollout_id = await running_rollout(pilot, app)
            # The server forgets the rollout (as after a restart): the next poll gets a 404.
            entry = live.entries.pop(rollout_id)
            record = app.board.records[rollout_id]
            await until(pilot, lambda: record.poll_error is not None)
            assert record.poll_error is not None
            assert "404" in record.poll_error
            await until(pilot, lambda: any("polling" in toast for toast in toasts(app)))
            assert any(f"polling {rollout_id[:10]} failed" in line for line in log_lines(app))
            await until(pilot, lambda: "poll trouble" in row_text(app, rollout_id))
            assert app.return_code is None
            live.entries[rollout_id] = entry  # back, so that the teardown cancels its work


async def test_a_run_that_fails_as_a_whole_keeps_the_dashboard(live_eval: LiveFactory) -> None:
    async with live_eval([row()]) as live:
        live.folder.parent.mkdir(parents=True)
        live.folder.write_text("not a folder")  # the run cannot open its results folder
        app = make_app(live)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await until(pilot, lambda: any("the run stopped" in line for line in log_lines(app)))
            assert toasts(app) and app.return_code is None
            await pilot.press("q")  # nothing is running: no question, just leave
            await until(pilot, lambda: app.return_code is not None, timeout=2)


class _CannotDraw:
    """A renderable that fails as it is drawn."""

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        raise RuntimeError("a pane that cannot draw")


async def test_an_error_while_drawing_ends_the_run_with_its_results_written(
    live_eval: LiveFactory, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30: an error nobody caught in the dashboard (here the details pane failing as it is
    drawn) closes it with one line said and its traceback in logs.txt, without its locals;
    then the run ends as a quit ends it, its results written (as the CLI runs the app)."""
    monkeypatch.setattr("tui.widgets.details.describe", lambda *_: _CannotDraw())
    async with live_eval([row(**IN_FLIGHT), row()]) as live:
        app = make_app(live)

        async def open_details(pilot: Pilot[None]) -> None:
            await running_rollout(pilot, app)
            await pilot.press("enter")

        await asyncio.wait_for(
            run_and_close(app, headless=True, size=SIZE, auto_pilot=open_details), timeout=60
        )
        assert app.return_code == 1
        metrics = json.loads((live.folder / "metrics.json").read_text())
        assert metrics["eval_run"]["status"] == "incomplete"
        log = (live.folder / "logs.txt").read_text()
        assert "the dashboard failed: Traceback" in log
        assert "RuntimeError: a pane that cannot draw" in log
    said = capsys.readouterr().err
    assert "the dashboard failed (RuntimeError: a pane that cannot draw)" in said
    assert "locals" not in said and "Traceback" not in said
