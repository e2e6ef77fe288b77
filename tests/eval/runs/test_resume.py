"""Resuming a run by name: after a SIGKILL, with --retry-failed, with --fresh, and refusals."""

from __future__ import annotations

import json
import re
import signal
from collections import Counter
from pathlib import Path

from tests.eval.runs.command import run_eval, start_eval
from tests.eval.runs.files import multiply_rows, read_jsonl, run_folder, summary_of, write_jsonl
from tests.eval.runs.servers import ServedDemo
from tests.polling import eventually_sync


def test_sigkill_then_resume_runs_only_the_pending_items(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    rows = 16
    dataset = write_jsonl(
        tmp_path / "slow.jsonl", multiply_rows(rows, metadata={"stub": "slow:0.2"})
    )
    args = ("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "r1")
    events_path = run_folder(tmp_path, "r1") / "events.jsonl"

    first = start_eval(*args, "--max-in-flight", "2", cwd=tmp_path)
    try:
        eventually_sync(lambda: len(read_jsonl(events_path)) >= 6, "6 finished items")
    finally:
        first.send_signal(signal.SIGKILL)
        first.finish()
    before = {(e["row_index"], e["run_index"]) for e in read_jsonl(events_path)}
    assert 6 <= len(before) < rows

    second = run_eval(*args, "--max-in-flight", "4", "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    summary = summary_of(second.stdout)
    assert summary["items"]["resumed"] == len(before)
    assert summary["items"]["done"] == rows
    assert f"{rows - len(before)} work items to run" in second.stderr

    events = read_jsonl(events_path)
    keys = Counter((e["row_index"], e["run_index"]) for e in events)
    assert keys == Counter({(row, 0): 1 for row in range(rows)}), "each item runs exactly once"
    index = read_jsonl(run_folder(tmp_path, "r1") / "index.jsonl")
    assert len(index) == rows
    assert all(r["status"] == "success" for r in index)
    assert {(r["row_index"], r["run_index"]) for r in index if r.get("resumed")} == before


def test_retry_failed_reruns_failed_rows_with_fresh_rollout_ids(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    rows = [*multiply_rows(3), *multiply_rows(2, metadata={"stub": "error"})]
    dataset = write_jsonl(tmp_path / "rows.jsonl", rows)
    args = ("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "retry")
    first = run_eval(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    folder = run_folder(tmp_path, "retry")
    failed_before = {
        r["row_index"]: r["rollout_id"]
        for r in read_jsonl(folder / "index.jsonl")
        if r["status"] == "failed"
    }
    assert set(failed_before) == {3, 4}

    # Resuming a complete run runs nothing; --retry-failed runs the failed rows again.
    again = run_eval(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "0 work items to run" in again.stdout
    assert "all 5 work items already have results" in (folder / "logs.txt").read_text()
    retried = run_eval(*args, "--retry-failed", cwd=tmp_path)
    assert retried.returncode == 0, retried.stderr
    assert "2 work items to run" in retried.stdout

    events = read_jsonl(folder / "events.jsonl")
    assert Counter(e["row_index"] for e in events) == {0: 1, 1: 1, 2: 1, 3: 2, 4: 2}
    index = {r["row_index"]: r for r in read_jsonl(folder / "index.jsonl")}
    for row, old_id in failed_before.items():
        assert index[row]["rollout_id"] != old_id
        assert index[row]["status"] == "failed"
        assert "resumed" not in index[row]  # recorded again: no longer carried over
    assert all(index[row]["resumed"] is True for row in (0, 1, 2))
    assert len({e["rollout_id"] for e in events}) == len(events)


def test_fresh_archives_the_old_run(tmp_path: Path, demo_server: ServedDemo) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(2))
    args = ("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "again")
    assert run_eval(*args, cwd=tmp_path).returncode == 0
    folder = run_folder(tmp_path, "again")
    old_events = (folder / "events.jsonl").read_text()

    fresh = run_eval(*args, "--fresh", "--limit", "1", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    aside = [p for p in folder.parent.iterdir() if p.name.startswith("again.archive-")]
    assert len(aside) == 1
    assert re.fullmatch(r"again\.archive-\d{8}T\d{6}Z", aside[0].name)
    assert (aside[0] / "events.jsonl").read_text() == old_events
    assert len(read_jsonl(folder / "events.jsonl")) == 1
    assert (
        json.loads((folder / "manifest.json").read_text())["inputs"]["dataset"][
            "selected_source_rows"
        ]
        == "0"
    )


def test_resume_with_changed_inputs_is_refused(tmp_path: Path, demo_server: ServedDemo) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(3))
    args = ("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "fixed")
    assert run_eval(*args, "--limit", "2", cwd=tmp_path).returncode == 0
    events = (run_folder(tmp_path, "fixed") / "events.jsonl").read_text()

    more = run_eval(*args, "--limit", "3", "--n", "2", cwd=tmp_path)
    assert more.returncode == 2
    assert "changed: dataset, n;" in more.stderr
    assert "--fresh" in more.stderr

    write_jsonl(dataset, multiply_rows(4))
    changed = run_eval(*args, "--limit", "2", "--agent-timeout", "30", cwd=tmp_path)
    assert changed.returncode == 2
    assert "changed: dataset, timeouts;" in changed.stderr
    # Nothing was run or rewritten by the refused attempts.
    assert (run_folder(tmp_path, "fixed") / "events.jsonl").read_text() == events


def test_journal_records_outside_the_plan_are_named_and_left_out_of_the_runs_counts(
    tmp_path: Path, demo_server: ServedDemo
) -> None:
    dataset = write_jsonl(tmp_path / "rows.jsonl", multiply_rows(3))
    args = ("--server", demo_server.url, "--dataset-file", str(dataset), "--name", "out")
    folder = run_folder(tmp_path, "out")
    first = run_eval(*args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    events = folder / "events.jsonl"
    # One item pending again (its record gone), and two records outside the plan.
    kept = events.read_text().splitlines(keepends=True)[:2]
    good = len(kept)
    # A row beyond the dataset, and a run_index >= n: a journal edited by hand.
    strays = [
        {"duration_ms": 1.0, "reward": 1.0, "rollout_id": "stray1", "row_index": 7,
         "run_index": 0, "source_row_index": 7, "status": "success", "tokens": 1},
        {"duration_ms": 1.0, "error_type": "agent_error", "rollout_id": "stray2",
         "row_index": 0, "run_index": 3, "status": "failed"},
    ]  # fmt: skip
    events.write_text("".join(kept) + "".join(json.dumps(s) + "\n" for s in strays))

    second = run_eval(*args, "--json", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    for line, (row, attempt) in ((good + 1, (7, 0)), (good + 2, (0, 3))):
        warning = (
            f".osmosis/evals/out/events.jsonl:{line}: a record of row_index {row}, run_index "
            f"{attempt}, which is no work item of this run (3 rows × n = 1): not run, not "
            "counted in its progress; kept in index.jsonl and metrics.json, as the official "
            "tool keeps it"
        )
        assert warning in second.stderr
        assert warning in (folder / "logs.txt").read_text()
    summary = summary_of(second.stdout)
    assert summary["items"] == {
        "total": 3, "done": 3, "ok": 3, "failed": 0, "skipped": 0, "pending": 0, "resumed": 2,
    }  # fmt: skip
    assert summary["failed_rows"] == []
    # The files keep them, as the official tool's do: every journaled key has its line.
    index = read_jsonl(folder / "index.jsonl")
    assert [(r["row_index"], r["run_index"]) for r in index] == [
        (0, 0),
        (0, 3),
        (1, 0),
        (2, 0),
        (7, 0),
    ]
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["summary"]["total_samples"] == 5
    # Resumed once more, they are still named and still not run.
    third = run_eval(*args, "--json", cwd=tmp_path)
    assert third.returncode == 0, third.stderr
    assert summary_of(third.stdout)["items"]["pending"] == 0
    assert third.stderr.count("which is no work item of this run") == 2
    assert [r["rollout_id"] for r in read_jsonl(events)].count("stray1") == 1
