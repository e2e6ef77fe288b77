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
    log_lines,
    row,
    status_line,
    text_of,
    until,
)
from tests.tui.recordings import (
    SLOW,
    played_to_the_end,
    replay_app,
    write_jsonl,
    write_recording,
    write_steered_run,
)
from tui.bindings import help_lines
from tui.screens.seek import SeekScreen, parse_time
from tui.sources.replay import ReplaySource

Q, R, G, OK, FAIL = "queued", "running", "grading", "success", "failure"


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
    # A run killed before it wrote a metrics.json: the manifest says the threshold it had.
    (live.folder / "metrics.json").unlink()
    assert (
        json.loads((live.folder / "manifest.json").read_text())["provenance"]["pass_threshold"]
        == 0.5
    )
    assert played_to_the_end(live.folder).progress().pass_rate == summary["pass_rate"]


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
        # The session's start and both queued: now waiting ~3 s for the next.
        await until(pilot, lambda: source.position == 3)
        await pilot.press("full_stop")
        await until(pilot, lambda: source.position == 4, timeout=1)
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


async def test_the_end_of_the_recording_says_so_until_the_replay_goes_back(tmp_path: Path) -> None:
    path = write_recording(tmp_path, SLOW)
    results = [{"rollout_id": c * 32, "row_index": n, "run_index": 0, "status": "success",
                "reward": 1.0} for n, c in enumerate("ab")]  # fmt: skip
    write_jsonl(tmp_path / "events.jsonl", results)
    app, source = replay_app(path, speed=64)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "end of recording" in text_of(app.end_banner))
        banner = text_of(app.end_banner)
        assert "end of recording: all 7 events played" in banner
        assert "2 of 2 work items have their result" in banner
        await pilot.press("comma")  # one event back: a is grading again
        await until(pilot, lambda: not app.end_banner.has_class("-shown"))
        assert source.paused and source.position == 6 and not source.finished
        assert app.board is source.board and app.table.board is source.board
        statuses = {r.rollout_id[0]: r.status for r in app.board}
        assert statuses == {"a": RolloutStatus.GRADING, "b": RolloutStatus.SUCCESS}
        assert source.progress().done == 1
        await until(pilot, lambda: "1/2" in text_of(app.summary))
        await pilot.press("greater_than_sign")
        await until(pilot, lambda: app.end_banner.has_class("-shown"))
        assert source.finished and app.board.records["a" * 32].status is RolloutStatus.SUCCESS


async def test_colon_jumps_to_a_time_and_lt_gt_to_the_start_and_the_end(tmp_path: Path) -> None:
    app, source = replay_app(write_recording(tmp_path, SLOW))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        assert source.paused
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, SeekScreen))
        await pilot.press(*"soon", "enter")
        assert isinstance(app.screen, SeekScreen)  # not a time: said, and asked again
        assert "not a time: 'soon'" in text_of(app.screen.query_one("#seek-error"))
        await pilot.press(*["backspace"] * 4, *"0:05", "enter")
        await until(pilot, lambda: not isinstance(app.screen, SeekScreen))
        # Every event up to 5 s played, none after; still paused.
        assert (source.position, source.played, source.paused) == (5, 5.0, True)
        await until(pilot, lambda: len(app.table.order) == 2)
        assert {r.rollout_id[0]: r.status for r in app.board} == {
            "a": RolloutStatus.RUNNING,
            "b": RolloutStatus.SUCCESS,
        }
        assert "5.0s of 8.0s" in source.subtitle
        await pilot.press("less_than_sign")
        await until(pilot, lambda: app.table.order == [])
        assert source.position == 0 and len(app.board) == 0
        await pilot.press("greater_than_sign")
        await until(pilot, lambda: len(app.table.order) == 2 and source.finished)
        await pilot.press("colon", "escape")  # closed: nothing moves
        assert source.finished and not isinstance(app.screen, SeekScreen)
        keys = dict(help_lines(app))
        assert keys[","] == "Replay: take back the last event played (pauses)"
        assert keys[":"] == "Replay: jump to a time (90, 1m30s or 1:30)"
        assert "Replay: back to the start of the recording" in keys.values()


async def test_the_event_log_tells_what_was_done_up_to_the_replayed_moment(tmp_path: Path) -> None:
    app, source = replay_app(write_steered_run(tmp_path / "steered"), speed=64)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: source.finished)
        await pilot.press("l")
        await until(pilot, lambda: any("max in flight set to 2" in x for x in log_lines(app)))
        everything = log_lines(app)
        assert [line.split("s  ", 1)[1] for line in everything] == [t for _, t in source.notes]
        assert everything[0].strip().startswith("0.7s")  # at the recording's time
        await pilot.press("p", "less_than_sign")  # paused: the start stays on the screen
        await until(pilot, lambda: log_lines(app) == [])
        await pilot.press("greater_than_sign")
        await until(pilot, lambda: log_lines(app) == everything)  # each line once
        # Paused at the end of the first invocation: said as recorded, with no key to steer it.
        await pilot.press("colon", *"1.6", "enter")
        await until(pilot, lambda: "dispatch paused" in status_line(app))
        assert "P resumes" not in status_line(app)
        assert "+1 manual" in text_of(app.summary)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        (" 1m30s ", 90.0),
        ("1m 30s", 90.0),
        ("2m", 120.0),
        ("1h2m3s", 3723.0),
        ("1:30", 90.0),
        ("1:02:03", 3723.0),
        ("0:05.5", 5.5),
        ("2.5", 2.5),
        ("", None),
        ("soon", None),
        ("-5", None),
        ("1:2:3:4", None),
        ("30s1m", None),
    ],
)
def test_times_the_seek_box_reads(text: str, seconds: float | None) -> None:
    assert parse_time(text) == seconds
