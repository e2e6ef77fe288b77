"""Two run folders compared: every class counted, each row summed up, rows paired only where
they are the same row, and a pair with nothing to compare refused."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from core.eval.compare.compared_run import CompareInputError, read_compared_run
from core.eval.compare.comparison import Comparison, compare_runs, differing_rows
from core.eval.compare.text_report import sentence
from tests.eval.compare.folders import FAIL, PASS, SKIP, Spelled, error, write_run


def compared(tmp_path: Path, a: Path, b: Path, threshold: float | None = None) -> Comparison:
    return compare_runs(
        read_compared_run(a, label="A", threshold=threshold),
        read_compared_run(b, label="B", threshold=threshold),
    )


def test_every_class_is_counted_with_its_items(tmp_path: Path) -> None:
    rows = list(range(9))
    a = write_run(
        tmp_path / "a",
        source_rows=rows,
        results={
            (0, 0): PASS, (1, 0): FAIL, (2, 0): PASS, (3, 0): FAIL, (4, 0): error("Timeout"),
            (5, 0): FAIL, (6, 0): SKIP, (7, 0): PASS,  # row 8 unfinished
        },
    )  # fmt: skip
    b = write_run(
        tmp_path / "b",
        source_rows=rows,
        results={
            (0, 0): FAIL, (1, 0): PASS, (2, 0): PASS, (3, 0): FAIL, (4, 0): error("Crash"),
            (5, 0): error("Crash"), (6, 0): PASS, (8, 0): PASS,  # row 7 unfinished
        },
    )  # fmt: skip
    comparison = compared(tmp_path, a, b)
    assert {name: keys for name, keys in comparison.classes.items() if keys} == {
        "regressed": [(0, 0)],
        "improved": [(1, 0)],
        "error_changed": [(4, 0), (5, 0)],
        "still_failing": [(3, 0)],
        "still_passing": [(2, 0)],
        "pending": [(7, 0), (8, 0)],
        "skipped": [(6, 0)],
    }
    assert comparison.compared_items == 6
    assert comparison.same_dataset and comparison.notes == []
    # Rows that changed come first, the regressed one before the rest.
    assert [row.source_row for row in differing_rows(comparison.rows)][:3] == [0, 1, 4]
    assert sentence(comparison) == (
        "B passes as many rows as A, of 6 compared (33.3% → 33.3%); the difference is within "
        "noise at 95%."
    )
    statistics = comparison.statistics
    assert statistics.pass_rate is not None and statistics.pass_rate.rows == 6
    assert statistics.mcnemar_p == 1.0


def test_attempts_beyond_the_other_runs_n_and_rows_it_lacks_are_in_one_run_only(
    tmp_path: Path,
) -> None:
    a = write_run(
        tmp_path / "a",
        source_rows=[0, 1],
        n=1,
        results={(0, 0): PASS, (1, 0): PASS},
    )
    b = write_run(
        tmp_path / "b",
        source_rows=[1, 2],
        n=3,
        results={(1, 0): PASS, (1, 1): FAIL, (1, 2): PASS, (2, 0): FAIL},
    )
    comparison = compared(tmp_path, a, b)
    assert comparison.classes["only_in_A"] == [(0, 0)]
    assert comparison.classes["only_in_B"] == [(1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert comparison.classes["still_passing"] == [(1, 0)]
    assert any("A selects 2 rows and B 2; 1 are in both" in note for note in comparison.notes)
    assert any("A makes 1 attempts per row and B 3" in note for note in comparison.notes)
    row = next(row for row in comparison.rows if row.source_row == 1)
    assert row.a is not None and row.b is not None
    assert (row.a.attempts, row.a.passes, row.b.attempts, row.b.passes) == (1, 1, 3, 2)
    assert row.a.pass_at_k is None
    assert row.b.pass_at_k is not None
    # pass@1 = 2/3; pass@2 = 1 - C(1,2)/C(3,2) = 1 (one failure cannot fill two draws).
    assert math.isclose(row.b.pass_at_k[1], 2 / 3) and row.b.pass_at_k[2] == 1.0
    assert row.b.tokens == 303 and row.b.duration_ms == 2000.0
    # The statistics pair the items both runs finished: row 1's first attempt, passed in both
    # (B's other two attempts are in B only, so its 2/3 over them is not set against A's 1/1).
    pass_rate = comparison.statistics.pass_rate
    assert pass_rate is not None and pass_rate.rows == 1
    assert (pass_rate.a, pass_rate.b, pass_rate.difference) == (1.0, 1.0, 0.0)
    assert comparison.statistics.mcnemar_p is None  # not one attempt per row in both


def test_each_run_counts_with_its_own_threshold_unless_one_is_given(tmp_path: Path) -> None:
    half: Spelled = ("success", 0.5, None)
    a = write_run(tmp_path / "a", source_rows=[0], results={(0, 0): half}, threshold=0.5)
    b = write_run(tmp_path / "b", source_rows=[0], results={(0, 0): half}, threshold=1.0)
    comparison = compared(tmp_path, a, b)
    assert comparison.classes["regressed"] == [(0, 0)]
    assert any("A counts a pass at reward >= 0.5 and B at >= 1" in n for n in comparison.notes)
    assert compared(tmp_path, a, b, threshold=0.5).classes["still_passing"] == [(0, 0)]


def test_an_older_record_without_its_source_row_pairs_by_its_place_in_the_selection(
    tmp_path: Path,
) -> None:
    a = write_run(
        tmp_path / "a", source_rows=[3, 7], results={(3, 0): PASS, (7, 0): PASS},
        with_source_rows=False,
    )  # fmt: skip
    b = write_run(tmp_path / "b", source_rows=[3, 7], results={(3, 0): PASS, (7, 0): FAIL})
    assert compared(tmp_path, a, b).classes["regressed"] == [(7, 0)]


def test_rows_of_different_datasets_pair_only_where_their_opening_messages_agree(
    tmp_path: Path,
) -> None:
    a = write_run(
        tmp_path / "a",
        source_rows=[0, 1, 2, 3],
        results={(0, 0): PASS, (1, 0): PASS, (2, 0): PASS, (3, 0): PASS},
        prompts={0: "2 x 3", 1: "4 x 5", 2: "6 x 7"},
    )
    b = write_run(
        tmp_path / "b",
        source_rows=[0, 1, 2, 3],
        sha="b" * 64,
        results={(0, 0): FAIL, (1, 0): FAIL, (2, 0): PASS, (3, 0): FAIL},
        prompts={0: "2 x 3", 1: "9 x 9", 2: "6 x 7", 3: "1 x 1"},
    )
    comparison = compared(tmp_path, a, b)
    assert not comparison.same_dataset
    assert comparison.content_differs == [1]
    assert comparison.content_unchecked == [3]
    assert comparison.classes["regressed"] == [(0, 0)]
    assert comparison.classes["still_passing"] == [(2, 0)]
    assert comparison.compared_items == 2
    assert "different dataset files" in comparison.notes[0]


def test_a_pair_with_nothing_to_compare_is_refused_with_the_reason(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", source_rows=[0, 1], results={(0, 0): PASS})
    apart = write_run(tmp_path / "apart", source_rows=[5, 6], results={(5, 0): PASS})
    with pytest.raises(CompareInputError, match="no source row in common"):
        compared(tmp_path, a, apart)
    other = write_run(tmp_path / "other", source_rows=[0, 1], sha="c" * 64, results={})
    with pytest.raises(CompareInputError, match=r"different datasets .* do not say what"):
        compared(tmp_path, a, other)


def test_a_folder_that_is_no_run_is_named(tmp_path: Path) -> None:
    with pytest.raises(CompareInputError, match=r"^B: .*manifest.json cannot be read"):
        read_compared_run(tmp_path, label="B")


def test_a_run_that_does_not_say_its_threshold_is_counted_at_the_default_and_said_so(
    tmp_path: Path,
) -> None:
    a = write_run(tmp_path / "a", source_rows=[0], results={(0, 0): PASS}, threshold=None)
    b = write_run(tmp_path / "b", source_rows=[0], results={(0, 0): PASS})
    assert compared(tmp_path, a, b).notes == [
        "A's metrics.json does not say the pass threshold it counted with: 1 is used "
        "(--pass-threshold sets it)"
    ]
    assert compared(tmp_path, a, b, threshold=1.0).notes == []


def test_both_runs_rates_count_the_same_attempts(tmp_path: Path) -> None:
    # Row 0's second attempt failed in A and is unfinished in B: it is pending, and counted in
    # neither rate, so a run cut short does not look better for the attempts it lacks.
    a = write_run(
        tmp_path / "a", source_rows=[0, 1], n=2,
        results={(0, 0): PASS, (0, 1): FAIL, (1, 0): PASS, (1, 1): PASS},
    )  # fmt: skip
    b = write_run(
        tmp_path / "b", source_rows=[0, 1], n=2,
        results={(0, 0): PASS, (1, 0): PASS, (1, 1): PASS},
    )  # fmt: skip
    comparison = compared(tmp_path, a, b)
    assert comparison.classes["pending"] == [(0, 1)]
    pass_rate = comparison.statistics.pass_rate
    assert pass_rate is not None
    assert (pass_rate.a, pass_rate.b, pass_rate.difference) == (1.0, 1.0, 0.0)
    assert sentence(comparison) == (
        "B passes as many work items as A, of 3 compared (100.0% → 100.0%); the difference "
        "is within noise at 95%."
    )
