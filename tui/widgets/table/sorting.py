"""The rollout table's sort: a column and a direction, what each column sorts by, and the
keys that pick them (DESIGN.md §2: a key per column, reverse, a marker; header click).

As in k9s, each column has a shift+letter key: it sorts by that column, and pressed again it
reverses the order. `s` steps to the next column (in the table's order, each in its first
direction; after the last, back to the order submitted). A header click does what the
column's key does. Rows without a value (no reward yet, no error) stay last either way.
No Textual here: the table, the status line and the settings file read the same `Sort`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from core.board import RolloutBoard
from core.eval.compare.baseline import Baseline
from core.phases import PHASES
from core.rollout_record import NOT_ADMITTED, RolloutRecord
from core.types import RolloutStatus
from tui.widgets.table.columns import BASE, COLUMNS, WATCH_COLUMNS, error_text, flags

ASCENDING, DESCENDING = "▲", "▼"

#: What a column's rows are ordered by; None sorts last in both directions.
SortValue = Callable[[RolloutRecord, RolloutBoard, float], Any]


@dataclass(frozen=True)
class Sort:
    """The table's order: by a column, or (column None) the order the rollouts were submitted."""

    #: A key of `SORT_COLUMNS`; None: the order submitted.
    column: str | None = None
    #: Largest (latest, longest, last in the alphabet) first.
    descending: bool = False

    @property
    def marker(self) -> str:
        return DESCENDING if self.descending else ASCENDING


@dataclass(frozen=True)
class SortColumn:
    """How the rows sort by one table column."""

    #: The table column's key (`table_columns.COLUMNS`).
    column: str
    #: The key that sorts by it: a capital letter (shift+letter, as in k9s).
    key: str
    value: SortValue
    #: Its first direction: what needs a look first (the longest in phase, the lowest reward).
    descending: bool = False
    #: A rollout's value can change as it moves on (then a change can move its row).
    changes: bool = True
    #: The value moves with the clock alone (durations, stuck flags).
    ticks: bool = False


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


def _row(record: RolloutRecord, _board: RolloutBoard, _now: float) -> Any:
    reported_by = record.reported_by
    if reported_by is not None:  # a watch's: its run, then its server
        return reported_by.run or "", reported_by.server_id
    if record.source_row_index is None:
        return None
    return record.source_row_index, record.run_index or 0


def _try(record: RolloutRecord, _board: RolloutBoard, _now: float) -> Any:
    reported_by = record.reported_by
    if reported_by is not None:  # a watch's: its server, then its run
        return reported_by.server_id, reported_by.run or ""
    if record.run_index is None:
        return None
    return record.run_index, record.source_row_index or 0


def _phase(record: RolloutRecord, _board: RolloutBoard, _now: float) -> Any:
    """How far along the phase track: queued, running, grading, then over."""
    status = record.status
    return PHASES.index(status) if status in PHASES else len(PHASES)


def _in_phase(record: RolloutRecord, _board: RolloutBoard, now: float) -> Any:
    return now - record.phase_started_at if record.in_flight else None


def _total(record: RolloutRecord, _board: RolloutBoard, now: float) -> Any:
    end = record.terminal_at  # read once: it derives the status
    return (now if end is None else end) - record.submitted_at


def _reward(record: RolloutRecord, _board: RolloutBoard, _now: float) -> Any:
    result = record.result_head
    return result.reward if result is not None else None


def _model(record: RolloutRecord, _board: RolloutBoard, now: float) -> Any:
    """Waiting for the model longest, then idle longest, then (over) the most calls."""
    activity = record.model
    if record.in_flight:
        if activity.waiting_since is not None:
            return 2, now - activity.waiting_since
        if activity.last_ended_at is not None:
            return 1, now - activity.last_ended_at
    return (0, activity.calls) if activity.calls else None


def _no_baseline(_record: RolloutRecord, _board: RolloutBoard, _now: float) -> Any:
    """The base column without a baseline: no row has a value (`sort_records` gives it one)."""
    return None


#: The base column's order (`--baseline`): the items that changed first, regressed ones
#: before the rest; then by the baseline's outcome.
_CLASS_RANK = {
    name: rank
    for rank, name in enumerate(
        ("regressed", "error_changed", "improved", "still_failing", "still_passing", "skipped")
    )
}
_OUTCOME_RANK = {"pass": 0, "failure": 1, "error": 2, "skipped": 3}


