"""`osmosis-tui replay`: a recorded run played back on the read-only dashboard."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.types import RolloutStatus
from tests.server.plugins import RewardFromMetadata
from tests.tui.helpers import (
    SIZE,
    LiveFactory,
    details_text,
    row,
    status_line,
    text_of,
    until,
)
from tui.app import DashboardApp, create_app
from tui.sources.replay import ReplaySource

Q, R, G, OK, FAIL = "queued", "running", "grading", "success", "failure"


def write_recording(folder: Path, statuses: list[tuple[float, str, int, str]]) -> Path:
    """A transitions.jsonl in the documented format: a session line, then status lines."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [{"kind": "session", "t": 0.0, "started_at": "2026-03-01T12:00:00Z"}]
    for t, rollout_id, row_index, status in statuses:
        lines.append(
            {
                "kind": "status",
                "rollout_id": rollout_id,
                "row_index": row_index,
                "run_index": 0,
                "source_row_index": row_index,  # every row of the dataset
                "status": status,
                "t": t,
            }
        )
    path = folder / "transitions.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def replay_app(path: Path, speed: float = 1.0) -> tuple[DashboardApp, ReplaySource]:
    source = ReplaySource(path, speed=speed)
    return create_app(source, clock=source.clock, export_dir=path.parent), source


SLOW = [
    (0.0, "a" * 32, 0, Q),
    (0.05, "b" * 32, 1, Q),
    (3.0, "a" * 32, 0, R),
    (4.0, "b" * 32, 1, OK),  # running and grading between two polls: not observed
    (6.0, "a" * 32, 0, G),
    (8.0, "a" * 32, 0, OK),
]


async def test_a_real_recording_plays_to_the_end(live_eval: LiveFactory) -> None:
    ungraded = {"user_prompt": "6 * 7?", "ground_truth": "42", "metadata": {}, "grade": False}
    async with live_eval([row(), row(**{"raise": "runtime"}), ungraded]) as live:
        await live.source.run()  # the recording: a real eval, without a dashboard
        recorded = {r.rollout_id: r.status for r in live.source.board}
    app, source = replay_app(live.folder / "transitions.jsonl", speed=64)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.finished and len(app.table.order) == 3)
        assert {r.rollout_id: r.status for r in app.board} == recorded
        rewards = {
            r.row_index: r.latest_result.sample.reward
            for r in app.board
            if r.latest_result and r.latest_result.sample
        }
        assert rewards == {0: 1.0}  # from events.jsonl beside the recording
        (replayed_ungraded,) = [r for r in app.board if r.row_index == 2]
        assert replayed_ungraded.skipped_phases()[RolloutStatus.GRADING] == "not_requested"
        assert source.progress().done == 3
        assert "replay (read-only)" in status_line(app)


async def test_a_replay_counts_with_the_run_s_own_pass_threshold(live_eval: LiveFactory) -> None:
    # At the run's threshold of 0.5 three of the four pass; at the default 1.0, one would.
    rows = [row(reward=reward) for reward in (1.0, 0.7, 0.5, 0.3)]
    async with live_eval(rows, pass_threshold=0.5, grader=RewardFromMetadata) as live:
        await live.source.run()
        during_the_run = live.source.progress()
    summary = json.loads((live.folder / "metrics.json").read_text())["summary"]
    assert summary["pass_threshold"] == 0.5 and summary["pass_rate"] == 0.75
    assert during_the_run.pass_rate == summary["pass_rate"]
    app, source = replay_app(live.folder / "transitions.jsonl", speed=64)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.finished)
        replayed = source.progress()
        assert replayed.pass_rate == summary["pass_rate"]
        assert (replayed.done, replayed.total, replayed.completed) == (4, 4, 4)
        assert replayed.mean_reward == pytest.approx(summary["reward_stats"]["mean"])
        await until(pilot, lambda: "pass 75.0%" in text_of(app.summary))


async def test_pause_step_and_speed(tmp_path: Path) -> None:
    app, source = replay_app(write_recording(tmp_path, SLOW))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.position >= 1)
        await pilot.press("p")
        assert source.paused
        paused_at = source.position
        await pilot.pause(0.4)
        assert source.position == paused_at
        for expected in (paused_at + 1, paused_at + 2):
            await pilot.press("full_stop")
            await until(pilot, lambda: source.position == expected, timeout=2)  # noqa: B023
        assert source.paused
        await pilot.press("plus")
        assert source.speed == 2.0
        await pilot.press("minus", "minus")
        assert source.speed == 0.5
        assert "paused" in source.subtitle
        for _ in range(8):
            await pilot.press("plus")
        await pilot.press("p")
        assert not source.paused and "128x" in source.subtitle
        await until(pilot, lambda: source.finished and len(app.table.order) == 2)
        assert {r.rollout_id[0]: r.status for r in app.board} == {
            "a": RolloutStatus.SUCCESS,
            "b": RolloutStatus.SUCCESS,
        }


async def test_a_step_pressed_while_playing_pauses_and_plays_one_event(tmp_path: Path) -> None:
    app, source = replay_app(write_recording(tmp_path, SLOW))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.position == 2)  # now waiting ~3 s for the next
        await pilot.press("full_stop")
        await until(pilot, lambda: source.position == 3, timeout=1)
        assert source.paused


async def test_enter_opens_the_details_of_a_replayed_rollout(tmp_path: Path) -> None:
    app, source = replay_app(write_recording(tmp_path, SLOW), speed=64)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.finished and len(app.table.order) == 2)
        app.table.move_cursor_to("b" * 32)
        await pilot.press("enter")
        await pilot.pause()
        assert app.details.display
        text = details_text(app)
        assert "b" * 32 in text
        assert text.count("happened unseen") == 2  # running and grading
        # Steering makes no sense in a replay: those keys are not offered at all.
        assert app.check_action("cancel_server", ()) is False
        assert "c" not in app.screen.active_bindings
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None, timeout=2)


async def test_q_leaves_a_replay_at_once(tmp_path: Path) -> None:
    app, source = replay_app(write_recording(tmp_path, SLOW))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.position >= 1)
        await pilot.press("q")
        await until(pilot, lambda: app.return_code is not None, timeout=2)
        assert not source.finished


def test_a_replay_reads_the_previews_beside_its_recording(tmp_path: Path) -> None:
    path = write_recording(tmp_path / "run", SLOW)
    assert ReplaySource(path).preview_root is None
    (tmp_path / "run" / "previews").mkdir()
    assert ReplaySource(path).preview_root == tmp_path / "run" / "previews"
