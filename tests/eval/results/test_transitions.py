"""`transitions.jsonl` (EVAL.md §6): the replay log, its record shapes and its flushing."""

from __future__ import annotations

from pathlib import Path

from core.eval.results.transitions import TransitionLog, read_transitions
from tests.eval.results.helpers import file_mode
from tests.polling import eventually_sync


def test_transition_records_and_their_shapes(tmp_path: Path) -> None:
    path = tmp_path / "transitions.jsonl"
    log = TransitionLog(path)
    log.record("r1", 0, 1, "queued", 0.0, grade=True)
    log.record("r1", 0, 1, "running", 0.12345)
    log.record(
        "r1", 0, 1, "grading", 0.2, source="server", server_time=1_796_112_000.5,
        event_sequence=7, server_id="host-a",
    )  # fmt: skip
    log.cancel_request("r1", 0, 1, t=2)
    log.cancel_request("r1", 0, 1, t=2, disposition="cancelled_running", reply_t=2.0304)
    log.cancel_request("r3", 2, 0, t=2.5, error="POST /rollout/cancel returned 500")
    log.close()
    log.close()  # idempotent
    assert file_mode(path) == 0o600
    records = list(read_transitions(path))
    assert records[0]["kind"] == "session"
    assert records[0]["t"] == 0.0
    assert records[0]["started_at"].endswith("Z")
    assert records[1:] == [
        {"kind": "status", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "status": "queued", "t": 0.0, "source": "poll", "grade": True},
        {"kind": "status", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "status": "running", "t": 0.123, "source": "poll"},
        {"kind": "status", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "status": "grading", "t": 0.2, "source": "server",
         "server_time": "2026-12-01T08:00:00.500000Z", "event_sequence": 7,
         "server_id": "host-a"},
        {"kind": "cancel_request", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "t": 2.0},
        {"kind": "cancel_request", "rollout_id": "r1", "row_index": 0, "run_index": 1,
         "t": 2.0, "disposition": "cancelled_running", "reply_t": 2.03},
        {"kind": "cancel_request", "rollout_id": "r3", "row_index": 2, "run_index": 0,
         "t": 2.5, "error": "POST /rollout/cancel returned 500"},
    ]  # fmt: skip


def test_what_the_user_did_has_records_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "transitions.jsonl"
    with TransitionLog(path) as log:
        log.control("pause", t=1.0)
        log.control("max_in_flight", t=1.5, value=3)
        log.control("resume", t=2.0)
        log.untrack("r1", 0, 1, t=2.5)
        log.requeue("r2", "r3", 4, 0, t=3.0)
        log.record("m1", None, None, "queued", 3.5, grade=True)
        log.manual("m1", None, t=3.5)
        log.manual("m2", 4, t=4.0, rerun_of="r3")
        log.untrack("m2", 4, None, t=4.5)
    assert list(read_transitions(path))[1:] == [
        {"kind": "control", "action": "pause", "t": 1.0},
        {"kind": "control", "action": "max_in_flight", "value": 3, "t": 1.5},
        {"kind": "control", "action": "resume", "t": 2.0},
        {"kind": "untrack", "rollout_id": "r1", "row_index": 0, "run_index": 1, "t": 2.5},
        {"kind": "requeue", "rollout_id": "r2", "new_rollout_id": "r3", "row_index": 4,
         "run_index": 0, "t": 3.0},
        {"kind": "status", "rollout_id": "m1", "status": "queued", "t": 3.5, "source": "poll",
         "grade": True},
        {"kind": "manual", "rollout_id": "m1", "t": 3.5},
        {"kind": "manual", "rollout_id": "m2", "row_index": 4, "rerun_of": "r3", "t": 4.0},
        {"kind": "untrack", "rollout_id": "m2", "row_index": 4, "t": 4.5},
    ]  # fmt: skip


def test_enum_statuses_are_written_as_their_values(tmp_path: Path) -> None:
    from core.types import CancelDisposition, RolloutStatus

    path = tmp_path / "transitions.jsonl"
    with TransitionLog(path) as log:
        log.record("r", 0, 0, RolloutStatus.GRADING, 1.0)
        log.cancel_request("r", 0, 0, t=1.0, disposition=CancelDisposition.NOT_FOUND)
    records = list(read_transitions(path))
    assert records[1]["status"] == "grading"
    assert records[2]["disposition"] == "not_found"


def test_transitions_reach_the_file_without_close(tmp_path: Path) -> None:
    path = tmp_path / "transitions.jsonl"
    log = TransitionLog(path, flush_interval_s=0.05)
    try:
        log.record("r", 0, 0, "running", log.elapsed())
        eventually_sync(
            lambda: b'"running"' in path.read_bytes(),
            "the flush timer to write the record",
            timeout=2,
            interval=0.01,
        )
    finally:
        log.close()


def test_the_default_flush_interval_is_half_a_second(tmp_path: Path) -> None:
    log = TransitionLog(tmp_path / "t.jsonl")
    try:
        assert log._interval <= 0.5
        log.record("r", 0, 0, "running", 0.0)
        assert b"running" not in (tmp_path / "t.jsonl").read_bytes()  # buffered, not per record
    finally:
        log.close()


def test_elapsed_counts_from_the_session_start(tmp_path: Path) -> None:
    now = [100.0]
    log = TransitionLog(tmp_path / "t.jsonl", started_at=90.0, clock=lambda: now[0])
    try:
        assert log.elapsed() == 10.0
        assert log.elapsed(95.5) == 5.5
        now[0] = 101.0
        assert log.elapsed() == 11.0
    finally:
        log.close()


def test_a_resumed_session_is_appended_after_cutting_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "transitions.jsonl"
    with TransitionLog(path) as log:
        log.record("a", 0, 0, "queued", 0.0)
    with path.open("ab") as stream:
        stream.write(b'{"kind": "status", "rollout_')
    warnings: list[str] = []
    assert [r["kind"] for r in read_transitions(path, on_warning=warnings.append)] == [
        "session",
        "status",
    ]
    assert warnings == []  # a torn last line is the normal result of a crash
    with TransitionLog(path) as log:
        log.record("b", 1, 0, "queued", 0.0)
    records = list(read_transitions(path))
    assert [r["kind"] for r in records] == ["session", "status", "session", "status"]
    assert records[-1]["rollout_id"] == "b"


def test_read_transitions_skips_bad_lines_and_reads_kindless_ones_as_status(
    tmp_path: Path,
) -> None:
    path = tmp_path / "transitions.jsonl"
    path.write_text(
        '{"rollout_id": "a", "row_index": 0, "run_index": 0, "status": "queued", "t": 0}\n'
        "oops\n"
        "[1, 2]\n"
        '{"kind": "status"}\n'
        '{"kind": "cancel_request", "rollout_id": "a", "row_index": 0, "run_index": 0, "t": 1}\n'
    )
    warnings: list[str] = []
    records = list(read_transitions(path, on_warning=warnings.append))
    assert [r["kind"] for r in records] == ["status", "cancel_request"]
    assert len(warnings) == 3
