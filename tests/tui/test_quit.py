"""`q`: with rollouts in flight the dashboard asks (cancel on the server / leave / back)."""

from __future__ import annotations

from core.board import RolloutBoard
from core.types import RolloutStatus
from tests.tui.helpers import SIZE, LiveFactory, make_app, row, until
from tui.screens.dialogs import QuitScreen

IN_FLIGHT = {"sleep": 30}


def running_ids(board: RolloutBoard) -> list[str]:
    return [r.rollout_id for r in board if r.status == RolloutStatus.RUNNING]


async def test_quit_and_cancel_in_flight_on_the_server(live_eval: LiveFactory) -> None:
    async with live_eval([row(), row(**IN_FLIGHT), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 2)
            in_flight = running_ids(app.board)
            await pilot.press("q")
            assert isinstance(app.screen, QuitScreen)
            assert app.screen.in_flight == 2
            await pilot.press("c")
            await until(pilot, lambda: app.return_code is not None)
        assert [live.server_status(rid) for rid in in_flight] == ["cancelled", "cancelled"]
        summary = live.source.summary
        assert summary is not None and summary.status == "interrupted"


async def test_quit_and_leave_them_sends_nothing(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 2)
            in_flight = running_ids(app.board)
            await pilot.press("q", "l")
            await until(pilot, lambda: app.return_code is not None)
        for rollout_id in in_flight:
            entry = live.entries[rollout_id]
            assert entry.result is None and entry.disposition is None  # left to its lease


async def test_quit_then_back_changes_nothing(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 1)
            await pilot.press("q")
            assert isinstance(app.screen, QuitScreen)
            await pilot.press("b")
            assert not isinstance(app.screen, QuitScreen)
            await pilot.pause(0.3)
            assert app.return_code is None and not app.quit_flow.quitting
            (rollout_id,) = running_ids(app.board)
            assert live.entries[rollout_id].disposition is None
            runner = live.source.session.runner
            assert runner is not None and not runner.interrupted


async def test_quit_with_nothing_in_flight_exits_at_once(live_eval: LiveFactory) -> None:
    async with live_eval([row(), row()]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: live.source.finished)
            await pilot.press("q")
            await until(pilot, lambda: app.return_code is not None, timeout=2)
            assert not isinstance(app.screen, QuitScreen)
