"""What a live run keeps of its baseline (`core.eval.compare.baseline`): two bytes per work
item whatever the outcomes, error types kept by name up to a bound, and a tally in which a
result that replaces another moves its item instead of counting it twice."""

from __future__ import annotations

from pathlib import Path

from core.eval.compare.baseline import (
    MAX_ERROR_TYPES,
    Baseline,
    BaselineCounts,
    BaselineTally,
)
from core.eval.compare.outcomes import ItemOutcome, outcome_of
from core.eval.results.records import ItemResult, ItemStatus


def result(
    row: int,
    attempt: int,
    status: ItemStatus,
    *,
    reward: float | None = None,
    error_type: str | None = None,
) -> ItemResult:
    return ItemResult(
        row_index=row,
        run_index=attempt,
        rollout_id=f"r{row}-{attempt}-{status}",
        status=status,
        source_row_index=row,
        reward=reward,
        error_type=error_type,
    )


def baseline_of(results: list[ItemResult], *, rows: int, n: int = 1) -> Baseline:
    """The baseline of a run of `rows` rows × `n` whose finished items are `results`."""
    return Baseline(
        folder=Path("base"),
        name="base",
        dataset_sha256="0" * 64,
        source_rows=range(rows),
        n=n,
        outcomes=[((r.row_index, r.run_index), outcome_of(r, 1.0)) for r in results],
        threshold=1.0,
    )


def test_each_work_item_takes_two_bytes_whatever_it_came_to() -> None:
    results = [
        result(0, 0, "success", reward=1.0),
        result(0, 1, "success", reward=0.0),
        result(1, 0, "failed", error_type="timeout"),
        result(1, 1, "skipped"),
    ]
    baseline = baseline_of(results, rows=3, n=2)
    assert baseline.codes.itemsize == 2 and len(baseline.codes) == 3 * 2
    assert baseline.outcome(0, 0) == ItemOutcome("pass")
    assert baseline.outcome(0, 1) == ItemOutcome("failure")
    assert baseline.outcome(1, 0) == ItemOutcome("error", "timeout")
    assert baseline.outcome(1, 1) == ItemOutcome("skipped")
    assert baseline.outcome(2, 0) is None  # not finished there
    assert baseline.outcome(2, 5) is None and baseline.outcome(9, 0) is None  # not in it


def test_error_types_past_the_bound_count_as_errors_of_no_known_type() -> None:
    kinds = [f"message {k}" for k in range(MAX_ERROR_TYPES + 5)]
    results = [result(row, 0, "failed", error_type=kind) for row, kind in enumerate(kinds)]
    results.append(result(len(kinds), 0, "failed", error_type="x" * 1000))
    baseline = baseline_of(results, rows=len(results))
    assert len(baseline.error_types) == MAX_ERROR_TYPES
    assert baseline.outcome(3, 0) == ItemOutcome("error", "message 3")
    assert baseline.outcome(MAX_ERROR_TYPES + 1, 0) == ItemOutcome("error", None)
    assert baseline.outcome(len(kinds), 0) == ItemOutcome("error", None)


def test_a_result_that_replaces_another_moves_its_item_in_the_tally() -> None:
    baseline = baseline_of(
        [result(0, 0, "success", reward=1.0), result(1, 0, "success", reward=0.0)], rows=3
    )
    tally = BaselineTally(baseline, [result(0, 0, "failed", error_type="timeout")])
    assert tally.counts() == BaselineCounts(regressed=1)
    tally.add(result(0, 0, "success", reward=1.0))  # run again (--retry-failed): it passes
    tally.add(result(1, 0, "success", reward=1.0))
    tally.add(result(2, 0, "success", reward=1.0))  # not finished in the baseline: not counted
    tally.add(result(7, 0, "success", reward=1.0))  # not in the baseline at all
    counts = tally.counts()
    assert counts == BaselineCounts(improved=1, still_passing=1)
    assert counts.compared == 2
    assert counts.said() == "+1 improved, −0 regressed, 2 compared"
