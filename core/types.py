"""Wire models of the Osmosis rollout protocol (PROTOCOL.md §3), shared by client and server.

Names, fields and validator messages are part of the contract: a peer running the official
osmosis-ai 0.3.8 parses what we send and we parse what it sends.
"""

from __future__ import annotations

import copy
import enum
import math
import re
from pathlib import PurePath
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

POLLING_LEASE_HEADER = "X-Osmosis-Rollout-Lease"
# Our extension: the status the poller last saw. A server that knows it answers at once when
# the status has moved on, instead of holding the poll until the *next* change; peers that
# do not know it ignore it, so official clients and servers are unaffected.
OBSERVED_STATUS_HEADER = "X-Osmosis-Observed-Status"

# What a server publishes besides the API (PROTOCOL.md §8) is turned on by environment at its
# start: ownership events to `<endpoint>/v1/logs`, live previews under the preview root.
OTLP_ENDPOINT_ENV = "OSMOSIS_ROLLOUT_OTLP_ENDPOINT"
PREVIEW_ROOT_ENV = "_OSMOSIS_ROLLOUT_PREVIEW_ROOT"
# Our extension: the names (comma-separated) of the server's environment variables that hold
# the eval's `[secrets]` values, which a server must mask in what it publishes (its previews).
# The eval sets it for the servers it launches; servers that do not know it ignore it.
SECRET_NAMES_ENV = "_OSMOSIS_ROLLOUT_SECRET_NAMES"
#: A live preview (§8.2): `<root>/<rollout_id>/PREVIEW_FILE`, for ids matching PREVIEW_ID only,
#: at most MAX_PREVIEW_STEPS steps and MAX_PREVIEW_BYTES, each text at most
#: MAX_PREVIEW_TEXT_CHARS. The server writes by these and the dashboard reads by them.
PREVIEW_FILE = "preview.json"
PREVIEW_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,255}")
MAX_PREVIEW_STEPS = 100
MAX_PREVIEW_BYTES = 900 * 1024
MAX_PREVIEW_TEXT_CHARS = 16_384

MessageDict = dict[str, Any]
Messages = list[MessageDict]


class _StrEnum(str, enum.Enum):
    """`enum.StrEnum` for Python 3.10: members compare equal to, and print as, their values."""

    def __str__(self) -> str:
        return str(self.value)


