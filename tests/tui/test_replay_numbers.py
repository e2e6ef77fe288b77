"""A replay of a real run says the run's own numbers: the live dashboard's counts, progress,
pass rate, mean reward and tokens, and its metrics.json's, with cancels, untracks, requeues and
rollouts sent by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.board import RolloutBoard
from core.eval.results.metrics import Progress
from server_stub.demo import MultiplyWorkflow
from tests.tui.helpers import (
    SIZE,
    Live,
    LiveFactory,
    details_text,
    log_lines,
    make_app,
    running_rollout,
    text_of,
    until,
)
from tests.tui.recordings import numbers, played_to_the_end, replay_app
from tui.screens.dialogs import NewRolloutScreen


def multiply(**metadata: Any) -> dict[str, Any]:
    """A row for the demo workflow, which asks the run's model (the stub) for the product."""
    return {"user_prompt": "What is 6 * 7?", "ground_truth": "42", "metadata": metadata}


# Row 0 sleeps before it asks the model (it is the one the test steers); 1 is answered
# wrong (reward 0), 2 fails at the model (HTTP 500); the rest pass.
ROWS = [
    multiply(sleep=30),
    multiply(stub="wrong"),
    multiply(stub="error"),
    multiply(),
    multiply(),
]


def what_shows(board: RolloutBoard, progress: Progress, now: float) -> dict[str, Any]:
    """What a dashboard shows of a run: its counts and progress, the model's totals, and each
    rollout's status, cancels, model calls and reward."""
    rollouts = {}
    for record in board:
        result = record.latest_result
        rollouts[record.rollout_id] = (
            record.display_status,
            record.untracked,
            record.manual,
            record.requeued_as,
            [cancel.disposition for cancel in record.cancels],
            record.model.calls,
            record.model.tokens,
            None if result is None or result.sample is None else result.sample.reward,
        )
    return {
        "counts": dict(board.counts(now)),
        "progress": numbers(progress),
        "model": (board.total_tokens, board.model_calls),
        "rollouts": rollouts,
    }


async def run_steered(live: Live, *keys: str) -> dict[str, Any]:
    """Run `live` on the dashboard, press `keys` on row 0 once it runs, let the run end;
    what the live dashboard showed at the end."""
    app = make_app(live)
    async with app.run_test(size=SIZE) as pilot:
        await running_rollout(pilot, app)
        await pilot.press(*keys)
        await until(pilot, lambda: live.source.finished, timeout=30)
        # The cancel flow's worker says the server's answer last: the app must outlive it.
        cancels = [cancel for record in live.source.board for cancel in record.cancels]
        if cancels:
            await until(pilot, lambda: any("cancel requested" in x for x in log_lines(app)))
        board = live.source.board
        return what_shows(board, live.source.progress(), app.now())


def assert_the_metrics_say_it(folder: Path, shown: dict[str, Any]) -> None:
    summary = json.loads((folder / "metrics.json").read_text())["summary"]
    progress = shown["progress"]
    assert progress["done"] == summary["total_samples"]
    assert progress["completed"] == summary["completed_samples"]
    assert progress["passed"] == summary["passed"]
    assert progress["pass_rate"] == summary["pass_rate"]
    assert progress["mean_reward"] == pytest.approx(summary["reward_stats"]["mean"])
    # Nothing cancelled asked the model: every token was a work item's.
    assert shown["model"][0] == summary["tokens_used"] > 0


