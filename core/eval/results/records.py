"""Work items and their results: the records an eval run journals (EVAL.md §7, §8).

A work item is one attempt at one dataset row, keyed by `(row_index, run_index)`. An
`ItemResult` is its finished outcome; `ItemResult.to_json()` is exactly one `events.jsonl`
record in the official shape, so the journal, the index and the metrics all read the same
fields, and a journal written by the official `osmosis eval run` reads back the same way.

Standard library only, like every module of `core.eval.results` (see there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Literal, get_args

from core.eval.untrusted_json import is_finite, is_int

ItemStatus = Literal["success", "failed", "skipped"]
ITEM_STATUSES: frozenset[str] = frozenset(get_args(ItemStatus))

# (row_index, run_index): the identity of a work item within one run.
ItemKey = tuple[int, int]


def iso_utc(moment: datetime | None = None) -> str:
    """ISO 8601 UTC with microseconds and a `Z` suffix: the one timestamp form in results,
    as the official tool writes it (`2026-12-01T08:46:54.155727Z`).

    A naive `moment` is taken as local time.
    """
    moment = datetime.now(timezone.utc) if moment is None else moment.astimezone(timezone.utc)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


def is_path_segment(name: str) -> bool:
    """True when `name` is one directory entry: not empty, `.` or `..`, no separator or NUL.

    A rollout id names a folder under `rollout_trials/` and a run name a folder under the
    output root, so anything else would read or write outside them.
    """
    return (
        name not in ("", ".", "..") and "/" not in name and "\\" not in name and "\x00" not in name
    )


MAX_WORK_ITEMS = 1_000_000
"""The most work items (selected rows × n) a run may have. Every one is planned, queued and
tracked in memory (some 140 bytes each before it runs, a result after): a million take a few
seconds and some hundreds of MiB; an `n` of 100,000,000 would fill the memory before the
first rollout is sent."""


@dataclass(frozen=True, slots=True)
class WorkItem:
    """One (row, attempt) to run. `source_row_index` is the row's 0-based record in the file."""

    row_index: int
    run_index: int
    source_row_index: int

    @property
    def key(self) -> ItemKey:
        return (self.row_index, self.run_index)


@dataclass(frozen=True, slots=True)
class ItemResult:
    """The finished outcome of one work item (one `events.jsonl` record).

    `status`: `success` (reward kept), `failed` (`error_type` says why) or `skipped`
    (a success the workflow asked to remove from the samples). A cancelled rollout has no
    result: its item stays pending. `duration_ms` is a float, as official journals hold it;
    `source_row_index` is None only for a record of an older official writer.
    """

    row_index: int
    run_index: int
    rollout_id: str
    status: ItemStatus
    source_row_index: int | None = None
    reward: float | None = None
    tokens: int | None = None
    duration_ms: float = 0.0
    error_type: str | None = None

    def __post_init__(self) -> None:
        # Checked at construction so that a bad value fails where it is made, not as an
        # unreadable journal line found by the next resume. Written out check by check: a
        # run's journal is read a record at a time, a million of them for a big run.
        _check_index("row_index", self.row_index)
        _check_index("run_index", self.run_index)
        if self.source_row_index is not None:
            _check_index("source_row_index", self.source_row_index)
        if type(self.rollout_id) is not str or not is_path_segment(self.rollout_id):
            raise ValueError(
                f"rollout_id must be a single path segment (it names a folder), "
                f"got {self.rollout_id!r}"
            )
        if self.status not in ITEM_STATUSES:
            raise ValueError(f"status must be one of {sorted(ITEM_STATUSES)}, got {self.status!r}")
        if self.reward is not None:
            _check_finite("reward", self.reward)
        _check_finite("duration_ms", self.duration_ms)
        # Sign is not checked: these are reported by servers, and a server's odd count must
        # not stop a run whose result is otherwise fine.
        if self.tokens is not None and type(self.tokens) is not int and not is_int(self.tokens):
            raise ValueError(f"tokens must be an integer, got {self.tokens!r}")
        if self.error_type is not None and not isinstance(self.error_type, str):
            raise ValueError(f"error_type must be a string, got {self.error_type!r}")

    @property
    def key(self) -> ItemKey:
        return (self.row_index, self.run_index)

    def to_json(self) -> dict[str, Any]:
        """The `events.jsonl` record: the official keys, `None` values omitted.

        The journal writes it with sorted keys (see `core.eval.results.events`).
        """
        record: dict[str, Any] = {
            "row_index": self.row_index,
            "run_index": self.run_index,
            "rollout_id": self.rollout_id,
            "status": self.status,
            "source_row_index": self.source_row_index,
            "reward": None if self.reward is None else float(self.reward),
            "tokens": self.tokens,
            "duration_ms": float(self.duration_ms),
            "error_type": self.error_type,
        }
        return {name: value for name, value in record.items() if value is not None}

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> ItemResult:
        """Parse one `events.jsonl` record (ours or the official tool's); `ValueError` names
        the first bad field.

        As official: `row_index`, `run_index`, `rollout_id` and `status` are required, the
        rest optional (a missing `duration_ms` reads as 0.0), no field accepts a boolean,
        unknown keys are ignored, and numbers are read as floats where they are floats.
        """
        if not isinstance(record, Mapping):
            raise ValueError("record is not a JSON object")
        get = record.get
        # The construction checks the rest (`__post_init__`); checked here is only what it
        # cannot tell once converted: presence, and numbers that float() would accept as text.
        row_index, run_index = get("row_index"), get("run_index")
        rollout_id, status = get("rollout_id"), get("status")
        if row_index is None or run_index is None or rollout_id is None or status is None:
            missing = next(name for name in _REQUIRED if get(name) is None)
            raise ValueError(f"{missing} is missing")
        if not isinstance(status, str):
            raise ValueError(f"status must be a string, got {status!r}")
        reward, duration_ms = get("reward"), get("duration_ms")
        source_row_index = get("source_row_index")
        # A parser makes new objects for every value: a million results would hold a million
        # copies of "success", and of each row number twice. The shared ones are kept.
        if source_row_index == row_index and type(source_row_index) is type(row_index):
            source_row_index = row_index
        return cls(
            row_index,
            run_index,
            rollout_id,
            _STATUS_TEXT.get(status, status),  # type: ignore[arg-type]  # checked by __post_init__
            source_row_index,
            None if reward is None else _as_float("reward", reward),
            get("tokens"),
            0.0 if duration_ms is None else _as_float("duration_ms", duration_ms),
            get("error_type"),
        )


_REQUIRED = ("row_index", "run_index", "rollout_id", "status")
_STATUS_TEXT = {status: status for status in ITEM_STATUSES}


def _check_index(name: str, value: object) -> None:
    if (type(value) is not int and not is_int(value)) or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")


def _check_finite(name: str, value: object) -> None:
    if type(value) is float:
        if math.isfinite(value):
            return
    elif is_finite(value):  # an integer too big for a float is not finite
        return
    raise ValueError(f"{name} must be a finite number, got {value!r}")


def _as_float(name: str, value: object) -> float:
    """A record's number as a float; a string that `float()` would take is refused."""
    if isinstance(value, float):
        return float(value)  # infinite or NaN too: `__post_init__` refuses it, by name
    if not is_finite(value):  # not a number, or an integer float() would overflow on
        raise ValueError(f"{name} must be a number, got {value!r}")
    return float(value)


__all__ = [
    "ITEM_STATUSES",
    "MAX_WORK_ITEMS",
    "ItemKey",
    "ItemResult",
    "ItemStatus",
    "WorkItem",
    "is_path_segment",
    "iso_utc",
]
