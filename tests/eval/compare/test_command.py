"""`osmosis-tui compare` as a user runs it: names under -o or folders, text or JSON, and the
exit status a CI gate reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.eval.compare.outcomes import CLASSES
from tests.eval.compare.folders import FAIL, PASS, write_run
from tests.eval.runs.command import run_osmosis


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """Two runs under a results root: B regresses row 1 and row 2, and improves row 3."""
    rows = [0, 1, 2, 3]
    write_run(
        tmp_path / "evals" / "before",
        source_rows=rows,
        results={(0, 0): PASS, (1, 0): PASS, (2, 0): PASS, (3, 0): FAIL},
    )
    write_run(
        tmp_path / "evals" / "after",
        source_rows=rows,
        results={(0, 0): PASS, (1, 0): FAIL, (2, 0): FAIL, (3, 0): PASS},
    )
    return tmp_path / "evals"


def test_plain_text_names_the_classes_and_the_verdict(root: Path) -> None:
    result = run_osmosis("compare", "before", "after", "-o", str(root), "--plain", cwd=root)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "B passes 1 fewer rows of 4 compared (75.0% → 50.0%); the difference is within " \
        "noise at 95%." in lines  # fmt: skip
    assert "regressed           2  rows 1, 2" in lines
    assert "improved            1  rows 3" in lines
    assert any(line.startswith("McNemar exact p") for line in lines)


def test_json_is_the_documented_document_and_the_same_every_time(root: Path) -> None:
    args = ("compare", str(root / "before"), str(root / "after"), "--json")
    first, second = run_osmosis(*args, cwd=root), run_osmosis(*args, cwd=root)
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    document = json.loads(first.stdout)
    assert list(document) == [
        "schema_version", "operation", "status", "a", "b", "match", "classes", "rows",
        "statistics", "sentence", "gate",
    ]  # fmt: skip
    assert list(document["classes"]) == list(CLASSES)
    assert document["classes"]["regressed"] == {
        "count": 2,
        "items": [{"source_row": 1, "attempt": 0}, {"source_row": 2, "attempt": 0}],
    }
    assert document["statistics"]["pass_rate"]["difference"] == -0.25
    assert document["statistics"]["pass_rate"]["mcnemar_exact_p"] == 1.0
    assert document["gate"] is None and document["status"] == "ok"
    assert document["a"]["tool"] == "osmosis"  # no transitions.jsonl: an official run


@pytest.mark.parametrize(
    ("gate", "status"),
    [
        (("--fail-on-regression",), 1),
        (("--fail-on-regression", "1"), 1),
        (("--fail-on-regression", "2"), 0),
    ],
)
def test_fail_on_regression_gates_on_the_count(
    root: Path, gate: tuple[str, ...], status: int
) -> None:
    result = run_osmosis("compare", "before", "after", "-o", str(root), "--json", *gate, cwd=root)
    assert result.returncode == status, result.stderr
    document = json.loads(result.stdout)
    assert document["gate"]["regressed"] == 2
    assert document["status"] == ("regressed" if status else "ok")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("before", "gone"), "B: gone: neither a run folder nor a run under"),
        (("before", "after", "--fail-on-regression", "-1"), "--fail-on-regression"),
        (("before", "after", "--pass-threshold", "nan"), "--pass-threshold"),
    ],
)
def test_bad_input_is_exit_2_naming_the_argument(
    root: Path, args: tuple[str, ...], message: str
) -> None:
    result = run_osmosis("compare", *args, "-o", str(root), cwd=root)
    assert result.returncode == 2
    assert message in result.stderr
    assert result.stdout == ""


def test_an_incomparable_pair_is_refused_with_the_reason(root: Path) -> None:
    write_run(root / "elsewhere", source_rows=[10, 11], results={(10, 0): PASS})
    result = run_osmosis("compare", "before", "elsewhere", "-o", str(root), cwd=root)
    assert result.returncode == 2
    assert "have no source row in common" in result.stderr
