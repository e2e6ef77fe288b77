"""The dashboard reads `running` from a rollout's first model call (issue 24): the row, its
phase track and the details, live and in a replay, when no poll and no server event saw it.

A server that holds each poll until the next change (the official 0.3.8 one) and publishes no
ownership events lets the polls see `queued`, then the end: without the calls through the
gateway the row read `queued` while it waited on the model, and the details said that
`running` "happened unseen".
"""

from __future__ import annotations

from pathlib import Path

from core.board import RolloutBoard
from core.eval.results.calls import ModelCall
from core.types import RolloutStatus
from tests.tui.helpers import details_text, row_text
from tests.tui.recordings import replay_app, write_jsonl, write_recording
from tests.tui.states import NOW, SERVER, T0, WALL_T0, StaticSource, build_app, rollout_id

Q = "queued"


def waiting_board() -> RolloutBoard:
    """Row 3 as seen: queued by a poll at +1.143 s, calling the model from +1.373 s."""
    board = RolloutBoard(stuck_after_sec=30.0)
    board.started_at = T0
    rid = rollout_id(3)
    board.observe(rid, RolloutStatus.QUEUED, T0 + 1.143, row_index=3, run_index=0, grade=True)
    board.records[rid].server = SERVER
    board.call_started(
        ModelCall(
            call_id=1,
            rollout_id=rid,
            streamed=False,
            requested_model="osmosis-rollout",
            started_at=WALL_T0 + 1.373,
            started_monotonic=T0 + 1.373,
            request_text="What is 6 * 7?",
        )
    )
    board.take_changes()
    return board


async def test_a_row_waiting_on_the_model_reads_running_from_its_first_call() -> None:
    app = build_app(StaticSource(waiting_board(), total=1))
    rid = rollout_id(3)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        line = row_text(app, rid)
        assert "running" in line and Q not in line
        assert "●─◉" in line  # queued observed, running current
        assert app.board.stuck_ids(NOW) == [rid]  # 93.6 s in running, from the call's start
        await pilot.press("enter")
        await pilot.pause()
        details = details_text(app)
        assert "running   +1.373s from its first model call " in details
        assert "(current)" in details
        assert "happened unseen" not in details


async def test_a_replay_shows_running_from_the_first_model_call(tmp_path: Path) -> None:
    rid = "a" * 32
    path = write_recording(tmp_path, [(0.0, rid, 0, Q), (42.0, rid, 0, "success")])
    write_jsonl(
        tmp_path / "calls.jsonl",
        [
            {
                "kind": "model_call",
                "call_id": 1,
                "rollout_id": rid,
                "t": 1.373,
                "started_at": "2026-03-01T12:00:01.373000Z",
                "latency_s": 40.0,
                "status": 200,
                "streamed": False,
                "model": "stub",
                "total_tokens": 12,
                "request": "What is 6 * 7?",
                "reply": "42",
            }
        ],
    )
    app, source = replay_app(path)
    async with app.run_test(size=(150, 40)) as pilot:
        source.to_end()
        await pilot.pause()
        app.repaint()
        await pilot.press("enter")
        await pilot.pause()
        details = details_text(app)
        assert "+1.373s from its first model call" in details
        assert "happened unseen" in details  # grading: nothing proves when it happened
        running = next(line for line in details.splitlines() if "running" in line)
        assert "happened unseen" not in running
