"""THE acceptance test: `osmosis-tui eval --headless` on the zero-setup demo, end to end."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from server_stub.demo import DEMO_DESIGN, write_demo_dataset
from tests.eval.runs.command import RunningEval, run_eval
from tests.eval.runs.files import read_jsonl, run_folder, summary_of

FULL_DEMO_TIMEOUT_SEC = 400.0


def test_full_demo_headless(full_demo_run: tuple[RunningEval, Path]) -> None:
    # Started when collection finished (see conftest): the stuck rows take two minutes.
    running, cwd = full_demo_run
    stdout, stderr = running.finish(timeout=FULL_DEMO_TIMEOUT_SEC)
    assert running.returncode == 0, stderr
    summary = summary_of(stdout)
    total = DEMO_DESIGN.total
    assert summary["status"] == "complete"
    assert summary["items"] == {
        "total": total,
        "done": total,
        "ok": DEMO_DESIGN.succeeded,
        "failed": DEMO_DESIGN.failed,
        "skipped": 0,
        "pending": 0,
        "resumed": 0,
    }
    assert summary["pass_rate"] == pytest.approx(DEMO_DESIGN.pass_rate)
    assert len(summary["failed_rows"]) == DEMO_DESIGN.failed
    # One progress line per finished rollout, on stderr since stdout holds the JSON.
    assert sum(1 for line in stderr.splitlines() if line.startswith("[")) == total

    folder = run_folder(cwd, "full-demo")
    events = read_jsonl(folder / "events.jsonl")
    keys = Counter((e["row_index"], e["run_index"]) for e in events)
    assert keys == Counter({(row, 0): 1 for row in range(total)})

    index = read_jsonl(folder / "index.jsonl")
    assert [(r["row_index"], r["run_index"]) for r in index] == [(row, 0) for row in range(total)]
    statuses = Counter(r["status"] for r in index)
    assert statuses == {"success": DEMO_DESIGN.succeeded, "failed": DEMO_DESIGN.failed}
    assert not any("resumed" in r for r in index)  # official: the key only when true
    errors = Counter(r.get("error_type") for r in index if r["status"] == "failed")
    assert errors == {"agent_error": DEMO_DESIGN.chat_error, "timeout": DEMO_DESIGN.timeout}

    # Every rollout called the model once, through the gateway: answered, failed on purpose,
    # or abandoned when its row's own budget ran out.
    calls = read_jsonl(folder / "calls.jsonl")
    assert Counter(c["rollout_id"] for c in calls) == Counter(e["rollout_id"] for e in events)
    assert Counter(c.get("status") for c in calls) == {
        200: DEMO_DESIGN.succeeded,
        502: DEMO_DESIGN.chat_error,
        None: DEMO_DESIGN.timeout,
    }
    # An answered call's tokens are its item's tokens (the stub model reports usage).
    answered = {c["rollout_id"]: c["total_tokens"] for c in calls if c.get("status") == 200}
    assert all(tokens > 0 for tokens in answered.values())
    assert {e["rollout_id"]: e["tokens"] for e in events if e["status"] == "success"} == answered

    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["eval_run"]["status"] == "finished"
    assert metrics["eval_run"]["dataset_name"] == "demo"
    numbers = metrics["summary"]
    assert numbers["tokens_used"] == sum(answered.values())
    assert numbers["total_samples"] == total
    assert numbers["failed"] == DEMO_DESIGN.failed
    assert numbers["passed"] == DEMO_DESIGN.passed
    assert numbers["graded"] == total - DEMO_DESIGN.ungraded - DEMO_DESIGN.failed
    assert numbers["pass_rate"] == pytest.approx(DEMO_DESIGN.pass_rate)
    # Every status change the run saw is in the transitions log, ending in a terminal one.
    transitions = [t for t in read_jsonl(folder / "transitions.jsonl") if t["kind"] == "status"]
    final = {t["rollout_id"]: t["status"] for t in transitions}
    assert Counter(final.values()) == {
        "success": DEMO_DESIGN.succeeded,
        "failure": DEMO_DESIGN.failed,
    }
    # The demo server publishes its ownership events to the run (issue 13): every rollout's
    # statuses come from the server too, so every graded success has its grading phase.
    from_server: dict[str, set[str]] = {}
    for t in transitions:
        if t["source"] == "server":
            from_server.setdefault(t["rollout_id"], set()).add(t["status"])
    assert from_server.keys() == final.keys()
    graded = {t["rollout_id"] for t in transitions if t.get("grade") is True}
    successes = {rollout for rollout, status in final.items() if status == "success"}
    assert successes & graded
    assert all("grading" in from_server[rollout] for rollout in successes & graded)


def test_demo_rows_left_by_an_older_version_are_replaced(tmp_path: Path) -> None:
    stale = tmp_path / ".osmosis" / "evals" / "demo-dataset.jsonl"
    write_demo_dataset(stale, count=10, seed=1)
    result = run_eval("--rows", "0,1", "--name", "two", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert stale.read_text() == write_demo_dataset(tmp_path / "bundled.jsonl").read_text()
    # No temporary file left behind; `.locks/` holds the run-name locks, as official.
    assert [p.name for p in stale.parent.iterdir() if p.name.startswith(".")] == [".locks"]
