"""A work item's outcome: what its rollout's result (or the runner's own verdict) is
journaled as (EVAL.md §7): success, skipped, failed with an error type, or none for a
cancelled one that stays pending.

The result's own token count (its sample's `metrics`) is read through
`core.eval.token_counts`: a value that is not a count is logged and left out.

A result whose reward is not a finite number (NaN, Infinity, 1e400, a string) is refused by
the client, as the official client refuses it, and the official runner then halts the whole
run with the item pending: every resume meets the same result and halts again. Here the
item fails instead, with the error type `invalid_reward` (`invalid_reward()` recognises the
refusal), and the run goes on.
"""

from __future__ import annotations

import logging

from pydantic import ValidationError

from core.errors import RolloutProtocolError
from core.eval.results.records import ItemResult, ItemStatus, WorkItem
from core.eval.safe_text import shown_value
from core.eval.token_counts import NOT_A_COUNT, token_count
from core.result_head import ResultHead
from core.types import RolloutResultResponse, RolloutStatus

logger = logging.getLogger(__name__)

#: The error type of an item whose result had a reward that is not a finite number.
INVALID_REWARD = "invalid_reward"
_REWARD = ("sample", "reward")


def classify(
    item: WorkItem, rollout_id: str, result: RolloutResultResponse, duration_ms: float
) -> ItemResult | None:
    """The item's outcome, or None when it must stay pending (cancelled)."""
    journaled = item_status(ResultHead.of(result))
    if journaled is None:
        return None
    status, reward, error_type = journaled
    sample = result.sample
    tokens = _tokens(rollout_id, sample.metrics) if sample is not None else None
    if status == "failed":
        return failed_item(item, rollout_id, duration_ms, error_type, tokens=tokens)
    return ItemResult(
        row_index=item.row_index,
        run_index=item.run_index,
        rollout_id=rollout_id,
        status=status,
        source_row_index=item.source_row_index,
        reward=reward,
        tokens=tokens,
        duration_ms=duration_ms,
        error_type=None,
    )


def item_status(
    result: ResultHead,
) -> tuple[ItemStatus, float | None, str | None] | None:
    """What a rollout's result makes of its work item: the status, reward and error type it
    is journaled with; None when it was cancelled (the item stays pending). `classify`
    journals this; the baseline's tally and the rows × attempts grid read a rollout by it."""
    status = result.status
    if status == RolloutStatus.CANCELLED:
        return None
    if status == RolloutStatus.SUCCESS:
        if result.remove_sample:
            return "skipped", None, None
        return "success", result.reward, None
    error_type = (
        result.err_category.value if result.err_category else result.err_message or "rollout_failed"
    )
    return "failed", None, error_type


def invalid_reward(error: RolloutProtocolError) -> str | None:
    """When the client refused a result only for its reward: that reward as the server sent
    it (for a message); else None."""
    cause = error.__cause__
    if not isinstance(cause, ValidationError):
        return None
    problems = cause.errors()
    if not problems or any(problem["loc"] != _REWARD for problem in problems):
        return None
    return shown_value(problems[0]["input"])


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


def _tokens(rollout_id: str, metrics: dict[str, object]) -> int | None:
    """`total_tokens`, else the sum of `prompt_tokens` and `completion_tokens` (either may be
    missing); None when none of them is a count."""
    total = _count(rollout_id, metrics, "total_tokens")
    if total is not None:
        return total
    parts = [_count(rollout_id, metrics, key) for key in ("prompt_tokens", "completion_tokens")]
    counted = [part for part in parts if part is not None]
    return sum(counted) if counted else None


def _count(rollout_id: str, metrics: dict[str, object], key: str) -> int | None:
    value = metrics.get(key)
    count = token_count(value)
    if count is None and value is not None:
        logger.warning(
            "rollout %s: the result's metrics.%s = %s %s; it is left out",
            rollout_id,
            key,
            shown_value(value),
            NOT_A_COUNT,
        )
    return count
