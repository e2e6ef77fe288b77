"""`h`, the distributions of the rows shown (issue 26): a bin picked there filters the table to
exactly its rollouts, the table's own filters apply to what is drawn, and Esc (or `0`) lets
the pick go. Pilot tests on the snapshot states' running board (a frozen clock)."""

from __future__ import annotations

from core.board import RolloutBoard
from tests.tui.helpers import status_line, text_of
from tests.tui.states import build_app, running_source
from tui.app import DashboardApp
from tui.bindings import help_lines
from tui.screens.distributions import DistributionsScreen
from tui.widgets.histogram import Histogram

LATENCY = 4  # the metric's place: queued, running, grading, total, latency


def latencies_between(board: RolloutBoard, low: float, high: float, last: bool) -> set[str]:
    """The rollouts with a model call whose latency is in [low, high) (or [low, high] for the
    last bin), counted from the board's calls, not from the histogram. As the histogram
    does, a latency a billionth of a bin short of an edge is on it: 6.1 − 5.5 on a clock
    that reads 5,000 is 0.59999999999945."""
    nudge = (high - low) * 1e-9
    found = set()
    for record in board:
        for call in record.model.recent:
            latency = call.latency_sec
            if latency is None:
                continue
            if low <= latency + nudge < high or (last and latency + nudge >= high):
                found.add(record.rollout_id)
    return found


def histogram(app: DashboardApp) -> Histogram:
    screen = app.screen
    assert isinstance(screen, DistributionsScreen)
    return screen.histogram


async def test_a_bins_filter_shows_exactly_its_rollouts_and_esc_clears_it() -> None:
    app = build_app(running_source())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        everyone = list(app.table.order)
        await pilot.press("h", *["right"] * LATENCY)
        await pilot.pause()
        shown = histogram(app).shown
        assert shown is not None and shown.metric.key == "latency"
        # Every non-empty bin, one after the other: picked, the table shows exactly its
        # rollouts; Esc, and every row is back.
        picked = 0
        for index, found in enumerate(shown.bins):
            if not found.count:
                continue
            expected = latencies_between(
                app.board, found.low, found.high, index == len(shown.bins) - 1
            )
            assert found.rollout_ids == expected
            if not isinstance(app.screen, DistributionsScreen):
                await pilot.press("h", *["right"] * LATENCY)
            await pilot.pause()
            histogram(app).move(index - histogram(app).cursor)
            await pilot.press("enter")
            await pilot.pause()
            assert not isinstance(app.screen, DistributionsScreen)
            assert set(app.table.order) == expected
            assert app.table.order == [rid for rid in everyone if rid in expected]  # its order
            assert "(esc clears)" in status_line(app)
            await pilot.press("escape")
            await pilot.pause()
            assert app.table.order == everyone and app.filter_pick is None
            picked += 1
        assert picked >= 3


async def test_the_tables_filters_apply_and_0_clears_the_pick_with_them() -> None:
    app = build_app(running_source())
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        await pilot.press("5")  # failures only (and the rollout never admitted)
        await pilot.pause()
        failures = list(app.table.order)
        assert len(failures) == 3
        await pilot.press("h")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DistributionsScreen)
        assert "of the 3 rollouts shown" in text_of(screen.query_one("#distributions-title"))
        assert "filter: status failure+not_admitted" in text_of(
            screen.query_one("#distributions-title")
        )
        assert [r.rollout_id for r in screen.records] == failures
        assert {rid for rid, _value in histogram(app).samples} <= set(failures)
        await pilot.press("enter")  # the first bin of the queued phase
        await pilot.pause()
        assert app.filter_pick is not None
        assert set(app.table.order) <= set(failures)
        await pilot.press("0")
        await pilot.pause()
        assert app.filter_pick is None and len(app.table.order) == len(app.board)


async def test_escape_leaves_the_distributions_without_a_pick_and_help_lists_the_key() -> None:
    app = build_app(running_source())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert ("h", help_text(app)) in help_lines(app)
        await pilot.press("h", "down", "escape")
        await pilot.pause()
        assert not isinstance(app.screen, DistributionsScreen)
        assert app.filter_pick is None and len(app.table.order) == len(app.board)


def help_text(app: DashboardApp) -> str:
    return next(text for keys, text in help_lines(app) if text.startswith("Histograms"))
