"""The dashboard's keys that steer the run (DESIGN.md §2): `P` pauses and resumes dispatch, `]`
and `[` raise and lower max-in-flight, `R` requeues after a confirmation; rollouts sent by hand
are marked and kept out of the progress. Against a live eval over a real server_stub, as in
test_actions.py; the engine's side is proven in tests/eval/runs/test_control.py."""

from __future__ import annotations

from typing import Any

from core.eval.results.transitions import read_transitions
from core.types import RolloutStatus
from tests.tui.helpers import (
    SIZE,
    LiveFactory,
    details_text,
    log_lines,
    make_app,
    row,
    row_text,
    running_rollout,
    status_line,
    text_of,
    until,
)
from tests.tui.recordings import SLOW, replay_app, write_recording
from tests.tui.states import build_app
from tui.app import DashboardApp
from tui.bindings import help_lines
from tui.flows.control import MAX_IN_FLIGHT
from tui.screens.dialogs import ConfirmScreen
from tui.sources.live import LiveSource

RUNNING = RolloutStatus.RUNNING
IN_FLIGHT = {"sleep": 30}


def running(app: DashboardApp) -> int:
    return sum(1 for record in app.board if record.status == RUNNING)


def control_lines(live: Any, kind: str = "control") -> list[dict[str, Any]]:
    recording = live.folder / "transitions.jsonl"
    if not recording.exists():
        return []
    return [line for line in read_transitions(recording) if line["kind"] == kind]


def source_of(app: DashboardApp) -> LiveSource:
    source = app.source
    assert isinstance(source, LiveSource)
    return source


async def test_p_holds_every_work_item_until_pressed_again(live_eval: LiveFactory) -> None:
    async with live_eval([row(), row(), row()], max_in_flight=2) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("P")  # while the servers are still being reached
            state = live.source.dispatch()
            assert state is not None and state.paused
            await until(pilot, lambda: live.source.session.runner is not None)
            runner = live.source.session.runner
            assert runner is not None
            # Both workers wait at the gate: none can send a work item.
            await until(pilot, lambda: runner.gate.waiting == 2)
            assert len(app.board) == 0 and not live.entries
            await until(pilot, lambda: "dispatch paused (P resumes)" in status_line(app))
            await until(pilot, lambda: "0 in flight, max 2" in status_line(app))
            assert any("dispatch paused" in line for line in log_lines(app))
            await pilot.press("P")
            await until(pilot, lambda: live.source.finished)
            assert len(live.entries) == 3
            assert "dispatch paused" not in status_line(app)
            assert any(line.endswith("dispatch resumed") for line in log_lines(app))
    assert [line["action"] for line in control_lines(live)] == ["pause", "resume"]


async def test_brackets_raise_and_lower_max_in_flight(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT) for _ in range(4)], max_in_flight=2) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: running(app) == 2)
            await pilot.press("right_square_bracket")
            state = live.source.dispatch()
            assert state is not None and state.max_in_flight == 3
            await until(pilot, lambda: running(app) == 3)
            await until(pilot, lambda: "3 in flight, max 3" in status_line(app))
            await pilot.press("left_square_bracket", "left_square_bracket")
            state = live.source.dispatch()
            assert state is not None and state.max_in_flight == 1
            # Lowering cancels nothing: the three go on.
            await until(pilot, lambda: "3 in flight, max 1" in status_line(app))
            assert running(app) == 3
            assert not [record for record in app.board if record.cancels]
            assert any("nothing is cancelled" in line for line in log_lines(app))
            await until(pilot, lambda: len(control_lines(live)) == 3)
    assert [(line["action"], line["value"]) for line in control_lines(live)] == [
        ("max_in_flight", 3),
        ("max_in_flight", 2),
        ("max_in_flight", 1),
    ]


