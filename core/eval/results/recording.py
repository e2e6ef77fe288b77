"""A run's recording as a replay plays it: one timed event for each thing that happened.

`read_recording` reads `transitions.jsonl` (its line kinds are described in
`core.eval.results.transitions`) and the `calls.jsonl` beside it (`core.eval.results.calls`) onto
one time line, in seconds: each recorded session (one invocation of the run) goes on where
the one before it ended, so a resumed run plays as one. Lines of a kind this version does not
know are passed over, with one warning per kind, so that a newer recording still plays.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.eval.results.calls import ModelCall, read_calls
from core.eval.results.folder import CALLS_FILE
from core.eval.results.records import ItemResult
from core.eval.results.transitions import read_transitions
from core.eval.untrusted_json import epoch_seconds, int_of, is_finite, is_number, text_of
from core.phases import PhaseMark
from core.reported_by import ReportedBy
from core.types import RolloutStatus


@dataclass(frozen=True)
class StatusSeen:
    """A rollout's status as a poll or its server saw it (a `status` line; in a run folder
    without a recording, a dispatch or a result)."""

    t: float
    rollout_id: str
    status: RolloutStatus
    row_index: int | None = None
    run_index: int | None = None
    source_row_index: int | None = None
    grade: bool | None = None
    server: PhaseMark | None = None
    """The server's report (its ownership event); its `at` is set when it is played."""
    sent: float | None = None
    """On a rollout's first line: when its admission was asked for (`sent_t`), on the same
    time line; None in older recordings."""
    server_url: str | None = None
    """On a rollout's first line: the server it was sent to; None in older recordings."""
    recorded: bool = True
    """False for a dispatch or a result read from a run folder's journal and log: nobody
    watched the rollout's phases, and its model calls are not recorded either."""
    reported_by: ReportedBy | None = None
    """A rollout nobody in the session sent (`osmosis-tui watch`): whose it is, as its
    server's events said; its `server` report then puts it on the board."""


@dataclass(frozen=True)
class CancelAsked:
    """A cancel was asked for (a `cancel_request` line before the server answered)."""

    t: float
    rollout_id: str


@dataclass(frozen=True)
class CancelAnswered:
    """The server answered the cancel asked for at `asked_t`, at `t` (or the request failed)."""

    t: float
    rollout_id: str
    asked_t: float
    disposition: str | None
    error: str | None


@dataclass(frozen=True)
class NotAdmitted:
    """A rollout sent at `t` that its server never admitted, and why."""

    t: float
    rollout_id: str
    row_index: int | None
    run_index: int | None
    source_row_index: int | None
    error: str
    server_url: str | None = None


@dataclass(frozen=True)
class Untracked:
    """The run stopped following the rollout; its server kept it until its lease ended."""

    t: float
    rollout_id: str


@dataclass(frozen=True)
class SentByHand:
    """A rollout sent from the dashboard (`n`, or `r` re-running `rerun_of`): no work item's."""

    t: float
    rollout_id: str
    rerun_of: str | None


@dataclass(frozen=True)
class Requeued:
    """The work item of `rollout_id` runs again under `new_rollout_id`."""

    t: float
    rollout_id: str
    new_rollout_id: str
    row_index: int | None
    run_index: int | None
    #: "rule" (--requeue-stuck), "hedge" (--hedge-after: `rollout_id` goes on), or None.
    reason: str | None = None


@dataclass(frozen=True)
class DispatchSteered:
    """The run's dispatch was paused, resumed, given a new max-in-flight (`value`), or a
    server (`server`) was drained or undrained."""

    t: float
    action: str
    value: int | None
    server: str | None = None


@dataclass(frozen=True)
class DispatchStarted:
    """The run began sending work items, at most `max_in_flight` at once."""

    t: float
    max_in_flight: int


@dataclass(frozen=True)
class SessionStarted:
    """An invocation of the run began (the first, or a resume)."""

    t: float
    number: int
    started_at: str | None


@dataclass(frozen=True)
class SessionEnded:
    """An invocation of the run ended (another began after it, or it wrote its results):
    whatever it still followed, nobody follows any more."""

    t: float
    number: int


@dataclass(frozen=True)
class ModelCallSeen:
    """A model call began (`ended` False) or ended; `call`'s monotonic times are seconds on
    the recording's time line, shifted onto the board's clock when it is played."""

    t: float
    call: ModelCall
    ended: bool


