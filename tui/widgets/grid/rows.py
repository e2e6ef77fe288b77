"""The rows × attempts grid's model: one line per dataset row, one outcome per attempt, the
row's passes and pass@k, and the order that puts the rows that pass only sometimes first.

Built from the board, which every source feeds (a live run, a replay, a run attached to):
each work item's latest rollout on it (a requeue, a server lost: the one sent last) is its
attempt; a resumed run's results from before, on no board, are the source's
(`carried_results`). What that rollout's result makes of the item is the journal's rule
(`core.eval.outcomes.item_status`), and what it came to is a comparison's
(`core.eval.compare.outcomes.outcome_kind`: `metrics.json`'s pass, with the run's
threshold); pass@k is its estimator (`pass_at_k`, and `pass_at_k_points` for the run).
Rollouts sent by hand are no work items.

Kept up to date from a change feed of its own (`RolloutBoard.subscribe`): only the rows whose
rollouts changed are counted again. No Textual here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, get_args

from core.board import ChangeFeed, RolloutBoard
from core.eval.compare.outcomes import OutcomeKind, outcome_kind
from core.eval.outcomes import item_status
from core.eval.results.metrics import k_values, pass_at_k, pass_at_k_points
from core.eval.results.records import ItemKey, ItemResult
from core.rollout_record import RolloutRecord
from tui.sources.pass_rule import PassRule

#: What an attempt came to, as far as the board knows.
Outcome = OutcomeKind | Literal["in_flight", "no_result", "not_run"]
#: Finished attempts: their work item has its result.
FINISHED: frozenset[Outcome] = frozenset(get_args(OutcomeKind))

#: Glyph and style (theme-neutral ANSI names, as the phase track's) of each outcome.
GLYPHS: dict[Outcome, tuple[str, str]] = {
    "pass": ("✔", "bold green"),
    "failure": ("✘", "bold red"),
    "error": ("!", "bold magenta"),
    "skipped": ("-", "dim"),
    "in_flight": ("◉", "bold cyan"),
    "no_result": ("⊘", "yellow"),
    "not_run": ("·", "dim"),
}
LEGEND: tuple[tuple[Outcome, str], ...] = (
    ("pass", "pass"),
    ("failure", "fail"),
    ("error", "error"),
    ("skipped", "skipped"),
    ("in_flight", "in flight"),
    ("no_result", "no result"),
    ("not_run", "not run"),
)

#: A row's class, in the grid's order: sometimes passing first (the rows worth a look),
#: then never, then always; a finished row whose every attempt was skipped; unfinished last.
RowClass = Literal["flaky", "always_fail", "always_pass", "all_skipped", "unfinished"]
CLASS_ORDER: dict[RowClass, int] = {
    "flaky": 0,
    "always_fail": 1,
    "always_pass": 2,
    "all_skipped": 3,
    "unfinished": 4,
}


def outcome(record: RolloutRecord, threshold: float) -> Outcome:
    """What `record`'s attempt came to: its result judged as the journal judges it, the
    pass by `metrics.json`'s rule."""
    if not record.finished:
        return "no_result" if record.untracked else "in_flight"
    result = record.result_head
    # Finished without a result: never admitted, or the polls gave up; the run fails it.
    verdict = ("failed", None, None) if result is None else item_status(result)
    if verdict is None:
        return "no_result"  # cancelled: the item stays pending
    status, reward, _ = verdict
    return outcome_kind(status, reward, threshold)


@dataclass
class GridRow:
    """One dataset row: its attempts' outcomes (index = attempt) and what they add up to."""

    row_index: int
    source_row: int | None
    outcomes: list[Outcome]
    #: The rollout of each attempt shown (None: not run yet).
    rollouts: list[str | None]
    passes: int = 0
    #: Finished attempts that are samples (not skipped): what pass@k counts over.
    graded: int = 0
    finished: int = 0
    row_class: RowClass = "unfinished"
    #: Counted at least once (a new row is not in the grid's order yet).
    counted: bool = False

    def count(self) -> None:
        self.counted = True
        outcomes = self.outcomes
        self.passes = outcomes.count("pass")
        self.finished = sum(o in FINISHED for o in outcomes)
        self.graded = self.finished - outcomes.count("skipped")
        if 0 < self.passes < self.graded:
            self.row_class = "flaky"  # known however many attempts are still to come
        elif self.finished < len(outcomes):
            self.row_class = "unfinished"
        elif not self.graded:
            self.row_class = "all_skipped"
        else:
            self.row_class = "always_pass" if self.passes else "always_fail"

    def pass_at(self, k: int) -> float | None:
        """This row's pass@k over its graded attempts; None until it has k of them."""
        return pass_at_k(self.graded, self.passes, k) if self.graded >= k else None

    @property
    def label(self) -> str:
        """The dataset's own row, as the table names it (a position when none is known)."""
        return str(self.row_index if self.source_row is None else self.source_row)


@dataclass(frozen=True)
class GridCounts:
    """The grid's header: rows per class, and the run's pass@k so far."""

    flaky: int = 0
    always_fail: int = 0
    always_pass: int = 0
    all_skipped: int = 0
    unfinished: int = 0
    #: (k, pass@k) as `metrics.json` averages it, over the rows' graded attempts so far.
    pass_at_k: tuple[tuple[int, float], ...] = field(default_factory=tuple)


