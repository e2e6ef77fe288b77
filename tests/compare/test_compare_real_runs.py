"""`osmosis-tui compare A B` on real run folders (`real_runs`): ours and the official
`osmosis eval run`'s, on one workspace, with a model that answers known rows differently in
run A and run B. Every class is counted for each pairing of the tools, in both directions;
the row sums are the journals' own; the statistics are hand-computed; `--json` is stable;
`--fail-on-regression` gates by its exit status; bad input and an incomparable pair are
refused (exit status 2) with the argument or the reason named.
"""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from typing import Any, NamedTuple

import pytest

from tests.compare.real_runs import RealRuns
from tests.eval.runs.command import run_osmosis
from tests.eval.runs.files import read_jsonl

pytestmark = pytest.mark.conformance

Items = list[tuple[int, int]]

# What the plan of `real_runs.ROWS` makes of each work item (source row, attempt), A to B.
A_TO_B: dict[str, Items] = {
    "regressed": [(1, 0), (1, 1), (4, 0)],
    "improved": [(2, 0), (2, 1), (3, 1), (10, 0), (10, 1)],
    # failure -> error (7), agent_error -> timeout (8, 0), error -> failure (11)
    "error_changed": [(7, 0), (7, 1), (8, 0), (11, 0), (11, 1)],
    # plain failures (5), agent_error both (6, and 8 #1)
    "still_failing": [(5, 0), (5, 1), (6, 0), (6, 1), (8, 1)],
    "still_passing": [(0, 0), (0, 1), (3, 0), (4, 1)],
    "pending": [],
    "skipped": [(9, 0), (9, 1)],
    "only_in_A": [],
    "only_in_B": [],
}
B_TO_A = {**A_TO_B, "regressed": A_TO_B["improved"], "improved": A_TO_B["regressed"]}
# Passes of each source row over its two attempts (row 9 is skipped: no attempt counted).
PASSES_A = {0: 2, 1: 2, 2: 0, 3: 1, 4: 2, 5: 0, 6: 0, 7: 0, 8: 0, 9: 0, 10: 0, 11: 0}
PASSES_B = {0: 2, 1: 0, 2: 2, 3: 2, 4: 1, 5: 0, 6: 0, 7: 0, 8: 0, 9: 0, 10: 2, 11: 0}
PAIRS = [
    ("ours_a", "ours_b"),
    ("official_a", "official_b"),
    ("ours_a", "official_b"),
    ("official_a", "ours_b"),
    ("ours_b", "official_a"),
    ("official_b", "ours_a"),
]
TOOL = {"ours": "osmosis-tui", "official": "osmosis"}


def compare(runs: RealRuns, *args: str) -> subprocess.CompletedProcess[str]:
    """`osmosis-tui compare ARGS -o <the runs' root>`, from outside the workspace."""
    return run_osmosis("compare", *args, "-o", str(runs.root), cwd=runs.tmp)


def compared(runs: RealRuns, a: str, b: str, *flags: str, status: int = 0) -> dict[str, Any]:
    done = compare(runs, a, b, "--json", *flags)
    assert done.returncode == status, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def items_of(document: dict[str, Any]) -> dict[str, Items]:
    classes = document["classes"]
    for name, listed in classes.items():
        assert listed["count"] == len(listed["items"]), name
    return {
        name: [(item["source_row"], item["attempt"]) for item in listed["items"]]
        for name, listed in classes.items()
    }


