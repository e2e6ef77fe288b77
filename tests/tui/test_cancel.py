"""Cancelling from the dashboard what the board would not show as cancellable at a glance:
an untracked rollout (it still runs on its server), and marks that include rows already over."""

from __future__ import annotations

from core.rollout_record import RolloutRecord
from tests.tui.helpers import log_lines, row_text
from tests.tui.states import build_app, rollout_id
from tui.app import DashboardApp
from tui.screens.dialogs import ConfirmScreen

UNTRACKED, STUCK, FINISHED = rollout_id(19), rollout_id(16), rollout_id(0)


def record(app: DashboardApp, rid: str) -> RolloutRecord:
    return app.board.records[rid]


async def test_an_untracked_rollout_can_still_be_cancelled_on_its_server() -> None:
    app = build_app()
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        app.table.move_cursor_to(UNTRACKED)
        await pilot.pause()
        assert record(app, UNTRACKED).untracked
        assert app.check_action("cancel_server", ()) is True
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmScreen)
        assert "no longer tracked here" in str(app.screen.question)
        await pilot.press("y")
        await pilot.pause()
        await pilot.pause()
        assert [c.disposition for c in record(app, UNTRACKED).cancels] == ["cancelled_running"]
        drawn = row_text(app, UNTRACKED)
        assert "untracked, cancelled_running" in drawn
        assert "cancelling" not in drawn  # no end will ever be seen: the status last seen
        assert any("cancel requested for 1" in line for line in log_lines(app))


async def test_cancel_marked_counts_what_it_sends_and_says_what_it_leaves_out() -> None:
    app = build_app()
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        table = app.table
        for rid in (FINISHED, UNTRACKED, STUCK):
            table.move_cursor_to(rid)
            await pilot.press("space")
        assert table.marks == {FINISHED, UNTRACKED, STUCK}
        await pilot.press("C")
        assert isinstance(app.screen, ConfirmScreen)
        question = str(app.screen.question)
        assert question.startswith("Cancel 2 marked rollouts on their servers?")
        assert "1 of them no longer tracked here" in question
        assert "1 marked already over: left out." in question
        await pilot.press("y")
        await pilot.pause()
        await pilot.pause()
        assert [c.disposition for c in record(app, UNTRACKED).cancels] == ["cancelled_running"]
        assert [c.disposition for c in record(app, STUCK).cancels] == ["cancelled_running"]
        assert record(app, FINISHED).cancels == ()
        assert table.marks == {FINISHED}  # what was acted on is unmarked
        assert any("cancel requested for 2" in line for line in log_lines(app))


async def test_cancel_marked_with_only_rollouts_that_are_over_says_so() -> None:
    app = build_app()
    async with app.run_test(size=(150, 40), notifications=True) as pilot:
        await pilot.pause()
        app.table.move_cursor_to(FINISHED)
        await pilot.press("space", "C")
        assert not isinstance(app.screen, ConfirmScreen)
        assert any(
            "nothing to cancel: the marked rollouts are over" in line for line in log_lines(app)
        )
