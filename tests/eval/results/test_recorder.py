"""`TransitionRecorder`: the board's hooks and the run's steering, as transitions.jsonl lines
whose fields come from the rollout's record."""

from __future__ import annotations

from pathlib import Path

from core.board import RolloutBoard
from core.eval.results.recorder import TransitionRecorder
from core.eval.results.recording import StatusSeen, read_recording
from core.eval.results.transitions import TransitionLog, read_transitions
from core.handle import Transition
from core.phases import PhaseMark
from core.reported_by import ReportedBy
from core.rollout_record import RecordedRollout, RolloutRecord
from core.types import RolloutStatus


def test_the_board_s_hooks_write_the_record_s_fields_once_the_folder_is_open(
    tmp_path: Path,
) -> None:
    recorder = TransitionRecorder()
    board = RolloutBoard(
        on_transition=recorder.status,
        on_cancel=recorder.cancel,
        on_not_admitted=recorder.not_admitted,
    )
    board.record_not_admitted("early", "refused", row_index=0, run_index=0)  # no folder yet
    path = tmp_path / "transitions.jsonl"
    clock = [100.0]
    log = TransitionLog(path, clock=lambda: clock[0])
    recorder.record_to(log)
    clock[0] = 101.5
    record = board.record_not_admitted(
        "r1", "refused: full", row_index=3, run_index=1, source_row_index=7, submitted_at=100.25
    )
    recorder.untracked(record)
    recorder.requeued(record, "r2")
    recorder.sent_by_hand(record, "r0")
    recorder.dispatch_started(4)
    recorder.steered("max_in_flight", 2)
    log.close()
    lines = [line for line in read_transitions(path) if line["kind"] != "session"]
    assert lines == [
        {"kind": "not_admitted", "rollout_id": "r1", "row_index": 3, "run_index": 1,
         "source_row_index": 7, "t": 0.25, "error": "refused: full"},
        {"kind": "untrack", "rollout_id": "r1", "row_index": 3, "run_index": 1, "t": 1.5},
        {"kind": "requeue", "rollout_id": "r1", "new_rollout_id": "r2", "row_index": 3,
         "run_index": 1, "t": 1.5},
        {"kind": "manual", "rollout_id": "r1", "row_index": 3, "rerun_of": "r0", "t": 1.5},
        {"kind": "dispatch", "max_in_flight": 4, "t": 1.5},
        {"kind": "control", "action": "max_in_flight", "value": 2, "t": 1.5},
    ]  # fmt: skip


def test_a_rollouts_first_status_line_keeps_when_it_was_sent_and_a_replay_reads_it(
    tmp_path: Path,
) -> None:
    recorder = TransitionRecorder()
    path = tmp_path / "transitions.jsonl"
    log = TransitionLog(path, clock=lambda: 100.0)
    recorder.record_to(log)
    # Sent at +0.25 s, admitted (its first status) at +0.75 s after two 429s, then running.
    admitted = Transition(RolloutStatus.QUEUED, 100.75)
    record = RolloutRecord(
        rollout_id="r",
        row_index=0,
        run_index=0,
        request=None,
        server="",
        submitted_at=100.25,
        observed=RecordedRollout(transitions=[admitted]),
    )
    recorder.status(record, PhaseMark(RolloutStatus.QUEUED, 100.75, "poll"))
    recorder.status(record, PhaseMark(RolloutStatus.RUNNING, 101.0, "poll"))
    log.close()
    lines = [line for line in read_transitions(path) if line["kind"] == "status"]
    assert [(line["status"], line["t"], line.get("sent_t")) for line in lines] == [
        ("queued", 0.75, 0.25),
        ("running", 1.0, None),
    ]
    warnings: list[str] = []
    seen = [e for e in read_recording(path, warnings) if isinstance(e, StatusSeen)]
    assert [(e.status, e.t, e.sent) for e in seen] == [
        (RolloutStatus.QUEUED, 0.75, 0.25),
        (RolloutStatus.RUNNING, 1.0, None),
    ]
    assert warnings == []


def test_a_watched_rollout_s_lines_say_whose_it_is_and_read_back_as_such(tmp_path: Path) -> None:
    recorder = TransitionRecorder()
    board = RolloutBoard(on_transition=recorder.status)
    path = tmp_path / "transitions.jsonl"
    log = TransitionLog(path, clock=lambda: 100.0)
    recorder.record_to(log)
    owner = ReportedBy("srv-a", namespace="team", run_name="nightly")
    for status, at in ((RolloutStatus.QUEUED, 100.5), (RolloutStatus.CANCELLED, 101.0)):
        mark = PhaseMark(
            status, at, "server", server_time=1e9 + at, event_sequence=1, server_id="srv-a"
        )
        board.server_report("w1", mark, owner)
    log.close()
    lines = [line for line in read_transitions(path) if line["kind"] != "session"]
    assert [(line["status"], line["source"]) for line in lines] == [
        ("queued", "server"),
        ("cancelled", "server"),
    ]
    assert all(
        line["reported_by"] == {"server_id": "srv-a", "namespace": "team", "run_name": "nightly"}
        for line in lines
    )
    seen = [event for event in read_recording(path, []) if isinstance(event, StatusSeen)]
    assert [event.reported_by for event in seen] == [owner, owner]
