"""Helpers shared by the results-folder tests: a sample result and a file's mode bits."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from core.eval.results.records import ItemResult


def file_mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def item_result(row: int = 0, run: int = 0, **fields: Any) -> ItemResult:
    values: dict[str, Any] = {
        "row_index": row,
        "run_index": run,
        "rollout_id": f"id-{row}-{run}",
        "status": "success",
        "source_row_index": row + 10,
        "reward": 1.0,
        "tokens": 42,
        "duration_ms": 1234,
    }
    values.update(fields)
    return ItemResult(**values)
