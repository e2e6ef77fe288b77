"""A deterministic run of four attempts per row for the rows × attempts grid's snapshots:
every kind of attempt (passed, failed, an error, skipped, in flight, cancelled, not run yet,
one requeued) on rows of every class, on a static board (see states.py) and a frozen clock.
The rows are dataset rows 100 and up (`--rows 100-129`): the grid names them as the table does.
"""

from __future__ import annotations

import hashlib

from core.board import RolloutBoard
from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutSample, RolloutStatus
from tests.tui.states import T0, StaticSource
from tui.sources.pass_rule import PassRule

N = 4
ROWS = 30
#: Passes at 0.5 (the run's `--pass-threshold`): a 0.6 passes, a 0.4 does not.
THRESHOLD = 0.5
Q, R = RolloutStatus.QUEUED, RolloutStatus.RUNNING
OK, FAIL, CANCELLED = RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED

# Each row's attempts: a reward (passes at THRESHOLD or above), "skip" (the workflow removed
# the sample), "error" (the rollout failed), "run" (in flight), "cancel" (cancelled: no
# result), "requeue" (cancelled, then sent again and passed), None (not sent yet).
Attempt = float | str | None
PLANNED: dict[int, tuple[Attempt, ...]] = {
    0: (1.0, 0.0, 1.0, 0.6),
    1: (0.0, 1.0, "run", None),
    2: (1.0, 1.0, 1.0, 1.0),
    3: (0.0, 0.4, "error", 0.0),
    4: (1.0, "skip", 1.0, "requeue"),
    5: ("run", "run", None, None),
    6: (1.0, 1.0, "cancel", None),
    7: (0.4, 0.0, 0.0, 0.9),
    8: ("error", "error", "error", "error"),
    9: ("skip", "skip", "skip", "skip"),
}


def _planned(row: int) -> tuple[Attempt, ...]:
    """Rows 10 and up: most always pass, every third always fails, every seventh is flaky."""
    if row in PLANNED:
        return PLANNED[row]
    if row % 7 == 0:
        return (1.0, 0.0, 0.0, 0.0)
    if row % 3 == 0:
        return (0.0,) * N
    return (1.0,) * N


def _id(row: int, attempt: int, again: bool = False) -> str:
    return hashlib.md5(f"grid-{row}-{attempt}-{again}".encode()).hexdigest()


def _result(rid: str, status: RolloutStatus, planned: Attempt) -> RolloutResultResponse:
    if status is not OK:
        category = RolloutErrorCategory.AGENT_ERROR if status is FAIL else None
        return RolloutResultResponse(rollout_id=rid, status=status, err_category=category)
    skipped = planned == "skip"
    reward = None if skipped or not isinstance(planned, float) else planned
    sample = RolloutSample(reward=reward if not skipped else 1.0, remove_sample=skipped)
    return RolloutResultResponse(rollout_id=rid, status=status, sample=sample)


def _observe(
    board: RolloutBoard,
    rid: str,
    item: tuple[int, int],
    end: RolloutStatus | None,
    at: float,
    *,
    plan: Attempt = None,
) -> None:
    row, attempt = item
    steps = [(Q, at), (R, at + 0.5)] + ([] if end is None else [(end, at + 2.0)])
    for index, (status, when) in enumerate(steps):
        last = index == len(steps) - 1
        board.observe(
            rid,
            status,
            T0 + when,
            row_index=row,
            run_index=attempt,
            source_row_index=100 + row,
            result=None if end is None or not last else _result(rid, end, plan),
        )


def grid_board() -> RolloutBoard:
    board = RolloutBoard()
    board.started_at = T0
    for row in range(ROWS):
        for attempt, plan in enumerate(_planned(row)):
            at = row * 2.0 + attempt * 0.3
            rid = _id(row, attempt)
            if plan is None:
                continue
            if plan == "run":
                _observe(board, rid, (row, attempt), None, at)
            elif plan in ("cancel", "requeue"):
                _observe(board, rid, (row, attempt), CANCELLED, at)
                if plan == "requeue":  # its item sent again under a new id, which passed
                    board.records[rid].requeued_as = _id(row, attempt, again=True)
                    again = _id(row, attempt, again=True)
                    _observe(board, again, (row, attempt), OK, at + 3, plan=1.0)
            elif plan == "error":
                _observe(board, rid, (row, attempt), FAIL, at)
            else:
                _observe(board, rid, (row, attempt), OK, at, plan=plan)
    board.take_changes()
    return board


def grid_source() -> StaticSource:
    return StaticSource(grid_board(), total=ROWS * N, pass_rule=PassRule(N, THRESHOLD))
