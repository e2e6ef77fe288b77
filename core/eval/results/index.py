"""`index.jsonl` of an eval run (EVAL.md §6): one row per work item.

Rewritten atomically at the end: `row_index, run_index, rollout_id, status, reward, tokens,
duration_ms, error_type, resumed`. Items without a result have status `pending`; null values
are omitted as in the journal (readers of the official layout drop lines holding nulls) and
`resumed` is always a boolean: true when the result was carried over from an earlier session.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from core.eval.results.durable import json_line, write_bytes_atomic
from core.eval.results.records import ItemKey, ItemResult, WorkItem


def index_rows(
    items: Iterable[WorkItem],
    results: Mapping[ItemKey, ItemResult],
    *,
    resumed: Collection[ItemKey] = (),
) -> list[dict[str, Any]]:
    """One index row per work item, in `(row_index, run_index)` order.

    `resumed` holds the keys whose result was carried over from an earlier session.
    """
    rows: list[dict[str, Any]] = []
    for item in sorted(items, key=lambda item: item.key):
        result = results.get(item.key)
        row: dict[str, Any] = {
            "row_index": item.row_index,
            "run_index": item.run_index,
            "rollout_id": None,
            "status": "pending",
            "reward": None,
            "tokens": None,
            "duration_ms": None,
            "error_type": None,
        }
        if result is not None:
            row.update(
                rollout_id=result.rollout_id,
                status=result.status,
                reward=result.reward,
                tokens=result.tokens,
                duration_ms=result.duration_ms,
                error_type=result.error_type,
            )
        row = {key: value for key, value in row.items() if value is not None}
        row["resumed"] = result is not None and item.key in resumed
        rows.append(row)
    return rows


def write_index(path: Path, rows: Iterable[Mapping[str, Any]]) -> None:
    """Rewrite `index.jsonl` atomically with `rows` (see `index_rows`), one per line."""
    write_bytes_atomic(path, b"".join(json_line(row) for row in rows))


__all__ = ["index_rows", "write_index"]