def _base(baseline: Baseline) -> SortValue:
    def value(record: RolloutRecord, _board: RolloutBoard, _now: float) -> Any:
        outcome = baseline.record_outcome(record)
        if outcome is None:
            return None
        changed = baseline.row_class(record)
        return (
            _CLASS_RANK.get(changed or "", len(_CLASS_RANK)),
            _OUTCOME_RANK[outcome.kind],
            outcome.error_type or "",
        )

    return value


def _text(shown: Callable[[RolloutRecord, RolloutBoard, float], str]) -> SortValue:
    """A column of text: alphabetical, without case; an empty cell has no value."""

    def value(record: RolloutRecord, board: RolloutBoard, now: float) -> Any:
        return shown(record, board, now).casefold() or None

    return value


SORT_COLUMNS: dict[str, SortColumn] = {
    sort.column: sort
    for sort in (
        SortColumn("row", "O", _row, changes=False),
        SortColumn("try", "Y", _try, changes=False),
        SortColumn("rollout", "I", lambda r, _b, _n: r.rollout_id, changes=False),
        SortColumn(
            "status", "S", lambda r, _b, _n: _STATUS_RANK.get(r.display_status, len(_STATUS_RANK))
        ),
        SortColumn("phases", "H", _phase),
        SortColumn("in_phase", "T", _in_phase, descending=True, ticks=True),
        SortColumn("total", "A", _total, descending=True, ticks=True),
        SortColumn("reward", "W", _reward),
        SortColumn(BASE, "B", _no_baseline),
        SortColumn("tokens", "K", lambda r, _b, _n: r.model.tokens, descending=True),
        SortColumn("model", "M", _model, descending=True, ticks=True),
        SortColumn("error", "E", _text(lambda r, _b, _n: error_text(r))),
        SortColumn("flags", "F", _text(lambda r, b, n: ", ".join(flags(r, b, n))), ticks=True),
    )
}
TITLES = {column.key: column.title for column in COLUMNS}


def sort_records(
    records: list[RolloutRecord],
    sort: Sort,
    board: RolloutBoard,
    now: float,
    baseline: Baseline | None = None,
) -> list[RolloutRecord]:
    """`records` (in the order submitted) in `sort`'s order; rows without a value last, and
    rows of equal value in the order submitted, in either direction. The base column sorts
    by the `baseline`'s outcomes."""
    if sort.column is None:
        return records
    if sort.column == BASE and baseline is not None:
        value = _base(baseline)
    else:
        value = SORT_COLUMNS[sort.column].value
    keyed = [(value(record, board, now), record) for record in records]
    present = [pair for pair in keyed if pair[0] is not None]
    # Stable, also reversed: equal values keep the order submitted.
    present.sort(key=lambda pair: pair[0], reverse=sort.descending)
    return [record for _, record in present] + [r for v, r in keyed if v is None]


def pick(current: Sort, column: str) -> Sort:
    """What a column's key (or a click on its header) makes of the sort: that column in its
    first direction, or, when it is the sorted column already, the other direction."""
    if current.column == column:
        return Sort(column, not current.descending)
    return Sort(column, SORT_COLUMNS[column].descending)


def next_sort(current: Sort, *, baseline: bool = False) -> Sort:
    """`s`: the next column, in its first direction; after the last, the order submitted.
    The base column is one of them only with a `baseline`."""
    names: list[str | None] = [None, *(c for c in SORT_COLUMNS if baseline or c != BASE)]
    at = names.index(current.column) if current.column in names else 0
    column = names[(at + 1) % len(names)]
    return Sort() if column is None else Sort(column, SORT_COLUMNS[column].descending)


def describe(sort: Sort, *, watch: bool = False) -> str:
    """The sort as the status line names it: "reward ▲", "order submitted"; a `watch`'s
    columns by their titles there ("run ▲" for the row column's key)."""
    if sort.column is None:
        return "order submitted"
    shown = WATCH_COLUMNS.get(sort.column) if watch else None
    return f"{(shown.title if shown else TITLES[sort.column])} {sort.marker}"


def column_keys() -> Iterable[tuple[str, str, str]]:
    """(key, column key, column title) of each sortable column, in the table's order."""
    for sort in SORT_COLUMNS.values():
        yield sort.key, sort.column, TITLES[sort.column]
