"""A work item's outcome: what its rollout's result (or the runner's own verdict) is
journaled as (EVAL.md §7): success, skipped, failed with an error type, or none for a
cancelled one that stays pending.
"""

from __future__ import annotations

from core.eval.results.records import ItemResult, WorkItem
from core.types import RolloutResultResponse, RolloutStatus


def classify(
    item: WorkItem, rollout_id: str, result: RolloutResultResponse, duration_ms: float
) -> ItemResult | None:
    """The item's outcome, or None when it must stay pending (cancelled)."""
    status = result.status
    if status == RolloutStatus.CANCELLED:
        return None
    sample = result.sample
    tokens = _tokens(sample.metrics) if sample is not None else None
    if status == RolloutStatus.SUCCESS:
        skipped = sample is not None and sample.remove_sample
        return ItemResult(
            row_index=item.row_index,
            run_index=item.run_index,
            rollout_id=rollout_id,
            status="skipped" if skipped else "success",
            source_row_index=item.source_row_index,
            reward=None if sample is None or skipped else sample.reward,
            tokens=tokens,
            duration_ms=duration_ms,
            error_type=None,
        )
    error_type = (
        result.err_category.value if result.err_category else result.err_message or "rollout_failed"
    )
    return failed_item(item, rollout_id, duration_ms, error_type, tokens=tokens)


def failed_item(
    item: WorkItem,
    rollout_id: str,
    duration_ms: float,
    error_type: str | None,
    *,
    tokens: int | None = None,
) -> ItemResult:
    """A failed outcome: the result said so, or the runner gave up on the item itself."""
    return ItemResult(
        row_index=item.row_index,
        run_index=item.run_index,
        rollout_id=rollout_id,
        status="failed",
        source_row_index=item.source_row_index,
        reward=None,
        tokens=tokens,
        duration_ms=duration_ms,
        error_type=error_type,
    )


def _tokens(metrics: dict[str, object]) -> int | None:
    total = metrics.get("total_tokens")
    if isinstance(total, (int, float)):
        return int(total)
    parts = [metrics.get(key) for key in ("prompt_tokens", "completion_tokens")]
    numbers = [int(part) for part in parts if isinstance(part, (int, float))]
    return sum(numbers) if numbers else None
