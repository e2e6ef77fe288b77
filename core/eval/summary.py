"""The outcome of one `osmosis-tui eval` run, for the end-of-run table and `--json`.

`--json` prints `EvalSummary.envelope(...)`: the shape `osmosis eval run --json` prints
(`schema_version`, `status`, `operation`, `resource`, `message`, the `resource` keys in the
official order), so a script written for the official command reads ours. What only we report
(the run's own status, the pending count, the problem that stopped it, ...) is one extra key,
`osmosis_tui`, that the official shape does not have.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.eval.results.folder import MANIFEST_FILE, TRIALS_DIR
from core.eval.results.records import ItemKey, ItemResult, ItemStatus
from core.eval.runner import RunStatus
from core.eval.untrusted_json import load_json_file

ENVELOPE_SCHEMA_VERSION = 1
OPERATION = "eval.run"
#: The envelope's key for what only osmosis-tui reports.
OURS = "osmosis_tui"


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
    #: This invocation's hedges sent and won and rule requeues (`HedgeBook.counts`).
    tail: dict[str, int] | None = None

    @property
    def pending(self) -> int:
        return self.total_items - len(self.results)

    @property
    def cancelled(self) -> bool:
        """Interrupted (Ctrl-C, `q`): what was in flight was cancelled or left, not recorded."""
        return self.status == "interrupted"

    @property
    def complete(self) -> bool:
        """Every work item has a result (whatever the rewards), nothing was cancelled and
        every results file was written."""
        return self.status == "complete"

    def count(self, status: ItemStatus) -> int:
        return sum(1 for result in self.results.values() if result.status == status)

    def failed_rows(self) -> list[ItemResult]:
        """Every result that is not a success (failed, and skipped), by row and attempt."""
        failed = [r for r in self.results.values() if r.status != "success"]
        return sorted(failed, key=lambda r: r.key)

    def trial_dir(self, result: ItemResult) -> Path:
        """Where a launched server left the rollout's files (`rollout_trials/<rollout_id>`)."""
        return self.folder / TRIALS_DIR / result.rollout_id

    def envelope(
        self,
        *,
        message: str,
        dispatched: int,
        dataset_source: str,
        workspace: Path | None,
    ) -> dict[str, Any]:
        """The `--json` document (module docstring). `dispatched`: the rollouts this invocation
        started for work items; `workspace`: the workspace root, when there is one."""
        folder = self.folder.resolve()
        resource: dict[str, Any] = {
            "run_name": self.run_name,
            "local_run_id": _local_run_id(self.folder),
            "output_path": str(folder),
            "dataset_source": dataset_source,
            "total_work_items": self.total_items,
            "dispatched": dispatched,
            "succeeded": self.count("success"),
            "failed": self.count("failed"),
            "skipped": self.count("skipped"),
            "resumed": self.resumed,
            "cancelled": self.cancelled,
            "duration_ms": float(self.duration_ms),
            "metrics": self.metrics,
            "failed_rows": [
                {
                    "row_index": r.row_index,
                    "source_row_index": r.source_row_index,
                    "run_index": r.run_index,
                    "rollout_id": r.rollout_id,
                    "error_type": r.error_type,
                    "rollout_dir": str(folder / TRIALS_DIR / r.rollout_id),
                }
                for r in self.failed_rows()
            ],
        }
        if workspace is not None:
            resource["workspace_directory"] = str(workspace)
        return {
            "schema_version": ENVELOPE_SCHEMA_VERSION,
            "status": "success" if self.complete else "partial",
            "operation": OPERATION,
            "resource": resource,
            "message": message,
            OURS: self.to_json(),
        }

    def to_json(self) -> dict[str, Any]:
        """What osmosis-tui reports of the run (the envelope's `osmosis_tui`)."""
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
            # As in metrics.json: present only when something was graded / n >= 2.
            "reward": summary.get("reward_stats"),
            "pass_at_k": summary.get("pass_at_k", []),
            "tokens": summary["tokens_used"],
            "duration_ms": self.duration_ms,
            "problem": self.problem,
            "failed_rows": [
                {
                    "row_index": r.row_index,
                    "source_row_index": r.source_row_index,
                    "run_index": r.run_index,
                    "status": r.status,
                    "error_type": r.error_type,
                    "rollout_id": r.rollout_id,
                }
                for r in self.failed_rows()
            ],
            "tail": self.tail or {"hedges_sent": 0, "hedges_won": 0, "requeued_by_rule": 0},
        }


def _local_run_id(folder: Path) -> str | None:
    """The run's id from its manifest (None when the manifest has none, or cannot be read)."""
    try:
        document = load_json_file(folder / MANIFEST_FILE)
    except (OSError, ValueError):
        return None
    value = document.get("local_run_id") if isinstance(document, dict) else None
    return value if isinstance(value, str) else None
