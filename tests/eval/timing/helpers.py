"""Boards with known rollouts for the timing room's tests: statuses as polls and a server
report them, model calls as the gateway reports them, all at chosen instants."""

from __future__ import annotations

from dataclasses import replace

from core.board import RolloutBoard
from core.eval.results.calls import ModelCall
from core.phases import PhaseMark
from core.rollout_record import RolloutRecord
from core.types import RolloutResultResponse, RolloutSample, RolloutStatus

Q, R, G = RolloutStatus.QUEUED, RolloutStatus.RUNNING, RolloutStatus.GRADING
S, F, C = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED


def polled(
    board: RolloutBoard,
    rollout_id: str,
    steps: list[tuple[RolloutStatus, float]],
    *,
    reward: float | None = None,
    grade: bool = True,
) -> RolloutRecord:
    """The statuses a rollout's polls saw, at their times; a finished one's result has
    `reward`."""
    record = None
    for index, (status, at) in enumerate(steps):
        result = None
        if index == len(steps) - 1 and status.is_terminal:
            sample = RolloutSample(messages=[], reward=reward) if status is S else None
            result = RolloutResultResponse(rollout_id=rollout_id, status=status, sample=sample)
        record = board.observe(rollout_id, status, at, row_index=0, run_index=0, grade=grade)
        if result is not None:
            board.observe(rollout_id, status, at, result=result)
    assert record is not None
    return record


def reported(
    board: RolloutBoard, rollout_id: str, steps: list[tuple[RolloutStatus, float]]
) -> None:
    """The server's ownership events of a rollout, at their times."""
    for sequence, (status, at) in enumerate(steps):
        board.server_mark(
            rollout_id,
            PhaseMark(
                status, at, "server", server_time=1e9 + at, event_sequence=sequence, server_id="s"
            ),
        )


def call(
    board: RolloutBoard,
    rollout_id: str,
    started: float,
    ended: float | None,
    *,
    status: int | None = 200,
    tokens: int | None = 10,
) -> None:
    """A model call of the rollout from `started` to `ended` (None: still waiting)."""
    begun = ModelCall(
        call_id=board.model_calls + 1,
        rollout_id=rollout_id,
        streamed=False,
        requested_model="osmosis-rollout",
        started_at=1e9 + started,
        started_monotonic=started,
        request_text="q",
    )
    board.call_started(begun)
    if ended is not None:
        board.call_ended(
            replace(
                begun,
                ended_at=1e9 + ended,
                ended_monotonic=ended,
                status=status,
                total_tokens=tokens,
            )
        )