@dataclass(frozen=True)
class ResultSeen:
    """A work item's journaled result counted without a status line of its own: the run
    finished it without seeing it end (a deadline), or before the recording began."""

    t: float
    result: ItemResult


ReplayEvent = (
    StatusSeen
    | CancelAsked
    | CancelAnswered
    | NotAdmitted
    | Untracked
    | SentByHand
    | Requeued
    | DispatchSteered
    | DispatchStarted
    | SessionStarted
    | SessionEnded
    | ModelCallSeen
    | ResultSeen
)


def read_recording(path: Path, warnings: list[str]) -> list[ReplayEvent]:
    """The events of `path` (a transitions.jsonl) and of the calls.jsonl beside it, in play
    order; unreadable lines and unknown kinds are said in `warnings`."""
    reader = _TransitionsReader(path, warnings)
    for record in read_transitions(path, on_warning=warnings.append):
        reader.read(record)
    reader.say_unknown_kinds()
    events = reader.events
    calls = path.with_name(CALLS_FILE)
    if calls.is_file():
        events += _read_calls(calls, reader.session_of, warnings)
    events.sort(key=lambda event: event.t)  # stable: lines of one instant keep file order
    return events


class _TransitionsReader:
    """The lines of one transitions.jsonl, one at a time, onto the time line."""

    def __init__(self, path: Path, warnings: list[str]) -> None:
        self.path = path
        self.warnings = warnings
        self.events: list[ReplayEvent] = []
        #: The time line's offset of the session each rollout's first status is in.
        self.session_of: dict[str, float] = {}
        self._offset = 0.0
        self._last = 0.0  # the latest moment of the time line so far
        self._sessions = 0
        self._unknown: Counter[str] = Counter()

    def _at(self, t: float) -> float:
        moment = self._offset + float(t)
        self._last = max(self._last, moment)
        return moment

    def read(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        if kind == "session":
            if self._sessions:
                self.events.append(SessionEnded(self._last, self._sessions))
            self._offset = self._last
            self._sessions += 1
            started_at = record.get("started_at")
            self.events.append(
                SessionStarted(
                    self._at(record["t"]),
                    self._sessions,
                    started_at if isinstance(started_at, str) else None,
                )
            )
            return
        rollout_id = record.get("rollout_id")
        if kind == "control":
            action = record.get("action")
            if isinstance(action, str):
                value = int_of(record.get("value"))
                server = text_of(record.get("server"))
                self.events.append(DispatchSteered(self._at(record["t"]), action, value, server))
            else:
                self.warnings.append(f"{self.path}: skipped a control line without an action")
            return
        if kind == "dispatch":
            limit = int_of(record.get("max_in_flight"))
            if limit is not None:
                self.events.append(DispatchStarted(self._at(record["t"]), limit))
            else:
                self.warnings.append(f"{self.path}: skipped a dispatch line without its limit")
            return
        if not isinstance(rollout_id, str):
            if kind in ROLLOUT_KINDS:
                self.warnings.append(f"{self.path}: skipped a {kind} line without a rollout id")
            else:
                self._unknown[str(kind)] += 1
            return
        event = self._rollout_event(str(kind), record, rollout_id)
        if event is None:
            return
        if isinstance(event, StatusSeen):
            self.session_of.setdefault(rollout_id, self._offset)
        self.events.append(event)

    def _rollout_event(
        self, kind: str, record: dict[str, Any], rollout_id: str
    ) -> ReplayEvent | None:
        """The event of a line about one rollout; None when it cannot be played."""
        if kind == "status":
            return self._status(record, rollout_id)
        if kind == "cancel_request":
            return self._cancel(record, rollout_id)
        if kind == "untrack":
            return Untracked(self._at(record["t"]), rollout_id)
        if kind == "not_admitted":
            return NotAdmitted(
                self._at(record["t"]),
                rollout_id,
                int_of(record.get("row_index")),
                int_of(record.get("run_index")),
                int_of(record.get("source_row_index")),
                text_of(record.get("error")) or "not admitted",
                text_of(record.get("server_url")),
            )
        if kind == "manual":
            rerun_of = record.get("rerun_of")
            return SentByHand(
                self._at(record["t"]), rollout_id, rerun_of if isinstance(rerun_of, str) else None
            )
        if kind == "requeue":
            return self._requeue(record, rollout_id)
        self._unknown[kind] += 1
        return None

    def _status(self, record: dict[str, Any], rollout_id: str) -> ReplayEvent | None:
        status = _STATUSES.get(str(record.get("status")))
        if status is None:
            self.warnings.append(f"{self.path}: skipped a status line without a known status")
            return None
        grade, sent = record.get("grade"), record.get("sent_t")
        return StatusSeen(
            t=self._at(record["t"]),
            rollout_id=rollout_id,
            status=status,
            row_index=int_of(record.get("row_index")),
            run_index=int_of(record.get("run_index")),
            source_row_index=int_of(record.get("source_row_index")),
            grade=grade if isinstance(grade, bool) else None,
            server=_server_mark(record, status) if record.get("source") == "server" else None,
            sent=self._at(sent) if is_finite(sent) else None,
            server_url=text_of(record.get("server_url")),
            reported_by=_reported_by(record.get("reported_by")),
        )

    def _cancel(self, record: dict[str, Any], rollout_id: str) -> ReplayEvent:
        asked = self._at(record["t"])
        disposition, error = record.get("disposition"), record.get("error")
        if disposition is None and error is None:
            return CancelAsked(asked, rollout_id)
        # Answered when the reply came; a line of an older version says only when it was asked.
        reply_t = record.get("reply_t")
        answered = self._at(reply_t) if is_number(reply_t) else asked
        return CancelAnswered(
            answered,
            rollout_id,
            asked,
            disposition if isinstance(disposition, str) else None,
            error if isinstance(error, str) else None,
        )

    def _requeue(self, record: dict[str, Any], rollout_id: str) -> ReplayEvent | None:
        new_rollout_id = record.get("new_rollout_id")
        if not isinstance(new_rollout_id, str):
            self.warnings.append(f"{self.path}: skipped a requeue line without its new id")
            return None
        return Requeued(
            self._at(record["t"]),
            rollout_id,
            new_rollout_id,
            int_of(record.get("row_index")),
            int_of(record.get("run_index")),
            reason if isinstance(reason := record.get("reason"), str) else None,
        )

    def say_unknown_kinds(self) -> None:
        for kind, count in sorted(self._unknown.items()):
            self.warnings.append(
                f"{self.path}: passed over {count} line(s) of kind {kind!r}, "
                "which this version does not replay"
            )


#: The kinds of lines about one rollout.
ROLLOUT_KINDS = frozenset(
    {"status", "cancel_request", "not_admitted", "untrack", "manual", "requeue"}
)
_STATUSES = {status.value: status for status in RolloutStatus}


def _read_calls(
    path: Path, session_of: dict[str, float], warnings: list[str]
) -> Iterable[ReplayEvent]:
    """The start and the end of each model call in calls.jsonl, on the recording's time line.

    A line's `t` counts from the start of its session, the one its rollout was first seen in;
    a call of a rollout the recording never saw is taken to belong to the session of the
    line before it (the file is appended in the order the calls ended)."""
    offset = 0.0
    for recorded in read_calls(path, warnings.append):
        offset = session_of.get(recorded.rollout_id, offset)
        start = offset + recorded.started_monotonic
        end = start + (recorded.latency_sec or 0.0)
        call = replace(recorded, started_monotonic=start, ended_monotonic=end)
        yield ModelCallSeen(start, call.as_started(), ended=False)
        yield ModelCallSeen(end, call, ended=True)


def _reported_by(value: Any) -> ReportedBy | None:
    """A line's `reported_by`; None when absent or without a usable `server_id`."""
    if not isinstance(value, dict):
        return None
    server_id = text_of(value.get("server_id"))
    if server_id is None:
        return None
    return ReportedBy(
        server_id,
        server_name=text_of(value.get("server_name")),
        namespace=text_of(value.get("namespace")),
        run_id=text_of(value.get("run_id")),
        run_name=text_of(value.get("run_name")),
    )


def _server_mark(record: dict[str, Any], status: RolloutStatus) -> PhaseMark:
    """The server's report a line records; its `at` is set when it is played."""
    server_id = record.get("server_id")
    return PhaseMark(
        status,
        0.0,
        "server",
        server_time=epoch_seconds(record.get("server_time")),
        event_sequence=int_of(record.get("event_sequence")),
        server_id=server_id if isinstance(server_id, str) else None,
    )
