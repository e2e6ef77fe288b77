"""Every way out of the dashboard (`q`, ctrl+q, ctrl+c, the palette's Quit): with rollouts in
flight it asks first (cancel on the server / leave / back), and however the app ends, the run
ends its own way and its results are written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import OptionList, Static

from core.board import RolloutBoard
from core.eval import EvalRequest, prepare
from core.types import RolloutStatus
from tests.eval.runs.files import multiply_rows, write_jsonl
from tests.tui.helpers import (
    SIZE,
    LiveFactory,
    make_app,
    row,
    running_rollout,
    text_of,
    toasts,
    until,
)
from tui.app import create_app
from tui.commands.dashboard import run_and_close
from tui.screens.dialogs import ConfirmScreen, QuitScreen
from tui.sources.live import LiveSource

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


def question(screen: QuitScreen) -> str:
    """What the quit screen asks, as one line (the dialog wraps it to its width)."""
    return " ".join(text_of(screen.query_one(Static)).split())


LEASE = "the server fails each one when its polling lease expires"
ENDS_WITH_THE_RUN = "the rollout server this run started stops with it, and they end with it"


async def test_the_question_about_one_rollout_on_a_server_of_its_own(
    live_eval: LiveFactory,
) -> None:
    # --server: the server lives on after the run, and so does what is left on it.
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 1)
            await pilot.press("q")
            assert isinstance(app.screen, QuitScreen)
            shown = question(app.screen)
            await pilot.press("b")
    assert "1 rollout is still in flight." in shown
    assert LEASE in shown and ENDS_WITH_THE_RUN not in shown


async def test_leaving_them_on_the_runs_own_server_says_they_end_with_it(tmp_path: Path) -> None:
    # The demo's server is the run's (as a workspace's launched one is): it stops as the run
    # ends, so no lease is left to run out.
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2, metadata={"sleep": 30}))
    plan = prepare(EvalRequest(output=tmp_path / "out", name="demo", dataset_file=dataset))
    assert plan.mode == "embedded"
    source = LiveSource(plan, rerun="osmosis-tui eval")
    app = create_app(source, export_dir=tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 2, timeout=30)
            await pilot.press("q")
            assert isinstance(app.screen, QuitScreen)
            shown = question(app.screen)
            await pilot.press("l")
            await until(pilot, lambda: app.return_code is not None, timeout=30)
    finally:
        await source.close()
    assert "2 rollouts are still in flight." in shown
    assert ENDS_WITH_THE_RUN in shown and LEASE not in shown


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


@pytest.mark.parametrize("key", ["ctrl+q", "ctrl+c"])
async def test_every_quit_key_asks_the_same_question(live_eval: LiveFactory, key: str) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 1)
            await pilot.press(key)
            assert isinstance(app.screen, QuitScreen)
            assert app.return_code is None
            assert not any("ctrl+q" in toast for toast in toasts(app, "information"))
            await pilot.press(key)  # asked already: the same question stays, once
            assert len([s for s in app.screen_stack if isinstance(s, QuitScreen)]) == 1
            await pilot.press("l")
            await until(pilot, lambda: app.return_code is not None)
        assert live.source.summary is not None
        assert live.source.summary.status == "interrupted"


async def test_the_palette_has_one_quit_and_it_asks(live_eval: LiveFactory) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 1)
            titles = [command.title for command in app.get_system_commands(app.screen)]
            assert titles.count("Quit") == 1, titles
            await pilot.press("ctrl+p")
            assert isinstance(app.screen, CommandPalette)
            await until(pilot, lambda: app.screen.query_one(OptionList).option_count > 0)
            await pilot.press(*"quit")
            await until(pilot, lambda: app.screen.query_one(OptionList).option_count == 1)
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, QuitScreen))
            assert app.return_code is None
            await pilot.press("b")


def written_state(folder: Path) -> tuple[str, list[str]]:
    """metrics.json's run status, and the statuses index.jsonl holds."""
    metrics = json.loads((folder / "metrics.json").read_text())
    index = [json.loads(line) for line in (folder / "index.jsonl").read_text().splitlines()]
    return metrics["eval_run"]["status"], [line["status"] for line in index]


async def test_leaving_at_once_still_ends_the_run_and_writes_its_results(
    live_eval: LiveFactory,
) -> None:
    """q, cancel, then q again while the run winds down: the app is gone at once, and the
    session still ends its own way (results written, the summary there for the CLI)."""
    async with live_eval([row(), row(**IN_FLIGHT)]) as live:
        app = make_app(live)

        async def quit_twice(pilot: Pilot[None]) -> None:
            await until(
                pilot,
                lambda: len(running_ids(app.board)) == 1 and app.board.counts()["success"] == 1,
            )
            await pilot.press("q", "c", "q")

        await run_and_close(app, headless=True, size=SIZE, auto_pilot=quit_twice)
        summary = live.source.summary
        assert summary is not None and summary.status == "interrupted"
        assert written_state(live.folder) == ("incomplete", ["success"])


async def test_an_app_that_exits_from_anywhere_still_writes_the_results(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(), row(**IN_FLIGHT)]) as live:
        app = make_app(live)

        async def exit_now(pilot: Pilot[None]) -> None:
            await until(
                pilot,
                lambda: len(running_ids(app.board)) == 1 and app.board.counts()["success"] == 1,
            )
            app.exit(return_code=1)  # as an error anywhere in the app would end it

        await run_and_close(app, headless=True, size=SIZE, auto_pilot=exit_now)
        (rollout_id,) = [r.rollout_id for r in live.source.board if r.row_index == 1]
        assert live.entries[rollout_id].disposition is None  # left to its lease
        summary = live.source.summary
        assert summary is not None and summary.status == "interrupted"
        assert written_state(live.folder) == ("incomplete", ["success"])


async def test_every_cancel_is_in_logs_txt_step_control(live_eval: LiveFactory) -> None:
    # `c` on one row, then quitting with "cancel them" for the rest: each cancel asked, and
    # each answer, is a `[control]` line of logs.txt (as pause, requeue and untrack are).
    async with live_eval([row(**IN_FLIGHT), row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: len(running_ids(app.board)) == 2)
            first = await running_rollout(pilot, app)
            (second,) = set(running_ids(app.board)) - {first}
            await pilot.press("c")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await until(pilot, lambda: bool(app.board.records[first].cancels))
            await pilot.press("q", "c")
            await until(pilot, lambda: app.return_code is not None)
        logs = (live.folder / "logs.txt").read_text().splitlines()
    control = [line for line in logs if " [control] " in line]
    for rollout_id in (first, second):
        mine = [line for line in control if rollout_id in line]
        assert any("cancel asked of the rollout's server" in line for line in mine), control
        assert any("its server answered the cancel: cancelled_" in line for line in mine), control