def per_row(expected: dict[str, Items]) -> dict[int, dict[str, int]]:
    rows: dict[int, dict[str, int]] = defaultdict(dict)
    for name, items in expected.items():
        for row, _ in items:
            rows[row][name] = rows[row].get(name, 0) + 1
    return rows


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}-{b}" for a, b in PAIRS])
def test_every_class_counted_in_any_pairing_of_the_tools(
    real_runs: RealRuns, a: str, b: str
) -> None:
    document = compared(real_runs, a, b)
    forward = a.endswith("_a")
    expected = A_TO_B if forward else B_TO_A
    assert list(document["classes"]) == list(A_TO_B)  # every class, in the fixed order
    assert items_of(document) == expected
    assert (document["schema_version"], document["operation"]) == (1, "compare")
    assert (document["status"], document["gate"]) == ("ok", None)
    for side, name in (("a", a), ("b", b)):
        run = document[side]
        assert run["name"] == name
        assert run["folder"] == str(real_runs.folder(name))
        assert run["tool"] == TOOL[name.split("_")[0]]
        assert (run["rows"], run["n"], run["work_items"], run["finished"]) == (12, 2, 24, 24)
        assert (run["model"], run["pass_threshold"]) == ("openai/stub-model", 1.0)
    assert document["a"]["dataset_sha256"] == document["b"]["dataset_sha256"]
    assert document["match"] == {
        "same_dataset": True,
        "rows_in_both": 12,
        "rows_compared": 11,  # row 9 is skipped in both
        "content_differs": [],
        "content_unchecked": [],
        "notes": [],
    }
    passes_a, passes_b = (PASSES_A, PASSES_B) if forward else (PASSES_B, PASSES_A)
    row_classes = per_row(expected)
    assert [row["source_row"] for row in document["rows"]] == list(range(12))
    for row in document["rows"]:
        source = row["source_row"]
        attempts = 0 if source == 9 else 2
        assert (row["a"]["passes"], row["b"]["passes"]) == (passes_a[source], passes_b[source])
        assert row["a"]["attempts"] == row["b"]["attempts"] == attempts
        assert row["classes"] == row_classes[source]
    gained = len(expected["improved"]) - len(expected["regressed"])
    more = "more" if gained > 0 else "fewer"
    rates = "31.8% → 40.9%" if forward else "40.9% → 31.8%"
    assert document["sentence"] == (
        f"B passes {abs(gained)} {more} work items of 22 compared ({rates}); "
        "the difference is within noise at 95%."
    )


def journal_by_row(runs: RealRuns, name: str) -> dict[int, list[dict[str, Any]]]:
    rows: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for record in read_jsonl(runs.folder(name) / "events.jsonl"):
        rows[record["source_row_index"]].append(record)
    return rows


@pytest.mark.parametrize("side", ["a", "b"])
def test_row_sums_are_the_journals_own(real_runs: RealRuns, side: str) -> None:
    """Each row's mean reward (skipped attempts left out), tokens and mean duration, as the
    run's events.jsonl has them (ours in A, the official run's in B)."""
    document = compared(real_runs, "ours_a", "official_b")
    rows = {row["source_row"]: row[side] for row in document["rows"]}
    journal = journal_by_row(real_runs, document[side]["name"])
    assert sorted(journal) == sorted(rows)
    for source, records in journal.items():
        row = rows[source]
        rewards = [
            r["reward"] for r in records if r["status"] != "skipped" and r.get("reward") is not None
        ]
        tokens = [r["tokens"] for r in records if r.get("tokens") is not None]
        assert row["mean_reward"] == (
            pytest.approx(sum(rewards) / len(rewards)) if rewards else None
        )
        assert row["tokens"] == (sum(tokens) if tokens else None)
        durations = [r["duration_ms"] for r in records]
        assert row["duration_ms"] == pytest.approx(sum(durations) / len(durations))


def test_pass_at_k_of_rows_that_pass_only_sometimes(real_runs: RealRuns) -> None:
    rows = {row["source_row"]: row for row in compared(real_runs, "official_a", "ours_b")["rows"]}
    # Row 3 passes once of two in A, row 4 once of two in B: pass@1 1/2, pass@2 1.
    assert rows[3]["a"]["pass_at_k"] == {"1": 0.5, "2": 1.0}
    assert rows[4]["b"]["pass_at_k"] == {"1": 0.5, "2": 1.0}
    assert rows[0]["a"]["pass_at_k"] == rows[0]["b"]["pass_at_k"] == {"1": 1.0, "2": 1.0}
    assert rows[1]["b"]["pass_at_k"] == {"1": 0.0, "2": 0.0}
    assert rows[9]["a"]["pass_at_k"] is None  # skipped: no attempt counted
    # With three attempts: row 4 passes twice of three in ours_c (pass@1 2/3, pass@2 1).
    rows = {row["source_row"]: row for row in compared(real_runs, "ours_a", "ours_c")["rows"]}
    assert rows[4]["b"]["passes"] == 2 and rows[4]["b"]["attempts"] == 3
    assert rows[4]["b"]["pass_at_k"] == {"1": pytest.approx(2 / 3), "2": 1.0}


