"""`ResultHead`: what a rollout's result says of its outcome, without its conversation.

The table's columns, its sorts and filter, the baseline's tint, the grid and the
distributions read every finished rollout's outcome (its reward, its error) over and over;
only the details, the transcript and the exports read the conversation. A head is the part
the former need, small enough to keep for each of a million finished rollouts (issue 29),
while the full result can wait, packed, until someone asks for it (`RecordedRollout`).
"""

from __future__ import annotations

from dataclasses import dataclass

from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutStatus


@dataclass(frozen=True, slots=True)
class ResultHead:
    """A `RolloutResultResponse` without its sample's messages, metrics and extra fields."""

    status: RolloutStatus
    err_message: str | None = None
    err_category: RolloutErrorCategory | None = None
    #: The result carries a sample (a failure with one had a finished workflow).
    has_sample: bool = False
    reward: float | None = None
    remove_sample: bool = False
    label: str | None = None

    @classmethod
    def of(cls, result: RolloutResultResponse) -> ResultHead:
        sample = result.sample
        if sample is None:
            return cls(result.status, result.err_message, result.err_category)
        return cls(
            result.status,
            result.err_message,
            result.err_category,
            True,
            sample.reward,
            sample.remove_sample,
            sample.label,
        )


__all__ = ["ResultHead"]
