"""The run timeline (`w`) on the dashboard: it opens over the table, its cursor moves in time
and the table shows the rollouts in flight then, it zooms and pans, it closes; in a replay,
`enter` plays the recording to the cursor."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.eval.timeline.model import MarkerKind
from tests.tui.helpers import screen_lines, status_line
from tests.tui.recordings import replay_app
from tests.tui.states import NOW, SERVER, T0, build_app, rollout_id
from tests.tui.timeline_states import live_timeline_source, write_timeline_run
from tui.app import DashboardApp
from tui.bindings import help_lines, palette_commands
from tui.sources.base import STARTING, step_view

SIZE = (120, 40)


def shown(app: DashboardApp) -> set[str]:
    return set(app.table.order)


def at_cursor(app: DashboardApp) -> set[str]:
    pane = app.timeline_pane
    return set(pane.timeline.in_flight_at(pane.window.cursor))


async def test_w_opens_the_timeline_and_the_table_shows_what_was_in_flight_at_its_cursor() -> None:
    app = build_app(live_timeline_source())
    async with app.run_test(size=SIZE) as pilot:
        assert len(shown(app)) == 12
        await pilot.press("w")
        await pilot.pause()
        pane = app.timeline_pane
        assert pane.has_class("-open") and pane.has_focus
        # At first the cursor is now: the rollouts in flight now, by the board's own word.
        assert pane.window.cursor == pytest.approx(NOW - T0, abs=0.2)
        assert shown(app) == {r.rollout_id for r in app.board if r.in_flight}
        assert shown(app) == {rollout_id(9)}  # 8 was untracked at 90 s
        assert "in flight at 1m35s" in status_line(app)
        await pilot.press("home")
        await pilot.pause()
        assert pane.window.cursor == 0.0
        assert shown(app) == {rollout_id(0)}
        for _ in range(20):  # a column at a time: whatever the cursor passes, the table follows
            await pilot.press("right")
            await pilot.pause()
            assert shown(app) == at_cursor(app)
        assert pane.window.cursor > 0.0
        await pilot.press("shift+right")
        await pilot.pause()
        assert shown(app) == at_cursor(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not pane.has_class("-open") and app.table.has_focus
        assert len(shown(app)) == 12
        assert "in flight at" not in status_line(app)


async def test_zoom_and_pan_keep_the_cursor_in_the_window() -> None:
    app = build_app(live_timeline_source())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w", "home")
        for _ in range(30):
            await pilot.press("right")
        await pilot.pause()
        pane = app.timeline_pane
        fitted, cursor = pane.window, pane.window.cursor
        assert fitted.fitted
        await pilot.press("i")
        await pilot.pause()
        zoomed = pane.window
        assert zoomed.span == pytest.approx(fitted.span / 2)
        assert zoomed.t0 <= cursor < zoomed.t1 and zoomed.cursor == cursor
        assert not zoomed.fitted
        await pilot.press("ctrl+right")
        await pilot.pause()
        panned = pane.window
        assert panned.t0 > zoomed.t0 and panned.span == pytest.approx(zoomed.span)
        assert panned.t0 <= panned.cursor < panned.t1
        assert shown(app) == at_cursor(app)
        await pilot.press("o", "o")
        await pilot.pause()
        assert pane.window.fitted and pane.window.t0 == fitted.t0
        await pilot.press("i", "i", "z")
        await pilot.pause()
        assert pane.window.fitted


async def test_the_live_timeline_draws_the_band_lanes_rail_and_markers() -> None:
    app = build_app(live_timeline_source())
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("w")
        await pilot.pause()
        timeline = app.timeline_pane.timeline
        lines = "\n".join(screen_lines(app))
        assert "timeline · at 1m35s: 1 in flight of 4" in lines
        assert "…0.1:8430" in lines and "…0.1:8440" in lines  # a lane per server
        kinds = {marker.kind for marker in timeline.markers}
        assert {MarkerKind.CANCEL, MarkerKind.MANUAL, MarkerKind.UNTRACK, MarkerKind.STUCK} <= kinds
        assert [m.t for m in timeline.markers if m.kind is MarkerKind.UNTRACK] == [90.0]
        assert timeline.server_spans[0].state == "down"
        outcomes = sorted(span.outcome or "" for span in timeline.spans.values() if span.end)
        assert outcomes.count("failure") == 1 and "cancelled" in outcomes


async def test_the_help_lists_the_timeline_and_its_keys() -> None:
    app = build_app(live_timeline_source())
    async with app.run_test(size=SIZE):
        lines = dict(help_lines(app))
        commands = list(palette_commands(app))
    assert "w" in lines and "time axis" in lines["w"]
    assert "zoom" in lines["in the timeline"]
    assert "Timeline" in {command.title for command in commands}


async def test_a_replay_seeks_to_the_timeline_cursor(tmp_path: Path) -> None:
    """In a replay the timeline is the whole recording; `enter` plays it to the cursor, and
    then the board has in flight exactly the rollouts the timeline says."""
    app, source = replay_app(write_timeline_run(tmp_path / "run"))
    app.start_work = False  # the player moves only by the keys
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        await pilot.pause()
        pane = app.timeline_pane
        assert pane.timeline is source.timeline
        await pilot.press("home")
        for _ in range(40):
            await pilot.press("right")
        await pilot.pause()
        cursor = pane.window.cursor
        wanted = at_cursor(app)
        assert wanted and source.played == 0.0
        await pilot.press("enter")
        await pilot.pause()
        assert source.played == pytest.approx(cursor)
        assert {r.rollout_id for r in app.board if r.in_flight} == wanted
        assert shown(app) == wanted


async def test_seek_is_a_replays_only() -> None:
    app = build_app(live_timeline_source())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        await pilot.pause()
        assert app.timeline_pane.check_action("seek", ()) is False


async def test_opened_again_the_timeline_filters_the_table_again() -> None:
    app = build_app(live_timeline_source())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w", "home")
        await pilot.pause()
        first = shown(app)
        await pilot.press("w")  # closed: every rollout
        await pilot.pause()
        assert len(shown(app)) == 12
        await pilot.press("w")  # the same cursor, the same rollouts: shown again
        await pilot.pause()
        assert shown(app) == first == at_cursor(app)


async def test_the_start_up_steps_are_no_server_lanes() -> None:
    """While the servers start, the header shows the start-up's step in their place: the
    timeline draws no lane for it."""
    source = live_timeline_source()
    # The step that reads the servers' /health names their URLs: it is a step all the same.
    reading = step_view(f"reading /health of {SERVER}")
    source.server_states = [STARTING, reading, *source.server_states]
    app = build_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("w")
        await pilot.pause()
        lanes = app.timeline_pane.timeline.lanes()
        assert STARTING.url not in lanes and reading.url not in lanes
        assert "http://127.0.0.1:8440" in lanes  # down now: its span is drawn
        await pilot.press("escape", "v", "v")  # the server filter steps through servers only
        assert app.filter_server == "http://127.0.0.1:8440"
