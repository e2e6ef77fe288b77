"""Snapshots of the dashboard compared with a baseline (`eval --baseline`): the rollout table's
base column, the regressed row's tint and the summary strip's count, at 160×45 and at 80×24
(where the time in phase gives way to the base column), and sorted by it (`B`).

The states are tests/tui/states.py's running board with a baseline of outcomes written
here: most rows passed there (those that fail now regressed), row 0 failed and row 1 failed
with an error (both improved), row 2 was skipped, and rows 9 and 12 are missing. Plain
functions, as pytest-textual-snapshot runs the app itself; a frozen clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from core.eval.compare.baseline import Baseline, BaselineCounts
from core.eval.compare.outcomes import outcome_of
from core.eval.results.records import ItemResult, ItemStatus
from tests.tui.states import StaticSource, build_app, prepare_view, rollout_id, running_board

#: Each source row's outcome in the baseline: (status, reward, error type); rows 9 and 12
#: have none there.
BASELINE: dict[int, tuple[ItemStatus, float | None, str | None]] = {
    row: ("success", 1.0, None) for row in range(23) if row not in (9, 12)
}
BASELINE[0] = ("success", 0.0, None)
BASELINE[1] = ("failed", None, "agent_error")
BASELINE[2] = ("skipped", None, None)


def baseline() -> Baseline:
    results = {
        row: ItemResult(
            row_index=row,
            run_index=0,
            rollout_id=f"base-{rollout_id(row)}",
            status=status,
            source_row_index=row,
            reward=reward,
            error_type=error_type,
        )
        for row, (status, reward, error_type) in BASELINE.items()
    }
    return Baseline(
        folder=Path(".osmosis/evals/multiply-20260228-090000"),
        name="multiply-20260228-090000",
        dataset_sha256="0" * 64,
        source_rows=range(40),
        n=1,
        outcomes=(((row, 0), outcome_of(result, 1.0)) for row, result in results.items()),
        threshold=1.0,
    )


def compared_source() -> StaticSource:
    """The running board against the baseline; the strip's counts are its rows' own classes
    (what a live run's tally would have counted from their results)."""
    board, compared = running_board(), baseline()
    classes = Counter[str | None](compared.row_class(record) for record in board)
    counted = {name: classes[name] for name in BaselineCounts.__dataclass_fields__}
    return StaticSource(board, total=40, baseline=compared, versus=BaselineCounts(**counted))


@pytest.mark.parametrize(
    ("size", "press"),
    [((160, 45), ()), ((80, 24), ()), ((80, 24), ("B",))],
    ids=["large", "small", "small-sorted"],
)
def test_baseline_snapshot(
    size: tuple[int, int],
    press: tuple[str, ...],
    snap_compare: Callable[..., bool],
    clean_terminal: None,
) -> None:
    assert snap_compare(
        build_app(compared_source()),
        press=press,
        terminal_size=size,
        run_before=prepare_view(),
    )
