"""`BoardMirror`: a board of this process's own, kept a copy of a live run's board from the
record states the run sends over its control socket (`core.eval.attach.protocol`).

Its records have no handle, like a replay's: the statuses are fed through the board's
`observe` and `server_mark`, in the order they happened, so that the phase marks, durations,
counts and stuck flags are the board's own rules at work on the same observations. What the
board has no method for (the cancels, the model calls, the poll counts) is set on the record
as the run reports it, and `touch`ed. Times are mapped onto this process's clock from the
run's (`origin`). Each record's `client` is the mirror's `canceller` while the run can still
cancel it: a cancel from the dashboard's keys goes to the run. No Textual here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from core.board import RolloutBoard
from core.eval.attach.protocol import dict_of, list_of, options_from
from core.eval.untrusted_json import bool_of, float_of, int_of, text_of
from core.model_activity import ModelActivity
from core.phases import PhaseMark
from core.rollout_record import (
    Canceller,
    CancelRequest,
    RecordedRollout,
    RolloutRecord,
)
from core.types import RolloutErrorCategory, RolloutResultResponse, RolloutSample, RolloutStatus

_STATUSES = {status.value: status for status in RolloutStatus}
_CATEGORIES = {category.value: category for category in RolloutErrorCategory}


@dataclass(frozen=True)
class ReportedCall:
    """A model call as the run reported it (a `core.model_activity.ModelCallReport`)."""

    call_id: int
    rollout_id: str
    started_monotonic: float
    ended_monotonic: float | None
    status: int | None
    total_tokens: int | None
    cost_usd: float | None
    request_text: str
    reply_text: str | None
    error: str | None

    @property
    def latency_sec(self) -> float | None:
        ended = self.ended_monotonic
        return None if ended is None else ended - self.started_monotonic


class BoardMirror:
    """Keeps `board` a copy of the run's; `canceller` is where its records' cancels go."""

    def __init__(self, board: RolloutBoard, canceller: Canceller) -> None:
        self.board = board
        self.canceller: Canceller | None = canceller
        #: The run's board started at this moment of this process's clock.
        self.origin = board.started_at
        #: True while the run's own word is applied (an untrack it reports is not news to it).
        self.applying = False
        self._results: dict[str, dict[str, Any]] = {}

    def start(self, elapsed: float) -> None:
        """The run's board started `elapsed` seconds ago."""
        self.origin = self.board.started_at = time.monotonic() - elapsed

    def _at(self, t: object) -> float:
        return self.origin + (float_of(t) or 0.0)

    def apply(self, states: list[Any]) -> None:
        """Bring the board up to these record states (RECORD, `core.eval.attach.protocol`)."""
        self.applying = True
        try:
            for state in states:
                if isinstance(state, dict) and isinstance(state.get("id"), str):
                    self._apply(state)
        finally:
            self.applying = False

    def cut_off(self) -> None:
        """The run is over, or the connection to it: no record can be cancelled from here."""
        self.canceller = None
        for record in self.board:
            if record.client is not None:
                record.client = None
                self.board.touch(record.rollout_id)

    def _apply(self, state: dict[str, Any]) -> None:
        board, rollout_id = self.board, state["id"]
        record = board.records.get(rollout_id)
        rows = {
            "row_index": int_of(state.get("row")),
            "run_index": int_of(state.get("run")),
            "source_row_index": int_of(state.get("source_row")),
        }
        options = dict_of(state.get("options"))
        new = record is None
        not_admitted = text_of(state.get("not_admitted"))
        if record is None and not_admitted is not None:
            record = board.record_not_admitted(
                rollout_id,
                not_admitted,
                options=options_from(options) if options else None,
                row_index=rows["row_index"],
                run_index=rows["run_index"],
                source_row_index=rows["source_row_index"],
            )
        else:
            self._statuses(rollout_id, record, state, rows)
            record = board.records.get(rollout_id)
            if record is None:
                return  # nothing observed of it yet (the run always sends a status)
        if new:
            record.server = text_of(state.get("server")) or ""
            record.submitted_at = self._at(state.get("submitted"))
            if options and not record.asked:
                record.options = options_from(options)
        record.cancels = tuple(
            self._cancel(dict_of(cancel)) for cancel in list_of(state.get("cancels"))
        )
        # Through the board: the first call proves running there as it did in the run.
        board.use_model_activity(
            rollout_id, self._activity(rollout_id, dict_of(state.get("model")))
        )
        polling = dict_of(state.get("polling"))
        recording = record.observed
        if isinstance(recording, RecordedRollout):
            recording.polls = int_of(polling.get("polls")) or 0
            recording.poll_retries = int_of(polling.get("retries")) or 0
            recording.last_poll_error = text_of(polling.get("error"))
        record.client = self.canceller if bool_of(state.get("cancellable")) else None
        requeued_as = text_of(state.get("requeued_as"))
        if requeued_as is not None:  # requeued once, for good
            record.requeued_as = requeued_as
        hedged_with = text_of(state.get("hedged_with"))
        if hedged_with is not None:  # hedged once, for good
            record.hedged_with = hedged_with
        if bool_of(state.get("untracked")) and not record.untracked:
            board.stop_tracking([rollout_id])
        board.touch(rollout_id)

    def _statuses(
        self,
        rollout_id: str,
        record: RolloutRecord | None,
        state: dict[str, Any],
        rows: dict[str, int | None],
    ) -> None:
        """The statuses the run's polls and its server reported that this board has not had
        yet, in the order they happened, and the result."""
        board = self.board
        seen = len(record.transitions) if record is not None else 0
        polls = [
            (self._at(poll[1]), _STATUSES[poll[0]])
            for poll in list_of(state.get("polls"))[seen:]
            if isinstance(poll, list) and len(poll) == 2 and poll[0] in _STATUSES
        ]
        known = {s for s, m in record.marks.items() if m.source == "server"} if record else set()
        marks = []
        for raw in map(dict_of, list_of(state.get("server_marks"))):
            status = _STATUSES.get(text_of(raw.get("status")) or "")
            if status is None or status in known:
                continue
            marks.append(
                PhaseMark(
                    status,
                    self._at(raw.get("t")),
                    "server",
                    server_time=float_of(raw.get("server_time")),
                    event_sequence=int_of(raw.get("sequence")),
                    server_id=text_of(raw.get("server_id")),
                )
            )
        result = self._result(rollout_id, state.get("result"))
        grade = bool_of(state.get("grade"))
        # (when, which came first, what): polls in their own order, a server's report after
        # a poll of the same moment.
        events: list[tuple[float, int, RolloutStatus | PhaseMark]] = [
            *((at, index, status) for index, (at, status) in enumerate(polls)),
            *((mark.at, len(polls), mark) for mark in marks),
        ]
        events.sort(key=lambda event: (event[0], event[1]))
        for at, index, event in events:
            if isinstance(event, PhaseMark):
                board.server_mark(rollout_id, event)
                continue
            last = index == len(polls) - 1  # the result goes with the latest status
            board.observe(
                rollout_id,
                event,
                at,
                row_index=rows["row_index"],
                run_index=rows["run_index"],
                source_row_index=rows["source_row_index"],
                grade=grade,
                result=result if last else None,
            )
        record = board.records.get(rollout_id)
        if record is not None and not polls and result is not None and record.transitions:
            # A result without a new status (its text can come after the status did).
            board.observe(
                rollout_id, record.observed.status, record.transitions[-1].at, result=result
            )

    def _result(self, rollout_id: str, raw: object) -> RolloutResultResponse | None:
        """The result a record state carries, when it is new to this board."""
        if not isinstance(raw, dict) or self._results.get(rollout_id) == raw:
            return None
        status = _STATUSES.get(text_of(raw.get("status")) or "")
        if status is None:
            return None
        self._results[rollout_id] = raw
        reward, removed = float_of(raw.get("reward")), bool_of(raw.get("removed")) is True
        return RolloutResultResponse.model_construct(
            rollout_id=rollout_id,
            status=status,
            sample=RolloutSample(reward=reward, remove_sample=removed)
            if reward is not None or removed
            else None,
            err_message=text_of(raw.get("err_message")),
            err_category=_CATEGORIES.get(text_of(raw.get("err_category")) or ""),
        )

    def _cancel(self, raw: dict[str, Any]) -> CancelRequest:
        answered = raw.get("answered")
        return CancelRequest(
            requested_at=self._at(raw.get("requested")),
            disposition=text_of(raw.get("disposition")),
            error=text_of(raw.get("error")),
            answered_at=None if answered is None else self._at(answered),
        )

    def _activity(self, rollout_id: str, raw: dict[str, Any]) -> ModelActivity:
        cost = raw.get("cost_usd")
        last_ended = raw.get("last_ended")
        first_started = raw.get("first_started")
        activity = ModelActivity(
            calls=int_of(raw.get("calls")) or 0,
            failed=int_of(raw.get("failed")) or 0,
            tokens=int_of(raw.get("tokens")),
            cost_usd=float_of(cost) if cost is not None else None,
            last_ended_at=None if last_ended is None else self._at(last_ended),
            first_started_at=None if first_started is None else self._at(first_started),
        )
        for call in map(dict_of, list_of(raw.get("recent"))):
            ended = call.get("ended")
            report = ReportedCall(
                call_id=int_of(call.get("call_id")) or 0,
                rollout_id=rollout_id,
                started_monotonic=self._at(call.get("started")),
                ended_monotonic=None if ended is None else self._at(ended),
                status=int_of(call.get("status")),
                total_tokens=int_of(call.get("tokens")),
                cost_usd=float_of(call.get("cost_usd")),
                request_text=text_of(call.get("request")) or "",
                reply_text=text_of(call.get("reply")),
                error=text_of(call.get("error")),
            )
            if report.ended_monotonic is None:
                activity.waiting(report)
            else:
                activity.keep(report)
        return activity


__all__ = ["BoardMirror", "ReportedCall"]
