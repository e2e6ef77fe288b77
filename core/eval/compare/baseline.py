"""A run compared live with a baseline (`osmosis-tui eval --baseline RUN`): the baseline's
outcome for each work item, and this run's tally against it as its items finish.

`Baseline` is read once, before the run dispatches anything, and kept compact: a run of a
million work items is a sorted array of its source rows and two bytes per work item (its
outcome, an error's type as an index into the few distinct types), never an object per item.
Items are found by (source row, attempt), as `compare` pairs them; an item the baseline does
not have and one it did not finish both have no outcome there.

Each side counts passes with its own threshold, as `compare` does: the baseline's outcomes
with the baseline's, this run's results and rows with this run's (`Baseline.threshold`).

`BaselineTally` is the one owner of the counts ("+3 improved, −2 regressed, 41 compared"):
the session adds each result as its item finishes (O(log rows) each), and every front end
reads the counts from it. `Baseline.row_class` says what one rollout of this run came to
against the baseline (the table's tint), from the rollout's own result.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from core.eval.compare.compared_run import ComparedRun, PairKey, read_compared_run
from core.eval.compare.outcomes import (
    CLASSES,
    COMPARED,
    PLAIN_OUTCOMES,
    ItemClass,
    ItemOutcome,
    OutcomeKind,
    classify,
    outcome_from,
    outcome_of,
)
from core.eval.outcomes import item_status
from core.eval.results.records import ItemResult
from core.rollout_record import RolloutRecord

# An item's outcome code: none (not in the baseline, or not finished there), then the three
# outcomes without a type, then an error of type `ERROR + k` (`Baseline.error_types[k]`).
_NONE, _ERROR = 0, 4
#: The codes of the outcomes that carry nothing else (1 to 3), and back.
_PLAIN_CODE: dict[OutcomeKind, int] = {"pass": 1, "failure": 2, "skipped": 3}
_PLAIN = {code: PLAIN_OUTCOMES[kind] for kind, code in _PLAIN_CODE.items()}
#: The most distinct error types kept by name; an error of a further type counts as an error
#: of no known type. Error types are categories (a few) or, from a server that gives none,
#: its message: a bound keeps a baseline of a million distinct messages small.
MAX_ERROR_TYPES = 1024
#: An error type longer than this is kept cut (types are compared by what is kept).
MAX_ERROR_TYPE_CHARS = 200


class Baseline:
    """The outcomes of a baseline run's work items (see the module docstring)."""

    def __init__(
        self,
        *,
        folder: Path,
        name: str,
        dataset_sha256: str | None,
        source_rows: Iterable[int],
        n: int,
        outcomes: Iterable[tuple[PairKey, ItemOutcome]],
        threshold: float,
    ) -> None:
        """The baseline run in `folder`: its `source_rows` (every row an outcome names
        among them) and `n` attempts each, and the outcome of each finished item; an
        outcome of an attempt past `n` is left out. `threshold` is this run's pass
        threshold, with which this run's rollouts are judged against it (`row_class`)."""
        self.folder = folder
        self.name = name
        self.dataset_sha256 = dataset_sha256
        self.threshold = threshold
        self.n = n
        self.source_rows = array("q", sorted(set(source_rows)))
        self.codes = array("H", bytes(2 * len(self.source_rows) * n))
        self.error_types: list[str] = []
        interned: dict[str, int] = {}
        for (row, attempt), outcome in outcomes:
            position = self.position(row, attempt)
            if position is not None:
                self.codes[position] = self._code(outcome, interned)

    @classmethod
    def of(cls, run: ComparedRun, *, threshold: float) -> Baseline:
        """The baseline a comparison's reading of its folder makes (its outcomes counted with
        its own threshold); `threshold` is this run's."""
        return cls(
            folder=run.folder,
            name=run.name,
            dataset_sha256=run.dataset_sha256,
            # Its plan's rows, and those its journal holds beside them (another selection's).
            source_rows=(*run.source_rows, *(row for row, _attempt in run.results)),
            n=run.n,
            outcomes=(
                (key, outcome_of(result, run.threshold)) for key, result in run.results.items()
            ),
            threshold=threshold,
        )

    def _code(self, outcome: ItemOutcome, interned: dict[str, int]) -> int:
        if outcome.kind != "error":
            return _PLAIN_CODE[outcome.kind]
        kind = outcome.error_type
        if kind is None:
            return _ERROR + MAX_ERROR_TYPES  # no type: past every kept one
        kind = kind[:MAX_ERROR_TYPE_CHARS]
        index = interned.get(kind)
        if index is None:
            if len(self.error_types) >= MAX_ERROR_TYPES:
                return _ERROR + MAX_ERROR_TYPES
            index = interned[kind] = len(self.error_types)
            self.error_types.append(kind)
        return _ERROR + index

    @property
    def work_items(self) -> int:
        return len(self.codes)

    def position(self, source_row: int, attempt: int) -> int | None:
        """Where the item (source row, attempt) is in `codes`; None when the baseline lacks it."""
        index = bisect_left(self.source_rows, source_row)
        if index == len(self.source_rows) or self.source_rows[index] != source_row:
            return None
        if not 0 <= attempt < self.n:
            return None
        return index * self.n + attempt

    def outcome(self, source_row: int, attempt: int) -> ItemOutcome | None:
        """The item's outcome in the baseline; None when it has none there."""
        position = self.position(source_row, attempt)
        return None if position is None else self.outcome_at(position)

    def outcome_at(self, position: int) -> ItemOutcome | None:
        code = self.codes[position]
        if code == _NONE:
            return None
        if code < _ERROR:
            return _PLAIN[code]
        index = code - _ERROR
        kind = self.error_types[index] if index < len(self.error_types) else None
        return ItemOutcome("error", kind)

    def shares_rows(self, source_rows: Iterable[int]) -> bool:
        """Whether any of `source_rows` is a row of the baseline."""
        return any(self.position(row, 0) is not None for row in source_rows)

    def record_outcome(self, record: RolloutRecord) -> ItemOutcome | None:
        """The baseline's outcome for the work item whose rollout `record` is; None for a
        rollout sent by hand (no work item) and an item the baseline did not finish."""
        if record.manual or record.source_row_index is None or record.run_index is None:
            return None
        return self.outcome(record.source_row_index, record.run_index)

    def row_class(self, record: RolloutRecord) -> ItemClass | None:
        """What this run's rollout `record` came to against the baseline, judged by its own
        result with this run's threshold; None while it has none (in flight, cancelled), for
        one its item was requeued from, and when the baseline has no outcome for its item."""
        base = self.record_outcome(record)
        result = record.result_head
        if base is None or result is None or not record.finished or record.requeued_as:
            return None
        status = item_status(result)
        if status is None:
            return None
        return classify(base, outcome_from(*status, self.threshold))


