"""Each dashboard key against a live eval: what it does to the board, and to the server.

The server is a real server_stub under uvicorn that the test owns; its registry says what the
server itself did (cancelled, finished, never asked). Rows with {"sleep": 30} stay in flight.
"""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from typing import Any

from textual.command import CommandPalette
from textual.widgets import Input, OptionList

from core.eval.results.export import EXPORT_FIELDS
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
    selected_status,
    status_line,
    text_of,
    until,
)
from tui.screens.dialogs import ConfirmScreen, HelpScreen, NewRolloutScreen
from tui.widgets.details import DetailsPane
from tui.widgets.event_log import EventLog
from tui.widgets.table.columns import BASE
from tui.widgets.table.sorting import SORT_COLUMNS, TITLES

RUNNING = RolloutStatus.RUNNING
IN_FLIGHT = {"sleep": 30}


async def test_cancel_confirmed_cancels_on_the_server(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            rollout_id = await running_rollout(pilot, app)
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await until(pilot, lambda: live.server_status(rollout_id) == "cancelled")
            record = app.board.records[rollout_id]
            await until(pilot, lambda: record.status == RolloutStatus.CANCELLED)
            assert [c.disposition for c in record.cancels] == ["cancelled_running"]
            await until(pilot, lambda: "cancelled_running" in row_text(app, rollout_id))
            assert "cancelled" in row_text(app, rollout_id)
            assert any("cancel requested" in line for line in log_lines(app))


async def test_a_cancel_is_in_transitions_jsonl_while_the_run_goes_on(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        recording = live.folder / "transitions.jsonl"

        def cancel_lines(rollout_id: str) -> list[dict[str, Any]]:
            # Read the way the replay reads it: the log is written as things happen, so a
            # run killed now would keep these lines.
            return [
                line
                for line in read_transitions(recording)
                if line["kind"] == "cancel_request" and line["rollout_id"] == rollout_id
            ]

        async with app.run_test(size=SIZE) as pilot:
            rollout_id = await running_rollout(pilot, app)
            await pilot.press("c", "y")
            await until(pilot, lambda: len(cancel_lines(rollout_id)) == 2)
            asked, answered = cancel_lines(rollout_id)
            assert not live.source.finished, "the other row is still running"
            assert "disposition" not in asked
            assert answered["disposition"] == "cancelled_running"
            assert answered["t"] == asked["t"]
            assert isinstance(answered["reply_t"], float) and answered["reply_t"] >= asked["t"]


async def test_cancel_answered_no_sends_nothing(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            rollout_id = await running_rollout(pilot, app)
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            assert not isinstance(app.screen, ConfirmScreen)
            await pilot.pause(0.5)
            assert app.board.records[rollout_id].cancels == ()
            entry = live.entries[rollout_id]
            assert entry.disposition is None and entry.result is None


async def test_untrack_sends_nothing_and_the_server_finishes_the_rollout(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(sleep=1.5)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            rollout_id = await running_rollout(pilot, app)
            await pilot.press("x")  # no confirmation: it only concerns this dashboard
            record = app.board.records[rollout_id]
            assert record.untracked and record.cancels == ()
            await until(pilot, lambda: "untracked" in row_text(app, rollout_id))
            await until(pilot, lambda: live.server_status(rollout_id) == "success", timeout=5)
            assert live.entries[rollout_id].disposition is None
            assert record.status == RUNNING  # nobody polls it any more
            await pilot.press("enter")
            details = details_text(app)
            assert "not renewed (untracked)" in details
            assert " left" not in details  # no lease countdown for a lease nobody renews


async def test_marked_rollouts_are_cancelled_with_one_confirmation(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT), row(**IN_FLIGHT), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            await until(pilot, lambda: len(board) == 3 and all(r.status == RUNNING for r in board))
            await until(pilot, lambda: len(app.table.order) == 3)
            await pilot.press("home", "space", "space")  # space marks and moves down
            first, second, third = app.table.order
            assert app.table.marks == {first, second}
            assert "2 marked" in status_line(app)
            await pilot.press("C")
            assert isinstance(app.screen, ConfirmScreen)
            assert "Cancel 2 marked rollouts" in str(app.screen.question)
            await pilot.press("y")
            await until(
                pilot,
                lambda: live.server_status(first) == live.server_status(second) == "cancelled",
            )
            assert live.entries[third].result is None and live.entries[third].disposition is None
            assert app.table.marks == set()


async def test_new_rollout_form_submits_and_the_row_appears(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: selected_status(app) == RUNNING)
            await pilot.press("n")
            assert isinstance(app.screen, NewRolloutScreen)
            await pilot.press(*"hello")
            await pilot.press("tab", "4", "2", "enter")
            assert not isinstance(app.screen, NewRolloutScreen)
            board = app.board
            await until(pilot, lambda: len(board) == 2)
            new = next(r for r in board if r.row_index is None)
            assert new.options is not None and new.options.label == "42"
            assert new.options.initial_messages[-1]["content"] == "hello"
            await until(pilot, lambda: live.server_status(new.rollout_id) == "success")
            await until(pilot, lambda: "success" in row_text(app, new.rollout_id))
            assert app.table.cursor_id == new.rollout_id
            assert any(f"submitted {new.rollout_id[:10]}" in line for line in log_lines(app))


async def test_new_rollout_form_refuses_an_empty_prompt(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: live.source.can_send)
            await pilot.press("n", "enter")
            assert isinstance(app.screen, NewRolloutScreen)
            assert "empty" in text_of(app.screen.query_one("#error"))
            await pilot.press("escape")
            assert len(app.board) == 1


async def test_rerun_of_a_finished_row_creates_a_new_id(live_eval: LiveFactory) -> None:
    async with live_eval([row(), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            await until(pilot, lambda: len(board) == 2 and board.records[live.row_id(0)].finished)
            await until(pilot, lambda: len(app.table.order) == 2)
            app.table.move_cursor_to(live.row_id(0))
            original = app.selected()
            assert original is not None
            await pilot.press("r")
            await until(pilot, lambda: len(board) == 3)
            again = next(r for r in board if r.row_index == 0 and r is not original)
            assert again.rollout_id != original.rollout_id
            assert again.row_index == original.row_index == 0
            # The same request, with the gateway's route of the new id for the model.
            assert again.options is not None and original.options is not None
            assert again.options.chat_completions_url.endswith(f"/v1/rollouts/{again.rollout_id}")
            assert replace(again.options, chat_completions_url="") == replace(
                original.options, chat_completions_url=""
            )
            await until(pilot, lambda: live.server_status(again.rollout_id) == "success")
            await until(pilot, lambda: app.table.cursor_id == again.rollout_id)


async def test_actions_that_make_no_sense_for_the_row_are_greyed_out(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            await until(pilot, lambda: len(board) == 2 and board.records[live.row_id(0)].finished)
            await until(pilot, lambda: board.records[live.row_id(1)].status == RUNNING)
            await until(pilot, lambda: len(app.table.order) == 2)
            app.table.move_cursor_to(live.row_id(0))  # finished
            await pilot.pause()
            assert app.check_action("cancel_server", ()) is None
            assert app.check_action("untrack", ()) is None
            assert app.check_action("rerun", ()) is True
            footer = app.screen.active_bindings
            assert not footer["c"].enabled and not footer["x"].enabled and footer["r"].enabled
            await pilot.press("c", "x")  # disabled: nothing happens, no dialog
            assert not isinstance(app.screen, ConfirmScreen)
            assert not board.records[live.row_id(0)].untracked
            app.table.move_cursor_to(live.row_id(1))  # in flight
            await pilot.pause()
            assert app.check_action("cancel_server", ()) is True
            assert app.check_action("rerun", ()) is None
            footer = app.screen.active_bindings
            assert footer["c"].enabled and not footer["r"].enabled
            # Replay keys do not exist on a live run.
            assert app.check_action("step", ()) is False
            assert "full_stop" not in footer


async def test_new_and_rerun_grey_out_once_the_run_has_ended(live_eval: LiveFactory) -> None:
    async with live_eval([row()]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: live.source.finished)
            # a repaint notices and refreshes the footer
            await until(pilot, lambda: not app.screen.active_bindings["n"].enabled)
            footer = app.screen.active_bindings
            assert not footer["n"].enabled and not footer["r"].enabled
            await pilot.press("n", "r")
            assert not isinstance(app.screen, NewRolloutScreen)
            assert len(app.board) == 1


async def test_text_filter_shows_the_match_count(live_eval: LiveFactory) -> None:
    async with live_eval([row() for _ in range(5)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: live.source.finished and len(app.table.order) == 5)
            await pilot.press("slash")
            bar = app.query_one("#filter-bar", Input)
            assert bar.has_focus
            await pilot.press(*"row", "space", "3")
            assert app.table.order == [live.row_id(3)]
            assert "1 of 5 shown" in status_line(app)
            assert "text 'row 3'" in status_line(app)
            await pilot.press("enter")
            assert app.table.has_focus and bar.display  # the filter stays on, and shown
            await pilot.press("0")
            assert len(app.table.order) == 5 and not bar.display
            assert "5 of 5 shown" in status_line(app)


async def test_status_toggles_and_clear(live_eval: LiveFactory) -> None:
    rows = [row(), row(), row(**{"raise": "runtime"}), row(**IN_FLIGHT)]
    async with live_eval(rows) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            await until(
                pilot,
                lambda: (
                    len(board) == 4
                    and sum(r.finished for r in board) == 3
                    and board.records[live.row_id(3)].status == RUNNING
                ),
            )
            await pilot.pause(0.4)
            table = app.table
            ok, failed, running = live.row_id(0), live.row_id(2), live.row_id(3)
            await pilot.press("5")
            assert table.order == [failed]
            assert "1 of 4 shown" in status_line(app)
            await pilot.press("2")
            assert set(table.order) == {failed, running}
            await pilot.press("5")
            assert table.order == [running]
            await pilot.press("4")
            assert set(table.order) == {ok, live.row_id(1), running}
            for key in "136":
                await pilot.press(key)
            assert set(table.order) == {ok, live.row_id(1), running}
            await pilot.press("0")
            assert len(table.order) == 4
            assert "filter" not in status_line(app)


async def test_stuck_only(live_eval: LiveFactory) -> None:
    async with live_eval([row(), row(**IN_FLIGHT), row()], stuck_after_sec=0.5) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            stuck = None

            def one_stuck() -> bool:
                nonlocal stuck
                found = [r for r in board if board.is_stuck(r)]
                stuck = found[0].rollout_id if len(found) == 1 else None
                return stuck is not None and sum(r.finished for r in board) == 2

            await until(pilot, one_stuck)
            assert stuck is not None
            assert stuck == live.row_id(1)
            await pilot.press("exclamation_mark")
            assert app.table.order == [stuck]
            assert "stuck only" in status_line(app)
            stuck_id = stuck
            await until(pilot, lambda: "stuck" in row_text(app, stuck_id))
            summary = text_of(app.query_one("#summary"))
            assert "stuck 1" in summary
            await pilot.press("exclamation_mark")
            assert len(app.table.order) == 3


async def test_sort_cycles_and_the_cursor_follows_its_rollout(live_eval: LiveFactory) -> None:
    rows = [row(), row(**{"raise": "runtime"}), row(**IN_FLIGHT), row(answer="41")]
    async with live_eval(rows) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            await until(pilot, lambda: len(board) == 4 and sum(r.finished for r in board) == 3)
            await pilot.pause(0.4)
            table = app.table
            await pilot.press("home", "down", "down")
            chosen = table.cursor_id
            assert chosen == table.order[2]
            seen = ["order submitted"]
            # Without a baseline, `s` passes over the base column (it is not shown).
            cycled = {c: s for c, s in SORT_COLUMNS.items() if c != BASE}
            for _ in range(len(cycled) + 1):
                await pilot.press("s")
                assert table.cursor_id == chosen
                assert table.cursor_index == table.order.index(chosen)
                seen.append(status_line(app).split("sort: ")[1].split("  ")[0])
            assert seen[-1] == "order submitted"
            # Every column once, each in its first direction: in phase longest first.
            assert seen[1:-1] == [
                f"{TITLES[c]} {'▼' if s.descending else '▲'}" for c, s in cycled.items()
            ]
            assert "in phase ▼" in seen and "reward ▲" in seen
            await pilot.press("S")  # status: failures first, success last
            assert table.order[0] == live.row_id(1)
            assert table.cursor_id == chosen


async def test_p_freezes_the_screen(live_eval: LiveFactory) -> None:
    async with live_eval([row(sleep=1.0)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            rollout_id = await running_rollout(pilot, app)
            await until(pilot, lambda: "running" in row_text(app, rollout_id))
            await pilot.press("p")
            assert "SCREEN FROZEN" in status_line(app)
            record = app.board.records[rollout_id]
            await until(pilot, lambda: record.status == RolloutStatus.SUCCESS, timeout=5)
            await pilot.pause(0.5)  # a few repaint periods
            assert "running" in row_text(app, rollout_id)
            await pilot.press("p")
            assert "SCREEN FROZEN" not in status_line(app)
            assert "success" in row_text(app, rollout_id)


async def test_export_writes_jsonl_and_csv_without_secrets(
    live_eval: LiveFactory,
) -> None:
    secret = "sk-test-do-not-write-me"
    async with live_eval([row(), row(**{"raise": "runtime"})], llm_api_key=secret) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: live.source.finished and len(app.table.order) == 2)
            await pilot.press("e")
            exports = sorted(live.folder.parent.glob("osmosis-tui-export-*"))
            assert [p.suffix for p in exports] == [".csv", ".jsonl"]
            csv_file, jsonl_file = exports
            assert {p.stat().st_mode & 0o777 for p in exports} == {0o600}  # owner-only
            for path in exports:
                assert secret not in path.read_text()
            lines = [json.loads(line) for line in jsonl_file.read_text().splitlines()]
            assert [line["rollout_id"] for line in lines] == app.table.order
            assert [line["status"] for line in lines] == ["success", "failure"]
            assert lines[0]["reward"] == 1.0 and lines[1]["err_category"] == "agent_error"
            with csv_file.open(newline="") as handle:
                table = list(csv.DictReader(handle))
            assert list(table[0]) == list(EXPORT_FIELDS)
            assert [r["rollout_id"] for r in table] == app.table.order
            assert any("exported 2 rows" in line for line in log_lines(app))


async def test_event_log_toggles(live_eval: LiveFactory) -> None:
    async with live_eval([row()]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: live.source.finished)
            log = app.query_one(EventLog)
            assert not log.display
            await pilot.press("l")
            assert log.display and log.region.height > 0
            assert any("the run has ended" in line for line in log_lines(app))
            await pilot.press("l")
            assert not log.display


async def test_details_pane_opens_and_closes_with_enter(live_eval: LiveFactory) -> None:
    async with live_eval([row()]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: live.source.finished)
            pane = app.query_one(DetailsPane)
            await pilot.press("enter")
            await pilot.pause()
            assert pane.display
            assert live.row_id(0) in details_text(app)
            await pilot.press("enter")
            await pilot.pause()
            assert not pane.display


async def test_help_opens_with_question_mark_and_f1(live_eval: LiveFactory) -> None:
    async with live_eval([row()]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            for key in ("question_mark", "f1"):
                await pilot.press(key)
                await until(pilot, lambda: isinstance(app.screen, HelpScreen))
                assert isinstance(app.screen, HelpScreen)
                keys = dict(app.screen.bindings_shown)
                assert keys["c"] == "Cancel the selected rollout on its server"
                assert "/" in keys and "?, f1" in keys
                assert "." not in keys  # replay keys are not listed on a live run
                await pilot.press("escape")
                await until(pilot, lambda: not isinstance(app.screen, HelpScreen))


async def test_command_palette_lists_the_dashboard_commands(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: selected_status(app) == RUNNING)
            await pilot.press("ctrl+p")
            assert isinstance(app.screen, CommandPalette)
            await until(pilot, lambda: app.screen.query_one(OptionList).option_count > 0)
            options = app.screen.query_one(OptionList)
            titles = {
                str(options.get_option_at_index(i).prompt) for i in range(options.option_count)
            }
            for title in ("Cancel", "Untrack", "Export", "Stuck", "Cancel marked", "Help"):
                assert any(t.startswith(title) for t in titles), (title, titles)
            assert not any(t.startswith("Re-run") for t in titles)  # greyed for this row
            assert not any(t.startswith("Step") for t in titles)  # replay only
            await pilot.press(*"export", "enter")
            await until(pilot, lambda: any(live.folder.parent.glob("osmosis-tui-export-*")))
