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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from core.eval.compare.compared_run import ComparedRun, CompareInputError, PairKey
from core.eval.compare.outcomes import (
    CHANGED,
    CLASSES,
    ItemClass,
    ItemOutcome,
    classify,
    outcome_of,
)
from core.eval.compare.statistics import PairedDifference, mcnemar_exact_p, paired_difference
from core.eval.results.metrics import k_values, pass_at_k

RowContent = Literal["same", "differs", "unchecked"]


@dataclass(frozen=True, slots=True)
class RowSide:
    """One row in one run, over its finished attempts (skipped ones left out, as metrics.json
    leaves them out of the samples)."""

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


@dataclass(frozen=True, slots=True)
class RowComparison:
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
    """The paired statistics over the rows that finished a non-skipped attempt in both."""

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
    notes: list[str] = field(default_factory=list)
    statistics: Statistics = Statistics(None, None, None)

    @property
    def same_dataset(self) -> bool:
        return self.a.dataset_sha256 is not None and self.a.dataset_sha256 == self.b.dataset_sha256

    @property
    def rows_in_both(self) -> int:
        return sum(1 for row in self.rows if row.a is not None and row.b is not None)

    def count(self, name: ItemClass) -> int:
        return len(self.classes[name])

    @property
    def compared_items(self) -> int:
        """Work items finished, not skipped, in both runs."""
        return sum(
            self.count(name)
            for name in ("regressed", "improved", "error_changed", "still_failing", "still_passing")
        )


def compare_runs(a: ComparedRun, b: ComparedRun) -> Comparison:
    """Pair, class and count the work items of runs `a` and `b`."""
    rows_a, rows_b = _by_row(a), _by_row(b)
    shared = sorted(rows_a.keys() & rows_b.keys())
    if not shared:
        raise CompareInputError(
            f"A ({a.name}) and B ({b.name}) have no source row in common: nothing to compare"
        )
    content = {row: _content(a, b, row) for row in shared}
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
    rows: list[RowComparison] = []
    for row in sorted(rows_a.keys() | rows_b.keys()):
        verdict = content.get(row, "same")
        counts: dict[ItemClass, int] = {}
        if verdict == "same":
            for attempt in sorted(rows_a.get(row, set()) | rows_b.get(row, set())):
                name = _class_of(a, b, (row, attempt))
                classes[name].append((row, attempt))
                counts[name] = counts.get(name, 0) + 1
        rows.append(
            RowComparison(
                source_row=row,
                a=_side(a, row, rows_a.get(row)),
                b=_side(b, row, rows_b.get(row)),
                content=verdict,
                classes=counts,
            )
        )
    comparison = Comparison(
        a=a,
        b=b,
        rows=rows,
        classes=classes,
        content_differs=[row for row, verdict in content.items() if verdict == "differs"],
        content_unchecked=[row for row, verdict in content.items() if verdict == "unchecked"],
        notes=_notes(a, b, len(shared)),
    )
    comparison.statistics = _statistics(comparison)
    return comparison


def _by_row(run: ComparedRun) -> dict[int, set[int]]:
    rows: dict[int, set[int]] = {}
    for row, attempt in run.planned:
        rows.setdefault(row, set()).add(attempt)
    return rows


def _content(a: ComparedRun, b: ComparedRun, row: int) -> RowContent:
    if a.dataset_sha256 is not None and a.dataset_sha256 == b.dataset_sha256:
        return "same"
    first, second = a.prompt_digest(row), b.prompt_digest(row)
    if first is None or second is None:
        return "unchecked"
    return "same" if first == second else "differs"


def _outcome(run: ComparedRun, key: PairKey) -> ItemOutcome | None:
    result = run.results.get(key)
    return None if result is None else outcome_of(result, run.threshold)


def _class_of(a: ComparedRun, b: ComparedRun, key: PairKey) -> ItemClass:
    in_a, in_b = key in a.planned, key in b.planned
    if not in_b:
        return "only_in_A"
    if not in_a:
        return "only_in_B"
    return classify(_outcome(a, key), _outcome(b, key))


def _side(run: ComparedRun, row: int, attempts: set[int] | None) -> RowSide | None:
    if attempts is None:
        return None
    finished = [
        result for attempt in sorted(attempts) if (result := run.results.get((row, attempt)))
    ]
    samples = [outcome_of(result, run.threshold) for result in finished]
    counted = [
        (result, outcome)
        for result, outcome in zip(finished, samples, strict=True)
        if outcome.kind != "skipped"
    ]
    passes = sum(outcome.passed for _, outcome in counted)
    rewards = [result.reward for result, _ in counted if result.reward is not None]
    tokens = [result.tokens for result in finished if result.tokens is not None]
    return RowSide(
        attempts=len(counted),
        passes=passes,
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
        tokens=sum(tokens) if tokens else None,
        duration_ms=sum(result.duration_ms for result in finished) / len(finished)
        if finished
        else None,
        pass_at_k={k: pass_at_k(len(counted), passes, k) for k in k_values(len(counted))}
        if len(counted) >= 2
        else None,
    )


def _statistics(comparison: Comparison) -> Statistics:
    pass_a: list[float] = []
    pass_b: list[float] = []
    reward_a: list[float] = []
    reward_b: list[float] = []
    for row in comparison.rows:
        if row.content != "same" or row.a is None or row.b is None:
            continue
        fraction_a, fraction_b = row.a.pass_fraction, row.b.pass_fraction
        if fraction_a is not None and fraction_b is not None:
            pass_a.append(fraction_a)
            pass_b.append(fraction_b)
        if row.a.mean_reward is not None and row.b.mean_reward is not None:
            reward_a.append(row.a.mean_reward)
            reward_b.append(row.b.mean_reward)
    single = comparison.a.n == 1 and comparison.b.n == 1
    return Statistics(
        pass_rate=paired_difference(pass_a, pass_b),
        mcnemar_p=mcnemar_exact_p(comparison.count("regressed"), comparison.count("improved"))
        if single and pass_a
        else None,
        mean_reward=paired_difference(reward_a, reward_b),
    )


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
    "compare_runs",
    "differing_rows",
]