class AttemptGrid:
    """The rows × attempts of one board, under one pass rule."""

    def __init__(
        self,
        board: RolloutBoard,
        rule: PassRule,
        carried: Mapping[ItemKey, ItemResult] | None = None,
    ) -> None:
        """`carried`: results from before this invocation (a resume) that are on no board;
        a work item's rollout on the board, when it has one, wins over them."""
        self.board = board
        self.rule = rule
        self.rows: dict[int, GridRow] = {}
        #: The rows' indexes in the grid's order (`order_key`).
        self.order: list[int] = []
        #: How many times `order` changed: a view redraws every line when it has.
        self.reorders = 0
        #: Each work item's attempt shown: the rollout of it seen last.
        self._attempt: dict[ItemKey, str] = {}
        self._feed: ChangeFeed | None = board.subscribe()
        seen = max((r.run_index for r in board if _work_item(r) and r.run_index), default=0)
        #: Attempts per row: the run's n, or as many as the board has shown so far.
        self.n = max(rule.n or 0, seen + 1, *(run + 1 for _row, run in carried or ()))
        for (row_index, run_index), result in (carried or {}).items():
            row = self._row(row_index, result.source_row_index)
            row.outcomes[run_index] = outcome_kind(result.status, result.reward, rule.threshold)
        self._take(board.records, board.records)
        for row in self.rows.values():
            if not row.counted:  # carried results only: no rollout on the board counted it
                row.count()
        self.order = sorted(self.rows, key=self._order_key)

    def close(self) -> None:
        """No more updates: the board stops feeding this grid."""
        if self._feed is not None:
            self.board.unsubscribe(self._feed)
            self._feed = None

    def update(self) -> set[int]:
        """Take the board's changes since the last update; returns the rows that changed."""
        if self._feed is None:
            return set()
        batch = self._feed.take()
        return self._take(batch.added, batch.ids | set(batch.added))

    def _take(self, added: Iterable[str], changed: Iterable[str]) -> set[int]:
        records = self.board.records
        for rollout_id in added:  # in the order seen: a later attempt of an item wins
            record = records.get(rollout_id)
            if record is not None and _work_item(record):
                assert record.row_index is not None and record.run_index is not None
                self._attempt[record.row_index, record.run_index] = rollout_id
        rows: set[int] = set()
        for rollout_id in changed:
            record = records.get(rollout_id)
            if record is None or not _work_item(record):
                continue
            assert record.row_index is not None and record.run_index is not None
            key = (record.row_index, record.run_index)
            if self._attempt.get(key) == rollout_id:
                self._set(record, key)
                rows.add(record.row_index)
        moved = False
        for row_index in rows:
            row = self.rows[row_index]
            before = row.row_class if row.counted else None
            row.count()
            moved = moved or row.row_class != before
        if moved:  # within a class the order is the rows', so only a new class moves one
            self.order = sorted(self.rows, key=self._order_key)
            self.reorders += 1
        return rows

    def _row(self, row_index: int, source_row: int | None) -> GridRow:
        row = self.rows.get(row_index)
        if row is None:
            row = self.rows[row_index] = GridRow(
                row_index, source_row, ["not_run"] * self.n, [None] * self.n
            )
        elif row.source_row is None:
            row.source_row = source_row
        return row

    def _set(self, record: RolloutRecord, key: ItemKey) -> None:
        row_index, run_index = key
        row = self._row(row_index, record.source_row_index)
        if run_index >= len(row.outcomes):  # more attempts than the run said: shown too
            grow = run_index + 1 - len(row.outcomes)
            row.outcomes += ["not_run"] * grow
            row.rollouts += [None] * grow
        row.outcomes[run_index] = outcome(record, self.rule.threshold)
        row.rollouts[run_index] = record.rollout_id

    def _order_key(self, row_index: int) -> tuple[int, int]:
        # Within a class, the dataset's order: rows do not jump about as attempts finish.
        return CLASS_ORDER[self.rows[row_index].row_class], row_index

    def counts(self, total_rows: int | None = None) -> GridCounts:
        """Rows per class; with `total_rows` (the run's), the rows not started yet count as
        unfinished."""
        classes = [row.row_class for row in self.rows.values()]
        not_started = max((total_rows or 0) - len(self.rows), 0)
        # In the rows' order, as metrics.json sums them: the same float for the same rows.
        graded = [(row.graded, row.passes) for _, row in sorted(self.rows.items())]
        return GridCounts(
            flaky=classes.count("flaky"),
            always_fail=classes.count("always_fail"),
            always_pass=classes.count("always_pass"),
            all_skipped=classes.count("all_skipped"),
            unfinished=classes.count("unfinished") + not_started,
            pass_at_k=tuple(pass_at_k_points(graded, self.n)),
        )

    @property
    def ks(self) -> list[int]:
        """The k of the pass@k columns: 1, 2, 4, ... up to n, as `metrics.json` reports."""
        return k_values(self.n)


def _work_item(record: RolloutRecord) -> bool:
    """A work item's attempt: not sent by hand, and keyed by its row and attempt."""
    return not record.manual and record.row_index is not None and record.run_index is not None