async def test_a_run_with_a_cancel_replays_with_the_run_s_numbers(live_eval: LiveFactory) -> None:
    async with live_eval(ROWS, workflow=MultiplyWorkflow, pass_threshold=0.5) as live:
        live_shown = await run_steered(live, "c", "y")
    cancelled = live.row_id(0)
    assert live_shown["rollouts"][cancelled][:5] == (
        "cancelled",
        False,
        False,
        None,
        ["cancelled_running"],
    )
    assert live_shown["progress"]["done"] == 4 and live_shown["progress"]["not_dispatched"] == 0
    replayed = played_to_the_end(live.folder / "transitions.jsonl")
    assert what_shows(replayed.board, replayed.progress(), replayed.clock()) == live_shown
    assert_the_metrics_say_it(live.folder, live_shown)
    # On the dashboard: the end, the numbers, and a rollout's model calls in its details.
    app, source = replay_app(live.folder, speed=64)  # the run folder itself
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "end of recording" in text_of(app.end_banner))
        # Rows 3 and 4 pass; 1 was graded 0, 2 failed: 2 of 4 scored, mean of 0, 1 and 1.
        shown = "4/5  pass 50.0%  mean reward 0.667"
        await until(pilot, lambda: shown in text_of(app.summary))
        assert f"tokens {live_shown['model'][0]} " in text_of(app.summary)
        answered = live.row_id(3)
        app.table.move_cursor_to(answered)
        await pilot.press("enter")
        await until(pilot, lambda: "model calls" in details_text(app))
        assert "last reply   42" in details_text(app)
        assert source.warnings == []


async def test_a_run_with_an_untrack_replays_with_the_run_s_numbers(
    live_eval: LiveFactory,
) -> None:
    # Untracked when its `untrack` line says, or, in a recording without one, when the
    # invocation that had it in flight ended.
    async with live_eval(ROWS, workflow=MultiplyWorkflow, pass_threshold=0.5) as live:
        live_shown = await run_steered(live, "x")
    untracked = live.row_id(0)
    assert live_shown["rollouts"][untracked][:2] == ("running", True)
    assert live_shown["progress"]["in_flight"] == 0
    replayed = played_to_the_end(live.folder / "transitions.jsonl")
    assert what_shows(replayed.board, replayed.progress(), replayed.clock()) == live_shown
    assert_the_metrics_say_it(live.folder, live_shown)


async def test_a_run_with_a_requeue_and_a_rollout_sent_by_hand_replays_with_its_numbers(
    live_eval: LiveFactory,
) -> None:
    # Row 0 runs long enough to be requeued, and its new attempt for the one sent by hand.
    rows = [multiply(sleep=5), *ROWS[1:]]
    async with live_eval(rows, workflow=MultiplyWorkflow, pass_threshold=0.5) as live:
        app = make_app(live)
        async with app.run_test(size=SIZE) as pilot:
            old = await running_rollout(pilot, app)
            await pilot.press("R", "y")
            await until(pilot, lambda: app.board.records[old].requeued_as is not None)
            await pilot.press("n")
            await until(pilot, lambda: isinstance(app.screen, NewRolloutScreen))
            await pilot.press(*"What is 2 * 3?", "enter")
            await until(pilot, lambda: any("submitted" in line for line in log_lines(app)))
            await until(pilot, lambda: live.source.finished, timeout=30)
            live_shown = what_shows(live.source.board, live.source.progress(), app.now())
            live_dispatch = live.source.dispatch()
    new = live.source.board.records[old].requeued_as
    assert new is not None and live_shown["rollouts"][new][0] == "success"
    (manual,) = [rid for rid, shown in live_shown["rollouts"].items() if shown[2]]
    assert live_shown["progress"]["done"] == 5  # the requeued item's new attempt; not the manual
    replayed = played_to_the_end(live.folder)
    assert what_shows(replayed.board, replayed.progress(), replayed.clock()) == live_shown
    replayed_dispatch = replayed.dispatch()
    assert live_dispatch is not None and replayed_dispatch is not None
    assert replayed_dispatch.manual == live_dispatch.manual == 1
    # The limit the run began with, and kept: its `dispatch` line says it.
    assert replayed_dispatch.max_in_flight == live_dispatch.max_in_flight == 8
    summary = json.loads((live.folder / "metrics.json").read_text())["summary"]
    progress = live_shown["progress"]
    assert (progress["done"], progress["passed"]) == (summary["total_samples"], summary["passed"])
    assert progress["pass_rate"] == summary["pass_rate"]
    # The board's tokens are every model call's: the work items' (metrics.json's) and the
    # rollout sent by hand's.
    manual_tokens = replayed.board.records[manual].model.tokens or 0
    assert live_shown["model"][0] == summary["tokens_used"] + manual_tokens
