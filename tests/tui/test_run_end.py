"""Once the run is over the dashboard says so and stops: a banner with why it ended and how to
resume, a clock, ETA and durations that stand still, servers shown as they really are, and
no action that would need a connection the run has closed."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from core.eval import EvalRequest, prepare
from core.eval.servers import pool as servers_module
from core.types import RolloutStatus
from tests.tui.helpers import (
    CHAT_URL,
    SIZE,
    LiveFactory,
    log_lines,
    make_app,
    row,
    row_text,
    running_rollout,
    text_of,
    toasts,
    until,
)
from tui.app import DashboardApp, create_app
from tui.screens.dialogs import ConfirmScreen
from tui.sources.live import LiveSource

IN_FLIGHT = {"sleep": 30}


def banner(app: DashboardApp) -> str:
    return text_of(app.end_banner) if app.end_banner.display else ""


def drawn(app: DashboardApp) -> tuple[str, str, list[str]]:
    """What moves while a run goes on: the header, the summary strip and every row."""
    rows = [row_text(app, rid) for rid in app.table.order]
    return text_of(app.header), text_of(app.summary), rows


async def test_a_finished_run_stops_its_clock_and_says_so(live_eval: LiveFactory) -> None:
    async with live_eval([row(), row()]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            assert banner(app) == ""
            await until(pilot, lambda: "finished" in banner(app))
            assert "Run live finished" in banner(app)
            assert "ETA" not in text_of(app.summary)
            before = drawn(app)
            await pilot.pause(2.2)  # two ticks of the clock, and a throughput sample
            assert drawn(app) == before


async def test_a_run_ending_with_only_the_items_the_user_cancelled_says_so(
    live_eval: LiveFactory,
) -> None:
    """The demo's flagship flow, cancelling its stuck rows, ends with them pending (a cancelled
    rollout has no result): said as what the user did, not as a run that stopped short."""
    async with live_eval([row(**IN_FLIGHT), row()]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await running_rollout(pilot, app)
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await until(pilot, lambda: banner(app) != "", timeout=15)
            said = " ".join(banner(app).split())
    assert (
        "Run live ended with the 1 work item you cancelled left pending "
        "(a cancelled rollout has no result)" in said
    ), said
    assert "stopped before every work item finished" not in said
    assert "Resume the pending work items" in said


async def test_a_run_whose_only_server_died_says_why_and_how_to_resume(
    live_eval: LiveFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(servers_module, "RECOVERY_GRACE_SEC", 0.5)
    async with live_eval([row(), row(**IN_FLIGHT), row(**IN_FLIGHT)], max_in_flight=2) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            board = app.board
            await until(
                pilot,
                lambda: board.counts()["success"] == 1 and board.counts()["running"] == 2,
            )
            in_flight = [r.rollout_id for r in board if r.status == RolloutStatus.RUNNING]
            await live.take_server_down()
            await until(pilot, lambda: banner(app) != "", timeout=15)
            said = " ".join(banner(app).split())
            assert "Run live stopped before every work item finished" in said
            assert "stopped: every rollout server is down" in said
            resume = (
                f"Resume the pending work items: osmosis-tui eval --server {live.url} --name live"
            )
            assert resume in said
            # The server as it was last seen, no longer watched: a hollow dot, "down".
            header = text_of(app.header)
            assert f"○ {live.url.removeprefix('http://')} down" in header
            # The rows whose polling died are no longer in flight: untracked (their status
            # is the last one seen), and nothing can leave them "cancelling…".
            for rollout_id in in_flight:
                assert not board.records[rollout_id].in_flight
                assert "untracked" in row_text(app, rollout_id)
            before = drawn(app)
            await pilot.pause(1.2)
            assert drawn(app) == before  # their durations do not grow
            # Nothing can be cancelled any more: the key is greyed out and asks nothing.
            app.table.move_cursor_to(in_flight[0])
            assert app.check_action("cancel_server", ()) is None
            await pilot.press("c")
            assert not isinstance(app.screen, ConfirmScreen)
            assert not any("closed" in toast for toast in toasts(app))


async def test_a_cancel_answered_after_the_run_ended_says_nothing_was_sent(
    live_eval: LiveFactory,
) -> None:
    async with live_eval([row(**IN_FLIGHT)]) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            rollout_id = await running_rollout(pilot, app)
            await pilot.press("c")
            assert isinstance(app.screen, ConfirmScreen)
            await live.source.interrupt(cancel_in_flight=False)  # the run ends meanwhile
            await until(pilot, lambda: banner(app) != "")
            await pilot.press("y")
            await until(pilot, lambda: any("nothing was sent" in line for line in log_lines(app)))
            assert live.entries[rollout_id].disposition is None
            assert not toasts(app)  # no error: nothing was tried


async def test_the_embedded_demo_server_shows_as_stopped_once_the_run_is_over(
    tmp_path: Path,
) -> None:
    plan = prepare(EvalRequest(output=tmp_path / "out", name="demo", limit=2))
    source = LiveSource(plan, rerun="osmosis-tui eval")
    app = create_app(source, export_dir=tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "● 127.0.0.1:" in text_of(app.header), timeout=30)
            await until(pilot, lambda: banner(app) != "", timeout=60)
            assert "○ 127.0.0.1:" in text_of(app.header)
            assert "stopped" in text_of(app.header)
            assert "Run demo finished" in banner(app)
    finally:
        await source.close()


async def test_a_server_being_first_read_is_said_and_not_shown_up(tmp_path: Path) -> None:
    # A server that takes connections and never answers: the run waits for its health, and
    # the header holds the servers' place meanwhile.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text('{"user_prompt": "What is 2 * 7?", "ground_truth": "14"}\n')
    plan = prepare(
        EvalRequest(
            servers=(url,), dataset_file=dataset, output=tmp_path / "out", chat_url=CHAT_URL
        )
    )
    source = LiveSource(plan, rerun="osmosis-tui eval")
    app = create_app(source, export_dir=tmp_path)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "/health" in text_of(app.header))
            header = text_of(app.header)
            await source.interrupt(cancel_in_flight=False)
    finally:
        await source.close()
        silent.close()
    # The step in progress, once, and the server not shown as up before it answered.
    assert f"◌ reading /health of {url}" in header
    assert "starting" not in header
    assert "●" not in header
