"""`d`: one rollout full screen, in tabs (details, model calls, transcript, result JSON), over a
static board and over a live eval; `escape` goes back, the dashboard's keys wait behind it."""

from __future__ import annotations

import json

from textual.pilot import Pilot
from textual.widgets import Static, TabbedContent

from tests.tui.helpers import SIZE, LiveFactory, make_app, row, text_of, until
from tests.tui.states import build_app, rollout_id
from tui.app import DashboardApp
from tui.screens.dialogs import ConfirmScreen
from tui.screens.rollout_view import NO_RESULT, RolloutViewScreen
from tui.widgets.transcript_panel import TranscriptPanel

FAILED_CALL_ROW = 8  # failed, its one model call answered 502
SUCCESS_ROW = 0
RUNNING_ROW = 17


def body(app: DashboardApp, pane: str) -> str:
    return text_of(app.screen.query_one(f"#{pane}-body", Static))


def title(app: DashboardApp) -> str:
    return text_of(app.screen.query_one("#rollout-view-title", Static))


async def open_view(app: DashboardApp, pilot: Pilot[None], row_index: int) -> RolloutViewScreen:
    await pilot.pause()
    app.table.move_cursor_to(rollout_id(row_index))
    await pilot.press("d")
    screen = app.screen
    assert isinstance(screen, RolloutViewScreen)
    return screen


async def test_d_opens_the_rollout_full_screen_and_escape_goes_back() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.table.move_cursor_to(rollout_id(FAILED_CALL_ROW))
        await pilot.press("d")
        assert isinstance(app.screen, RolloutViewScreen)
        assert rollout_id(FAILED_CALL_ROW) in title(app) and "failure" in title(app)
        details = body(app, "view-details")
        assert "the rollout ended before reaching it" in details  # the details pane's words
        assert "agent_error" in details
        await pilot.press("escape")
        assert not isinstance(app.screen, RolloutViewScreen)
        assert app.table.cursor_id == rollout_id(FAILED_CALL_ROW)


async def test_the_number_keys_open_each_tab() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_view(app, pilot, FAILED_CALL_ROW)
        tabs = app.screen.query_one(TabbedContent)
        await pilot.press("2")
        assert tabs.active == "view-calls"
        calls = body(app, "view-calls")
        assert "1 call" in calls and "502" in calls
        assert "request: What is 68 * 17?" in calls
        assert "The stub model failed on purpose" in calls
        await pilot.press("4")
        assert tabs.active == "view-result"
        result = json.loads(body(app, "view-result"))
        assert result["rollout_id"] == rollout_id(FAILED_CALL_ROW)
        assert result["status"] == "failure" and result["err_category"] == "agent_error"
        await pilot.press("3")
        assert tabs.active == "view-transcript"
        await pilot.press("1")
        assert tabs.active == "view-details"


async def test_the_transcript_tab_is_the_transcript_screens_panel() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_view(app, pilot, SUCCESS_ROW)
        await pilot.press("3")
        panel = app.screen.query_one(TranscriptPanel)
        header = text_of(panel.query_one("#transcript-header", Static))
        assert "final sample" in header and "success" in header
        steps = text_of(panel.query_one("#transcript-steps", Static))
        assert "What is 12 * 3?" in steps and "assistant" in steps


async def test_the_result_json_is_what_the_server_sent_redacted_and_safe() -> None:
    app = build_app()
    record = app.board.records[rollout_id(SUCCESS_ROW)]
    record.redact = lambda text: text.replace("careful calculator", "***")
    async with app.run_test(size=SIZE) as pilot:
        await open_view(app, pilot, SUCCESS_ROW)
        await pilot.press("4")
        shown = body(app, "view-result")
        result = json.loads(shown)
        assert result["sample"]["reward"] == 1.0
        assert "trajectory_messages" not in result["sample"]  # the client's copy, not sent
        assert "careful calculator" not in shown and "You are a ***" in shown


async def test_a_rollout_without_a_result_says_so_and_the_dashboards_keys_wait() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_view(app, pilot, RUNNING_ROW)
        await pilot.press("4")
        assert body(app, "view-result") == NO_RESULT
        await pilot.press("c")  # cancel, on the dashboard: not here
        assert isinstance(app.screen, RolloutViewScreen)
        await pilot.press("d")
        assert not isinstance(app.screen, RolloutViewScreen)
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)


async def test_no_view_without_a_selected_rollout() -> None:
    app = build_app()
    async with app.run_test(size=SIZE) as pilot:
        app.filter_text = "no such rollout"
        await pilot.pause()
        await pilot.press("d")
        assert not isinstance(app.screen, RolloutViewScreen)


async def test_the_view_follows_a_live_rollout_to_its_end(live_eval: LiveFactory) -> None:
    async with live_eval([row(sleep=0.8)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.selected() is not None)
            await pilot.press("d")
            assert isinstance(app.screen, RolloutViewScreen)
            await pilot.press("4")
            await until(pilot, lambda: '"status": "success"' in body(app, "view-result"))
            await until(pilot, lambda: "success" in title(app))
            # The pane is laid out for its new text a frame after it is given it.
            await until(pilot, lambda: '"reward": 1.0' in body(app, "view-result"))
