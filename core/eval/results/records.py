"""Work items and their results: the records an eval run journals (EVAL.md §4, §6).

A work item is one attempt at one dataset row, keyed by `(row_index, run_index)`. An
`ItemResult` is its finished outcome; `ItemResult.to_json()` is exactly one `events.jsonl`
record, so the journal, the index and the metrics all read the same fields.

Standard library only, like every module of `core.eval.results` (see there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, TypeGuard, get_args

ItemStatus = Literal["success", "failed", "skipped"]
ITEM_STATUSES: frozenset[str] = frozenset(get_args(ItemStatus))

# (row_index, run_index): the identity of a work item within one run.
ItemKey = tuple[int, int]


def iso_utc(moment: datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds and a `Z` suffix: the one timestamp form in results.

    A naive `moment` is taken as local time.
    """
    moment = datetime.now(timezone.utc) if moment is None else moment.astimezone(timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One (row, attempt) to run. `source_row_index` is the row's 0-based record in the file."""

    row_index: int
    run_index: int
    source_row_index: int

    @property
    def key(self) -> ItemKey:
        return (self.row_index, self.run_index)


def _is_int(value: object) -> TypeGuard[int]:
    # bool is an int subclass; `true` is never a valid index or count.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The finished outcome of one work item (one `events.jsonl` record).

    `status`: `success` (reward kept), `failed` (`error_type` says why) or `skipped`
    (a success the workflow asked to remove from the samples). A cancelled rollout has no
    result: its item stays pending.
    """

    row_index: int
    run_index: int
    rollout_id: str
    status: ItemStatus
    source_row_index: int
    reward: float | None = None
    tokens: int | None = None
    duration_ms: int | None = None
    error_type: str | None = None

    def __post_init__(self) -> None:
        # Checked at construction so that a bad value fails where it is made, not as an
        # unreadable journal line found by the next resume.
        for name in ("row_index", "run_index", "source_row_index"):
            value = getattr(self, name)
            if not _is_int(value) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if not isinstance(self.rollout_id, str) or not self.rollout_id:
            raise ValueError("rollout_id must be a non-empty string")
        if self.status not in ITEM_STATUSES:
            raise ValueError(f"status must be one of {sorted(ITEM_STATUSES)}, got {self.status!r}")
        if self.reward is not None and (
            not _is_number(self.reward) or not math.isfinite(self.reward)
        ):
            raise ValueError(f"reward must be a finite number, got {self.reward!r}")
        # Sign is not checked: these are reported by servers, and a server's odd count must
        # not stop a run whose result is otherwise fine.
        for name in ("tokens", "duration_ms"):
            value = getattr(self, name)
            if value is not None and not _is_int(value):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if self.error_type is not None and not isinstance(self.error_type, str):
            raise ValueError(f"error_type must be a string, got {self.error_type!r}")

    @property
    def key(self) -> ItemKey:
        return (self.row_index, self.run_index)

    def to_json(self) -> dict[str, Any]:
        """The `events.jsonl` record: fields in spec order, `None` values omitted."""
        record: dict[str, Any] = {
            "row_index": self.row_index,
            "run_index": self.run_index,
            "rollout_id": self.rollout_id,
            "status": self.status,
            "source_row_index": self.source_row_index,
            "reward": None if self.reward is None else float(self.reward),
            "tokens": self.tokens,
            "duration_ms": self.duration_ms,
            "error_type": self.error_type,
        }
        return {name: value for name, value in record.items() if value is not None}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> ItemResult:
        """Parse one `events.jsonl` record; `ValueError` names the first bad field.

        Unknown keys are ignored (a newer writer may add some). `reward` may be written as an
        integer and `duration_ms` as a float by other writers; both are normalised.
        """
        if not isinstance(record, Mapping):
            raise ValueError("record is not a JSON object")
        for name in ("row_index", "run_index", "rollout_id", "status", "source_row_index"):
            if record.get(name) is None:
                raise ValueError(f"{name} is missing")
        reward = record.get("reward")
        if reward is not None and not _is_number(reward):
            raise ValueError(f"reward must be a number, got {reward!r}")
        duration_ms = record.get("duration_ms")
        if duration_ms is not None:
            if not _is_number(duration_ms) or not math.isfinite(duration_ms):
                raise ValueError(f"duration_ms must be a number, got {duration_ms!r}")
            duration_ms = round(duration_ms)
        status = record["status"]
        if status not in ITEM_STATUSES:
            raise ValueError(f"status must be one of {sorted(ITEM_STATUSES)}, got {status!r}")
        return cls(
            row_index=record["row_index"],
            run_index=record["run_index"],
            rollout_id=record["rollout_id"],
            status=status,
            source_row_index=record["source_row_index"],
            reward=None if reward is None else float(reward),
            tokens=record.get("tokens"),
            duration_ms=duration_ms,
            error_type=record.get("error_type"),
        )


__all__ = [
    "ITEM_STATUSES",
    "ItemKey",
    "ItemResult",
    "ItemStatus",
    "WorkItem",
    "iso_utc",
]
