"""Which rollouts the table shows, and in what order: the dashboard's filters and sort.

The app owns these as reactives and hands the table one `TableView` whenever one changes;
here is only what they mean (no Textual), so the table and the status line agree on it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from core.board import RolloutBoard
from core.rollout_record import NOT_ADMITTED, RolloutRecord
from core.types import RolloutStatus

SORTS: dict[str, str] = {
    "submitted": "order submitted",
    "row": "row, then attempt",
    "status": "status",
    "phase_time": "longest in phase first",
    "reward": "reward, lowest first",
}
# The status sort: what needs a look first.
_STATUS_RANK: dict[str, int] = {
    status: rank
    for rank, status in enumerate(
        (
            NOT_ADMITTED,
            RolloutStatus.FAILURE,
            RolloutStatus.CANCELLED,
            RolloutStatus.GRADING,
            RolloutStatus.RUNNING,
            RolloutStatus.QUEUED,
            RolloutStatus.SUCCESS,
        )
    )
}


@dataclass(frozen=True)
class TableView:
    #: Text the shown rollouts hold (id, row, status, error or label); "" shows all.
    text: str = ""
    #: The display statuses shown; None shows every status.
    statuses: frozenset[str] | None = None
    #: Only the rollouts flagged stuck.
    stuck_only: bool = False
    #: The order: a key of `SORTS`.
    sort: str = "submitted"

    def select(self, board: RolloutBoard, now: float) -> list[RolloutRecord]:
        """The board's rollouts that pass the filters, in this view's order."""
        records = board.select(
            text=self.text or None, statuses=self.statuses, stuck_only=self.stuck_only, now=now
        )
        if self.sort != "submitted":
            records.sort(key=_sort_key(self.sort, now))
        return records

    @property
    def order_depends_on_changes(self) -> bool:
        """Whether a changed rollout can move or appear/disappear (then rebuild, not patch)."""
        return (
            self.sort in ("status", "phase_time", "reward")
            or self.statuses is not None
            or self.stuck_only
            or bool(self.text)
        )

    @property
    def order_depends_on_time(self) -> bool:
        """Whether the order can change while nothing but the clock moves."""
        return self.sort == "phase_time" or self.stuck_only

    def filters(self) -> list[str]:
        """The filters in force, as the status line names them."""
        named = []
        if self.text:
            named.append(f"text {self.text!r}")
        if self.statuses is not None:
            named.append("status " + "+".join(sorted(self.statuses)))
        if self.stuck_only:
            named.append("stuck only")
        return named


def toggle_status(statuses: frozenset[str] | None, status: str) -> frozenset[str] | None:
    """`statuses` with `status` shown or hidden; None again once nothing is left."""
    current = set(statuses or ())
    # A rollout the server never admitted failed too: the failure toggle shows it.
    group = {status, NOT_ADMITTED} if status == RolloutStatus.FAILURE else {status}
    if status in current:
        current -= group
    else:
        current |= group
    return frozenset(current) or None


def next_sort(sort: str) -> str:
    names = list(SORTS)
    return names[(names.index(sort) + 1) % len(names)]


def _sort_key(sort: str, now: float) -> Callable[[RolloutRecord], tuple[float, ...]]:
    if sort == "row":
        return lambda r: (
            r.source_row_index if r.source_row_index is not None else -1,
            r.run_index or 0,
        )
    if sort == "status":
        return lambda r: (_STATUS_RANK.get(r.display_status, 9), r.submitted_at)
    if sort == "phase_time":
        return lambda r: (-(now - r.phase_started_at) if r.in_flight else 0.0, r.submitted_at)
    return lambda r: (
        r.latest_result.sample.reward
        if r.latest_result and r.latest_result.sample and r.latest_result.sample.reward is not None
        else float("inf"),
        r.submitted_at,
    )
