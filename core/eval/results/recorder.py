"""`TransitionRecorder`: everything a run writes to `transitions.jsonl`, from what it is about.

The board's hooks (a status change, a cancel and its answer, a rollout never admitted) and the
run's steering (dispatch started and steered, a requeue, a rollout untracked or sent by hand)
hand over the rollout's record or the action itself; the recorder takes the line's fields from
it (the work item's `row_index`, `run_index` and `source_row_index`, the times counted from the
session's start) and writes the line through `TransitionLog`, which owns the file's format.
Before the run's folder is open (`record_to`), nothing is written: there is no file yet.

`RolloutRecord` and `CancelRequest` are only types here, so this room still loads no HTTP stack.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.phases import PhaseMark

if TYPE_CHECKING:
    from core.eval.results.transitions import TransitionLog
    from core.rollout_record import CancelRequest, RolloutRecord


class TransitionRecorder:
    """The one writer of a run's transitions.jsonl lines, from records and actions."""

    def __init__(self) -> None:
        self._log: TransitionLog | None = None

    def record_to(self, log: TransitionLog) -> None:
        """The run's folder is open: lines from now on go to `log`."""
        self._log = log

    # -- the board's hooks -----------------------------------------------------------------

    def status(self, record: RolloutRecord, mark: PhaseMark) -> None:
        """`on_transition`: a rollout's status change as a poll or the server reported it (a
        rollout sent by hand's too: a replay shows it; one nobody here sent, with whose it is)."""
        log = self._log
        if log is None:
            return
        # The admission's status is always the first line of a rollout (the board accounts
        # for it before anything else): a replay tells unrequested grading from missed, and
        # the client's wait for admission from when it was sent.
        first = mark.source == "poll" and mark.at == record.transitions[0].at
        log.record(
            record.rollout_id,
            record.row_index,
            record.run_index,
            mark.status.value,
            log.elapsed(mark.at),
            source=mark.source,
            source_row_index=record.source_row_index,
            grade=record.grade if first else None,
            server_time=mark.server_time,
            event_sequence=mark.event_sequence,
            server_id=mark.server_id,
            sent_t=log.elapsed(record.submitted_at) if first else None,
            server_url=record.server or None if first else None,
            reported_by=None if record.reported_by is None else record.reported_by.fields(),
        )

    def cancel(self, record: RolloutRecord, cancel: CancelRequest) -> None:
        """`on_cancel`: a cancel asked for (by an interrupt, a deadline or the dashboard),
        then the server's answer, each written as it happens, so a run killed afterwards
        keeps them."""
        log = self._log
        if log is None:
            return
        answered = cancel.disposition is not None or cancel.error is not None
        log.cancel_request(
            record.rollout_id,
            record.row_index,
            record.run_index,
            source_row_index=record.source_row_index,
            t=log.elapsed(cancel.requested_at),
            disposition=cancel.disposition,
            error=cancel.error,
            reply_t=log.elapsed() if answered else None,
        )

    def not_admitted(self, record: RolloutRecord) -> None:
        """`on_not_admitted`: a rollout its server never admitted, and why."""
        log = self._log
        if log is None:
            return
        log.not_admitted(
            record.rollout_id,
            record.row_index,
            record.run_index,
            source_row_index=record.source_row_index,
            t=log.elapsed(record.submitted_at),
            error=record.admission_error or "not admitted",
            server_url=record.server or None,
        )

    # -- the run's steering ----------------------------------------------------------------

    def untracked(self, record: RolloutRecord) -> None:
        """The run stopped following `record`, now."""
        log = self._log
        if log is not None:
            log.untrack(record.rollout_id, record.row_index, record.run_index, t=log.elapsed())

    def sent_by_hand(self, record: RolloutRecord, rerun_of: str | None) -> None:
        """`record` was sent by hand (a re-run of `rerun_of`), and admitted, now."""
        log = self._log
        if log is not None:
            log.manual(record.rollout_id, record.row_index, t=log.elapsed(), rerun_of=rerun_of)

    def requeued(
        self, record: RolloutRecord, new_rollout_id: str, *, reason: str | None = None
    ) -> None:
        """`record`'s work item runs again under `new_rollout_id`, from now (`reason`
        "rule": the --requeue-stuck rule asked; "hedge": it is sent a second time while
        `record` goes on)."""
        log = self._log
        if log is not None:
            log.requeue(
                record.rollout_id,
                new_rollout_id,
                record.row_index,
                record.run_index,
                t=log.elapsed(),
                reason=reason,
            )

    def dispatch_started(self, max_in_flight: int) -> None:
        """Dispatch began, at most `max_in_flight` at once."""
        log = self._log
        if log is not None:
            log.dispatch(max_in_flight, t=log.elapsed())

    def steered(self, action: str, value: int | None = None, *, server: str | None = None) -> None:
        """Dispatch was steered now: `pause`, `resume`, `max_in_flight` = `value`, or
        `drain`/`undrain` of the server at `server`."""
        log = self._log
        if log is not None:
            log.control(action, t=log.elapsed(), value=value, server=server)


__all__ = ["TransitionRecorder"]