def test_statistics_as_computed_by_hand(real_runs: RealRuns) -> None:
    statistics = compared(real_runs, "ours_a", "official_b")["statistics"]
    assert statistics["rows"] == 11
    # The pass fractions of the 11 rows with a counted attempt: 3.5 of 11 in A, 4.5 in B.
    rate = statistics["pass_rate"]
    assert rate["a"] == pytest.approx(3.5 / 11) and rate["b"] == pytest.approx(4.5 / 11)
    assert rate["difference"] == pytest.approx(1 / 11)
    low, high = rate["ci95"]
    assert low < 0 < rate["difference"] < high  # 1 row in 11 is within noise
    assert rate["method"].startswith("paired bootstrap over rows")
    assert rate["mcnemar_exact_p"] is None  # two attempts per row: not McNemar's case
    # Rewards of the rows graded in both (0-5): 4.125 of 6 in each, a difference of 0.
    reward = statistics["mean_reward"]
    assert reward["a"] == reward["b"] == pytest.approx(4.125 / 6)
    assert reward["difference"] == pytest.approx(0.0)
    assert reward["ci95"][0] <= 0 <= reward["ci95"][1]


def test_json_is_the_same_bytes_each_time(real_runs: RealRuns) -> None:
    first = compare(real_runs, "official_a", "ours_b", "--json")
    second = compare(real_runs, "official_a", "ours_b", "--json")
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout
    assert first.stdout.count("\n") == 1  # one document, one line


def test_run_folders_in_place_of_names(real_runs: RealRuns) -> None:
    """A and B as run folders, from anywhere, without -o: the same document as by name."""
    by_name = compare(real_runs, "ours_a", "official_b", "--json")
    by_folder = run_osmosis(
        "compare",
        str(real_runs.folder("ours_a")),
        str(real_runs.folder("official_b")),
        "--json",
        cwd=real_runs.tmp,
    )
    assert by_folder.returncode == by_name.returncode == 0, by_folder.stderr
    assert by_folder.stdout == by_name.stdout


def test_items_in_one_run_only(real_runs: RealRuns) -> None:
    """ours_c: rows 0-5, three attempts each, B's answers."""
    document = compared(real_runs, "ours_a", "ours_c")
    rows_0_5 = {
        name: [(row, attempt) for row, attempt in items if row <= 5]
        for name, items in A_TO_B.items()
    }
    assert items_of(document) == {
        **rows_0_5,
        "only_in_A": [(row, attempt) for row in range(6, 12) for attempt in (0, 1)],
        "only_in_B": [(row, 2) for row in range(6)],
    }
    assert document["b"]["n"] == 3 and document["b"]["work_items"] == 18
    match = document["match"]
    assert (match["same_dataset"], match["rows_in_both"]) == (True, 6)
    assert match["notes"] == [
        "A selects 12 rows and B 6; 6 are in both",
        "A makes 2 attempts per row and B 3: the attempts beyond the fewer are in one run only",
    ]
    rows = {row["source_row"]: row for row in document["rows"]}
    assert rows[11]["b"] is None and rows[11]["classes"] == {"only_in_A": 2}


