"""`index.jsonl` (EVAL.md §8): one line per work item that has a result, as official."""

from __future__ import annotations

import json

from core.eval.results.index import index_line, index_row
from core.eval.results.trials import Trajectory
from tests.eval.results.helpers import item_result

# Lines of an official index (osmosis eval run 0.3.8), byte for byte.
OFFICIAL_INDEX = (
    '{"row_index": 0, "run_index": 0, "rollout_id": "4e3ac15702a54898b4d412dec92738dc", '
    '"trajectory_filename": "trajectory.json", "status": "success", "reward": 1.0, '
    '"tokens": 13, "duration_ms": 231.1877940001068, "resumed": true}\n'
    '{"row_index": 2, "run_index": 0, "rollout_id": "5c0dcdec093c4ece821ee76553352ffe", '
    '"status": "failed", "duration_ms": 183.19184800020594, "error_type": "agent_error", '
    '"resumed": true}\n'
)


def test_index_rows_in_the_official_key_order_without_nulls() -> None:
    success = item_result(0, 0, duration_ms=231.1877940001068, tokens=13)
    failed = item_result(
        0, 1, status="failed", reward=None, tokens=None, error_type="timeout", duration_ms=9.5
    )
    skipped = item_result(1, 1, status="skipped", reward=None, tokens=None)
    row = index_row(success, trajectory=Trajectory(tokens=None), resumed=True)
    assert list(row.items()) == [
        ("row_index", 0),
        ("run_index", 0),
        ("rollout_id", "id-0-0"),
        ("trajectory_filename", "trajectory.json"),
        ("status", "success"),
        ("reward", 1.0),
        ("tokens", 13),
        ("duration_ms", 231.1877940001068),
        ("resumed", True),
    ]
    assert index_row(failed, trajectory=None, resumed=False) == {
        "row_index": 0,
        "run_index": 1,
        "rollout_id": "id-0-1",
        "status": "failed",
        "duration_ms": 9.5,
        "error_type": "timeout",
    }
    # Tokens the result lacks come from the trajectory; `resumed` is absent unless true.
    assert index_row(skipped, trajectory=Trajectory(tokens=7), resumed=False) == {
        "row_index": 1,
        "run_index": 1,
        "rollout_id": "id-1-1",
        "trajectory_filename": "trajectory.json",
        "status": "skipped",
        "tokens": 7,
        "duration_ms": 1234.0,
    }


def test_index_lines_use_the_default_separators() -> None:
    """Each row one line, as official; their order is the snapshots' (by item,
    tests/eval/results/test_snapshots.py)."""
    rows = [json.loads(line) for line in OFFICIAL_INDEX.splitlines()]
    assert b"".join(map(index_line, rows)).decode() == OFFICIAL_INDEX
