"""The outcome of one `osmosis-tui eval` run, for the end-of-run table and `--json`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.results.records import ItemKey, ItemResult, ItemStatus
from core.eval.runner import RunStatus


@dataclass
class EvalSummary:
    """What the end of a run prints (and `--json` returns)."""

    run_name: str
    status: RunStatus
    folder: Path
    total_items: int
    results: dict[ItemKey, ItemResult]
    metrics: dict[str, Any]
    duration_ms: int
    problem: str | None = None
    resumed: int = 0

    @property
    def pending(self) -> int:
        return self.total_items - len(self.results)

    def count(self, status: ItemStatus) -> int:
        return sum(1 for result in self.results.values() if result.status == status)

    def failed_rows(self) -> list[ItemResult]:
        failed = [r for r in self.results.values() if r.status == "failed"]
        return sorted(failed, key=lambda r: r.key)

    def to_json(self) -> dict[str, Any]:
        summary = self.metrics
        return {
            "run_name": self.run_name,
            "status": self.status,
            "output": str(self.folder),
            "items": {
                "total": self.total_items,
                "done": len(self.results),
                "ok": self.count("success"),
                "failed": self.count("failed"),
                "skipped": self.count("skipped"),
                "pending": self.pending,
                "resumed": self.resumed,
            },
            "pass_rate": summary["pass_rate"],
            "pass_threshold": summary["pass_threshold"],
            "reward": summary["reward_stats"],
            "pass_at_k": summary["pass_at_k"],
            "tokens": summary["tokens_used"],
            "duration_ms": self.duration_ms,
            "problem": self.problem,
            "failed_rows": [
                {
                    "row_index": r.row_index,
                    "run_index": r.run_index,
                    "error_type": r.error_type,
                    "rollout_id": r.rollout_id,
                }
                for r in self.failed_rows()
            ],
        }
