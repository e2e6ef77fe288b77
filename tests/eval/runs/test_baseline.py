"""`osmosis-tui eval --baseline RUN` as a process on the official-layout workspace: the end of
the run counts its items against the baseline (as text, and as an extra key of the JSON
envelope), and a baseline that is missing, unreadable or not comparable is bad input, said
with the reason before anything starts. The two runs' models answer different rows wrong
(tests/eval/runs/wrong_rows_model.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.eval.runs.command import run_eval
from tests.eval.runs.files import envelope, multiply_rows, run_folder, write_jsonl
from tests.eval.runs.wrong_rows_model import wrong_rows_model

CONFIG = "configs/eval/multiply.toml"
#: The config's first six rows: 3 * 4, 12 * 11, 7 * 8, 25 * 4, 9 * 9, 13 * 17.
BASELINE_WRONG = ("3 * 4", "25 * 4")  # rows 0 and 3: they improve
LIVE_WRONG = ("7 * 8",)  # row 2: it regresses
OFFICIAL_KEYS = {"schema_version", "status", "operation", "resource", "message", "osmosis_tui"}


def eval_with(model: str, *args: str, cwd: Path) -> tuple[int, str, str]:
    result = run_eval(CONFIG, "--chat-url", model, "--chat-model", "stub", *args, cwd=cwd)
    return result.returncode, result.stdout, result.stderr


def test_the_end_of_a_run_counts_it_against_its_baseline(workspace: Path) -> None:
    with wrong_rows_model(*BASELINE_WRONG) as model:
        code, _out, err = eval_with(model, "--headless", "--name", "base", cwd=workspace)
        assert code == 0, err
    with wrong_rows_model(*LIVE_WRONG) as model:
        code, out, err = eval_with(
            model, "--headless", "--json", "--name", "now", "--baseline", "base", cwd=workspace
        )
        assert code == 0, err
        document = envelope(out)
        # The official envelope keeps its keys; ours go in our own key.
        assert set(document) == OFFICIAL_KEYS
        assert "baseline" not in document["resource"]
        assert document["osmosis_tui"]["baseline"] == {
            "run": "base",
            "folder": str(run_folder(workspace, "base").resolve()),
            "regressed": 1,
            "improved": 2,
            "error_changed": 0,
            "still_failing": 0,
            "still_passing": 3,
            "skipped": 0,
            "compared": 6,
        }
        # A run folder names the baseline as well as a run name does; --plain says it in a line.
        folder = str(run_folder(workspace, "base"))
        code, out, err = eval_with(
            model, "--headless", "--plain", "--name", "again", "--baseline", folder, cwd=workspace
        )
        assert code == 0, err
        assert "vs baseline: base: +2 improved, −1 regressed, 6 compared" in out.splitlines()
        assert "osmosis-tui compare" in out  # and where to see the rows that changed


def refused(workspace: Path, *args: str) -> str:
    """Run `eval` with `args`, which must be refused as bad input before the run starts; its
    stderr."""
    result = run_eval(
        CONFIG, "--chat-url", "stub", "--headless", "--name", "late", *args, cwd=workspace
    )
    assert result.returncode == 2, result.stderr
    assert not run_folder(workspace, "late").exists(), "nothing was started"
    assert "--baseline" in result.stderr
    return result.stderr


def test_a_missing_or_unreadable_baseline_is_bad_input(workspace: Path) -> None:
    said = refused(workspace, "--baseline", "nope")
    assert "nope: neither a run folder nor a run under" in said
    broken = run_folder(workspace, "broken")
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{")
    said = refused(workspace, "--baseline", "broken")
    assert "broken" in said and "manifest.json" in said


@pytest.mark.parametrize("case", ["another dataset", "no shared row", "itself"])
def test_a_baseline_that_cannot_be_compared_live_is_refused_with_the_reason(
    workspace: Path, case: str
) -> None:
    first: tuple[str, ...] = ()
    later: tuple[str, ...] = ()
    if case == "another dataset":
        other = write_jsonl(workspace / "data" / "other.jsonl", multiply_rows(3))
        first = ("--dataset-file", str(other))
    elif case == "no shared row":
        first, later = ("--rows", "6,7"), ("--rows", "0-2")
    else:
        later = ("--name", "base")
    made = run_eval(
        CONFIG, "--chat-url", "stub", "--headless", "--name", "base", *first, cwd=workspace
    )
    assert made.returncode == 0, made.stderr
    result = run_eval(
        CONFIG,
        "--chat-url",
        "stub",
        "--headless",
        "--name",
        "late",
        "--baseline",
        "base",
        *later,
        cwd=workspace,
    )
    assert result.returncode == 2, result.stderr
    said = result.stderr
    assert "--baseline: base:" in said
    if case == "another dataset":
        assert "ran another dataset file" in said
        assert "osmosis-tui compare base late" in said  # what to do instead
    elif case == "no shared row":
        assert "has none of the 3 source rows this run selects (rows 0-2; it ran rows 6-7)" in said
    else:
        assert "is this run itself" in said
    assert not run_folder(workspace, "late").exists()