def test_pending_items_of_an_interrupted_run(real_runs: RealRuns) -> None:
    """ours_partial: rows 6-11, interrupted while its last item (11, 1) waited on the model;
    row 8 erred at once and row 11 was answered wrong first."""
    document = compared(real_runs, "ours_a", "ours_partial")
    assert items_of(document) == {
        "regressed": [],
        "improved": [(10, 0), (10, 1)],
        "error_changed": [(7, 0), (7, 1), (11, 0)],
        "still_failing": [(6, 0), (6, 1), (8, 0), (8, 1)],
        "still_passing": [],
        "pending": [(11, 1)],
        "skipped": [(9, 0), (9, 1)],
        "only_in_A": [(row, attempt) for row in range(6) for attempt in (0, 1)],
        "only_in_B": [],
    }
    assert (document["b"]["work_items"], document["b"]["finished"]) == (12, 11)
    rows = {row["source_row"]: row for row in document["rows"]}
    assert rows[11]["b"]["attempts"] == 1


def test_pass_threshold_counts_every_pass_again(real_runs: RealRuns) -> None:
    """At 0.25 every graded item passes: only the errors fail."""
    document = compared(real_runs, "ours_a", "official_b", "--pass-threshold", "0.25")
    assert document["a"]["pass_threshold"] == document["b"]["pass_threshold"] == 0.25
    assert items_of(document) == {
        "regressed": [(7, 0), (7, 1)],
        "improved": [(10, 0), (10, 1), (11, 0), (11, 1)],
        "error_changed": [(8, 0)],
        "still_failing": [(6, 0), (6, 1), (8, 1)],
        "still_passing": [(row, attempt) for row in range(6) for attempt in (0, 1)],
        "pending": [],
        "skipped": [(9, 0), (9, 1)],
        "only_in_A": [],
        "only_in_B": [],
    }


class Gate(NamedTuple):
    a: str
    b: str
    flags: tuple[str, ...]
    status: int
    #: (max_regressed, regressed, tripped), None without --fail-on-regression
    gate: tuple[int, int, bool] | None


GATES = [
    # ours_a -> official_b regresses 3 items, the reverse 5.
    Gate("ours_a", "official_b", (), 0, None),
    Gate("ours_a", "official_b", ("--fail-on-regression",), 1, (0, 3, True)),
    Gate("ours_a", "official_b", ("--fail-on-regression", "2"), 1, (2, 3, True)),
    Gate("ours_a", "official_b", ("--fail-on-regression", "3"), 0, (3, 3, False)),
    Gate("official_b", "ours_a", ("--fail-on-regression", "4"), 1, (4, 5, True)),
    Gate("official_b", "ours_a", ("--fail-on-regression", "5"), 0, (5, 5, False)),
    # The same answers in both: nothing regressed.
    Gate("official_a", "ours_a", ("--fail-on-regression",), 0, (0, 0, False)),
]


@pytest.mark.parametrize("case", GATES, ids=lambda case: f"{case.a}-{case.b}{''.join(case.flags)}")
def test_fail_on_regression_exit_status(real_runs: RealRuns, case: Gate) -> None:
    document = compared(real_runs, case.a, case.b, *case.flags, status=case.status)
    assert document["status"] == ("regressed" if case.status else "ok")
    if case.gate is None:
        assert document["gate"] is None
    else:
        max_regressed, regressed, tripped = case.gate
        assert document["gate"] == {
            "max_regressed": max_regressed,
            "regressed": regressed,
            "tripped": tripped,
        }
    # As text, the same exit status; a tripped gate says why on stderr.
    text = compare(real_runs, case.a, case.b, *case.flags)
    assert text.returncode == case.status
    said = "work items regressed, more than --fail-on-regression"
    assert (said in text.stderr) == bool(case.status), text.stderr


def test_text_names_the_changed_items(real_runs: RealRuns) -> None:
    done = compare(real_runs, "official_a", "ours_b")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "B passes 2 more work items of 22 compared" in done.stdout
    assert any(
        line.split() == ["regressed", "3", "row#attempt", "1#0,", "1#1,", "4#0"] for line in lines
    )
    assert any(line.split()[:2] == ["still_passing", "4"] for line in lines)