async def test_r_requeues_the_selected_rollout_after_a_yes(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            old = await running_rollout(pilot, app)
            record = app.board.records[old]
            await pilot.press("R")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")  # no: nothing is asked of anyone
            assert not isinstance(app.screen, ConfirmScreen)
            assert record.requeued_as is None and record.cancels == ()
            await pilot.press("R")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            new = record.requeued_as
            assert new is not None
            await until(pilot, lambda: live.server_status(old) == "cancelled")
            await until(pilot, lambda: new in app.board.records)
            again = app.board.records[new]
            assert (again.row_index, again.run_index) == (record.row_index, record.run_index)
            said = f"requeued {old[:10]} as {new[:10]}"
            assert any(line.endswith(said) for line in log_lines(app))
            await until(pilot, lambda: "requeued" in row_text(app, old))
            app.table.move_cursor_to(old)
            await pilot.press("enter")
            await until(pilot, lambda: new in details_text(app))
            await until(pilot, lambda: len(control_lines(live, "requeue")) == 1)
    (line,) = control_lines(live, "requeue")
    assert (line["rollout_id"], line["new_rollout_id"]) == (old, new)


async def test_r_on_a_finished_rollout_asks_nothing(live_eval: LiveFactory) -> None:
    async with live_eval([row(), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(app.board) == 2)
            finished = live.row_id(0)
            await until(pilot, lambda: app.board.records[finished].finished)
            await until(pilot, lambda: len(app.table.order) == 2)
            app.table.move_cursor_to(finished)
            await pilot.press("R")
            assert not isinstance(app.screen, ConfirmScreen)
            assert any("nothing to requeue" in line for line in log_lines(app))
            assert app.board.records[finished].requeued_as is None


async def test_a_rerun_is_marked_manual_and_left_out_of_the_progress(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            await until(pilot, lambda: len(board) == 2 and board.records[live.row_id(0)].finished)
            await until(pilot, lambda: len(app.table.order) == 2)
            original = live.row_id(0)
            app.table.move_cursor_to(original)
            await pilot.press("r")
            await until(pilot, lambda: len(board) == 3)
            again = next(r for r in board if r.row_index == 0 and r.rollout_id != original)
            assert again.manual and not board.records[original].manual
            await until(pilot, lambda: live.server_status(again.rollout_id) == "success")
            await until(pilot, lambda: again.finished)
            progress = source_of(app).progress()
            assert (progress.done, progress.total) == (1, 2)  # the rerun counts for nothing
            await until(pilot, lambda: "+1 manual" in text_of(app.summary))
            assert " 1/2 +1 manual" in text_of(app.summary)
            await until(pilot, lambda: "manual" in row_text(app, again.rollout_id))
            await until(pilot, lambda: len(control_lines(live, "manual")) == 1)
            await pilot.press("enter")
            await until(pilot, lambda: "sent by hand" in details_text(app))
    (line,) = control_lines(live, "manual")
    assert line["rollout_id"] == again.rollout_id
    assert (line["row_index"], line["rerun_of"]) == (0, original)


async def test_the_steering_keys_are_in_the_help_and_absent_from_a_replay(
    live_eval: LiveFactory, tmp_path: Any
) -> None:
    async with live_eval([row()]) as live:
        app = make_app(live, start_work=False)
        async with app.run_test(size=SIZE):
            keys = dict(help_lines(app))
            assert keys["P"].startswith("Pause or resume the run")
            assert keys["R"].startswith("Cancel the selected (or marked) rollouts")
            assert keys["]"].startswith("Raise max-in-flight")
            assert keys["["].startswith("Lower max-in-flight")
    replay, _source = replay_app(write_recording(tmp_path / "rec", SLOW))
    async with replay.run_test(size=SIZE):
        for action in ("pause_dispatch", "max_in_flight", "requeue"):
            assert replay.check_action(action, ()) is False
        assert "R" not in replay.screen.active_bindings


async def test_bracket_presses_update_one_notice(live_eval: LiveFactory) -> None:
    """Ten presses of `]` or `[` are one notice saying the latest limit, not ten toasts over
    the table."""
    async with live_eval([row(**IN_FLIGHT) for _ in range(2)], max_in_flight=2) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await until(pilot, lambda: running(app) == 2)
            await pilot.press(*["right_square_bracket"] * 3, "left_square_bracket")
            await until(pilot, lambda: "max 4" in status_line(app))
            await pilot.pause()
            # The notifications the toasts show (another notice may be up: the run's own).
            shown = [n.message for n in app._notifications if "max in flight" in n.message]
            assert shown == ["max in flight 4"]
            # Every press is still in the event log.
            assert sum("max in flight" in line for line in log_lines(app)) == 4


async def test_a_notice_replaced_before_it_was_put_up_is_still_one() -> None:
    """Key presses handled back to back (as a terminal sends them) report twice before a
    posted notice could be up: still one notice, the latest."""
    app = build_app()
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        app.report("max in flight 3", topic=MAX_IN_FLIGHT)
        app.report("max in flight 4", topic=MAX_IN_FLIGHT)
        await pilot.pause()
        assert [n.message for n in app._notifications] == ["max in flight 4"]
