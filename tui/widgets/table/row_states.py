"""The tint of a rollout's row: how it ended, regressed against the baseline (`--baseline`),
and stuck above all (DESIGN.md §2).

Each tint is a component class of the rollout table, coloured with the theme's own variables
(never a fixed colour), light enough that the cells' colours keep reading on it in dark and
light themes alike. Rollouts in flight keep the table's background, so that those that ended,
and how, stand out; a stuck one stands out most. The table takes only each tint's background
(and boldness), blended as the theme means it, and draws the marks and the cursor over it.
"""

from __future__ import annotations

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline
from core.rollout_record import NOT_ADMITTED, RolloutRecord
from core.types import RolloutStatus

STUCK = "rollout-table--stuck"
#: A rollout that did not pass where the baseline's did (`--baseline`): after stuck, above how
#: it ended.
REGRESSED = "rollout-table--regressed"
#: The tint of each display status that has one.
STATUS_TINTS: dict[str, str] = {
    RolloutStatus.SUCCESS: "rollout-table--success",
    RolloutStatus.FAILURE: "rollout-table--failure",
    NOT_ADMITTED: "rollout-table--failure",
    RolloutStatus.CANCELLED: "rollout-table--cancelled",
}
TINTS = frozenset({STUCK, REGRESSED, *STATUS_TINTS.values()})

TINTS_CSS = """
RolloutTable > .rollout-table--success {
    background: $success 7%;
}
RolloutTable > .rollout-table--failure {
    background: $error 12%;
}
RolloutTable > .rollout-table--cancelled {
    background: $warning 9%;
}
RolloutTable > .rollout-table--regressed {
    background: $accent 30%;
}
RolloutTable > .rollout-table--stuck {
    background: $error 30%;
    text-style: bold;
}
"""


def row_tint(
    record: RolloutRecord, board: RolloutBoard, now: float, baseline: Baseline | None = None
) -> str | None:
    """The component class of the row's tint; None for the table's own background."""
    if board.is_stuck(record, now):
        return STUCK
    if baseline is not None and baseline.row_class(record) == "regressed":
        return REGRESSED
    return STATUS_TINTS.get(record.display_status)