BAD_INPUT = [
    # (arguments, what the message must name)
    ((), "A and B: missing; give two runs to compare"),
    (("ours_a",), "B: missing; give two runs to compare"),
    (("nope", "ours_b"), "A: nope: neither a run folder nor a run under"),
    (("ours_a", "DATA"), "B: {data}: neither a run folder nor a run under"),
    (("ours_a", "ours_b", "--fail-on-regression", "x"), "argument --fail-on-regression"),
    (("ours_a", "ours_b", "--fail-on-regression", "-1"), "argument --fail-on-regression"),
    (("ours_a", "ours_b", "--pass-threshold", "nan"), "argument --pass-threshold"),
]


@pytest.mark.parametrize(("args", "named"), BAD_INPUT)
def test_bad_input_is_refused_naming_the_argument(
    real_runs: RealRuns, args: tuple[str, ...], named: str
) -> None:
    data = str(real_runs.workspace / "data")  # a folder, not a run
    args = tuple(data if arg == "DATA" else arg for arg in args)
    done = compare(real_runs, *args, "--json")
    assert done.returncode == 2, done.stderr
    assert named.format(data=data) in done.stderr
    assert done.stdout == ""


INCOMPARABLE = [
    # ours_other: another dataset file's rows 1-2, whose questions no row of A asks.
    (
        "ours_a",
        "ours_other",
        "A (ours_a) and B (ours_other) ran different datasets (sha256 ",
        "and no row could be checked to be the same in both: every row's opening messages differ",
    ),
    (
        "ours_other",
        "official_b",
        "A (ours_other) and B (official_b) ran different datasets (sha256 ",
        "every row's opening messages differ",
    ),
    # ours_untraced: the same file as ours_edited, its trials not in its folder.
    (
        "official_a",
        "ours_untraced",
        "A (official_a) and B (ours_untraced) ran different datasets (sha256 ",
        "no row could be checked to be the same in both: their trajectories do not say what "
        "the rows held",
    ),
    # ours_c holds rows 0-5, ours_partial rows 6-11.
    (
        "ours_c",
        "ours_partial",
        "A (ours_c) and B (ours_partial) have no source row in common: nothing to compare",
        "",
    ),
]


@pytest.mark.parametrize(("a", "b", "reason", "detail"), INCOMPARABLE)
def test_an_incomparable_pair_is_refused_with_the_reason(
    real_runs: RealRuns, a: str, b: str, reason: str, detail: str
) -> None:
    for flags in ((), ("--json",), ("--fail-on-regression",)):
        done = compare(real_runs, a, b, *flags)
        assert done.returncode == 2, done.stderr
        assert reason in done.stderr and detail in done.stderr
        assert done.stdout == ""


@pytest.mark.parametrize("a", ["ours_a", "official_a"])
def test_rows_whose_content_differs_are_listed_apart(real_runs: RealRuns, a: str) -> None:
    """ours_edited: another dataset file whose row 0 is A's row 0 and rows 1-2 are not."""
    document = compared(real_runs, a, "ours_edited")
    match = document["match"]
    assert match["same_dataset"] is False
    assert (match["content_differs"], match["content_unchecked"]) == ([1, 2], [])
    assert match["rows_in_both"] == 3 and match["rows_compared"] == 1
    assert match["notes"][0].startswith("the runs read different dataset files (sha256 ")
    items = items_of(document)
    assert items["still_passing"] == [(0, 0), (0, 1)]
    assert items["only_in_A"] == [(row, attempt) for row in range(3, 12) for attempt in (0, 1)]
    assert sum(len(listed) for listed in items.values()) == 20  # rows 1 and 2 not classed
    rows = {row["source_row"]: row for row in document["rows"]}
    assert rows[1]["content"] == rows[2]["content"] == "differs"
    assert rows[1]["classes"] == rows[2]["classes"] == {}
    text = compare(real_runs, a, "ours_edited")
    assert text.returncode == 0, text.stderr
    assert "rows whose content differs, not compared: 1, 2" in text.stdout.splitlines()
