"""Rollout ownership events (PROTOCOL.md §8.1): one OTLP log record → one `OwnershipEvent`.

A rollout server that has `OSMOSIS_ROLLOUT_OTLP_ENDPOINT` publishes one log record per status
it gives a rollout, with the attributes `event = "rollout.ownership"`, `rollout_id`,
`server_id`, `status`, `event_sequence` and, when it knows them, `server_name`, `namespace`,
`run_id` and `run_name`. `ownership_event` reads one record the way the protocol writes it and
returns None for anything else: another kind of record, or an ownership record whose
`rollout_id`, `server_id`, `status` or `event_sequence` is missing or unusable. The optional
texts are None when missing or unusable; the event survives without them.

The records come from any process that can reach a loopback port, so every text is held to the
rule the server itself applies before publishing: printable, not blank, at most 512 characters;
and the receiver takes only events dated within `CLOCK_SLACK_SEC` of its own clock
(`OwnershipEvent.dated_near`), while the board takes a rollout's events only from the server
that reported it first (`core.board`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from core.phases import PhaseMark
from core.types import RolloutStatus

OWNERSHIP_EVENT = "rollout.ownership"
"""The `event` attribute of every ownership record."""
MAX_TEXT_CHARS = 512
"""The longest text value the protocol publishes."""
CLOCK_SLACK_SEC = 300.0
"""How far an event's time may be from ours when it arrives. The servers that report to a run
share its host's clock and export within seconds (an exporter retries for under a minute);
an event dated 1970 or 2200 is forged or its clock is broken, and either would move a phase
track by decades."""

_STATUSES = {status.value: status for status in RolloutStatus}
_WANTED = frozenset(
    (
        "event",
        "rollout_id",
        "server_id",
        "status",
        "event_sequence",
        "server_name",
        "namespace",
        "run_id",
        "run_name",
    )
)


@dataclass(frozen=True, slots=True)
class OwnershipEvent:
    """A status a rollout server gave one of its rollouts, as the server published it."""

    rollout_id: str
    server_id: str
    """The publishing server's id (its `OSMOSIS_ROLLOUT_SERVER_ID`, instance id or host name)."""
    status: RolloutStatus
    event_sequence: int
    """Grows by one per record within one server process: orders one server's events."""
    server_time: float | None
    """The server's wall clock when it gave the status, in seconds since the epoch (the
    record's `time_unix_nano`, else its `observed_time_unix_nano`); None when it has neither."""
    received_at: float
    """`time.monotonic()` when the record's request was read."""
    server_name: str | None = None
    namespace: str | None = None
    run_id: str | None = None
    run_name: str | None = None

    def dated_near(self, now: float, slack: float = CLOCK_SLACK_SEC) -> bool:
        """Whether the server's time is within `slack` seconds of `now` (the wall clock at
        arrival); an event without a time is dated by its arrival, so it is."""
        return self.server_time is None or abs(self.server_time - now) <= slack

    def mark(self) -> PhaseMark:
        """The event as the board keeps it: the server's time on this process's monotonic
        clock (through the wall clock, which loopback servers share with us), never later
        than when the event arrived; the arrival time when the server gave none."""
        at = self.received_at
        if self.server_time is not None:
            at = min(at, self.server_time - (time.time() - time.monotonic()))
        return PhaseMark(
            self.status,
            at,
            "server",
            server_time=self.server_time,
            event_sequence=self.event_sequence,
            # One string per server, not one per mark: a long run keeps four marks per
            # finished rollout, each with the id parsed afresh from its event.
            server_id=sys.intern(self.server_id),
        )


def _text(value: AnyValue | None) -> str | None:
    """A string value the protocol could have published, else None."""
    if value is None or value.WhichOneof("value") != "string_value":
        return None
    text = value.string_value
    if len(text) > MAX_TEXT_CHARS or not text.strip() or not text.isprintable():
        return None
    return text


def _sequence(value: AnyValue | None) -> int | None:
    if value is None or value.WhichOneof("value") != "int_value" or value.int_value < 0:
        return None
    return value.int_value


def _seconds(unix_nano: int) -> float | None:
    return unix_nano / 1e9 if unix_nano > 0 else None


def ownership_event(record: LogRecord, *, received_at: float) -> OwnershipEvent | None:
    """`record` as an `OwnershipEvent`, or None when it is not a usable ownership record."""
    # Only the attributes the protocol names are looked at (the last one wins, should a sender
    # repeat a key), so a record carrying thousands of others costs one pass and no copies.
    values = {kv.key: kv.value for kv in record.attributes if kv.key in _WANTED}
    if _text(values.get("event")) != OWNERSHIP_EVENT:
        return None
    rollout_id = _text(values.get("rollout_id"))
    server_id = _text(values.get("server_id"))
    status = _STATUSES.get(_text(values.get("status")) or "")
    sequence = _sequence(values.get("event_sequence"))
    if rollout_id is None or server_id is None or status is None or sequence is None:
        return None
    return OwnershipEvent(
        rollout_id=rollout_id,
        server_id=server_id,
        status=status,
        event_sequence=sequence,
        server_time=_seconds(record.time_unix_nano) or _seconds(record.observed_time_unix_nano),
        received_at=received_at,
        server_name=_text(values.get("server_name")),
        namespace=_text(values.get("namespace")),
        run_id=_text(values.get("run_id")),
        run_name=_text(values.get("run_name")),
    )


__all__ = [
    "CLOCK_SLACK_SEC",
    "MAX_TEXT_CHARS",
    "OWNERSHIP_EVENT",
    "OwnershipEvent",
    "ownership_event",
]
