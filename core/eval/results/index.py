"""`index.jsonl` and its copy `summary.jsonl` (EVAL.md §8), as the official tool writes them.

One line per work item that has a result (its latest), sorted by `(row_index, run_index)`;
an empty file when none has. Keys in this order, those without a value left out:
`row_index, run_index, rollout_id, trajectory_filename, status, reward, tokens, duration_ms,
error_type, resumed`, serialised with JSON's default separators (`", "`, `": "`):

- `trajectory_filename`: `"trajectory.json"` when the attempt's trajectory is valid
  (`core.eval.results.trials`), checked when the run starts and ends and, while it runs, at
  every refresh until it is found, for `TRAJECTORY_WAIT_SEC` after the item's result
  (`core.eval.results.snapshots`);
- `tokens`: the result's, else the trajectory's token totals;
- `resumed`: `true` for a result carried over from an earlier invocation of the run and not
  replaced in this one; absent otherwise.

Pending items have no line: `progress.json` says how many there are in all. The official
upload reads this file and refuses one that differs from these rules.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from core.eval.results.records import ItemResult
from core.eval.results.trials import TRAJECTORY_FILE, Trajectory


def index_tokens(result: ItemResult, trajectory: Trajectory | None) -> int | None:
    """The `tokens` of `result`'s index line: the result's, else its trajectory's."""
    if result.tokens is None and trajectory is not None:
        return trajectory.tokens
    return result.tokens


def index_row(
    result: ItemResult, *, trajectory: Trajectory | None, resumed: bool
) -> dict[str, Any]:
    """The index line of `result` (see the module docstring)."""
    tokens = index_tokens(result, trajectory)
    row: dict[str, Any] = {
        "row_index": result.row_index,
        "run_index": result.run_index,
        "rollout_id": result.rollout_id,
        "trajectory_filename": TRAJECTORY_FILE if trajectory is not None else None,
        "status": result.status,
        "reward": result.reward,
        "tokens": tokens,
        "duration_ms": float(result.duration_ms),
        "error_type": result.error_type,
        "resumed": True if resumed else None,
    }
    return {key: value for key, value in row.items() if value is not None}


def index_line(row: Mapping[str, Any]) -> bytes:
    """One row's line of `index.jsonl`, its newline included."""
    return (json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


__all__ = ["index_line", "index_row", "index_tokens"]
