"""`index.jsonl` (EVAL.md §6): one row per work item."""

from __future__ import annotations

import json
from pathlib import Path

from core.eval.results.index import index_rows, write_index
from core.eval.results.records import WorkItem
from tests.eval_results.helpers import file_mode, item_result


def test_index_has_one_row_per_work_item(tmp_path: Path) -> None:
    items = [WorkItem(row, run, row + 10) for row in (1, 0) for run in (1, 0)]
    results = {
        (0, 0): item_result(0, 0),
        (0, 1): item_result(0, 1, status="failed", reward=None, tokens=None, error_type="timeout"),
        (1, 1): item_result(1, 1, status="skipped", reward=None),
    }
    rows = index_rows(items, results, resumed={(0, 0), (1, 0)})
    assert rows == [
        {"row_index": 0, "run_index": 0, "rollout_id": "id-0-0", "status": "success",
         "reward": 1.0, "tokens": 42, "duration_ms": 1234, "resumed": True},
        {"row_index": 0, "run_index": 1, "rollout_id": "id-0-1", "status": "failed",
         "duration_ms": 1234, "error_type": "timeout", "resumed": False},
        {"row_index": 1, "run_index": 0, "status": "pending", "resumed": False},
        {"row_index": 1, "run_index": 1, "rollout_id": "id-1-1", "status": "skipped",
         "tokens": 42, "duration_ms": 1234, "resumed": False},
    ]  # fmt: skip
    path = tmp_path / "index.jsonl"
    path.write_text("stale\n")
    write_index(path, rows)
    assert [json.loads(line) for line in path.read_text().splitlines()] == rows
    assert file_mode(path) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.jsonl"]