class RolloutStatus(_StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    GRADING = "grading"
    SUCCESS = "success"
    FAILURE = "failure"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"

    @property
    def is_terminal(self) -> bool:
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES = frozenset(
    {RolloutStatus.SUCCESS, RolloutStatus.FAILURE, RolloutStatus.CANCELLED}
)
# Phase order used by wait thresholds and phase tracks; failure/cancelled satisfy any threshold.
PHASE_ORDER: dict[RolloutStatus, int] = {
    RolloutStatus.QUEUED: 0,
    RolloutStatus.RUNNING: 1,
    RolloutStatus.GRADING: 2,
    RolloutStatus.SUCCESS: 3,
}


class RolloutErrorCategory(_StrEnum):
    TIMEOUT = "timeout"
    LEASE_EXPIRED = "lease_expired"
    VALIDATION_ERROR = "validation_error"
    HTTP_ERROR = "http_error"
    AGENT_ERROR = "agent_error"
    INTERNAL_ERROR = "internal_error"


#: The failures-by-category name of a failure whose result gives no category (its message
#: alone): the board's and a resumed run's carried-over results' alike.
UNCATEGORISED_FAILURE = "other"


def failure_category(name: str | None) -> str:
    """A failure's category for the failures-by-category counts: a `RolloutErrorCategory`
    value as it is, anything else (a message, a reason the runner gave) `other`."""
    return str(name) if name in _CATEGORY_VALUES else UNCATEGORISED_FAILURE


_CATEGORY_VALUES = frozenset(category.value for category in RolloutErrorCategory)


class CancelDisposition(_StrEnum):
    NOT_FOUND = "not_found"
    CANCELLED_QUEUED = "cancelled_queued"
    CANCELLED_RUNNING = "cancelled_running"


def ensure_single_path_segment(value: str, *, label: str = "rollout_id") -> str:
    """Reject ids that could escape a folder when joined onto a path (PROTOCOL.md §2.1)."""
    ok = (
        value not in ("", ".", "..")
        and "/" not in value
        and "\\" not in value
        and "\x00" not in value
        and PurePath(value).name == value
    )
    if not ok:
        raise ValueError(
            f"{label} must be a single path segment (no path separators, and not '.' or '..')"
        )
    return value


def unpaired_surrogate(text: str) -> str | None:
    """The first lone UTF-16 surrogate in `text`, or None: JSON can spell one (`"\\udc80"`),
    UTF-8 cannot encode it, so nothing holding it can be sent on as UTF-8 JSON."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


def ensure_unicode(value: str, *, label: str = "rollout_id") -> str:
    """Reject text holding an unpaired surrogate: every answer that names a rollout (the
    cancel dispositions, a 422) would fail to encode."""
    surrogate = unpaired_surrogate(value)
    if surrogate is not None:
        raise ValueError(
            f"{label} must be valid Unicode: it holds an unpaired surrogate ({surrogate!a}), "
            "which UTF-8 cannot encode"
        )
    return value


def ensure_finite_timeout(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise ValueError("timeout must be finite; omit it to run unbounded")
    return value


RECEIVED: dict[str, bool] = {"received": True}
"""The validation context of a result as a client parses it off the wire (`RolloutSample`)."""


class RolloutSample(BaseModel):
    """One rollout's conversation and reward. `trajectory_messages` never goes on the wire."""

    model_config = ConfigDict(allow_inf_nan=False, validate_assignment=True)

    messages: list[MessageDict] = Field(default_factory=list)
    trajectory_messages: list[MessageDict] | None = None
    label: str | None = None
    reward: float | None = None
    remove_sample: bool = False
    metrics: dict[str, Any] = Field(default_factory=dict)
    extra_fields: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _snapshot_trajectory(self, info: ValidationInfo) -> RolloutSample:
        # Unset means "persist a copy of messages"; an explicit None turns persistence off.
        # A sample a client received is persisted by nobody (the copy is never sent): it is
        # left without one, as PROTOCOL.md allows, rather than doubling every finished
        # rollout's conversation in memory (`RECEIVED`).
        if info.context == RECEIVED:
            return self
        if "trajectory_messages" not in self.model_fields_set:
            # Written around validate_assignment (which would re-run this validator) and marked
            # as set so that later assignments, e.g. set_reward(), keep the first snapshot.
            self.__dict__["trajectory_messages"] = copy.deepcopy(self.messages)
            self.__pydantic_fields_set__.add("trajectory_messages")
        return self


class RolloutInitRequest(BaseModel):
    """Body of `POST /rollout`. Field order is the order the official client sends."""

    initial_messages: list[MessageDict]
    label: str | None = None
    metadata: dict[str, Any] | None = None
    rollout_id: str
    chat_completions_url: str
    llm_api_key: str | None = Field(default=None, repr=False)
    grade: bool = True
    agent_timeout_sec: float | None = None
    grader_timeout_sec: float | None = None
    extra_fields: dict[str, Any] | None = None

    @field_validator("rollout_id")
    @classmethod
    def _single_segment(cls, value: str) -> str:
        return ensure_single_path_segment(ensure_unicode(value))

    @field_validator("llm_api_key")
    @classmethod
    def _non_empty_key(cls, value: str | None) -> str | None:
        if value == "":
            raise ValueError("llm_api_key must be omitted or a non-empty string")
        return value

    @field_validator("agent_timeout_sec", "grader_timeout_sec")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        return ensure_finite_timeout(value)


class RolloutInitResponse(BaseModel):
    """Body of the 202 that admits a rollout."""

    rollout_id: str
    status: RolloutStatus
    polling_lease_token: str = Field(min_length=1, repr=False)
    result_wait_timeout_sec: float
    polling_lease_timeout_sec: float

    @model_validator(mode="after")
    def _coherent_timeouts(self) -> RolloutInitResponse:
        wait, lease = self.result_wait_timeout_sec, self.polling_lease_timeout_sec
        if not math.isfinite(wait) or wait <= 0:
            raise ValueError("result_wait_timeout_sec must be positive and finite")
        if not math.isfinite(lease) or lease <= wait:
            raise ValueError(
                "polling_lease_timeout_sec must be finite and exceed result_wait_timeout_sec"
            )
        return self


class RolloutResultResponse(BaseModel):
    """Body of `GET /rollout/{id}/result`: progress (status only) or the terminal result."""

    rollout_id: str
    status: RolloutStatus
    sample: RolloutSample | None = None
    err_message: str | None = None
    err_category: RolloutErrorCategory | None = None


class CancelRolloutsRequest(BaseModel):
    """Body of `POST /rollout/cancel`: exactly one of `ids`, `prefix`, `all`."""

    ids: list[str] | None = None
    prefix: str | None = None
    all: bool = False


class CancelRolloutsResponse(BaseModel):
    dispositions: dict[str, str]


class RolloutLifecycle(BaseModel):
    accepting_rollouts: bool
    active_rollouts: int = Field(ge=0)


__all__ = [
    "MAX_PREVIEW_BYTES",
    "MAX_PREVIEW_STEPS",
    "MAX_PREVIEW_TEXT_CHARS",
    "OBSERVED_STATUS_HEADER",
    "OTLP_ENDPOINT_ENV",
    "PHASE_ORDER",
    "POLLING_LEASE_HEADER",
    "PREVIEW_FILE",
    "PREVIEW_ID",
    "PREVIEW_ROOT_ENV",
    "RECEIVED",
    "SECRET_NAMES_ENV",
    "TERMINAL_STATUSES",
    "CancelDisposition",
    "CancelRolloutsRequest",
    "CancelRolloutsResponse",
    "MessageDict",
    "Messages",
    "RolloutErrorCategory",
    "RolloutInitRequest",
    "RolloutInitResponse",
    "RolloutLifecycle",
    "RolloutResultResponse",
    "RolloutSample",
    "RolloutStatus",
    "ensure_finite_timeout",
    "ensure_single_path_segment",
    "ensure_unicode",
    "unpaired_surrogate",
]
