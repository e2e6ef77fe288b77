"""What a replay plays of each kind of line a recording holds (core.eval.results.transitions,
core.eval.results.calls), and that a seek or a step back leaves the board a fresh replay has."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.eval.dispatch_gate import DispatchState
from core.types import RolloutStatus
from tests.tui.recordings import (
    B2,
    D2,
    OLD,
    A,
    B,
    C,
    D,
    M,
    board_state,
    numbers,
    played_to_the_end,
    write_jsonl,
    write_steered_run,
)
from tui.sources.replay import ReplaySource


def test_every_kind_of_line_plays_and_the_run_counts_as_it_did_live(tmp_path: Path) -> None:
    source = played_to_the_end(write_steered_run(tmp_path / "steered"))
    board = source.board
    assert numbers(source.progress()) == {
        # a, d2 (requeued d's item) and the result from before the recording pass at 0.5 (the
        # manifest's threshold: there is no metrics.json); b2 failed without a reward.
        "done": 4,
        "total": 6,
        "passed": 3,
        "completed": 4,
        "pass_rate": 0.75,
        "mean_reward": pytest.approx(2.5 / 3),
        "graded": 3,
        # c was untracked, m was sent by hand: neither is in flight; c's item waits for a
        # resume, as it did live: only row 5, never sent, is not dispatched.
        "in_flight": 0,
        "stuck": 0,
        "not_dispatched": 1,
    }
    states = {rid: r.display_status for rid, r in board.records.items()}
    assert states == {
        A: "success",
        B: "cancelled",
        C: "running",
        D: "cancelled",
        M: "success",
        D2: "success",
        B2: "failure",
        OLD: "success",  # from before the recording: as the journal has it
    }
    assert not board.records[OLD].phases_recorded and board.records[A].phases_recorded
    assert board.records[C].untracked and not board.records[C].in_flight
    assert board.counts()["untracked"] == 1
    # The server's reports are the marks' times; the poll that saw one too is kept beside it.
    running = board.records[A].marks[RolloutStatus.RUNNING]
    assert (running.source, running.event_sequence) == ("server", 1)
    assert running.at - board.started_at == pytest.approx(0.5)
    assert running.polled_at is not None
    assert running.polled_at - board.started_at == pytest.approx(0.6)
    assert board.records[A].marks[RolloutStatus.GRADING].source == "server"
    # The cancel: asked at 0.8, answered at 0.9, ended with the rollout at 1.0.
    (cancel,) = board.records[B].cancels
    assert cancel.disposition == "cancelled_running"
    assert cancel.requested_at - board.started_at == pytest.approx(0.8)
    assert cancel.answered_at is not None
    assert cancel.answered_at - board.started_at == pytest.approx(1.0)
    # Model calls: tokens on the rollouts and in the total (the manual one's too, as live),
    # and the tokens of the result from before the recording, whose calls it does not hold.
    assert (board.total_tokens, board.model_calls) == (22 + 3, 3)
    assert board.records[A].model.tokens == 10 and board.records[D2].model.tokens == 7
    # d2's call counts from the second session's start, which goes on where the first ended.
    (d2_call,) = board.records[D2].model.recent
    assert d2_call.started_monotonic - board.started_at == pytest.approx(1.6 + 0.3)
    assert source.dispatch() == DispatchState(paused=False, max_in_flight=2, in_flight=0, manual=1)
    assert board.records[M].manual and not board.records[A].manual
    assert board.records[D].requeued_as == D2
    assert [text for _t, text in source.notes] == [
        f"submitted {M[:10]} (by hand)",
        f"cancel requested for {B[:10]}",
        f"cancel {B[:10]}: cancelled_running",
        f"stopped tracking {C[:10]}; the server keeps it until its lease ends",
        f"requeued {D[:10]} as {D2[:10]}",
        f"cancel requested for {D[:10]}",
        f"cancel {D[:10]}: cancelled_running",
        "dispatch paused",
        "the run resumed (invocation 2)",
        "dispatch resumed",
        "max in flight set to 2",
    ]
    assert source.warnings == [
        f"{source.path}: passed over 1 line(s) of kind 'from_a_later_version', "
        "which this version does not replay"
    ]


def test_at_the_end_of_the_first_invocation(tmp_path: Path) -> None:
    source = ReplaySource(write_steered_run(tmp_path / "steered"))
    source.seek(1.6)
    assert numbers(source.progress()) | {"mean_reward": None} == {
        "done": 2,  # a, and the result from before the recording
        "total": 6,
        "passed": 2,
        "completed": 2,
        "pass_rate": 1.0,
        "mean_reward": None,
        "graded": 2,
        "in_flight": 0,
        # Row 5, and row 3, requeued: its new rollout is sent in the next invocation.
        "not_dispatched": 2,
        "stuck": 0,
    }
    assert source.dispatch() == DispatchState(paused=True, in_flight=0, manual=1)


def test_seeks_and_steps_back_leave_the_board_of_a_fresh_replay(tmp_path: Path) -> None:
    path = write_steered_run(tmp_path / "steered")
    source = played_to_the_end(path)
    events = len(source.events)
    for position in range(events - 1, -1, -1):
        source.step_back()
        fresh = ReplaySource(path)
        fresh.go_to(position)
        assert source.position == position and source.paused
        assert board_state(source) == board_state(fresh), position
    source.step_back()  # at the start already: nothing to take back
    assert source.position == 0 and len(source.board) == 0
    for seconds in (2.1, 0.25, 1.0, 0.0, 1.45, 99.0):
        source.seek(seconds)
        fresh = ReplaySource(path)
        fresh.seek(seconds)
        assert board_state(source) == board_state(fresh), seconds
    assert source.finished and source.played == source.length
    source.rewind()
    assert source.position == 0 and source.played == 0.0 and len(source.board) == 0


def test_a_cancel_of_an_older_version_has_only_its_answered_line(tmp_path: Path) -> None:
    folder = tmp_path / "old"
    folder.mkdir()
    rid = "e" * 32
    lines = [
        {"kind": "session", "t": 0.0},
        {"rollout_id": rid, "row_index": 0, "run_index": 0, "status": "running", "t": 0.1},
        {
            "kind": "cancel_request",
            "rollout_id": rid,
            "row_index": 0,
            "run_index": 0,
            "t": 0.5,
            "disposition": "cancelled_running",
        },
        {"rollout_id": rid, "row_index": 0, "run_index": 0, "status": "cancelled", "t": 0.7},
    ]
    (folder / "transitions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    board = played_to_the_end(folder / "transitions.jsonl").board
    (cancel,) = board.records[rid].cancels
    assert cancel.disposition == "cancelled_running"
    assert cancel.requested_at - board.started_at == pytest.approx(0.5)
    assert board.records[rid].status is RolloutStatus.CANCELLED


def test_a_result_the_recording_never_saw_end_counts_when_its_rollout_was_last_heard_of(
    tmp_path: Path,
) -> None:
    # A rollout past its item's deadline: cancelled on its server and untracked by the run,
    # which journaled it failed; its recording has no terminal status line.
    folder = tmp_path / "deadline"
    rid = "f" * 32
    lines = [
        {"kind": "session", "t": 0.0},
        {
            "kind": "status",
            "rollout_id": rid,
            "row_index": 0,
            "run_index": 0,
            "status": "running",
            "t": 0.1,
        },
        {"kind": "cancel_request", "rollout_id": rid, "row_index": 0, "run_index": 0, "t": 3.0},
        {"kind": "untrack", "rollout_id": rid, "row_index": 0, "run_index": 0, "t": 3.2},
    ]
    folder.mkdir()
    (folder / "transitions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "events.jsonl").write_text(
        json.dumps({"duration_ms": 3100.0, "error_type": "item_deadline_exceeded",
                    "rollout_id": rid, "row_index": 0, "run_index": 0, "status": "failed"})
        + "\n"
    )  # fmt: skip
    source = ReplaySource(folder)  # the folder, not only its transitions.jsonl
    source.seek(3.1)
    assert source.progress().done == 0
    source.seek(3.2)
    progress = source.progress()
    assert (progress.done, progress.completed, progress.passed, progress.in_flight) == (1, 1, 0, 0)


@pytest.mark.parametrize(
    ("state", "followed_at_the_end"), [("running", True), ("incomplete", False)]
)
def test_an_invocation_that_ended_no_longer_follows_what_it_had_in_flight(
    tmp_path: Path, state: str, followed_at_the_end: bool
) -> None:
    # A recording of a version that wrote no untrack lines: the first invocation was
    # interrupted with `left` running (left to its lease); the second one left `last` running.
    left, last = "1" * 32, "2" * 32

    def running(rid: str, row: int) -> dict[str, object]:
        return {"kind": "status", "rollout_id": rid, "row_index": row, "run_index": 0,
                "status": "running", "t": 0.2}  # fmt: skip

    lines = [{"kind": "session", "t": 0.0}, running(left, 0), {"kind": "session", "t": 0.0},
             running(last, 1)]  # fmt: skip
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "transitions.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "metrics.json").write_text(json.dumps({"eval_run": {"status": state}}))
    source = played_to_the_end(folder)
    records = source.board.records
    assert records[left].untracked and records[left].status is RolloutStatus.RUNNING
    # A run that still goes on (or was killed) has not ended its last invocation.
    assert records[last].in_flight is followed_at_the_end
    assert source.progress().in_flight == int(followed_at_the_end)
    assert source.notes[0] == (0.2, "invocation 1 ended with 1 in flight, no longer followed")


def test_a_rollout_never_admitted_and_the_limit_the_run_began_with_are_played(
    tmp_path: Path,
) -> None:
    never = "e" * 32
    path = write_jsonl(
        tmp_path / "run" / "transitions.jsonl",
        [
            {"kind": "session", "t": 0.0, "started_at": "2026-03-01T12:00:00Z"},
            {"kind": "dispatch", "max_in_flight": 3, "t": 0.0},
            {
                "kind": "status",
                "rollout_id": A,
                "status": "queued",
                "t": 0.1,
                "row_index": 0,
                "run_index": 0,
            },
            {
                "kind": "not_admitted",
                "rollout_id": never,
                "row_index": 1,
                "run_index": 0,
                "source_row_index": 7,
                "t": 0.2,
                "error": "POST /rollout returned 503",
            },
            {"kind": "not_admitted", "t": 0.3, "error": "no id"},
            {"kind": "dispatch", "t": 0.4},
        ],
    )
    source = ReplaySource(path)
    source.to_end()
    record = source.board.records[never]
    assert record.admission_error == "POST /rollout returned 503"
    assert (record.row_index, record.run_index, record.source_row_index) == (1, 0, 7)
    assert record.submitted_at - source.board.started_at == pytest.approx(0.2)
    dispatch = source.dispatch()
    assert dispatch is not None and dispatch.max_in_flight == 3
    assert source.warnings == [
        f"{path}: skipped a not_admitted line without a rollout id",
        f"{path}: skipped a dispatch line without its limit",
    ]
