"""Two runs compared: their work items paired by (source row, attempt), each pair classed, each
row summed up, and the statistics over the rows both runs answered.

Rows pair by source row. When the two runs read the same dataset file (the manifests'
`dataset.sha256` agree) a source row is the same row in both. When they do not, a row pairs
only when its opening messages (`ComparedRun.prompt_digest`) are the same in both runs; a row
whose messages differ is listed in `content_differs`, one that cannot be checked (no readable
trajectory on one side) in `content_unchecked`, and neither is classed or counted. A pair
with nothing in common to compare is refused (`CompareInputError`), with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from core.eval.compare.compared_run import (
    ComparedRun,
    CompareInputError,
    PairKey,
    read_compared_run,
)
from core.eval.compare.outcomes import (
    CHANGED,
    CLASSES,
    COMPARED,
    ItemClass,
    ItemOutcome,
    classify,
)
from core.eval.compare.statistics import PairedDifference, mcnemar_exact_p, paired_difference
from core.eval.results.metrics import k_values, pass_at_k

RowContent = Literal["same", "differs", "unchecked"]


class RowSide(NamedTuple):
    """One row in one run, over its finished attempts (skipped ones left out, as metrics.json
    leaves them out of the samples). A tuple: a comparison of big runs makes 200,000."""

    attempts: int
    passes: int
    mean_reward: float | None
    tokens: int | None
    #: The mean duration of its finished attempts, skipped ones included.
    duration_ms: float | None
    #: pass@k for k = 1, 2, 4, ... up to its attempts, when it has at least two.
    pass_at_k: dict[int, float] | None

    @property
    def pass_fraction(self) -> float | None:
        return self.passes / self.attempts if self.attempts else None


class RowComparison(NamedTuple):
    """A source row of either run: each side's sums and how many of its items fell in each
    class."""

    source_row: int
    a: RowSide | None
    b: RowSide | None
    content: RowContent
    classes: dict[ItemClass, int]

    @property
    def changed(self) -> bool:
        return any(self.classes.get(name, 0) for name in CHANGED)


@dataclass(frozen=True, slots=True)
class Statistics:
    """The paired statistics over the items compared (finished, not skipped, in both runs),
    row by row."""

    pass_rate: PairedDifference | None
    #: McNemar's exact p, only when both runs made one attempt per row.
    mcnemar_p: float | None
    mean_reward: PairedDifference | None


@dataclass
class Comparison:
    """What changed from run A to run B (see the module docstring)."""

    a: ComparedRun
    b: ComparedRun
    rows: list[RowComparison]
    classes: dict[ItemClass, list[PairKey]]
    content_differs: list[int]
    content_unchecked: list[int]
    notes: list[str]
    statistics: Statistics

    @property
    def same_dataset(self) -> bool:
        return same_dataset(self.a, self.b)

    @property
    def one_attempt_per_row(self) -> bool:
        """Both runs made one attempt per row: a work item is a row."""
        return self.a.n == 1 and self.b.n == 1

    @property
    def rows_in_both(self) -> int:
        return sum(1 for row in self.rows if row.a is not None and row.b is not None)

    def count(self, name: ItemClass) -> int:
        return len(self.classes[name])

    @property
    def compared_items(self) -> int:
        """Work items finished, not skipped, in both runs."""
        return sum(self.count(name) for name in COMPARED)


def compare_runs(a: ComparedRun, b: ComparedRun) -> Comparison:
    """Pair, class and count the work items of runs `a` and `b`."""
    rows_a, rows_b = a.attempts_by_row, b.attempts_by_row
    shared = sorted(rows_a.keys() & rows_b.keys())
    if not shared:
        raise CompareInputError(
            f"A ({a.name}) and B ({b.name}) have no source row in common: nothing to compare"
        )
    content: dict[int, RowContent] = (
        dict.fromkeys(shared, "same")
        if same_dataset(a, b)
        else {row: _content(a, b, row) for row in shared}
    )
    if not any(verdict == "same" for verdict in content.values()):
        raise CompareInputError(
            f"A ({a.name}) and B ({b.name}) ran different datasets (sha256 "
            f"{_short(a.dataset_sha256)} and {_short(b.dataset_sha256)}), and no row could "
            "be checked to be the same in both: "
            + (
                "every row's opening messages differ"
                if all(verdict == "differs" for verdict in content.values())
                else "their trajectories do not say what the rows held"
            )
        )
    classes: dict[ItemClass, list[PairKey]] = {name: [] for name in CLASSES}
    outcomes_a, outcomes_b = a.outcomes, b.outcomes
    paired = _Paired()
    rows: list[RowComparison] = []
    for row in sorted(rows_a.keys() | rows_b.keys()):
        attempts_a, attempts_b = rows_a.get(row, ()), rows_b.get(row, ())
        verdict = content.get(row, "same")
        counts: dict[ItemClass, int] = {}
        if verdict == "same":
            both = attempts_a if attempts_a == attempts_b else sorted({*attempts_a, *attempts_b})
            for attempt in both:
                key = (row, attempt)
                name: ItemClass
                if attempt not in attempts_b:
                    name = "only_in_A"
                elif attempt not in attempts_a:
                    name = "only_in_B"
                else:
                    first, second = outcomes_a.get(key), outcomes_b.get(key)
                    name = classify(first, second)
                    if name in COMPARED:
                        paired.add(first, second, a.results[key].reward, b.results[key].reward)
                classes[name].append(key)
                counts[name] = counts.get(name, 0) + 1
            paired.end_row()
        rows.append(
            RowComparison(
                source_row=row,
                a=_side(a, row, attempts_a) if row in rows_a else None,
                b=_side(b, row, attempts_b) if row in rows_b else None,
                content=verdict,
                classes=counts,
            )
        )
    one_attempt = a.n == 1 and b.n == 1
    return Comparison(
        a=a,
        b=b,
        rows=rows,
        classes=classes,
        content_differs=[row for row, verdict in content.items() if verdict == "differs"],
        content_unchecked=[row for row, verdict in content.items() if verdict == "unchecked"],
        notes=_notes(a, b, len(shared)),
        statistics=Statistics(
            pass_rate=paired_difference(paired.pass_a, paired.pass_b),
            mcnemar_p=mcnemar_exact_p(len(classes["regressed"]), len(classes["improved"]))
            if one_attempt and paired.pass_a
            else None,
            mean_reward=paired_difference(paired.reward_a, paired.reward_b),
        ),
    )


def compare_folders(a: Path, b: Path, *, threshold: float | None = None) -> Comparison:
    """Run folder `a` compared to run folder `b` (`threshold`, when given, counts a pass in
    both); `CompareInputError` when either is no run or the two cannot be compared."""
    return compare_runs(
        read_compared_run(a, label="A", threshold=threshold),
        read_compared_run(b, label="B", threshold=threshold),
    )


def same_dataset(a: ComparedRun, b: ComparedRun) -> bool:
    """Whether the two runs read the same dataset file (so a source row is the same row)."""
    return a.dataset_sha256 is not None and a.dataset_sha256 == b.dataset_sha256


def _content(a: ComparedRun, b: ComparedRun, row: int) -> RowContent:
    """Whether a row of two runs over different datasets is the same row."""
    first, second = a.prompt_digest(row), b.prompt_digest(row)
    if first is None or second is None:
        return "unchecked"
    return "same" if first == second else "differs"


def _side(run: ComparedRun, row: int, attempts: Sequence[int]) -> RowSide:
    results, outcomes = run.results, run.outcomes
    finished = counted = passes = rewarded = 0
    reward_sum = duration_sum = 0.0
    tokens: int | None = None
    for attempt in attempts:
        result = results.get((row, attempt))
        if result is None:
            continue
        finished += 1
        duration_sum += result.duration_ms
        if result.tokens is not None:
            tokens = result.tokens + (tokens or 0)
        outcome = outcomes[(row, attempt)]
        if outcome.kind == "skipped":
            continue
        counted += 1
        passes += outcome.passed
        if result.reward is not None:
            rewarded += 1
            reward_sum += result.reward
    return RowSide(
        attempts=counted,
        passes=passes,
        mean_reward=reward_sum / rewarded if rewarded else None,
        tokens=tokens,
        duration_ms=duration_sum / finished if finished else None,
        pass_at_k={k: pass_at_k(counted, passes, k) for k in k_values(counted)}
        if counted >= 2
        else None,
    )


class _Paired:
    """The per-row values the statistics pair, over the items compared (finished, not
    skipped, in both runs), so that both runs' rates count the same attempts: a row's pass
    fraction in A and in B, and its mean reward in A and in B over the items graded in both."""

    def __init__(self) -> None:
        self.pass_a: list[float] = []
        self.pass_b: list[float] = []
        self.reward_a: list[float] = []
        self.reward_b: list[float] = []
        self._items = self._passes_a = self._passes_b = self._rewarded = 0
        self._reward_a = self._reward_b = 0.0

    def add(
        self,
        first: ItemOutcome | None,
        second: ItemOutcome | None,
        reward_a: float | None,
        reward_b: float | None,
    ) -> None:
        self._items += 1
        self._passes_a += first is not None and first.passed
        self._passes_b += second is not None and second.passed
        if reward_a is not None and reward_b is not None:
            self._rewarded += 1
            self._reward_a += reward_a
            self._reward_b += reward_b

    def end_row(self) -> None:
        if self._items:
            self.pass_a.append(self._passes_a / self._items)
            self.pass_b.append(self._passes_b / self._items)
        if self._rewarded:
            self.reward_a.append(self._reward_a / self._rewarded)
            self.reward_b.append(self._reward_b / self._rewarded)
        self._items = self._passes_a = self._passes_b = self._rewarded = 0
        self._reward_a = self._reward_b = 0.0


def _notes(a: ComparedRun, b: ComparedRun, shared: int) -> list[str]:
    notes: list[str] = []
    if a.dataset_sha256 != b.dataset_sha256:
        notes.append(
            f"the runs read different dataset files (sha256 {_short(a.dataset_sha256)} and "
            f"{_short(b.dataset_sha256)}): rows pair only where their opening messages agree"
        )
    if a.source_rows != b.source_rows:
        notes.append(
            f"A selects {len(a.source_rows):,} rows and B {len(b.source_rows):,}; "
            f"{shared:,} are in both"
        )
    if a.n != b.n:
        notes.append(
            f"A makes {a.n} attempts per row and B {b.n}: the attempts beyond the fewer "
            "are in one run only"
        )
    if a.threshold != b.threshold:
        notes.append(
            f"A counts a pass at reward >= {a.threshold:g} and B at >= {b.threshold:g} "
            "(--pass-threshold makes them one)"
        )
    for label, run in (("A", a), ("B", b)):
        if not run.threshold_known:
            notes.append(
                f"{label}'s metrics.json does not say the pass threshold it counted with: "
                f"{run.threshold:g} is used (--pass-threshold sets it)"
            )
        notes.extend(f"{label}: {warning}" for warning in run.warnings)
    return notes


def _short(digest: str | None) -> str:
    return "unknown" if digest is None else digest[:12]


def differing_rows(rows: Iterable[RowComparison]) -> list[RowComparison]:
    """The rows with a changed item first (regressed ones before the rest), then the others,
    each part in source-row order: the order a reader goes through them."""

    def rank(row: RowComparison) -> tuple[int, int]:
        if row.classes.get("regressed"):
            return (0, row.source_row)
        if row.changed:
            return (1, row.source_row)
        return (2, row.source_row)

    return sorted(rows, key=rank)


__all__ = [
    "Comparison",
    "RowComparison",
    "RowContent",
    "RowSide",
    "Statistics",
    "compare_folders",
    "compare_runs",
    "differing_rows",
    "same_dataset",
]
