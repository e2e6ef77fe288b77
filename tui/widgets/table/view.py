"""Which rollouts the table shows, and in what order: the dashboard's filters and sort.

The app owns these as reactives and hands the table one `TableView` whenever one changes;
here is only what they mean (no Textual), so the table and the status line agree on it.
What each sort means is in sorting.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline
from core.rollout_record import NOT_ADMITTED, RolloutRecord
from core.types import RolloutStatus
from tui.widgets.table.sorting import SORT_COLUMNS, Sort, sort_records


@dataclass(frozen=True)
class RolloutPick:
    """Rollouts picked in another view, shown alone: a histogram's bin (`h`, until Esc), the
    rollouts in flight at the timeline's cursor (`w`, while it is open)."""

    #: What they are, as the status line names the filter: "running 0.40s–0.80s",
    #: "in flight at 43s".
    label: str
    rollout_ids: frozenset[str]


@dataclass(frozen=True)
class TableView:
    #: Text the shown rollouts hold (id, row, status, error or label); "" shows all.
    text: str = ""
    #: The display statuses shown; None shows every status.
    statuses: frozenset[str] | None = None
    #: Only the rollouts flagged stuck.
    stuck_only: bool = False
    #: The order.
    sort: Sort = field(default_factory=Sort)
    #: Only the rollouts sent to this server (its URL); None: every server's.
    server: str | None = None
    #: Only one dataset row's attempts (the rows × attempts grid's `enter`): its `row_index`
    #: and how the table names it; None: every row's.
    row: tuple[int, str] | None = None
    #: The run compared with (`--baseline`), which the base column sorts by.
    baseline: Baseline | None = field(default=None, compare=False)
    #: Only the rollouts in flight at the timeline's cursor; None: at any time.
    in_flight_at: RolloutPick | None = None
    #: Only these rollouts (a histogram's bin); None: no such pick.
    pick: RolloutPick | None = None

    def select(self, board: RolloutBoard, now: float) -> list[RolloutRecord]:
        """The board's rollouts that pass the filters, in this view's order."""
        records = board.select(
            text=self.text or None, statuses=self.statuses, stuck_only=self.stuck_only, now=now
        )
        if self.server is not None:
            records = [record for record in records if record.server == self.server]
        if self.row is not None:
            row_index = self.row[0]
            records = [record for record in records if record.row_index == row_index]
        if self.in_flight_at is not None:
            records = [r for r in records if r.rollout_id in self.in_flight_at.rollout_ids]
        if self.pick is not None:
            picked = self.pick.rollout_ids
            records = [record for record in records if record.rollout_id in picked]
        return sort_records(records, self.sort, board, now, self.baseline)

    @property
    def order_depends_on_changes(self) -> bool:
        """Whether a changed rollout can move or appear/disappear (then rebuild, not patch)."""
        column = self.sort.column
        return (
            (column is not None and SORT_COLUMNS[column].changes)
            or self.statuses is not None
            or self.stuck_only
            or bool(self.text)
            or self.server is not None
            or self.row is not None
            or self.in_flight_at is not None
            or self.pick is not None
        )

    @property
    def order_depends_on_time(self) -> bool:
        """Whether the order can change while nothing but the clock moves."""
        column = self.sort.column
        return (column is not None and SORT_COLUMNS[column].ticks) or self.stuck_only

    def filters(self) -> list[str]:
        """The filters in force, as the status line names them."""
        named = []
        if self.text:
            named.append(f"text {self.text!r}")
        if self.statuses is not None:
            named.append("status " + "+".join(sorted(self.statuses)))
        if self.stuck_only:
            named.append("stuck only")
        if self.server is not None:
            named.append(f"server {self.server}")
        if self.row is not None:
            named.append(f"row {self.row[1]}")
        if self.in_flight_at is not None:
            named.append(self.in_flight_at.label)
        if self.pick is not None:
            named.append(f"{self.pick.label} (esc clears)")
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


def next_server(current: str | None, servers: Iterable[str]) -> str | None:
    """`v`: the server after `current` among `servers` (each once, in their order); after
    the last, None again (every server's rollouts)."""
    choices: list[str | None] = [None, *dict.fromkeys(servers)]
    position = choices.index(current) if current in choices else 0
    return choices[(position + 1) % len(choices)]