def read_baseline(folder: Path, *, label: str, threshold: float) -> Baseline:
    """The baseline in the run folder `folder` (`label` names it in errors), with this run's
    pass `threshold`; `CompareInputError` when it is no readable run."""
    return Baseline.of(read_compared_run(folder, label=label), threshold=threshold)


@dataclass(frozen=True)
class BaselineCounts:
    """This run's finished work items against the baseline, per class (only the classes of
    items finished in both: an item the baseline did not finish is not counted)."""

    regressed: int = 0
    improved: int = 0
    error_changed: int = 0
    still_failing: int = 0
    still_passing: int = 0
    skipped: int = 0

    @property
    def compared(self) -> int:
        """Items finished, not skipped, in both runs."""
        return sum(getattr(self, name) for name in COMPARED)

    def as_json(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in (*COMPARED, "skipped", "compared")}

    def said(self) -> str:
        """The counts in words: "+3 improved, −2 regressed, 41 compared"."""
        return f"+{self.improved} improved, −{self.regressed} regressed, {self.compared} compared"


#: The classes `BaselineCounts` has, each with its code in `BaselineTally` (0: not counted).
_COUNTED: tuple[ItemClass, ...] = (*COMPARED, "skipped")
_CLASS_CODE = {name: code for code, name in enumerate(_COUNTED, start=1)}
assert set(_COUNTED) <= set(CLASSES)


class BaselineTally:
    """The running count of this run's finished items against `baseline` (module docstring):
    one byte per baseline item says which class the item's latest result is counted in, so
    that a result replacing another moves the item rather than counting it twice."""

    def __init__(self, baseline: Baseline, results: Iterable[ItemResult] = ()) -> None:
        self.baseline = baseline
        self._classes = bytearray(baseline.work_items)
        # Indexed by class code; slot 0 (not counted) is never read.
        self._counts = [0] * (len(_COUNTED) + 1)
        for result in results:
            self.add(result)

    def add(self, result: ItemResult) -> None:
        """Count a finished item of this run (its latest result)."""
        row = result.source_row_index
        baseline = self.baseline
        position = None if row is None else baseline.position(row, result.run_index)
        if position is None:
            return
        base = baseline.outcome_at(position)
        name = None if base is None else classify(base, outcome_of(result, baseline.threshold))
        code = 0 if name is None else _CLASS_CODE.get(name, 0)
        self._counts[self._classes[position]] -= 1
        self._classes[position] = code
        self._counts[code] += 1

    def counts(self) -> BaselineCounts:
        return BaselineCounts(**{name: self._counts[code] for name, code in _CLASS_CODE.items()})


__all__ = [
    "MAX_ERROR_TYPES",
    "Baseline",
    "BaselineCounts",
    "BaselineTally",
    "read_baseline",
]
