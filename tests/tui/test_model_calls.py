"""The dashboard shows each rollout's model calls as they happen (a live eval, the stub model)."""

from __future__ import annotations

from core.eval.gateway.errors import PreflightError
from core.eval.servers.launcher import free_port
from server_stub.demo import MultiplyWorkflow
from tests.tui.helpers import (
    SIZE,
    LiveFactory,
    details_text,
    log_lines,
    make_app,
    row,
    row_text,
    text_of,
    until,
)
from tui.widgets.summary import SummaryStrip


async def test_a_call_waiting_for_the_model_shows_on_its_row_and_in_the_details(
    live_eval: LiveFactory,
) -> None:
    rows = [{"user_prompt": "What is 6 * 7?", "ground_truth": "42", "metadata": {"stub": "slow:3"}}]
    async with live_eval(rows, workflow=MultiplyWorkflow) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            board = app.board
            await until(pilot, lambda: len(board) == 1 and bool(next(iter(board)).model.in_flight))
            rollout_id = live.row_id(0)
            await until(pilot, lambda: app.table.order == [rollout_id])
            await until(pilot, lambda: "model 1" in row_text(app, rollout_id), timeout=5)
            await pilot.press("enter")  # the details pane (the table narrows: no model column)
            await pilot.pause(0.1)
            details = details_text(app)
            assert "model calls" in details and "waiting 1" in details
            assert "last request What is 6 * 7?" in details
            await until(pilot, lambda: board.records[rollout_id].finished)
            await until(pilot, lambda: "last reply   42" in details_text(app))  # a repaint
            await pilot.press("enter")
            await until(pilot, lambda: "1 call" in row_text(app, rollout_id))
            tokens = board.records[rollout_id].model.tokens
            assert tokens is not None and tokens > 0
            assert f" {tokens} 1 call" in row_text(app, rollout_id)
            assert f"tokens {tokens} (" in text_of(app.query_one(SummaryStrip))


async def test_a_model_that_fails_the_preflight_is_said_and_kept_for_the_exit_status(
    live_eval: LiveFactory,
) -> None:
    nobody = f"http://127.0.0.1:{free_port()}/v1"
    async with live_eval([row()], chat_url=nobody) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.run_state == "ended")
            assert isinstance(live.source.refused, PreflightError)  # the CLI exits 2 with it
            assert any("model preflight for 'osmosis-stub' failed" in t for t in log_lines(app))
            assert len(app.board) == 0  # no rollout was sent
