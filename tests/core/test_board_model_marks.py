"""The model gateway as a source of phase truth (issue 24): a rollout's first model call
proves `running` from the call's start, for servers whose polls and events say nothing of it.

An official 0.3.8 server without its ownership events holds each poll until the next change:
the polls see `queued`, then the end. The board still holds the model calls that prove the
rollout ran; these tests pin the rule the board applies to them.
"""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from core.board import RolloutBoard
from core.eval.attach.mirror import BoardMirror
from core.eval.attach.protocol import MODEL_CALLS_SENT, record_state
from core.phases import PhaseMark
from core.rollout_record import RolloutRecord
from core.types import RolloutResultResponse, RolloutSample, RolloutStatus
from tests.core.test_board import ended, model_call

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
S = RolloutStatus.SUCCESS


def success(rollout_id: str) -> RolloutResultResponse:
    return RolloutResultResponse(
        rollout_id=rollout_id, status=S, sample=RolloutSample(messages=[], reward=1.0)
    )


def test_a_queued_rollout_that_calls_the_model_is_running_from_the_calls_start() -> None:
    board = RolloutBoard(stuck_after_sec=5.0)
    record = board.observe("r", Q, 1.143, grade=True)
    board.call_started(model_call("r", 1, started=1.373))
    # The poll still says queued (held until the next change): the call says better.
    assert record.observed.status is Q
    assert (record.status, record.display_status) == (R, "running")
    mark = record.marks[R]
    assert (mark.source, mark.at, mark.polled_at) == ("model", 1.373, None)
    assert record.phase_started_at == 1.373
    assert board.counts()["running"] == 1 and board.counts()["queued"] == 0
    # Stuck from the call's start, not from when a poll happens to see it.
    assert board.stuck_ids(now=6.3) == []
    assert board.stuck_ids(now=6.4) == ["r"] and board.is_stuck(record, now=6.4)
    assert len(board._durations[Q]) == 1 and board._durations[Q].median() == 1.373 - 1.143


def test_a_finished_rollout_that_called_the_model_did_not_run_unseen() -> None:
    board = RolloutBoard()
    record = board.observe("r", Q, 1.0, grade=True)
    call = model_call("r", 1, started=1.4)
    board.call_started(call)
    board.call_ended(ended(call, 2.0, total_tokens=9))
    board.observe("r", S, 31.0, result=success("r"))
    assert record.finished
    assert R not in record.skipped_phases()
    assert record.skipped_phases() == {G: "not_observed"}  # nothing proves grading's time
    assert [(m.status, m.source) for m in record.timeline()] == [
        (Q, "poll"),
        (R, "model"),
        (S, "poll"),
    ]


def test_calls_made_before_the_admission_answer_prove_running_once_it_is_on_the_board() -> None:
    board = RolloutBoard()
    board.call_started(model_call("early", 1, started=0.9))
    record = board.observe("early", Q, 1.0, grade=True)
    assert record.status is R and record.marks[R].at == 0.9


def test_the_servers_report_wins_and_an_earlier_poll_keeps_its_place() -> None:
    board = RolloutBoard()
    record = board.observe("r", Q, 1.0, grade=True)
    board.call_started(model_call("r", 1, started=2.0))
    board.server_mark("r", PhaseMark(R, 1.8, "server", event_sequence=2))
    assert (record.marks[R].source, record.marks[R].at) == ("server", 1.8)
    # A later model call changes nothing the server said.
    board.call_started(model_call("r", 2, started=2.5))
    assert record.marks[R].source == "server"

    polled = board.observe("p", Q, 1.0, grade=True)
    board.observe("p", R, 1.5)
    board.call_started(model_call("p", 3, started=2.0))
    assert (polled.marks[R].source, polled.marks[R].at) == ("poll", 1.5)


def test_a_poll_that_sees_running_after_the_call_is_kept_as_when_a_poll_saw_it() -> None:
    board = RolloutBoard(stuck_after_sec=10.0)
    record = board.observe("r", Q, 1.0, grade=True)
    board.call_started(model_call("r", 1, started=2.0))
    board.observe("r", R, 30.0)  # the held poll came back at the next change
    mark = record.marks[R]
    assert (mark.source, mark.at, mark.polled_at) == ("model", 2.0, 30.0)
    assert board.stuck_ids(now=12.5) == ["r"]


def test_a_call_after_a_later_phase_began_proves_nothing_of_running() -> None:
    # A grader that calls the model: grading began before the call, running was never seen.
    board = RolloutBoard()
    record = board.observe("r", Q, 1.0, grade=True)
    board.server_mark("r", PhaseMark(G, 3.0, "server", event_sequence=3))
    board.call_started(model_call("r", 1, started=4.0))
    assert R not in record.marks and record.status is G
    assert record.skipped_phases() == {R: "not_observed"}


def test_a_model_proof_is_not_written_as_a_transition_the_calls_are_its_record() -> None:
    # calls.jsonl keeps each call; a replay plays them back and the rule applies again.
    seen: list[PhaseMark] = []

    def hook(_record: RolloutRecord, mark: PhaseMark) -> None:
        seen.append(mark)

    board = RolloutBoard(on_transition=hook)
    board.observe("r", Q, 1.0, grade=True)
    board.call_started(model_call("r", 1, started=2.0))
    assert [(m.status, m.source) for m in seen] == [(Q, "poll")]


def test_a_board_attached_to_the_run_reads_running_from_the_first_call_too() -> None:
    # A dashboard of another process (`osmosis-tui attach`) is sent the record's state: the
    # latest calls only, and when its first call began; its board applies the same rule.
    run = RolloutBoard()
    run.started_at = 100.0
    record = run.observe("r", Q, 101.0, row_index=0, run_index=0, grade=True)
    for n in range(1, MODEL_CALLS_SENT + 3):  # more calls than a state carries
        call = model_call("r", n, started=101.5 + n)
        run.call_started(call)
        if n < MODEL_CALLS_SENT + 2:
            run.call_ended(ended(call, 101.9 + n))
    viewer = RolloutBoard()
    viewer.started_at = 500.0
    mirror = BoardMirror(viewer, canceller=cast(Any, None))
    mirror.apply([json.loads(json.dumps(record_state(record, run.started_at, first=True)))])
    copy = viewer.records["r"]
    assert copy.status is R
    mark = copy.marks[R]
    assert mark.source == "model" and mark.at == pytest.approx(500.0 + 2.5)
